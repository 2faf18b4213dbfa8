"""``gpuemu check --ray``: the manifest's launchers as Ray tasks, one result and one store on the driver.

Each launcher of the manifest is one task (the same unit a local ``--jobs`` worker runs: :func:`fuzz_one` with the
same kernel seed, so verdicts do not depend on where or in which order tasks run). A task fuzzes into a store of
its own, in a temporary folder of the worker's machine, and returns the result with every file of that store
(records, snapshots, the runs' notes) as bytes; the driver writes them into its store, where every replay line
points (``gpuemu reproduce`` needs no Ray). Shrinking and hints run in the task; the driver never re-runs a kernel.

A worker lost mid-task (its process killed, its node gone) is retried by Ray (``max_retries``); only a task that
finished returns a result, and each task's result is taken once, so nothing is lost or counted twice.
Resources per task: one CPU, and one GPU for ``--device cuda``. On the ambient or a remote cluster
(``address``), the manifest's folder travels as the job's working directory (Ray skips what ``.gitignore`` names,
and the folders in :data:`EXCLUDES`); with no address a local cluster is started on this machine.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..errors import InvalidArgument

EXCLUDES = [".git", ".venv", "venv", ".gpuemu", "__pycache__", "node_modules", "bench/out", ".snap", ".whl"]
MAX_RETRIES = 3


def require_ray():
    """The ``ray`` module, or one usage line saying how to get it."""
    try:
        import ray
    except ImportError:
        raise InvalidArgument("--ray needs Ray: pip install 'gpuemu[ray]' (or pip install ray)") from None
    return ray


def execute(tasks: list[tuple[Any, dict]], *, address: str | None, root: str, store: str, device: str,
            num_cpus: int | None, done: Callable[[int, dict], None]) -> int:
    """Run ``tasks`` ([(entry, fuzz_one keyword arguments)]) as Ray tasks; ``done(i, result)`` as each finishes.
    Returns the cluster's CPU count (the run's parallelism)."""
    ray, remote_dir, started_here = _connect(address, root, num_cpus)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        unit = ray.remote(_unit).options(**_task_options(device))
        refs = {}
        for i, (entry, kw) in enumerate(tasks):
            shipped = dataclasses.replace(entry, target=_relative(entry.target, root)) if remote_dir else entry
            refs[unit.remote(shipped, {k: v for k, v in kw.items() if k != "store"})] = i
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                i = refs[ref]
                entry = tasks[i][0]
                try:
                    result, files, tmp_root = ray.get(ref)
                except Exception as e:  # retries exhausted (the worker died every time): that launcher's error
                    from .run import KernelResult, against

                    result = KernelResult(target=entry.target, op=against(entry), seed=tasks[i][1]["seed"],
                                          error=f"Ray task failed after {MAX_RETRIES} retries: {type(e).__name__}: "
                                                f"{str(e).splitlines()[0] if str(e) else ''}").to_dict()
                    files, tmp_root = {}, None
                done(i, _land(result, files, tmp_root, store, entry, root if remote_dir else None))
    finally:
        if started_here:
            ray.shutdown()
    return cpus


def _connect(address: str | None, root: str, num_cpus: int | None = None):
    """(ray, whether the launchers' files travel with the job, whether this call started Ray)."""
    ray = require_ray()
    remote_dir = address not in (None, "", "local")
    started_here = not ray.is_initialized()
    if started_here:
        kw: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        if remote_dir:  # the launchers' files travel with the job
            kw.update(address=address, runtime_env={"working_dir": root, "excludes": EXCLUDES})
        elif num_cpus:
            kw["num_cpus"] = num_cpus
        try:
            ray.init(**kw)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise InvalidArgument(f"--ray {address or ''}: cannot connect to a Ray cluster ({e}); give its address "
                                  "(host:6379, ray://host:10001) or 'auto' for the ambient one") from None
    return ray, remote_dir, started_here


def _task_options(device: str | None) -> dict:
    """Per task: one CPU, a GPU on cuda, Ray's retries of a lost worker, and the interpreter switch (it must be set
    before a launcher's module is imported in the worker)."""
    if device in (None, "auto"):  # as on the driver
        interpret = os.environ.get("TRITON_INTERPRET", "0")
    else:
        interpret = "1" if device == "cpu" else "0"
    return dict(num_cpus=1, num_gpus=1 if (device or "").startswith("cuda") else 0, max_retries=MAX_RETRIES,
                retry_exceptions=False, runtime_env={"env_vars": {"TRITON_INTERPRET": interpret}})


class RaySession:
    """The pytest plugin's route (``--gpuemu-ray``): :meth:`submit` one marked launcher as a task, :meth:`outcome`
    waits for it and writes its store files into the driver's store; :meth:`close` stops a cluster it started."""

    def __init__(self, address: str | None, *, device: str | None, root: str) -> None:
        import sys

        self._ray, self._remote_dir, self._started = _connect(address, root)
        self._root, self._sys_path = root, list(sys.path)
        from ..pytest_plugin import ray_task

        self._task = self._ray.remote(ray_task).options(**_task_options(device))
        self._stores: dict = {}

    def submit(self, target: str, fuzz_kwargs: dict):
        from ..config import resolve

        store = str(resolve(store=fuzz_kwargs.get("store")).store)
        shipped = _relative(target, self._root) if self._remote_dir else target
        ref = self._task.remote(shipped, {k: v for k, v in fuzz_kwargs.items() if k != "store"}, self._sys_path)
        self._stores[ref] = (store, target, shipped)
        return ref

    def outcome(self, ref) -> dict:
        store, target, shipped = self._stores.pop(ref)
        try:
            outcome, files, tmp_root = self._ray.get(ref)
        except Exception as e:  # retries exhausted: the item fails with why, not a traceback of Ray's
            return {"status": "failed", "properties": [], "message": f"gpuemu: Ray task for {target} failed after "
                    f"{MAX_RETRIES} retries: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        from types import SimpleNamespace

        entry = SimpleNamespace(target=target)  # what _land reads of a launcher: its target as the driver names it
        return _land(outcome, files, tmp_root, store, entry, self._root if shipped != target else None)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False


def _relative(target: str, root: str) -> str:
    """``target`` relative to ``root`` (the job's working directory on the workers), or as it is when outside."""
    file, _, fn = target.rpartition(":")
    try:
        rel = os.path.relpath(file, root)
    except ValueError:
        return target
    return target if rel.startswith("..") else f"{rel}:{fn}"


def _unit(entry, kw: dict) -> tuple[dict, dict[str, bytes], str]:
    """One task of ``check --ray``: fuzz one launcher into a temporary store (see :func:`in_temporary_store`)."""
    from .run import fuzz_one

    return in_temporary_store(lambda tmp: fuzz_one(entry, store=tmp, **kw))


def in_temporary_store(work: Callable[[str], dict]) -> tuple[dict, dict[str, bytes], str]:
    """In a Ray task: ``work(store)`` into a temporary store, then (its result, the store's files as bytes, the
    store's path), the store removed; :func:`_land` writes the files into the driver's store."""
    tmp = tempfile.mkdtemp(prefix="gpuemu-ray-store-")
    try:
        result = work(tmp)
        files = {str(p.relative_to(tmp)): p.read_bytes() for p in Path(tmp).rglob("*")
                 if p.is_file() and not p.name.startswith(".tmp-")}
        return result, files, tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _land(result: dict, files: dict[str, bytes], tmp_root: str | None, store: str, entry,
          root: str | None) -> dict:
    """Write a task's store files into the driver's store and make every path in the result name the driver's."""
    from ..store import _atomic_write

    def here(data: bytes) -> bytes:
        text = data.decode("utf-8")
        if tmp_root:
            text = text.replace(json.dumps(tmp_root)[1:-1], json.dumps(str(store))[1:-1])
        if root is not None:  # targets were shipped relative to the working directory: give them back whole
            rel = _relative(entry.target, root)
            text = text.replace(json.dumps(rel)[1:-1], json.dumps(entry.target)[1:-1])
        return text.encode("utf-8")

    for rel, data in sorted(files.items()):
        dest = Path(store) / rel
        if rel.startswith("snapshots/"):
            if not dest.exists():  # content-addressed: the same bytes whoever wrote them
                _atomic_write(dest, data)
        else:
            _atomic_write(dest, here(data))
    return json.loads(here(json.dumps(result).encode()))
