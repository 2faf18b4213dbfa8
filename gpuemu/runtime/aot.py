"""PTX at the same time: compile exactly what the runtime ran, ahead of time, for a named GPU target.

    >>> from gpuemu.runtime import compile_for
    >>> with compile_for("sm_90") as compiled:      # doctest: +SKIP
    ...     launcher(x)                            # runs on the CPU runtime, and compiles for sm_90
    >>> compiled[0].asm["ptx"][:40]                # doctest: +SKIP

Inside :func:`compile_for` every launch the runtime runs is also bound by Triton's own binder for the target
(``create_function_from_signature``: the same specialisation a GPU launch would get: pointer and integer
divisibility by 16, integers equal to 1 turned constexpr, the same constexprs) and compiled with
``triton.compile`` for that target. The constexprs the CPU run used are checked against the ones the
compile used, so the lint sees the code that was run. Triton internals are version-gated in _compat.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import InvalidArgument, one_line

_local = threading.local()


@dataclass(frozen=True)
class CompiledLaunch:
    """One launch, compiled for ``target``: Triton's asm dict (ttir, ttgir, llir, ptx, cubin) and metadata."""

    kernel: str
    target: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    asm: dict[str, Any] = field(repr=False, default_factory=dict)
    metadata: dict[str, Any] = field(repr=False, default_factory=dict)
    error: str | None = None

    @property
    def ptx(self) -> str | None:
        return self.asm.get("ptx")


def parse_target(target: str):
    """'sm_80' / 'sm_90' / 'sm_90a' / 'cuda:90' -> GPUTarget('cuda', 90, 32)."""
    from triton.backends.compiler import GPUTarget

    t = target.strip().lower()
    digits = "".join(c for c in t.split("_")[-1].split(":")[-1] if c.isdigit())
    if not (t.startswith("sm_") or t.startswith("cuda:")) or not digits:
        raise InvalidArgument(f"target {target!r} is not a CUDA target; use e.g. 'sm_80' or 'sm_90'")
    return GPUTarget("cuda", int(digits), 32)


@contextlib.contextmanager
def compile_for(target: str) -> Iterator[list[CompiledLaunch]]:
    """Inside the block, every launch the runtime runs is also compiled for ``target`` (e.g. "sm_90")."""
    gpu_target = parse_target(target)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    out: list[CompiledLaunch] = []
    stack.append((target, gpu_target, out))
    try:
        yield out
    finally:
        stack.remove((target, gpu_target, out))


def on_launch(kernel: Any, args: tuple, kwargs: dict, report: Any) -> None:
    """Called by the runtime after each launch it ran: compile it for every active compile_for target."""
    for target, gpu_target, out in getattr(_local, "stack", ()):
        out.append(compile_launch(kernel, args, kwargs, gpu_target, target_name=target, ran=report.constexprs))


def _jit_function(kernel: Any):
    from ._compat import jit_function_class

    JIT = jit_function_class()
    if isinstance(kernel, JIT):
        return kernel
    fn = getattr(kernel, "fn", kernel)
    cache = getattr(_local, "jit_cache", None)
    if cache is None:
        cache = _local.jit_cache = {}
    if fn not in cache:  # an InterpretedFunction (TRITON_INTERPRET=1 at decoration): a JITFunction of its fn
        cache[fn] = JIT(fn)
    return cache[fn]


def specialization_key(kernel: Any, args: tuple, kwargs: dict, gpu_target: Any) -> str:
    """The launch's compile identity on ``gpu_target`` as text, the same in every process: the kernel's source
    location and Triton's own binding (argument types, divisibility by 16, integers equal to 1, constexprs,
    options). Two launches with the same key are one compile in Triton's cache; it is computed without compiling."""
    jit = _jit_function(kernel)
    _, binder = _binder(jit, gpu_target)
    _, specialization, options = binder(*args, **_launch_options(kwargs))
    code = jit.fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}:{jit.fn.__qualname__}|{specialization!r}|{options!r}"


def _launch_options(kwargs: dict) -> dict:
    """``kwargs`` with the options Triton's ``run`` adds before binding."""
    import triton

    kw = dict(kwargs)
    kw.setdefault("debug", False)
    if hasattr(triton, "knobs"):
        kw.setdefault("instrumentation_mode", getattr(triton.knobs.compilation, "instrumentation_mode", ""))
    return kw


def compile_launch(kernel: Any, args: tuple, kwargs: dict, gpu_target: Any, *, target_name: str = "",
                   ran: dict | None = None, cache: bool = False, limits_only: bool = False,
                   early: Any = None) -> CompiledLaunch:
    """Bind ``args``/``kwargs`` with Triton's binder for ``gpu_target`` and compile; never raises (a failed
    compile is returned with ``error`` set: a kernel the CPU ran but the GPU compiler rejects is a finding
    for the lint).

    ``cache``: reuse the compile of an earlier launch with the same kernel, specialisation (Triton's own:
    argument types, divisibility by 16, integers equal to 1), constexprs, options and target, as a GPU's
    kernel cache would; a fuzz run then compiles once per distinct specialisation, not once per case.

    ``limits_only``: only the metadata a launch is checked against (shared memory, num_warps, num_stages),
    with ``asm`` empty: read from Triton's own disk cache when that launch was compiled before, else from
    gpuemu's figure stored beside it, else compiled only as far as LLVM IR (where Triton sets
    ``metadata["shared"]``; PTX and cubin, about two thirds of a compile, are skipped) and stored.
    ``early(ttgir_text) -> dict | None``: asked after the TTGIR stage; a dict it returns is the metadata
    (a kernel so large that lowering it to LLVM IR would take minutes can be judged from its TTGIR).
    """
    import triton
    from triton.compiler import ASTSource

    jit = _jit_function(kernel)
    name = jit.fn.__name__
    try:
        backend, binder = _binder(jit, gpu_target)
        kw = _launch_options(kwargs)
        bound_args, specialization, options = binder(*args, **kw)
        options, signature, constexprs, attrs = jit._pack_args(backend, kw, bound_args, specialization, options)
        named = {jit.params[path[0]].name: v for path, v in constexprs.items() if len(path) == 1}
        if ran is not None:
            for k, v in ran.items():
                if k in named and named[k] != v and not (hasattr(v, "name") and str(v) == str(named[k])):
                    raise RuntimeError(f"constexpr {k}: CPU run used {v!r}, the compile bound {named[k]!r}")
        key = None
        if cache or limits_only:
            key = (limits_only, jit.fn, repr(gpu_target), repr(sorted(signature.items())),
                   repr(sorted(constexprs.items())), repr(sorted(attrs.items())), repr(sorted(options.__dict__.items())))
            hit = _compiled.get(key)
            if hit is not None:
                _stats["hits"] += 1
                _compiled.move_to_end(key)
                return hit
        src = ASTSource(jit, signature, constexprs, attrs)
        from .executor import _lock as launch_lock

        t0 = time.perf_counter()
        with launch_lock, _compiled_mode(jit.fn.__globals__):  # no runtime launch sees the swapped helpers
            if limits_only:
                asm, meta = {}, _limits(src, gpu_target, options.__dict__, early)
            else:
                compiled = triton.compile(src, target=gpu_target, options=options.__dict__)
                asm = dict(compiled.asm)
                meta = (compiled.metadata._asdict() if hasattr(compiled.metadata, "_asdict")
                        else dict(vars(compiled.metadata)))
        out = CompiledLaunch(name, target_name or f"sm_{gpu_target.arch}", {k: str(v) for k, v in signature.items()},
                             {k: _plain(v) for k, v in named.items()}, asm, _plain_dict(meta))
        _stats["seconds"] += time.perf_counter() - t0
        if key is not None:
            _stats["compiles"] += 1
            with _cache_lock:
                _compiled[key] = out
                while len(_compiled) > _CACHE_SIZE:
                    _compiled.popitem(last=False)
        return out
    except Exception as e:  # the CPU run stands; the compile failure is reported
        return CompiledLaunch(name, target_name or f"sm_{getattr(gpu_target, 'arch', '?')}", {}, {},
                              error=_error_text(e))


_LIMIT_KEYS = ("shared", "num_warps", "num_stages", "num_ctas", "tmem_size", "name")


def _limits(src: Any, gpu_target: Any, options: dict, early: Any = None) -> dict:
    """The launch-check metadata of ``src`` compiled for ``gpu_target`` (see ``compile_launch(limits_only=)``).
    Triton internals (its cache key and stage table), so any surprise falls back to a full compile."""
    import json

    import triton

    try:
        import hashlib

        import triton.compiler.compiler as tc
        from triton._C.libtriton import ir

        backend = tc.make_backend(gpu_target)
        opts = backend.parse_options(dict(options, **src.parse_options()))
        env_vars = tc.get_cache_invalidating_env_vars()
        hash_ = hashlib.sha256(tc.get_cache_key(src, backend, opts, env_vars=env_vars).encode("utf-8")).hexdigest()
        manager = tc.get_cache_manager(hash_)
        file_name = src.name[:150]
        group = manager.get_group(f"{file_name}.json") or {}
        if group.get(f"{file_name}.json"):  # Triton compiled it before (a GPU run, the lint, compile_for)
            with open(group[f"{file_name}.json"]) as f:
                return {k: v for k, v in json.load(f).items() if k in _LIMIT_KEYS}
        ours = f"{file_name}.gpuemu-limits.json"
        path = manager.get_file(ours)
        if path:
            with open(path) as f:
                return json.load(f)
        stages: dict = {}
        backend.add_stages(stages, opts, src.language)
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(gpu_target, opts, backend.get_codegen_implementation(opts), backend.get_module_map(),
                             context)
        metadata = {"hash": hash_, "target": gpu_target, **opts.__dict__, **env_vars}
        module = stages["ttgir"](stages["ttir"](module, metadata), metadata)
        ttgir = str(module)
        judged = early(ttgir) if early is not None else None
        if judged:
            out = {**{k: _plain(metadata[k]) for k in _LIMIT_KEYS if k in metadata}, **judged}
            manager.put(json.dumps(out), ours, binary=False)
            _stats["early"] += 1
            return out
        if not (ALLOCATION_ONLY and _allocate(module, ttgir, metadata, opts, gpu_target)):
            stages["llir"](module, metadata)
        if "shared" not in metadata:
            raise LookupError("no shared memory figure after llir")
        out = {k: _plain(metadata[k]) for k in _LIMIT_KEYS if k in metadata}
        manager.put(json.dumps(out), ours, binary=False)
        _stats["partial"] += 1
        return out
    except Exception:  # another Triton's internals: compile in full, as a launch would
        compiled = triton.compile(src, target=gpu_target, options=options)
        meta = compiled.metadata._asdict() if hasattr(compiled.metadata, "_asdict") else dict(vars(compiled.metadata))
        return {k: meta[k] for k in _LIMIT_KEYS if k in meta}


ALLOCATION_ONLY = True  # _limits stops after Triton's shared memory allocation (False: lowers to LLVM IR)


def _allocate(module: Any, ttgir: str, metadata: dict, opts: Any, gpu_target: Any) -> bool:
    """The launch-check figures of a TTGIR module (``ttgir``: its text) from the passes of Triton's ``make_llir``
    up to its shared and tensor memory allocation (the NVIDIA pipeline of Triton 3.6 and 3.8, in its order),
    without the lowering to LLVM and LLVM's optimisation that follow (three quarters of a limits compile, measured
    on the corpus's flash attention): ``metadata`` gets ``shared``, ``tmem_size`` and a warp-specialised
    ``num_warps`` as make_llir reads them after its passes. False (nothing run, ``module`` untouched) where this
    Triton's pipeline is not that one (a pass missing or with another signature) or the module is
    warp-specialised (whose lowering adds barriers); the caller then runs make_llir.
    tests/test_launch_resources.py checks the figures equal make_llir's on every corpus launch."""
    if gpu_target.backend != "cuda" or "warp_specialize" in ttgir:
        return False
    try:
        from triton._C.libtriton import ir, nvidia, passes
        from triton.backends.nvidia.compiler import get_ptx_version_from_options

        capability = int(gpu_target.arch)
        pm = ir.pass_manager(module.context)
        passes.ttgpuir.add_combine_tensor_select_and_if(pm)
        try:
            passes.ttgpuir.add_allocate_warp_groups(pm, False)  # Triton 3.8: (pm, consan)
        except TypeError:
            passes.ttgpuir.add_allocate_warp_groups(pm)  # Triton 3.6
        passes.convert.add_scf_to_cf(pm)
        passes.gluon.add_inliner(pm)
        nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, capability,
                                                            get_ptx_version_from_options(opts, capability))
        nvidia.passes.ttnvgpuir.add_allocate_tensor_memory(pm)
    except (ImportError, AttributeError, TypeError):  # another Triton's pipeline
        return False
    pm.run(module, "gpuemu_limits")
    warps = module.get_int_attr("ttg.total-num-warps")
    if warps is not None:
        metadata["num_warps"] = warps
    metadata["shared"] = module.get_int_attr("ttg.shared")
    metadata["tmem_size"] = module.get_int_attr("ttg.tensor_memory_size")
    _stats["allocated"] += 1
    return True


_CACHE_SIZE = 256  # compiled launches kept (asm included: a few hundred KB each at most)
_compiled: "collections.OrderedDict[tuple, CompiledLaunch]" = collections.OrderedDict()
_binders: dict[tuple, tuple] = {}
_cache_lock = threading.Lock()
_stats = {"compiles": 0, "hits": 0, "partial": 0, "early": 0, "allocated": 0,
          "seconds": 0.0}  # seconds: spent compiling (or reading Triton's disk cache), not in this process's memo


def cache_stats() -> dict[str, float]:
    """Compiles made and reused by ``compile_launch(..., cache=True)`` in this process, and the seconds spent
    compiling (or reading Triton's disk cache) outside its memo."""
    return dict(_stats)


def _binder(jit: Any, gpu_target: Any) -> tuple:
    """(backend, Triton's binder) for ``jit`` on ``gpu_target``, built once (building one generates code)."""
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    key = (jit.fn, repr(gpu_target))
    hit = _binders.get(key)
    if hit is None:
        backend = make_backend(gpu_target)
        hit = _binders[key] = (backend, create_function_from_signature(jit.signature, jit.params, backend))
    return hit


def _error_text(e: BaseException) -> str:
    """One line for a failed compile. A CompilationError's first line is only its location ("at 2:11:"); the
    reason is its error_message or, for an exception raised inside code generation, its cause."""
    text = one_line(e)
    if type(e).__name__ == "CompilationError":
        cause = e.__cause__
        reason = e.error_message or (f"{type(cause).__name__}: {cause}" if cause is not None else None)
        if reason:
            text = f"{text} {' '.join(str(reason).split())}"
    return text[:500]


@contextlib.contextmanager
def _compiled_mode(kernel_globals: dict) -> Iterator[None]:
    """Compile in a process where TRITON_INTERPRET=1 made ``@triton.jit`` functions InterpretedFunctions:
    for the duration, Triton's own language functions and the kernel's helpers are JITFunctions again and
    the interpret knob is off (``triton.compile`` cannot call interpreted functions on IR values)."""
    import sys

    from ._compat import interpreted_function_class, jit_function_class, unpatched_language

    Interp, JIT = interpreted_function_class(), jit_function_class()
    cache = getattr(_local, "jit_cache", None)
    if cache is None:
        cache = _local.jit_cache = {}
    undo: list[tuple[dict, str, Any]] = []
    seen: set[int] = set()

    def convert(ns: dict) -> None:
        if id(ns) in seen:
            return
        seen.add(id(ns))
        for key, value in list(ns.items()):
            if isinstance(value, Interp):
                if value.fn not in cache:
                    cache[value.fn] = JIT(value.fn)
                undo.append((ns, key, value))
                ns[key] = cache[value.fn]
                convert(value.fn.__globals__)

    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    old_knob = getattr(getattr(knobs, "runtime", None), "interpret", None)
    try:
        for name, mod in list(sys.modules.items()):
            if name.startswith("triton.language") and mod is not None:
                convert(vars(mod))
        convert(kernel_globals)
        if old_knob:
            knobs.runtime.interpret = False
        with unpatched_language():
            yield
    finally:
        if old_knob:
            knobs.runtime.interpret = old_knob
        for ns, key, value in reversed(undo):
            ns[key] = value


def _plain(v: Any) -> Any:
    return v if isinstance(v, (int, float, bool, str)) or v is None else str(v)


def _plain_dict(d: dict) -> dict:
    return {k: _plain(v) for k, v in d.items()}
