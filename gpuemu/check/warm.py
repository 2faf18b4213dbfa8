"""Warming Triton's cache before a ``gpuemu check`` on CUDA: each specialisation compiled once, on every core.

On a GPU a check's time goes to Triton compiling each launcher's specialisations (a new block size, an argument
that became divisible by 16), one after another inside the worker fuzzing that launcher: measured on the H200,
10 parallel ``--device cuda`` fuzzes of the corpus took a median 36 s per launcher and 380 s in all, while a
warm run of flash attention takes 7 s of its 22 s cold. The compiles do not depend on the verdicts, so before
the check runs, :func:`warm` compiles them on a pool of every core, in two phases:

1. **discover**: one job per launcher walks its cases (the same draws its fuzz run makes: the same plan, the same
   seeds) and calls the launcher with every launch intercepted and dropped: nothing is compiled or run. Each
   launch's compile identity (:func:`gpuemu.runtime.aot.specialization_key`: Triton's own binding of its
   arguments) is noted with the case that made it.
2. **compile**: every distinct specialisation of the whole check, once (two launchers with the same kernel share
   its compiles), cut into jobs of a few each, the launchers with the most first, so that the pool's wall time
   is the total compile time over the cores rather than the longest launcher's. A job gets, beside its keys, the
   records of the cases that first made them (a case materialises exactly from its record, as a replay does), calls
   the launcher on those cases only and compiles the launches it was given without running them (Triton's
   ``warmup=True``); each lands in Triton's on-disk cache, where the check's workers find it. (A job no longer
   walks its launcher's cases from the first one: with jobs of a few keys, the corpus' 4,374 specialisations
   made about 1,500 jobs, each materialising and calling up to a hundred cases before its own.)

Verdicts do not depend on it: a case whose kernel was not compiled ahead (its launch came after host code that
needed a kernel's result, say) is compiled by its worker as before. On the CPU (tests) the compile is the
launch-limit check's (sm_90, limits only).

A lone ``gpuemu fuzz --device cuda`` of a kernel judged against its reference uses the same two phases, started
beside its loop (:class:`Warming`): the loop draws the same cases, so it finds their kernels in the cache as the
pool compiles them, and compiles the rest itself.
"""

from __future__ import annotations

import math
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

KEYS_PER_JOB = 3  # at most this many compiles per job: ptxas takes seconds each on attention kernels


def warm(tasks: list[tuple[Any, dict]], *, device: str, workers: int, _warming: "Warming | None" = None) -> dict:
    """Compile the kernels of ``tasks`` (``run_check``'s (entry, fuzz_one keyword arguments)) in ``workers``
    processes. Returns {"jobs": jobs run, "seconds", "failed": jobs that did not finish, "busy_seconds",
    "slowest": [[launcher, seconds]], "specialisations": compiles asked for, "shared": launches whose
    specialisation another launcher compiled}; a job that fails costs the check nothing."""
    import multiprocessing

    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
    plans = [(entry.target, entry.op, entry.reference, entry.inputs, entry.schema, kw) for entry, kw in tasks]
    failed = 0
    seconds: dict[str, float] = {}  # launcher -> seconds its jobs took

    def run(pool, jobs: list[tuple]) -> list:
        nonlocal failed
        out: list = [None] * len(jobs)
        submit = lambda: {pool.submit(_timed, os.getcwd(), device, *job): i for i, job in enumerate(jobs)}  # noqa: E731
        futures = submit() if _warming is None else _warming.submitting(pool, submit)
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                ok, took, value = fut.result()
            except Exception:  # noqa: BLE001 - a process that died (an illegal address): its worker compiles it
                ok, took, value = False, 0.0, None
            failed += not ok
            seconds[jobs[i][1][0]] = seconds.get(jobs[i][1][0], 0.0) + took
            out[i] = value
        return out

    jobs: list = []
    stats: dict = {"specialisations": 0, "shared": 0}
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        found = run(pool, [("discover", plan, ()) for plan in plans])
        if _warming is None or not _warming.stopped:
            jobs, stats = plan_jobs(plans, found, workers)
            run(pool, jobs)
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:5]
    return {"jobs": len(plans) + len(jobs), "seconds": time.perf_counter() - t0, "failed": failed,
            "busy_seconds": sum(seconds.values()), "slowest": [[t, round(s, 1)] for t, s in slowest], **stats}


class Warming:
    """:func:`warm` of one fuzz run's cases, in a thread of the fuzzing process (its pool's processes do the work)
    while the loop runs; :meth:`stop` ends it, terminating the pool's processes (the loop no longer needs them)."""

    def __init__(self, target: str, *, reference: str, inputs: str | None, schema: Any, kw: dict, device: str,
                 workers: int) -> None:
        from types import SimpleNamespace

        entry = SimpleNamespace(target=target, op=None, reference=reference, inputs=inputs, schema=schema)
        self.workers = workers
        self.stats: dict | None = None
        self.stopped = False
        self._pool: Any = None
        self._processes: set = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=([(entry, kw)], device, workers), daemon=True,
                                        name="gpuemu-warm")
        self._thread.start()

    def _run(self, tasks: list, device: str, workers: int) -> None:
        try:
            self.stats = warm(tasks, device=device, workers=workers, _warming=self)
        except BaseException:  # noqa: BLE001 - no pool here (no process could start): the loop compiles, as before
            self.stats = None

    def submitting(self, pool: Any, submit: Any) -> dict:
        """Run ``submit`` (which submits jobs to ``pool``) unless :meth:`stop` came first, noting the processes the
        pool started for them; under the lock :meth:`stop` takes, so no process starts unseen after it."""
        with self._lock:
            if self.stopped:
                return {}
            self._pool = pool
            futures = submit()
            self._processes.update((getattr(pool, "_processes", None) or {}).values())  # (shutdown forgets them)
            return futures

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            pool, processes = self._pool, list(self._processes)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:  # a compile job can take seconds: not waited for
            if p.is_alive():
                p.terminate()
        for p in processes:
            p.join(timeout=10)
            if _running(p):  # (a process that outlived SIGTERM, seen once on a loaded 2-core machine: SIGKILL)
                p.kill()
                p.join(timeout=10)
        self._thread.join(timeout=30)

    def leftover(self) -> list:
        """The pool's processes still running after :meth:`stop` (none, unless one outlived SIGKILL)."""
        return [p for p in list(self._processes) if _running(p)]

    def join(self, timeout: float | None = None) -> dict | None:
        """Wait for the warming to finish; its :func:`warm` statistics (None if it failed or was stopped early)."""
        self._thread.join(timeout)
        return self.stats


def _running(p: Any) -> bool:
    """Whether process ``p`` still runs. ``is_alive()`` alone is not enough: when another waiter reaped the child
    first (the pool's own manager thread joins its workers too), ``p`` never learns its exit status and reports it
    alive for ever; its pid is then gone, or a zombie."""
    import os

    if not p.is_alive():
        return False
    try:
        with open(f"/proc/{p.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # (no /proc: ask the kernel whether the pid exists)
        try:
            os.kill(p.pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True


def plan_jobs(plans: list[tuple], found: list, workers: int) -> tuple[list[tuple], dict]:
    """The compile phase's jobs from what discovery found (per launcher: the specialisation keys of each case, or
    None where discovery failed: its worker compiles them): each key once, owned by the first launcher that meets
    it; a launcher's keys cut into jobs of at most :data:`KEYS_PER_JOB`; the launchers with the most keys first."""
    owner: set[str] = set()
    mine: list[tuple[int, list[str]]] = []
    shared = 0
    for i, per_case in enumerate(found):
        if per_case is None:
            continue
        new: list[tuple[str, dict]] = []  # (key, the record of the case that first made it)
        seen: set[str] = set()
        for keys, case in per_case:
            for key in keys:
                if key in seen:
                    continue
                seen.add(key)
                if key in owner:  # another launcher's compile: the same kernel, the same binding
                    shared += 1
                    continue
                owner.add(key)
                new.append((key, case))
        mine.append((i, new))
    total = sum(len(new) for _, new in mine)
    per_job = max(1, min(KEYS_PER_JOB, math.ceil(total / max(2 * workers, 1))))
    keyed = []
    for i, new in sorted(mine, key=lambda m: -len(m[1])):
        for j in range(0, len(new), per_job):
            part = new[j:j + per_job]
            cases = list({id(case): case for _, case in part}.values())  # a case that made two keys, once
            keyed.append(("compile", plans[i], (tuple(key for key, _ in part), tuple(cases))))
    return keyed, {"specialisations": total, "shared": shared}


def _timed(cwd: str, device: str, kind: str, plan: tuple, arg: tuple) -> tuple[bool, float, Any]:
    t0 = time.perf_counter()
    ok, value = _job(cwd, device, kind, plan, arg)
    return ok, time.perf_counter() - t0, value


def _job(cwd: str, device: str, kind: str, plan: tuple, arg: tuple) -> tuple[bool, Any]:
    """One job in a pool process: ``discover`` (returns each case's specialisation keys) or ``compile`` (the keys
    in ``arg``)."""
    import contextlib

    os.chdir(cwd)
    devnull = open(os.devnull, "w")  # the launcher's own prints belong to the check's run of it
    with contextlib.redirect_stdout(devnull), contextlib.redirect_stderr(devnull):
        import warnings

        warnings.simplefilter("ignore")
        from ..runners.cuda_on_cpu import cuda_on_cpu

        with cuda_on_cpu(active=device == "cpu"):  # (as the check's own run of the launcher)
            try:
                draws = _draws(device, *plan)
            except BaseException:  # noqa: BLE001 - a launcher that cannot be planned here is the check's to report
                return False, None
            if kind == "compile":
                keys, cases = arg
                return _compile(device, draws, set(keys), cases)
            return _walk(device, draws)


def _draws(device: str, target: str, op: str | None, reference: Any, inputs: Any, schema: Any, kw: dict):
    """(the launcher's plan, the block sizes learned so far, its Drawer): the cases as the fuzz loop draws them,
    tile edges steered by the blocks :func:`_call` learns from each launch."""
    from ..cases import Blocks
    from ..engine.generate import Drawer
    from ..engine.plan import make_plan
    from ..envelope import DtypeEnvelopes
    from ..preconditions import Requires
    from ..target import load

    fn = load(target)
    plan = make_plan(fn, op=op, reference=reference, inputs=inputs, schema=schema, init_inputs=None,
                     iterations=kw.get("iterations"), seed=kw["seed"], dtypes=kw.get("dtypes"),
                     strategy=kw.get("strategy"), store=None, rulepack=list(kw.get("rulepacks") or ()),
                     device=device, target=target, check_determinism=False,
                     requires=Requires.from_dict(kw["requires"]) if kw.get("requires") else None,
                     preconditions=kw.get("preconditions"), case_timeout=None, compile_workers=0,
                     framework=kw.get("framework"), limits=None)
    blocks = Blocks()
    return plan, blocks, Drawer(plan, blocks, DtypeEnvelopes())


def _call(device: str, plan: Any, blocks: Any, case: Any) -> None:
    """Call the launcher on ``case`` (its launches intercepted by the caller), learning its block sizes."""
    from ..cases import materialize
    from ..explain import learn
    from ..runners import run_launcher

    args, kwargs = materialize(case, device)
    got = run_launcher(plan.fn, [args[a.name] for a in plan.spec.args], kwargs, device=device, poison=False,
                       runtime=False)
    learn(blocks, plan.spec, got.launches)


def _walk(device: str, draws: tuple) -> tuple[bool, Any]:
    """Walk every case with each launch dropped; per case, (its launches' keys, its record)."""
    from ..runners.launches import add_interceptor, remove_interceptor
    from ..runtime.aot import specialization_key

    plan, blocks, draw = draws
    gpu_target = _target(device)
    per_case: list[tuple[list[str], dict]] = []
    keys: list[str] = []

    def dropped(kernel: Any, args: tuple, kwargs: dict, grid: Any, warmup: bool, call_next: Any) -> None:
        keys.append(specialization_key(kernel, args, kwargs, gpu_target))
        return None

    add_interceptor(dropped)
    try:
        for _ in range(plan.iterations):
            try:
                case = draw.next(long_rows=True)
            except BaseException:  # noqa: BLE001 - the draws end here; the check reports why
                return False, None
            keys.clear()
            try:
                _call(device, plan, blocks, case)
            except BaseException:  # noqa: BLE001 - the check judges every case; here only the keys matter
                pass
            per_case.append((list(dict.fromkeys(keys)), case.to_dict()))
    finally:
        remove_interceptor(dropped)
    return True, per_case


def _compile(device: str, draws: tuple, todo: set[str], cases: tuple[dict, ...], compile: Any = None
             ) -> tuple[bool, None]:
    """Call the launcher on ``cases`` (records from discovery), compiling each launch whose key is in ``todo``
    without running it, every other launch dropped. ``compile(kernel, args, kwargs, gpu_target)``, where given,
    compiles instead (bench/compile_keys.py times full compiles so)."""
    from ..cases import Case
    from ..runners.launches import add_interceptor, remove_interceptor
    from ..runtime.aot import compile_launch, specialization_key

    plan, blocks, _ = draws
    gpu_target = _target(device)

    def dropped(kernel: Any, args: tuple, kwargs: dict, grid: Any, warmup: bool, call_next: Any) -> None:
        key = specialization_key(kernel, args, kwargs, gpu_target)
        if key in todo:
            todo.discard(key)
            if compile is not None:
                compile(kernel, args, kwargs, gpu_target)
            elif device.startswith("cuda"):
                call_next(args, kwargs, grid, True)  # Triton's warmup: compiled into its cache, not launched
            else:
                compile_launch(kernel, args, kwargs, gpu_target, limits_only=True)
        return None

    add_interceptor(dropped)
    try:
        for record in cases:
            if not todo:
                break
            try:
                _call(device, plan, blocks, Case.from_dict(record))
            except BaseException:  # noqa: BLE001 - the check judges every case; here only the compiles matter
                pass
    finally:
        remove_interceptor(dropped)
    return True, None


def _target(device: str) -> Any:
    """The Triton target launches are bound for: the current GPU's, or sm_90 on the CPU."""
    if device.startswith("cuda"):
        from triton.runtime import driver

        return driver.active.get_current_target()
    from ..runtime.aot import parse_target

    return parse_target("sm_90")
