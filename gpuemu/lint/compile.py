"""Ahead-of-time compilation for a named target, with the artifact cache and a process pool.

Triton: ``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", CC, 32),
options=...)`` with the specialisation from :mod:`.specialize`. Triton's own cache is pointed at a
throw-away directory for the run, so every miss of the lint's cache really runs ptxas and its ``-v`` log
(which Triton prints when ``knobs.nvidia.dump_ptxas_log`` is set) gives the spill bytes.

CUDA C: ``nvcc -cubin -arch=sm_XY -Xptxas -v`` once per file and target; every ``__global__`` function in the
cubin becomes a kernel.

Triton's compiler holds the GIL, so threads do not overlap compiles; several uncached compiles run in
forked worker processes instead (they inherit the loaded kernels, and nothing is pickled but job indices
and metrics dicts).
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import tools
from .cache import ArtifactCache, cache_key
from .examples import SourceLocation, Specimen, display_path
from .metrics import METRICS_VERSION, KernelMetrics, measure
from .specialize import Specialization, specialize, triton_target
from .targets import Target


@dataclass
class Job:
    """One kernel (or one .cu file) to compile for one target."""

    target: Target
    key: str
    sass: bool
    specimen: Specimen | None = None
    spec: Specialization | None = None
    cu_path: Path | None = None
    cu_flags: tuple[str, ...] = ()
    cu_num_warps: int = 8


@dataclass
class Outcome:
    """The metrics of one kernel on one target, or why there are none."""

    kernel_id: str
    name: str
    target: Target
    metrics: KernelMetrics | None
    error: str | None = None
    cache_hit: bool = False
    seconds: float = 0.0
    location: SourceLocation | None = None
    specialization: dict = field(default_factory=dict)
    grid: tuple[int, ...] | None = None


def tool_versions(target: Target, *, sass: bool) -> dict[str, str]:
    """Versions that change machine code or what is read from it: triton, ptxas, cuobjdump (nvdisasm)."""
    import triton

    out = {"triton": triton.__version__,
           "ptxas": tools.nvidia_tool("ptxas-blackwell" if target.capability >= 100 else "ptxas").version,
           "cuobjdump": tools.nvidia_tool("cuobjdump").version}
    if sass:
        out["nvdisasm"] = tools.nvidia_tool("nvdisasm").version
    return out


def triton_job(specimen: Specimen, target: Target, *, sass: bool) -> Job:
    """Specialise ``specimen`` for ``target`` and key it for the cache."""
    spec = specialize(specimen.fn, specimen.args, specimen.kwargs, target)
    key = cache_key({"kind": "triton", "source": specimen.fn.cache_key, "name": specimen.name, "spec": spec.key(),
                     "target": target.name, "tools": tool_versions(target, sass=False),
                     "metrics": METRICS_VERSION})
    return Job(target=target, key=key, sass=sass, specimen=specimen, spec=spec)


def cuda_job(path: Path, target: Target, *, sass: bool, flags: tuple[str, ...] = (), num_warps: int = 8) -> Job:
    nv = tools.nvcc()
    key = cache_key({"kind": "cuda", "source": tools_hash(path), "flags": list(flags), "target": target.name,
                     "nvcc": nv.version if nv else None, "cuobjdump": tools.nvidia_tool("cuobjdump").version,
                     "num_warps": num_warps, "metrics": METRICS_VERSION})
    return Job(target=target, key=key, sass=sass, cu_path=path, cu_flags=flags, cu_num_warps=num_warps)


def tools_hash(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def _triton_compile_scope(cache_dir: str, kernel_globals: dict):
    """Triton writes into ``cache_dir`` (so nothing is a stale hit) and prints the ptxas log; and the
    compile sees JITFunctions only (see :func:`_jit_helpers`)."""
    from triton import knobs

    with knobs.cache.scope(), knobs.nvidia.scope(), knobs.runtime.scope(), _jit_helpers(kernel_globals):
        knobs.cache.dir = cache_dir
        knobs.runtime.interpret = False
        if any("dump_ptxas_log" in vars(c) for c in type(knobs.nvidia).__mro__):
            knobs.nvidia.dump_ptxas_log = True
        yield


_JIT_OF: dict = {}  # python function -> the JITFunction standing in for its InterpretedFunction


@contextlib.contextmanager
def _jit_helpers(kernel_globals: dict):
    """In a process where triton was first imported with TRITON_INTERPRET=1 (pytest, or a fuzz run before the
    lint), Triton's own ``@jit`` helpers (``tl.sum``'s combine function, ...) are InterpretedFunctions, which
    ``triton.compile`` cannot call on IR values. For the compile, every InterpretedFunction in
    ``triton.language.*`` and in the kernel's globals is swapped for a JITFunction of the same Python function,
    and put back afterwards (the interpreter in the same process keeps working)."""
    import sys

    from triton.runtime.jit import JITFunction

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - a triton without the interpreter
        yield
        return
    undo: list[tuple[dict, str, object]] = []
    seen: set[int] = set()

    def convert(ns: dict) -> None:
        if id(ns) in seen:
            return
        seen.add(id(ns))
        for key, value in list(ns.items()):
            if isinstance(value, InterpretedFunction):
                if value.fn not in _JIT_OF:
                    _JIT_OF[value.fn] = JITFunction(value.fn)
                undo.append((ns, key, value))
                ns[key] = _JIT_OF[value.fn]
                convert(value.fn.__globals__)

    try:
        for name, mod in list(sys.modules.items()):
            if name.startswith("triton.language") and mod is not None:
                convert(vars(mod))
        convert(kernel_globals)
        yield
    finally:
        for ns, key, value in reversed(undo):
            ns[key] = value


def _compile_triton(job: Job, cache: ArtifactCache, triton_cache: str) -> list[dict]:
    import triton
    from triton.compiler import ASTSource

    spec, specimen = job.spec, job.specimen
    assert spec is not None and specimen is not None
    src = ASTSource(specimen.fn, spec.signature, spec.constexprs, spec.attrs)
    log = io.StringIO()
    with _triton_compile_scope(triton_cache, specimen.fn.fn.__globals__), contextlib.redirect_stdout(log):
        compiled = triton.compile(src, target=triton_target(job.target), options=spec.options)
    asm = compiled.asm
    md = compiled.metadata._asdict() if hasattr(compiled.metadata, "_asdict") else dict(compiled.metadata)
    cubin = asm["cubin"]
    resources = tools.resource_usage(cubin)
    sass = tools.disassemble(cubin) if job.sass else None
    name = md.get("name", specimen.name)
    metrics = measure(name=name, target=job.target, cubin_resources=resources, ptx=asm["ptx"],
                      ttir=asm.get("ttir", ""), num_warps=int(md.get("num_warps", 4)),
                      num_stages=md.get("num_stages"), shared_dynamic=int(md.get("shared", 0) or 0),
                      ptxas_log=log.getvalue(), sass=sass, tools=tool_versions(job.target, sass=job.sass))
    files: dict[str, bytes | str] = {"kernel.cubin": cubin, "kernel.ptx": asm["ptx"], "kernel.ttir": asm.get("ttir", ""),
                                     "ptxas.log": log.getvalue(), "resources.txt": resources}
    if sass:
        files["kernel.sass"] = sass
    cache.put(job.key, {"kernels": [metrics.to_dict()]}, files)
    return [metrics.to_dict()]


_MANGLED = re.compile(r"^_Z(?:N(?:\d+\w+?)*?)?(\d+)(\w+)")


def demangle_simple(name: str) -> str:
    """``_Z6kernelPf`` -> ``kernel``; names that are not Itanium-mangled come back unchanged."""
    if not name.startswith("_Z"):
        return name
    rest = name[2:]
    parts = []
    if rest.startswith("N"):
        rest = rest[1:]
        while rest and rest[0].isdigit():
            m = re.match(r"(\d+)", rest)
            n = int(m.group(1))
            rest = rest[len(m.group(1)):]
            parts.append(rest[:n])
            rest = rest[n:]
        return parts[-1] if parts else name
    m = re.match(r"(\d+)", rest)
    if not m:
        return name
    n = int(m.group(1))
    return rest[len(m.group(1)):len(m.group(1)) + n] or name


_C_TYPES = {"double": "fp64", "float": "fp32", "half": "fp16", "__half": "fp16", "__nv_bfloat16": "bf16",
            "nv_bfloat16": "bf16", "int": "i32", "long": "i64", "int64_t": "i64", "int32_t": "i32"}


def cuda_signature(source: str, name: str) -> tuple[tuple[str, ...], int, int] | None:
    """(argument types, first line, last line) of ``__global__ ... name(...)`` in CUDA C source, best effort."""
    m = re.search(r"__global__[^;{]*?\b" + re.escape(name) + r"\s*\(([^)]*)\)", source, flags=re.DOTALL)
    if not m:
        return None
    types = []
    for param in m.group(1).split(","):
        words = re.findall(r"[A-Za-z_]\w*", param)
        ptr = "*" in param
        t = next((_C_TYPES[w] for w in words if w in _C_TYPES), "?")
        types.append(("*" if ptr else "") + t)
    start = source.count("\n", 0, m.start()) + 1
    depth, end = 0, None
    i = source.find("{", m.end())
    if i >= 0:
        for j in range(i, len(source)):
            depth += source[j] == "{"
            depth -= source[j] == "}"
            if depth == 0:
                end = source.count("\n", 0, j) + 1
                break
    return tuple(types), start, end or start


def _compile_cuda(job: Job, cache: ArtifactCache) -> list[dict]:
    assert job.cu_path is not None
    with tempfile.TemporaryDirectory(prefix="gpuemu-nvcc-") as d:
        cubin, ptx, log = tools.nvcc_compile(job.cu_path, job.target.name, Path(d), list(job.cu_flags))
    resources = tools.resource_usage(cubin)
    sass = tools.disassemble(cubin) if job.sass else None
    from .artifacts import parse_resource_usage

    source = job.cu_path.read_text(errors="replace")
    nv = tools.nvcc()
    out = []
    for fn_name in parse_resource_usage(resources):
        sig = cuda_signature(source, demangle_simple(fn_name))
        m = measure(name=fn_name, target=job.target, cubin_resources=resources, ptx=ptx, num_warps=job.cu_num_warps,
                    ptxas_log=log, sass=sass, arg_types=sig[0] if sig else (),
                    tools={"nvcc": nv.version if nv else "?", "cuobjdump": tools.nvidia_tool("cuobjdump").version})
        d = m.to_dict()
        d["lines"] = [sig[1], sig[2]] if sig else None
        out.append(d)
    cache.put(job.key, {"kernels": out}, {"kernel.cubin": cubin, "kernel.ptx": ptx, "ptxas.log": log,
                                           "resources.txt": resources})
    return out


def _run_one(job: Job, cache: ArtifactCache, triton_cache: str) -> dict:
    t0 = time.perf_counter()
    try:
        kernels = _compile_cuda(job, cache) if job.cu_path is not None else _compile_triton(job, cache, triton_cache)
        return {"kernels": kernels, "error": None, "seconds": time.perf_counter() - t0}
    except tools.ToolError as e:
        return {"kernels": [], "error": str(e), "seconds": time.perf_counter() - t0}
    except Exception as e:  # a kernel that does not compile for this target is a finding, not a crash
        error = _error_line(e)[:400]
        cache.put(job.key, {"kernels": [], "error": error})  # the same source fails the same way: keep it
        return {"kernels": [], "error": error, "seconds": time.perf_counter() - t0}


def _error_line(e: BaseException) -> str:
    """One line naming the compile error: Triton's CompilationError puts the source excerpt first and the
    reason last ("at 1:0: / def k(...) / ^ / ValueError(...)"), so the last non-empty line is the one to keep."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip() and ln.strip() != "^"]
    where = lines[0] if lines and lines[0].startswith("at ") else ""
    reason = lines[-1] if lines else ""
    return f"{type(e).__name__}{' ' + where.rstrip(':') if where and where != reason else ''}: {reason}"


_POOL: list[Job] = []
_POOL_ARGS: tuple = ()


def _pool_entry(i: int) -> dict:
    return _run_one(_POOL[i], *_POOL_ARGS)


def _add_sass(job: Job, cache: ArtifactCache, cached: dict) -> dict | None:
    """A cached entry compiled without SASS, asked for with it: disassemble the cached cubin."""
    cubin = cache.artifact(job.key, "kernel.cubin")
    if cubin is None:
        return None
    sass = tools.disassemble(cubin)
    from .artifacts import sass_functions, sass_mix

    fns = sass_functions(sass)
    for k in cached["kernels"]:
        k["sass"] = sass_mix(fns.get(k["name"], sass)).to_dict()
        k["tools"]["nvdisasm"] = tools.nvidia_tool("nvdisasm").version
    cache.update_metrics(job.key, cached)
    return cached


def run_jobs(jobs: list[Job], cache: ArtifactCache, *, workers: int = 1,
             progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Results for ``jobs`` in order: {"kernels": [metrics dicts], "error", "seconds", "cache_hit"}.

    Cached entries are read; the rest compile, in ``workers`` forked processes when there are several.
    """
    results: list[dict | None] = [None] * len(jobs)
    todo: list[int] = []
    for i, job in enumerate(jobs):
        hit = cache.get(job.key)
        if hit is not None and job.sass and any(k.get("sass") is None for k in hit.get("kernels", [])):
            hit = _add_sass(job, cache, hit)
        if hit is not None:
            results[i] = {"kernels": hit["kernels"], "error": hit.get("error"), "seconds": 0.0, "cache_hit": True}
        else:
            todo.append(i)
    done = len(jobs) - len(todo)
    if progress:
        progress(done, len(jobs))
    triton_cache = tempfile.mkdtemp(prefix="gpuemu-lint-triton-")
    try:
        from . import isolate

        if todo and isolate.lang_patched():  # see gpuemu/lint/isolate.py: compile in clean processes
            blobs = {i: isolate.describe(jobs[i], str(cache.root) if cache.root else None, triton_cache)
                     for i in todo if jobs[i].specimen is not None}
            movable = [i for i in todo if blobs.get(i) is not None]
            for i, res in zip(movable, isolate.run([blobs[i] for i in movable], workers=workers)):
                results[i] = dict(res, cache_hit=False)
            todo = [i for i in todo if i not in set(movable)]
            done += len(movable)
        workers = max(1, min(workers, len(todo)))
        can_fork = "fork" in multiprocessing.get_all_start_methods()
        if workers > 1 and can_fork:
            # Triton's first compile in a process pays ~1 s of one-time set-up; pay it once here, before
            # forking, and every worker inherits it (measured: a worker's first compile 1.0 s -> 0.3 s)
            first = todo.pop(0)
            results[first] = dict(_run_one(jobs[first], cache, triton_cache), cache_hit=False)
            done += 1
            if progress:
                progress(done, len(jobs))
            global _POOL, _POOL_ARGS
            _POOL, _POOL_ARGS = [jobs[i] for i in todo], (cache, triton_cache)
            try:
                with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as ex:
                    for i, res in zip(todo, ex.map(_pool_entry, range(len(todo)))):
                        results[i] = dict(res, cache_hit=False)
                        done += 1
                        if progress:
                            progress(done, len(jobs))
            finally:
                _POOL, _POOL_ARGS = [], ()
        else:
            for i in todo:
                results[i] = dict(_run_one(jobs[i], cache, triton_cache), cache_hit=False)
                done += 1
                if progress:
                    progress(done, len(jobs))
    finally:
        shutil.rmtree(triton_cache, ignore_errors=True)
    return [r for r in results if r is not None]


def outcomes(jobs: list[Job], results: list[dict], *, root: str | os.PathLike | None = None) -> list[Outcome]:
    """Pair every job's result with its kernel's identity and source location."""
    out: list[Outcome] = []
    for job, res in zip(jobs, results):
        if job.specimen is not None:
            sp = job.specimen
            metrics = KernelMetrics.from_dict(res["kernels"][0]) if res["kernels"] else None
            out.append(Outcome(kernel_id=sp.kernel_id, name=sp.name, target=job.target, metrics=metrics,
                               error=res["error"], cache_hit=res["cache_hit"], seconds=res["seconds"],
                               location=sp.location, specialization=job.spec.describe() if job.spec else {},
                               grid=sp.grid))
            continue
        assert job.cu_path is not None
        label = display_path(job.cu_path, root)
        if res["error"] or not res["kernels"]:
            out.append(Outcome(kernel_id=label, name=job.cu_path.name, target=job.target, metrics=None,
                               error=res["error"] or "nvcc produced no kernel", cache_hit=res["cache_hit"],
                               seconds=res["seconds"], location=SourceLocation(str(job.cu_path), 1, 1)))
            continue
        for k in res["kernels"]:
            lines = k.get("lines") or [1, 1]
            short = demangle_simple(k["name"])
            out.append(Outcome(kernel_id=f"{label}:{short}", name=short, target=job.target,
                               metrics=KernelMetrics.from_dict(k), cache_hit=res["cache_hit"],
                               seconds=res["seconds"] / max(1, len(res["kernels"])),
                               location=SourceLocation(str(job.cu_path), lines[0], lines[1]),
                               specialization={"block_warps_assumed": job.cu_num_warps}))
    return out
