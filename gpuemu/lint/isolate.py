"""Compiling in a clean process when this one's ``triton.language`` has been patched by the interpreter.

Triton's interpreter swaps ``triton.language`` functions (``program_id``, ``dtype.to_ir``, ``range``, ...) for
numpy versions during a launch and puts them back afterwards, except on one path: calling an
``InterpretedFunction`` directly (``helper(x)`` outside ``kernel[grid]``) patches and never restores
(Triton 3.6-3.9). After that, every ``triton.compile`` in the process fails on IR values. The originals are
gone, so the lint does not repair the process: it compiles such jobs in freshly spawned processes that
re-import each kernel from its file. That costs an interpreter start per worker, only in polluted processes
(a test session that ran interpreted helpers before the lint, say); the CLI never gets here.
"""

from __future__ import annotations

import multiprocessing
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def lang_patched() -> bool:
    """True when the interpreter's patches are left on ``triton.language`` in this process."""
    for name in ("triton.language.core", "triton.language"):
        mod = sys.modules.get(name)
        fn = getattr(mod, "program_id", None) if mod is not None else None
        if fn is not None and "_patch_attr" in getattr(fn, "__qualname__", ""):
            return True
    return False


def describe(job: Any, cache_root: str | None, triton_cache: str) -> bytes | None:
    """A pickled description a fresh process can compile from, or None when the kernel cannot be found again
    by file and qualified name (a kernel made inside a function) or its specialisation does not pickle."""
    import inspect

    fn = job.specimen.fn.fn
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        return None
    if not path or "<locals>" in fn.__qualname__:
        return None
    try:
        return pickle.dumps({"path": path, "qualname": fn.__qualname__, "spec": job.spec, "target": job.target.name,
                             "key": job.key, "sass": job.sass, "cache": cache_root, "triton_cache": triton_cache})
    except Exception:  # a constexpr that is a JITFunction or another unpicklable object
        return None


def _entry(blob: bytes) -> dict:
    """Runs in the spawned process: import the kernel's file afresh and compile one job."""
    d = pickle.loads(blob)
    from .cache import ArtifactCache
    from .compile import Job, _run_one
    from .examples import Specimen, load_module
    from .targets import get

    obj: Any = load_module(d["path"])
    for part in d["qualname"].split("."):
        obj = getattr(obj, part)
    while not hasattr(obj, "_pack_args") and hasattr(obj, "fn"):  # autotuner / heuristics wrappers
        obj = obj.fn
    specimen = Specimen(kernel_id="", name=obj.fn.__name__, fn=obj, args=(), kwargs={})
    job = Job(target=get(d["target"]), key=d["key"], sass=d["sass"], specimen=specimen, spec=d["spec"])
    return _run_one(job, ArtifactCache(d["cache"]), d["triton_cache"])


def run(blobs: list[bytes], *, workers: int) -> list[dict]:
    """Compile the described jobs in ``workers`` spawned processes; results in order."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(blobs))), mp_context=ctx) as ex:
        return list(ex.map(_entry, blobs))
