"""Compiling ahead for a CUDA fuzz: Triton's compiles, spread over worker processes.

On a GPU a fuzz run's time goes to Triton compiling each new specialisation of the kernel (a new block size,
an argument that became divisible by 16): measured on an H200, a 20-case fuzz of the corpus attention kernel
spent 140 of 179 s in 46 compiles (``ptxas`` alone 107 s), one after another in the fuzzing process, while
gpuemu's own work took 0.3 s. The compiles are independent, so :func:`start` launches worker processes that
draw the cases the run will draw (the same seeds, dtypes and strategy, strided over the workers) and call the
launcher on each, on the GPU, without judging anything: every specialisation they meet is compiled into
Triton's on-disk cache, where the fuzz loop finds it. The loop itself is unchanged (the same cases, in the same
order, the same verdicts); a case whose kernel is not compiled yet is compiled by the loop as before.

Workers are only started for a launcher that can be imported again by its target string (a file given to
``gpuemu fuzz``, a module function); never for ``__main__`` or a closure, whose module would run again.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Precompile", "importable", "start"]


@dataclass
class Precompile:
    """The running workers; :meth:`stop` ends them (the fuzz loop no longer needs what they compile)."""

    processes: list[Any] = field(default_factory=list)

    @property
    def workers(self) -> int:
        return len(self.processes)

    def stop(self) -> None:
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        for p in self.processes:
            p.join(timeout=10)
            if p.is_alive():  # pragma: no cover - a worker stuck in the driver
                p.kill()
                p.join(timeout=5)
        self.processes.clear()


def importable(fn: Any, target: str) -> bool:
    """True when ``target`` names ``fn`` in a module a worker can import without side effects on the host."""
    mod = getattr(fn, "__module__", None) or ""
    qual = getattr(fn, "__qualname__", "") or ""
    if mod == "__main__" or "<" in qual or ":" not in target:
        return False
    return mod.startswith("gpuemu_target_") or mod in sys.modules and getattr(sys.modules[mod], "__file__", None) is not None


def start(target: str, *, op: str, seed: int, dtypes: list[str], strategy: str, iterations: int,
          requires: dict, workers: int) -> Precompile:
    """Start ``workers`` processes compiling the kernels of the first ``iterations`` cases of the run."""
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
    run = Precompile()
    for w in range(workers):
        p = ctx.Process(target=_worker, name=f"gpuemu-precompile-{w}", daemon=True,
                        args=(os.getcwd(), target, op, seed, list(dtypes), strategy, iterations, requires, w, workers))
        p.start()
        run.processes.append(p)
    return run


def _worker(cwd: str, target: str, op: str, seed: int, dtypes: list[str], strategy: str, iterations: int,
            requires: dict, index: int, workers: int) -> None:
    """Draw cases index, index + workers, ... as the fuzz loop does and run the launcher on each (no judging)."""
    os.chdir(cwd)
    try:
        import torch

        from .. import ops
        from ..cases import generate, materialize
        from ..fuzzer import Blocks, _learn
        from ..preconditions import Requires
        from ..rng import derive_seed
        from ..target import load
        from . import run_launcher

        fn = load(target)
        spec = ops.get(op)
        req = Requires.from_dict(requires) if requires else Requires()
    except BaseException:  # a worker that cannot start costs the run nothing but its compiles
        return
    blocks = Blocks()
    for case_index in range(index, iterations, workers):
        try:
            dtype = dtypes[case_index % len(dtypes)]
            case = req.apply(generate(op, derive_seed(seed, case_index), dtype=dtype, strategy=strategy,
                                      blocks=blocks, caps=req.max_dims))
            inputs, kwargs = materialize(case, "cuda")
            got = run_launcher(fn, [inputs[a.name] for a in spec.args], kwargs, device="cuda", poison=False)
            _learn(blocks, spec, got.launches)
            del inputs, got
        except BaseException:  # a case the launcher rejects, a kernel that faults: the fuzz loop judges it
            try:
                torch.cuda.synchronize()
            except BaseException:
                return  # the context is gone (an illegal address): nothing more to compile here
