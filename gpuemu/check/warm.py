"""Warming Triton's cache before a ``gpuemu check`` on CUDA: the compiles of every launcher, shared by all cores.

On a GPU a check's time goes to Triton compiling each launcher's specialisations (a new block size, an argument
that became divisible by 16), one after another inside the worker fuzzing that launcher: measured on the H200,
10 parallel ``--device cuda`` fuzzes of the corpus took a median 36 s per launcher and 380 s in all, while a
warm run of flash attention takes 7 s of its 22 s cold. The compiles are independent of the verdicts, so before
the check runs, :func:`warm` splits each launcher's cases (the same draws its fuzz run makes: the same plan, the
same seeds) into slices and runs the slices on a pool of every core: each process calls the launcher on the
GPU without judging, and every specialisation it meets lands in Triton's on-disk cache, where the check's
workers find it. Verdicts do not depend on it: a case whose kernel was not compiled ahead is compiled by its
worker as before (a slice learns block sizes from its own launches only, so a tile-edge draw may differ).
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any


def warm(tasks: list[tuple[Any, dict]], *, device: str, workers: int) -> dict:
    """Compile the kernels of ``tasks`` (``run_check``'s (entry, fuzz_one keyword arguments)) in ``workers``
    processes; returns {"slices", "seconds", "failed"} (a slice that fails costs the check nothing)."""
    import multiprocessing

    t0 = time.perf_counter()
    per = max(1, min(8, math.ceil(2 * workers / max(len(tasks), 1))))  # slices per launcher: every core busy
    jobs = [(entry.target, entry.op, entry.reference, entry.inputs, entry.schema, kw, k, per)
            for entry, kw in tasks for k in range(per)]
    failed = 0
    seconds: dict[str, float] = {}  # launcher -> seconds its slices took (the longest bound the warm-up's wall time)
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(_timed_slice, os.getcwd(), device, *job): job[0] for job in jobs}
        for fut in as_completed(futures):
            try:
                ok, took = fut.result()
            except Exception:  # noqa: BLE001 - a process that died (an illegal address): its worker compiles it
                ok, took = False, 0.0
            failed += not ok
            seconds[futures[fut]] = seconds.get(futures[fut], 0.0) + took
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:5]
    return {"slices": len(jobs), "seconds": time.perf_counter() - t0, "failed": failed,
            "busy_seconds": sum(seconds.values()), "slowest": [[t, round(s, 1)] for t, s in slowest]}


def _timed_slice(*args: Any) -> tuple[bool, float]:
    t0 = time.perf_counter()
    return _slice(*args), time.perf_counter() - t0


def _slice(cwd: str, device: str, target: str, op: str | None, reference: Any, inputs: Any, schema: Any, kw: dict,
           index: int, stride: int) -> bool:
    """Run cases ``index``, ``index + stride``, ... of the launcher's fuzz plan on ``device``, judging nothing."""
    import contextlib
    import sys

    os.chdir(cwd)
    devnull = open(os.devnull, "w")
    with contextlib.redirect_stdout(devnull), contextlib.redirect_stderr(devnull):
        try:
            import warnings

            warnings.simplefilter("ignore")
            from ..cases import Blocks, materialize
            from ..engine.generate import Drawer
            from ..engine.plan import make_plan
            from ..envelope import DtypeEnvelopes
            from ..explain import learn
            from ..preconditions import Requires
            from ..runners import run_launcher
            from ..target import load

            fn = load(target)
            plan = make_plan(fn, op=op, reference=reference, inputs=inputs, schema=schema, init_inputs=None,
                             iterations=kw.get("iterations"), seed=kw["seed"], dtypes=kw.get("dtypes"),
                             strategy=kw.get("strategy"), store=None, rulepack=list(kw.get("rulepacks") or ()),
                             device=device, target=target, check_determinism=False,
                             requires=Requires.from_dict(kw["requires"]) if kw.get("requires") else None,
                             preconditions=kw.get("preconditions"), case_timeout=None, compile_workers=0,
                             framework=kw.get("framework"), limits=None)
        except BaseException:  # noqa: BLE001 - a launcher that cannot be planned here is the check's to report
            return False
        blocks = Blocks()
        draw = Drawer(plan, blocks, DtypeEnvelopes())
        for i in range(plan.iterations):
            try:
                case = draw.next(long_rows=True)
            except BaseException:  # noqa: BLE001
                return False
            if i % stride != index:
                continue
            try:
                args, kwargs = materialize(case, device)
                got = run_launcher(plan.fn, [args[a.name] for a in plan.spec.args], kwargs, device=device, poison=False)
                learn(blocks, plan.spec, got.launches)
                del args, got
            except BaseException:  # noqa: BLE001 - the check judges every case; here only compiles matter
                try:
                    import torch

                    torch.cuda.synchronize()
                except BaseException:  # noqa: BLE001 - the context is gone: nothing more to compile here
                    return False
        sys.stdout.flush()
    return True
