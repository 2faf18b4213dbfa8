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

On the CPU runtime the compiles are the launch-limit checks (:func:`gpuemu.resources.guard`: each new
specialisation compiled for every target as far as Triton's shared memory allocation). With a cold Triton cache
they were most of a run: 21.5 of 35.7 s for 100 cases of the corpus flash attention on 2 cores. A
:class:`Lookahead` starts one worker process (:func:`start` with ``device="cpu"``) once the run has spent
:attr:`Lookahead.AFTER_SECONDS` in such compiles, so warm-cache runs and short runs never pay for a process. A
CPU worker calls the launcher with the launch-limit check on and the kernel not run (its launches are only
checked, so each specialisation is compiled into the disk cache, where the loop's own check reads it).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Lookahead", "Precompile", "importable", "start"]


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
          requires: dict, workers: int, first: int = 0, device: str = "cuda",
          targets: tuple[str, ...] = ()) -> Precompile:
    """Start ``workers`` processes compiling the kernels of cases ``first`` .. ``iterations - 1`` of the run
    (on ``device``; for "cpu", the launch-limit checks for ``targets``)."""
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
    run = Precompile()
    for w in range(workers):
        p = ctx.Process(target=_worker, name=f"gpuemu-precompile-{w}", daemon=True,
                        args=(os.getcwd(), target, op, seed, list(dtypes), strategy, iterations, requires, first + w,
                              workers, device, tuple(targets)))
        p.start()
        run.processes.append(p)
    return run


class Lookahead:
    """For a run on the CPU runtime: one worker compiling the coming cases' launch-limit checks, started from
    the loop (:meth:`poll` after each case) once those compiles have cost :attr:`AFTER_SECONDS` in this run
    with :attr:`MIN_LEFT` cases or more still to draw; never where the machine has one core."""

    AFTER_SECONDS = 2.0
    MIN_LEFT = 20

    def __init__(self, target: str, *, op: str, seed: int, dtypes: list[str], strategy: str, iterations: int,
                 requires: dict, workers: int, targets: tuple[str, ...]) -> None:
        from ..runtime import aot

        self._aot = aot
        self.kwargs = dict(op=op, seed=seed, dtypes=dtypes, strategy=strategy, iterations=iterations,
                           requires=requires, targets=targets, device="cpu")
        self.target = target
        self.workers = min(workers, (os.cpu_count() or 1) - 1)
        self.base = aot.cache_stats()["seconds"]
        self.started: Precompile | None = None

    def poll(self, next_index: int) -> Precompile | None:
        """The worker, started now if the run has waited long enough on compiles (None before that)."""
        if self.started is None and self.workers > 0 and self.kwargs["targets"] \
                and self.kwargs["iterations"] - next_index >= self.MIN_LEFT \
                and self._aot.cache_stats()["seconds"] - self.base >= self.AFTER_SECONDS:
            try:
                self.started = start(self.target, workers=self.workers, first=next_index, **self.kwargs)
            except Exception:  # no process can be started here: the loop compiles, as without a worker
                self.workers = 0
        return self.started


def _worker(cwd: str, target: str, op: str, seed: int, dtypes: list[str], strategy: str, iterations: int,
            requires: dict, index: int, workers: int, device: str = "cuda", targets: tuple[str, ...] = ()) -> None:
    """Draw cases index, index + workers, ... as the fuzz loop does and run the launcher on each (no judging)."""
    os.chdir(cwd)
    if device == "cpu":
        from .cuda_on_cpu import cuda_on_cpu

        with cuda_on_cpu():  # (the loop's process answers the launcher's CUDA requests so: this one too)
            return _cpu_worker(target, op, seed, dtypes, strategy, iterations, requires, index, workers, targets)
    try:
        import torch

        from ..cases import materialize
        from ..cases import Blocks
        from ..explain import learn as _learn
        from . import run_launcher

        fn, spec, req = _prepare(target, op, requires)
    except BaseException:  # a worker that cannot start costs the run nothing but its compiles
        return
    blocks = Blocks()
    for case_index in range(index, iterations, workers):
        try:
            case = _draw(op, seed, dtypes, strategy, req, blocks, case_index)
            inputs, kwargs = materialize(case, "cuda")
            got = run_launcher(fn, [inputs[a.name] for a in spec.args], kwargs, device="cuda", poison=False)
            _learn(blocks, spec, got.launches)
            del inputs, got
        except BaseException:  # a case the launcher rejects, a kernel that faults: the fuzz loop judges it
            try:
                torch.cuda.synchronize()
            except BaseException:
                return  # the context is gone (an illegal address): nothing more to compile here


def _cpu_worker(target: str, op: str, seed: int, dtypes: list[str], strategy: str, iterations: int, requires: dict,
                index: int, workers: int, targets: tuple[str, ...]) -> None:
    """The CPU form of :func:`_worker`: the launcher's launches pass the launch-limit check for ``targets``
    (which compiles each new specialisation into Triton's disk cache) and are then dropped, not run. The cases
    are taken from the last one back to ``index`` (the case the loop was about to draw when the worker was
    started): the loop and the worker each compile what the other has not reached, meeting in between,
    whatever the worker's start-up cost."""
    try:
        import warnings

        # the launcher's own prints and warnings belong to the loop's run of it, not to this one
        devnull = open(os.devnull, "w")
        sys.stdout = sys.stderr = devnull
        warnings.simplefilter("ignore")
        from ..cases import materialize
        from ..cases import Blocks
        from ..explain import learn as _learn
        from ..resources import guard, predicting
        from . import run_launcher
        from .launches import add_interceptor, guarding

        fn, spec, req = _prepare(target, op, requires)
        add_interceptor(_checked_only)
    except BaseException:  # a worker that cannot start costs the run nothing but its compiles
        return
    blocks = Blocks()
    for case_index in range(iterations - 1 - (index % workers), index - 1, -workers):
        try:
            case = _draw(op, seed, dtypes, strategy, req, blocks, case_index)
            inputs, kwargs = materialize(case, "cpu")
            with predicting(targets), guarding(guard):
                got = run_launcher(fn, [inputs[a.name] for a in spec.args], kwargs, device="cpu", poison=False,
                                   runtime=False)
            _learn(blocks, spec, got.launches)
        except BaseException:  # the fuzz loop judges every case; here only the compiles matter
            continue


def _prepare(target: str, op: str, requires: dict) -> tuple[Any, Any, Any]:
    """A worker's (launcher, op spec, declared preconditions), as the fuzz loop has them."""
    from .. import ops
    from ..preconditions import Requires
    from ..target import load

    return load(target), ops.get(op), Requires.from_dict(requires) if requires else Requires()


def _draw(op: str, seed: int, dtypes: list[str], strategy: str, req: Any, blocks: Any, case_index: int) -> Any:
    """The case the fuzz loop draws at ``case_index`` (its dtype cycling, seeds and declared caps)."""
    from ..cases import generate
    from ..rng import derive_seed

    return req.apply(generate(op, derive_seed(seed, case_index), dtype=dtypes[case_index % len(dtypes)],
                              strategy=strategy, blocks=blocks, caps=req.max_dims))


def _checked_only(kernel: Any, args: tuple, kwargs: dict, grid: Any, warmup: bool, call_next: Any) -> None:
    """An interceptor that runs nothing: the launch was checked (compiled for its targets) before the chain."""
    return None
