"""One launch on the CPU runtime: bind, convert arguments, patch the interpreter, run every program.

The program loop is Triton's interpreter's (one Python call of the rewritten kernel per program id, numpy
underneath), with the interpreter's builder patched for the duration of the launch:

- memory: loads, stores and atomics go through the bounds-checked :class:`~gpuemu.runtime.memory.Arena`;
- numerics: bf16, TF32 dots, fused FMA, saturating casts (:mod:`~gpuemu.runtime.numerics`);
- libdevice: ``create_extern_elementwise`` computes (:mod:`~gpuemu.runtime.libdevice`);
- ``tl.device_assert`` (and ``assert`` on tensors) enforced: a failure is a finding with its message;
- nested ``@triton.jit`` helpers callable whatever TRITON_INTERPRET said when they were decorated;
- every launch bounded in time; a program spinning on a value only another program would change is
  reported as unsupported instead of hanging.

Launches are serialised by a lock: the interpreter's builder is one object per process.
"""

from __future__ import annotations

import ctypes
import dataclasses
import inspect
import itertools
import operator
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import KernelFinding, one_line
from ..runners.launches import _all_plain, bind_plain
from . import _compat, batched, fast, libdevice, numerics, overflow, partial, trace
from .memory import Arena, MemoryError_
from .rewrite import rewrite

_lock = threading.RLock()
_MISSING = object()


@dataclass(frozen=True)
class Settings:
    """How the runtime runs kernels.

    ``dot_precision``: "gpu" computes each fp32 ``tl.dot`` as the GPU does (TF32 unless the kernel asks
    for "ieee" or "tf32x3"); "ieee" computes every fp32 dot in full fp32 (the interpreter's behaviour).
    ``timeout_s`` bounds every launch; ``spin_limit`` is how many identical, write-free volatile loads or
    atomics in a row count as waiting on another program. ``grid``: "batched" runs chunks of programs at
    once with a program axis (:mod:`gpuemu.runtime.batched`) and falls back to one program at a time for
    a launch that needs it; "sequential" always runs one at a time.
    """

    dot_precision: str = "gpu"
    timeout_s: float = 120.0
    spin_limit: int = 2000
    grid: str = "batched"

    def __post_init__(self) -> None:
        from ..errors import InvalidArgument

        if self.dot_precision not in ("gpu", "ieee"):
            raise InvalidArgument(f"dot_precision={self.dot_precision!r} must be 'gpu' (TF32 for fp32 dots, "
                                  f"as on sm_80+) or 'ieee' (full fp32)")
        if self.grid not in ("batched", "sequential"):
            raise InvalidArgument(f"grid={self.grid!r} must be 'batched' (programs with a program axis, "
                                  f"sequential where a kernel needs it) or 'sequential' (one program at a time)")


@dataclass
class LaunchState:
    """Mutable state of the launch in progress (read by the builder patches)."""

    kernel: str
    settings: Settings
    arena: Arena
    deadline: float
    program: tuple[int, int, int] = (0, 0, 0)
    dot_precisions: list[str] = field(default_factory=list)
    codes: dict = field(default_factory=dict)  # code object -> function name (kernel and helpers)
    kernel_codes: frozenset = frozenset()
    rewritten: Any = None
    libdevice_patched: bool = False
    scope: Any = None  # the launch's _Scope (helpers found mid-launch patch their modules into it)
    patched_modules: set = field(default_factory=set)
    check_overflow: bool = False  # Triton's integer overflow check (a kernel in debug mode); else ints wrap
    # integer wraps that reach an address (runtime/overflow.py): the innermost scope in place (launch, batched
    # pass, recording), the kernel's and helpers' sources by code, the wrap the next builder call produces, and
    # whether the builder carries wrap notes now
    scope_now: Any = None
    sources: dict = field(default_factory=dict)
    wrap_pending: Any = None
    replaying: bool = False
    taint_on: bool = False
    taint_mark: Any = None
    chosen: list | None = None  # a partial launch's programs (runtime/partial.py); None: every program
    _spin_fp: Any = None
    _spin_n: int = 0

    def reset(self, kernel: str, settings: Settings, arena: Arena, deadline: float) -> None:
        """Make this (the process's reused) state the state of a new launch."""
        self.kernel, self.settings, self.arena, self.deadline = kernel, settings, arena, deadline
        self.program = (0, 0, 0)
        self.dot_precisions = []
        self.codes, self.kernel_codes, self.rewritten = {}, frozenset(), None
        self.libdevice_patched, self.scope = False, None
        self.patched_modules = set()
        self.check_overflow = False
        self.scope_now, self.sources, self.wrap_pending, self.replaying = None, {}, None, False
        self.taint_on, self.taint_mark = False, None
        self.chosen = None
        self._spin_fp, self._spin_n = None, 0

    @property
    def dot_precision(self) -> str:
        return self.settings.dot_precision

    def note_dot(self, used: str) -> None:
        if used not in self.dot_precisions:
            self.dot_precisions.append(used)

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Timeout(self.site_now())

    def site_now(self) -> str:
        """file:line of the innermost kernel or helper frame on the live stack."""
        f = sys._getframe(1)
        while f is not None:
            if f.f_code in self.codes:
                return _fmt_site(f.f_code, f.f_lineno, self.kernel_codes)
            f = f.f_back
        return "?"

    def spin_check(self, what: str, real: np.ndarray, result: np.ndarray) -> None:
        fp = (what, hash(np.asarray(real).tobytes()), hash(np.asarray(result).tobytes()), self.arena.epoch)
        if fp == self._spin_fp:
            self._spin_n += 1
            if self._spin_n >= self.settings.spin_limit:
                raise _Spin(what, self._spin_n, self.site_now())
        else:
            self._spin_fp, self._spin_n = fp, 0


class _Located(Exception):
    site = "?"


class _Timeout(_Located):
    def __init__(self, site: str = "?") -> None:
        super().__init__(site)
        self.site = site


class _Spin(_Located):
    def __init__(self, what: str, n: int, site: str = "?") -> None:
        super().__init__(what)
        self.what, self.n, self.site = what, n, site


class _AssertFailed(_Located):
    def __init__(self, message: str, lane: tuple[int, ...], n_bad: int, n: int, site: str = "?") -> None:
        super().__init__(message)
        self.message, self.lane, self.n_bad, self.n, self.site = message, lane, n_bad, n, site


# what the ordinary path raises for a kernel's own mistakes: a replay that raises one of these keeps its
# trace (the launch re-runs the ordinary way to locate it)
_FINDINGS = (MemoryError_, _Timeout, _Spin, _AssertFailed, KernelFinding, libdevice.UnsupportedLibdevice,
             overflow.Overflow)


def _interpreter_error() -> type:
    try:
        from triton.runtime.errors import InterpreterError
    except ImportError:  # pragma: no cover - a triton without it
        return RuntimeError
    return InterpreterError


class KernelError(_interpreter_error(), RuntimeError):
    """An exception raised by a kernel's own code, with the kernel source line: the error Triton's interpreter
    raises for the same launch (a ``triton.runtime.errors.InterpreterError``, so ``pytest.raises`` and
    ``except`` clauses written for Triton catch it), its cause the kernel's own exception."""


@dataclass(frozen=True)
class LaunchResult:
    kernel: str
    grid: tuple[int, int, int]
    constexprs: dict
    programs: int
    seconds: float
    dot_precisions: tuple[str, ...]
    grid_mode: str = "sequential"  # "batched (N passes)" or "sequential" with the reason batching was not used
    fallback: str | None = None  # why Triton's interpreter ran the launch instead (see _on_interpreter)
    programs_run: int | None = None  # a partial launch (runtime/partial.py): the programs it ran


# ---------------------------------------------------------------------- patching
class _Scope:
    """Set attributes for the launch and put every one back afterwards (instance attributes removed)."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self.recording: list | None = None  # when a list: every set() is also noted there

    def set_many(self, objs: list, names: list, values: list) -> None:
        """``set`` for each (object, name, value), with one undo for all of them."""
        olds = [getattr(o, "__dict__", {}).get(n, _MISSING) for o, n in zip(objs, names)]
        list(map(setattr, objs, names, values))
        self._undo.append(lambda: list(map(_restore, reversed(objs), reversed(names), reversed(olds))))

    def apply(self, patches: "Patches") -> None:
        """Set what ``patches`` holds; an instance it patches as a whole gets a copy of its ``__dict__`` with
        them in, and its own dict back (unchanged) on restore."""
        for obj, values in patches.overlays:
            saved = obj.__dict__
            now = saved.copy()
            now.update(values)
            obj.__dict__ = now
            self._undo.append(lambda obj=obj, saved=saved: setattr(obj, "__dict__", saved))
        if patches.objs:
            self.set_many(patches.objs, patches.names, patches.values)

    def set(self, obj: Any, name: str, value: Any) -> None:
        if self.recording is not None:
            self.recording.append((obj, name, value))
        own = getattr(obj, "__dict__", {})  # a class's mappingproxy or an instance's / module's dict
        old = own[name] if name in own else _MISSING
        setattr(obj, name, value)
        self._undo.append(lambda: _restore(obj, name, old))

    def set_item(self, mapping: dict, key: str, value: Any) -> None:
        old = mapping.get(key, _MISSING)
        mapping[key] = value

        def undo(mapping=mapping, key=key, old=old):
            if old is _MISSING:
                mapping.pop(key, None)
            else:
                mapping[key] = old

        self._undo.append(undo)

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


class Patches:
    """Patches recorded once (``_Scope.recording``) and set again on later launches by ``_Scope.apply``.
    An instance given :data:`OVERLAY_FROM` attributes or more (the interpreter's builder: some seventy
    methods) is patched by swapping its ``__dict__`` for a copy with them in: one assignment to set, one to
    undo, instead of a setattr and a restore per method. Classes and modules are set attribute by attribute."""

    OVERLAY_FROM = 8

    def __init__(self, entries: list[tuple[Any, str, Any]]) -> None:
        count: dict[int, int] = {}
        for obj, _, _ in entries:
            count[id(obj)] = count.get(id(obj), 0) + 1
        overlays: dict[int, tuple[Any, dict]] = {}
        rest = []
        for obj, name, value in entries:
            if count[id(obj)] >= self.OVERLAY_FROM and not isinstance(obj, (type, type(sys))) \
                    and type(getattr(obj, "__dict__", None)) is dict:
                overlays.setdefault(id(obj), (obj, {}))[1][name] = value  # a name set twice: the last value
            else:
                rest.append((obj, name, value))
        self.overlays = list(overlays.values())
        self.objs = [e[0] for e in rest]
        self.names = [e[1] for e in rest]
        self.values = [e[2] for e in rest]
        self._for_replay: Patches | None = None

    def for_replay(self) -> "Patches":
        """The part of these patches that a lean replay can reach (see :data:`REPLAY_REACHES`): every instance
        overlay (the builder) and the attributes named there."""
        if self._for_replay is None:
            part = Patches([])
            part.overlays = self.overlays
            keep = [i for i, n in enumerate(self.names) if n in REPLAY_REACHES]
            part.objs = [self.objs[i] for i in keep]
            part.names = [self.names[i] for i in keep]
            part.values = [self.values[i] for i in keep]
            self._for_replay = part
        return self._for_replay


# A lean replay (trace.Trace.lean) runs none of the kernel's Python: only its recorded builder calls (the
# builder's overlay), tensors and block types built for Triton's integer overflow check, that check (the
# semantic layer's casts, comparisons and device_assert) and the dtype lookups of the builder's methods. The
# other patches (tensor operators and conversions, tl.load / store / where / reduce / associative_scan,
# .T, nested helper calls) are only reached from a kernel's Python: a lean launch leaves them off, and a
# replay that falls back to the kernel's Python re-patches in full first (execute).
REPLAY_REACHES = frozenset({"__init__", "_get_np_dtype", "binary_op_sanitize_overflow_impl", "validate_block_shape"})


def _restore(obj: Any, name: str, old: Any) -> None:
    """Put ``obj.name`` back as it was before a ``_Scope`` set it: ``old``, or no own attribute at all."""
    if old is _MISSING:
        try:
            delattr(obj, name)
        except AttributeError:
            pass
    else:
        setattr(obj, name, old)


def _anchor():
    """A function whose globals see triton.language (and its core): lets _patch_lang patch tl / tl.core."""
    import types

    import triton.language as tl

    return types.FunctionType((lambda: None).__code__, {"tl": tl, "core": tl.core})


class _DtypeConstexpr:
    """Factory for constexpr-wrapped dtypes that forward attributes, as compiled Triton's are."""

    _cls = None

    @classmethod
    def wrap(cls, value: Any) -> Any:
        import triton.language as tl

        if not isinstance(value, tl.dtype):
            return value
        if cls._cls is None:
            class ConstexprDtype(tl.constexpr):
                def __getattr__(self, name):  # compiled Triton unwraps constexprs on attribute access
                    if name.startswith("__"):
                        raise AttributeError(name)
                    return getattr(object.__getattribute__(self, "value"), name)

            cls._cls = ConstexprDtype
        return cls._cls(value)


# ---------------------------------------------------------------------- argument conversion
_types: dict[str, Any] = {}  # Triton's type for a mangled argument type ("*fp32", "i32"): parsed once


def _str_to_ty(mangled: str):
    import triton.language as tl

    ty = _types.get(mangled)
    if ty is None:
        ty = _types[mangled] = tl.str_to_ty(mangled, None)
    return ty


def _pointer_type(obj: Any):
    import triton.language as tl
    from triton.runtime.jit import mangle_type

    try:
        return _str_to_ty(mangle_type(obj))
    except Exception:  # a duck-typed buffer Triton's mangler does not know: name its dtype ourselves
        from triton.runtime.jit import type_canonicalisation_dict

        name = str(getattr(obj, "dtype", "uint8")).split(".")[-1]
        return tl.pointer_type(tl.str_to_ty(type_canonicalisation_dict.get(name, name), None))


_ptr_by_dtype: dict = {}  # torch dtype -> Triton's pointer type for a tensor of it


def _is_tensor_type(kind: type) -> bool:
    """``torch.Tensor`` itself (not a subclass), told without importing torch."""
    return kind.__name__ == "Tensor" and kind.__module__ == "torch"


def _scalar(it: Any, tl: Any, data: np.ndarray, ty: Any) -> Any:
    """``tl.tensor(TensorHandle(data, ty), ty)`` for a scalar or pointer argument. With the fast paths on,
    the tensor is built as their constructor builds every tensor of the launch (fast.install)."""
    h = it.TensorHandle(data, ty)
    if not fast.ENABLED:
        return tl.tensor(h, ty)
    if fast.ONE is None:
        fast.ONE = tl.constexpr(1)
    t = object.__new__(tl.tensor)
    t.handle, t.shape, t.numel, t.type, t.dtype = h, (), fast.ONE, ty, ty.scalar
    return t


def _convert(value: Any, name: str, arena: Arena) -> Any:
    import triton.language as tl

    it = _compat.interp()
    kind = type(value)
    if kind is int and -2**31 <= value < 2**31:  # mangle_type names every such int "i32"
        return _scalar(it, tl, np.array([value], dtype=np.int32), tl.int32)
    if kind is float:  # compiled Triton passes a float argument as an fp32 scalar
        return _scalar(it, tl, np.array([value], dtype=np.float32), tl.float32)
    if _is_tensor_type(kind):
        ty = _ptr_by_dtype.get(value.dtype)
        if ty is None:
            ty = _ptr_by_dtype[value.dtype] = _pointer_type(value)
        return _scalar(it, tl, np.array([arena.add(value, name)], dtype=np.uint64), ty)
    if value is None or isinstance(value, (tl.dtype, tl.constexpr)):
        return value
    if isinstance(value, bool):  # an i1 scalar (triton 3.6's interpreter mistypes it as int32 data)
        return tl.tensor(it.TensorHandle(np.array([value], dtype=np.bool_), tl.int1), tl.int1)
    if isinstance(value, int):
        if not -2**31 <= value < 2**31:
            return it._implicit_cvt(value)
        # what _implicit_cvt makes of an int32 argument, with its type parsed once
        from triton.runtime.jit import mangle_type

        ty = _str_to_ty(mangle_type(value))
        return tl.tensor(it.TensorHandle(np.array([value], dtype=np.int32), ty), ty)
    if isinstance(value, float):  # compiled Triton passes a float argument as an fp32 scalar
        return tl.tensor(it.TensorHandle(np.array([value], dtype=np.float32), tl.float32), tl.float32)
    if isinstance(value, np.floating):
        return _convert(float(value), name, arena)
    if isinstance(value, np.integer):
        return _convert(int(value), name, arena)
    if type(value).__name__ == "TensorDescriptor" and hasattr(value, "block_shape"):
        return _descriptor(value, name, arena)
    if hasattr(value, "data_ptr"):
        ty = _pointer_type(value)
        ptr = arena.add(value, name)
        return tl.tensor(it.TensorHandle(np.array([ptr], dtype=np.uint64), ty), ty)
    if isinstance(value, tuple):
        items = [_convert(v, f"{name}[{i}]", arena) for i, v in enumerate(value)]
        if hasattr(value, "_fields"):
            return type(value)(*items)
        try:
            return type(value)(items)
        except TypeError:  # torch.Size takes ints only: Triton's interpreter, whose tl.tensor has __index__ then,
            return value  # gets the ints back; so does the kernel here
    return it._implicit_cvt(value)


def _descriptor(desc: Any, name: str, arena: Arena) -> Any:
    import triton.language as tl

    base = _convert(desc.base, name, arena)
    strides = [_convert(s, name, arena) for s in desc.strides]
    strides[-1] = tl.constexpr(1)
    return _compat.semantic().make_tensor_descriptor(
        base=base, shape=[_convert(s, name, arena) for s in desc.shape], strides=strides,
        block_shape=[tl.constexpr(b) for b in desc.block_shape], padding_option=desc.padding)


def normalize_grid(grid: Any, bound_args: dict) -> tuple[int, int, int]:
    """A grid as compiled Triton accepts it: a callable of the bound arguments, a tuple or a list (of
    ints, numpy ints or 0-d tensors), 1 to 3 dims."""
    g = grid(bound_args) if callable(grid) else grid
    if isinstance(g, (int, np.integer)):
        g = (g,)
    dims = tuple(int(x) for x in g)
    if not 1 <= len(dims) <= 3:
        from ..errors import InvalidArgument

        raise InvalidArgument(f"grid {g!r} must have 1 to 3 dimensions")
    return dims + (1,) * (3 - len(dims))


# ---------------------------------------------------------------------- the launch
class _Signature:
    """A kernel's parameters, read once per function: binds a launch's arguments as ``inspect`` does."""

    def __init__(self, fn: Callable) -> None:
        self.fn, self.code, self.defaults, self.kwdefaults = fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__
        self.sig = inspect.signature(fn)
        params = self.sig.parameters
        self.constexprs = {p for p, prm in params.items() if _compat.is_constexpr_annotation(prm.annotation)}
        self.params = params
        self.plain = _all_plain(self.sig)  # bound by :meth:`bind` without inspect's machinery
        self.names = tuple(params)

    def current(self, fn: Callable) -> bool:
        """Still ``fn``'s parameters (its code or defaults may be reassigned)."""
        return self.fn is fn and self.code is fn.__code__ and self.defaults == fn.__defaults__ \
            and self.kwdefaults == fn.__kwdefaults__

    def bind(self, args: tuple, kwargs: dict) -> dict:
        """The launch's arguments by parameter name, in parameter order, defaults applied (keyword
        arguments the kernel does not take are left out, as Triton's launcher passes them: num_warps, ...)."""
        params = self.params
        kw = {k: v for k, v in kwargs.items() if k in params}
        if len(kw) != len(kwargs):
            _check_launch_options(kwargs, params)
        out = bind_plain(params, args, kw, partial=False) if self.plain else None
        if out is not None:
            return out
        bound = self.sig.bind(*args, **kw)
        bound.apply_defaults()
        return dict(bound.arguments)


_signatures: dict[int, _Signature] = {}  # id(fn) -> its parameters


def _launch_options() -> frozenset:
    """The keyword arguments a Triton launch takes besides the kernel's parameters: the target's compile options
    (num_warps, num_stages, ...), as Triton's ``JITFunction.run`` checks them."""
    global _OPTIONS
    if _OPTIONS is None:
        import dataclasses

        names = {"num_warps", "num_ctas", "num_stages", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                 "launch_pdl", "debug", "sanitize_overflow", "extern_libs", "warmup", "grid"}
        try:
            from triton.backends.nvidia.compiler import CUDAOptions

            names |= {f.name for f in dataclasses.fields(CUDAOptions)}
        except Exception:  # noqa: BLE001 - a Triton without the NVIDIA backend: the fixed list
            pass
        _OPTIONS = frozenset(names)
    return _OPTIONS


_OPTIONS: frozenset | None = None


def _check_launch_options(kwargs: dict, params: Any) -> None:
    """Raise as Triton's launch does for a keyword argument that is neither a parameter nor a launch option: a
    launcher passing one runs on the CPU runtime only if it also runs on a GPU."""
    for k in kwargs:
        if k not in params and k not in _launch_options():
            raise KeyError("Keyword argument %s was specified but unrecognised" % k)


class _Bound:
    """A launch's arguments as the kernel body takes them, apart from the tensors: the same for every launch
    of one kernel with the same grid, settings, scalar arguments (by value and type) and tensor dtypes, so
    such a launch (a replayed specialisation, most of all) binds, checks the grid and converts its scalars
    once, and converts only its tensors (their addresses, extents and regions are the launch's own)."""

    __slots__ = ("name", "signature", "grid3", "constexprs", "kargs", "tensors", "trace_keys")

    def __init__(self, name: str, signature: _Signature, grid3: tuple[int, int, int], constexprs: dict,
                 kargs: dict, tensors: tuple) -> None:
        self.name, self.signature, self.grid3, self.constexprs = name, signature, grid3, constexprs
        self.kargs = kargs  # every parameter; a tensor's entry is filled per launch
        self.tensors = tensors  # (parameter, position in args or keyword name) of each tensor argument
        # mode -> (rewritten kernel, trace key) of the launch's arguments: every launch bound here has the same
        # key while the kernel's globals and the language plan are the same (a tensor's type is its dtype's)
        self.trace_keys: dict[str, tuple] = {}


_bound: dict[tuple, _Bound] = {}  # _bound_key -> the launch's bound arguments
_MAX_BOUND = 1024
_float_bits = struct.Struct("<d").pack


def _bound_key(fn: Callable, args: tuple, kwargs: dict, grid: Any, settings: Settings) -> tuple | None:
    """What binding and converting a launch's arguments depend on, apart from its tensors' addresses; None
    where an argument or the grid is not one this covers (then the launch binds from scratch). Scalars by
    type and value (a float by its bits: 0.0 and -0.0 convert apart), a CPU or device tensor by dtype (a
    subclass is not covered: its conversion may differ)."""
    if type(grid) is not tuple:
        return None
    for g in grid:
        if type(g) is not int:
            return None
    parts: list = [fn, grid, settings]
    for v in itertools.chain(args, kwargs.values()):
        kind = type(v)
        if kind is int or kind is bool or v is None:
            parts.append((kind, v))
        elif kind is float:
            parts.append(_float_bits(v))
        elif _is_tensor_type(kind):
            parts.append(v.dtype)
        else:
            return None
    if kwargs:
        parts.append(tuple(kwargs))
    return tuple(parts)


def _bind_launch(fn: Callable, args: tuple, kwargs: dict, grid: Any, settings: Settings,
                 arena: Arena) -> tuple[_Bound, dict]:
    """The launch's bound arguments and the kernel body's arguments (tensors registered in ``arena``)."""
    import triton.language as tl

    key = _bound_key(fn, args, kwargs, grid, settings)
    bound = _bound.get(key) if key is not None else None
    if bound is not None and bound.signature.current(fn):
        kargs = dict(bound.kargs)
        for pname, at in bound.tensors:
            kargs[pname] = _convert(args[at] if type(at) is int else kwargs[at], pname, arena)
        return bound, kargs
    hit = _signatures.get(id(fn))
    if hit is None or not hit.current(fn):
        hit = _signatures[id(fn)] = _Signature(fn)
    arguments = hit.bind(args, kwargs)
    grid3 = normalize_grid(grid, dict(arguments) if callable(grid) else arguments)
    kargs = {}
    constexpr_names = hit.constexprs
    for pname, value in arguments.items():
        if pname in constexpr_names:
            kargs[pname] = _DtypeConstexpr.wrap(value.value if isinstance(value, tl.constexpr) else value)
        else:
            kargs[pname] = _convert(value, pname, arena)
    bound = _Bound(getattr(fn, "__name__", repr(fn)), hit, grid3,
                   {k: v for k, v in arguments.items() if k in constexpr_names}, dict(kargs), ())
    if key is not None and hit.plain:  # (positions are parameters' only where every parameter is plain)
        at_of = {pname: i for i, pname in enumerate(hit.names[:len(args)])}
        at_of.update((pname, pname) for pname in kwargs)
        tensors = tuple((pname, at_of.get(pname)) for pname, v in arguments.items() if _is_tensor_type(type(v)))
        if any(at is None or pname in constexpr_names for pname, at in tensors):
            return bound, kargs  # a tensor from a default, or as a constexpr: bound from scratch every time
        bound.tensors = tensors
        for pname, _ in tensors:
            bound.kargs[pname] = None
        for v in bound.kargs.values():  # shared by later launches: a write to one would be a bug, so it raises
            if type(v) is tl.tensor and type(v.handle.data) is np.ndarray:
                v.handle.data.flags.writeable = False
        if len(_bound) >= _MAX_BOUND:
            _bound.clear()
        _bound[key] = bound
    return bound, kargs


def execute(kernel: Any, args: tuple, kwargs: dict, grid: Any, settings: Settings) -> LaunchResult:
    """Run ``kernel[grid](*args, **kwargs)`` on the CPU runtime; raises KernelFinding for what the kernel
    did wrong (out-of-bounds access, failed assertion, inter-program wait, timeout)."""
    fn = getattr(kernel, "fn", kernel)
    arena = Arena()
    bound, kargs = _bind_launch(fn, args, kwargs, grid, settings, arena)
    name, grid3, constexprs = bound.name, bound.grid3, bound.constexprs
    rw = rewrite(kernel, fn)
    t0 = time.perf_counter()
    with _lock:
        global _depth
        _depth += 1
        deadline = time.monotonic() + settings.timeout_s
        if _depth == 1:  # the process's one state: the launch patches built for it are reused (_patch)
            state = _STATE
            state.reset(name, settings, arena, deadline)
        else:  # a launch inside a launch: its own state and patches
            state = LaunchState(kernel=name, settings=settings, arena=arena, deadline=deadline)
        state.check_overflow = debug_mode(kernel, kwargs)
        state.chosen = partial.programs(grid3)
        state.codes = dict.fromkeys(rw.codes, name)
        state.kernel_codes = rw.codes
        state.sources = dict.fromkeys(rw.codes, rw.source)
        state.rewritten = rw
        scope = _Scope()
        state.scope = state.scope_now = scope
        lang_scope = None
        watchdog = _Watchdog(settings.timeout_s + 2.0)
        arena.keep_writes()  # (copy on first write) a launch the runtime cannot finish starts again from here
        gap: KernelError | None = None
        try:
            lean_found = _lean(state, rw, kargs, settings, grid3, bound) if state.chosen is None else None
            lean = lean_found is not None
            lang_scope = _patch(scope, state, fn, lean=lean)
            builder = _compat.builder()
            builder.set_grid_dim(*grid3)
            watchdog.start()
            passes = _Passes(rw, kargs, settings, state, builder)
            passes.plain = passes.plain or state.chosen is not None  # (a partial launch records nothing)
            passes.lean = lean
            if lean:
                passes.found[lean_found[0]] = lean_found[1:]
            with np.errstate(all="ignore"):
                try:
                    grid_mode = _run_programs(passes, kargs, grid3, state, builder, arena)
                except trace.ReplayFailed as e:  # a recorded pass diverged or raised: again, the ordinary way
                    passes.restore(arena, state, unmatched=e.args == ("unmatched",))
                    if lean:  # the language patches go under the others: all again, in their order
                        scope.restore()
                        lang_scope = _patch(scope, state, fn)
                        builder.set_grid_dim(*grid3)  # (the builder's patched dict was put back with the rest)
                        passes.lean = False
                        passes.found.clear()  # (the patch plan, part of a key, may be recorded anew)
                    grid_mode = _run_programs(passes, kargs, grid3, state, builder, arena)
            passes.commit(grid_mode)
            dots = tuple(state.dot_precisions)  # read under the lock: the state is reused by the next launch
            ran = len(state.chosen) if state.chosen is not None else None
        except BaseException as e:  # noqa: BLE001 - every escape becomes a finding or a located error
            watchdog.stop()
            found = _translate(e, state)
            if not isinstance(found, KernelError):
                raise found from (None if isinstance(e, (MemoryError_, _Timeout, _Spin, _AssertFailed,
                                                         _WatchdogTimeout, overflow.Overflow)) else e)
            gap = found  # Python raised inside the launch: the kernel's error, or a construct the runtime lacks
        finally:
            watchdog.stop()
            scope.restore()
            if lang_scope is not None:
                lang_scope.restore()
            if gap is not None:
                arena.put_back()  # (before the write-back: staged buffers get their first bytes too)
            arena.writeback()
            if gap is None:
                _depth -= 1
        if gap is not None:
            try:
                fallback = _on_interpreter(kernel, fn, args, kwargs, grid, settings, gap)
            finally:
                _depth -= 1
            grid_mode, dots, ran = "interpreter", (), None
        else:
            fallback = None
    programs = grid3[0] * grid3[1] * grid3[2]
    return LaunchResult(name, grid3, constexprs, programs, time.perf_counter() - t0, dots,
                        grid_mode, fallback, ran)


_interpreted: dict[int, tuple[Any, Any]] = {}  # id(fn) -> (fn, Triton's InterpretedFunction of it)


def _interpreted_of(fn: Callable) -> Any:
    hit = _interpreted.get(id(fn))
    if hit is None or hit[0] is not fn:
        hit = _interpreted[id(fn)] = (fn, _compat.interpreted_function_class()(fn))
    return hit[1]


def _on_interpreter(kernel: Any, fn: Callable, args: tuple, kwargs: dict, grid: Any, settings: Settings,
                    gap: "KernelError") -> str:
    """Run the launch as Triton's own interpreter does (its grid executor, its language patches; nested
    ``@triton.jit`` helpers through its InterpretedFunction), from the bytes the launch started with, after
    Python raised inside the runtime's run of it. If Triton's interpreter raises too, the error is the
    kernel's own: a located KernelError whose cause is the interpreter's. Else the runtime lacks a construct
    this kernel uses: the interpreter's result stands and the reason is returned (``LaunchReport.fallback``)."""
    it = _compat.interp()
    ifn = _interpreted_of(fn)
    scope = _Scope()
    scope.set(_compat.jit_function_class(), "__call__",
              lambda self, *a, **k: _interpreted_of(self.fn)(*a, **k))  # (helpers decorated outside TRITON_INTERPRET)
    watchdog = _Watchdog(settings.timeout_s + 2.0)
    try:
        watchdog.start()
        with np.errstate(all="ignore"):
            it.GridExecutor(ifn.rewrite(), ifn.arg_names, grid)(*args, **kwargs)
    except _WatchdogTimeout:
        raise KernelFinding("timeout", f"launch of {gap.kernel} exceeded its time bound of {settings.timeout_s:g} s "
                                       "on Triton's interpreter", kernel=gap.kernel, site="?") from None
    except Exception as e:  # noqa: BLE001 - the kernel's own error, as Triton's interpreter raises it
        inner = e.__cause__ if isinstance(e, _interpreter_error()) and e.__cause__ is not None else e
        site = _interpreter_site(inner, fn) or gap.site
        err = KernelError(f"{one_line(inner)} in kernel {gap.kernel} at {site}")
        err.kernel, err.site = gap.kernel, site
        raise err from inner
    finally:
        watchdog.stop()
        scope.restore()
    return f"{gap.reason} (the gpuemu runtime cannot run this yet; Triton's interpreter ran the launch)"


def _interpreter_site(e: BaseException, fn: Callable) -> str | None:
    """file:line of the innermost frame of a traceback in the kernel's file (where Triton's interpreter ran it)."""
    filename = fn.__code__.co_filename
    best = None
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == filename:
            best = f"{filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" + \
                ("" if code.co_name == fn.__name__ else f" (in {code.co_name})")
        tb = tb.tb_next
    return best


# Measured with the fast paths (CPU ms, 2-program launches of 1073 elements): add 2.16 one by one vs 1.80
# batched, exp 1.77 vs 1.44, gelu_tanh 4.27 vs 3.34, softmax_bf16_path 8.03 vs 7.04. (Before them, when a
# launch's fixed cost was higher, 2 programs ran 20.5 ms one by one and 24.1 ms batched: it was 3.)
MIN_BATCH = 2


def _run_programs(passes: "_Passes", kargs: dict, grid3: tuple[int, int, int], state: LaunchState, builder: Any,
                  arena: Arena) -> str:
    """Every program of the launch: batched where it can, else one at a time; returns the grid mode."""
    if state.chosen is not None:  # a partial launch: its chosen programs, one at a time
        body = passes.body("sequential")
        for x, y, z in state.chosen:
            state.program = (x, y, z)
            state.tick()
            builder.set_grid_idx(x, y, z)
            body(**kargs)
        return f"partial ({len(state.chosen)} of {grid3[0] * grid3[1] * grid3[2]} programs)"
    grid_mode = _run_batched(passes, kargs, grid3, state, builder, arena) \
        if state.settings.grid == "batched" else "sequential"
    if not grid_mode.startswith("batched"):
        body = passes.body("sequential")
        for x in range(grid3[0]):
            for y in range(grid3[1]):
                for z in range(grid3[2]):
                    state.program = (x, y, z)
                    state.tick()
                    builder.set_grid_idx(x, y, z)
                    body(**kargs)
    return grid_mode


class _Passes:
    """What runs one pass of the kernel body (one program, or one chunk of programs with a program axis):
    the rewritten kernel, the same while recording it, or the recording of an earlier launch of the same
    specialisation (:mod:`gpuemu.runtime.trace`). A replay that fails raises ``trace.ReplayFailed``; the
    launch then restores the memory it started with (:meth:`restore`) and runs the ordinary way."""

    def __init__(self, rw: Any, kargs: dict, settings: Settings, state: LaunchState, builder: Any) -> None:
        self.rw, self.kargs, self.settings, self.state, self.builder = rw, kargs, settings, state, builder
        self.plain = not trace.ENABLED or fast.SHADOW is not None
        self.pending: dict[str, tuple] = {}  # mode -> (key, trace) recorded in this launch
        self.snap: dict | None = None  # (the arena's kept bytes once a snapshot began: arena.saved)
        self.lean = False  # set by the launch: no language patches in place (see _lean)
        self.found: dict[str, tuple] = {}  # mode -> (trace key, its traces) as _lean found them (valid while lean)

    def body(self, mode: str) -> Callable:
        if self.plain:
            return self.rw.fn
        found = self.found.get(mode)
        key = found[0] if found else trace.key_of(self.rw, mode, self.settings, self.kargs)
        if key is None:
            return self.rw.fn
        rw, builder, passes = self.rw, self.builder, self
        inputs = trace.inputs_of(self.kargs)
        chosen: list = []  # [trace] once the first pass picked one, [None] when it did not

        def replay(t) -> None:
            state = passes.state
            state.replaying = True  # (an integer wrap falls back: overflow.ReplayWrap, not a finding)
            try:
                t.run(inputs, builder)
            except (trace.Diverged, _WatchdogTimeout):
                raise
            except _FINDINGS as e:
                raise trace.ReplayFailed() from e
            except BaseException as e:  # noqa: BLE001 - not what the ordinary path raises: stop using it
                trace.failed(key, t)
                raise trace.ReplayFailed() from e
            finally:
                state.replaying = False

        def run(**kargs) -> None:
            if chosen:
                t = chosen[0]
                if t is None:
                    return rw.fn(**kargs)
                try:
                    return replay(t)
                except trace.Diverged:
                    trace.failed(key, t)
                    raise trace.ReplayFailed() from None
            cands = found[1] if found else trace.candidates(key)
            if cands and passes.snap is None:
                passes.snapshot()
            for t in cands:
                try:
                    replay(t)
                except trace.Diverged as e:
                    if e.early:  # an argument guard: nothing ran yet, try the next
                        continue
                    trace.failed(key, t)
                    raise trace.ReplayFailed() from None
                chosen.append(t)
                trace.replayed(t)
                return None
            chosen.append(None)
            if passes.lean:  # no trace matched (nothing ran): the kernel's Python needs the language patches
                raise trace.ReplayFailed("unmatched")
            if not trace.recordable(key, inputs, rw):
                return rw.fn(**kargs)
            rec = trace.Recorder(inputs)
            scope = _Scope()
            rec.install(scope, builder, _compat.semantic())
            state, outer = passes.state, passes.state.scope_now
            state.scope_now = scope
            try:
                rw.fn(**kargs)
            finally:
                scope.restore()
                state.scope_now = outer
            t = rec.finish()
            if t is not None:
                passes.pending[mode] = (key, t)
            return None

        return run

    def snapshot(self) -> None:
        """From here on the arena keeps what a write overwrites (each region once, at its first write)."""
        arena = self.state.arena
        arena.keep_writes()
        self.snap = arena.saved
        self.snap_at = (arena.epoch, len(self.state.dot_precisions))

    def restore(self, arena: Arena, state: LaunchState, unmatched: bool = False) -> None:
        """Back to the memory the launch started with; the re-run replays nothing (it may record where
        no trace matched the arguments: ``unmatched``)."""
        if self.snap is not None:
            arena.put_back()
        arena.epoch, dots = self.snap_at
        del state.dot_precisions[dots:]
        state._spin_fp, state._spin_n = None, 0
        self.plain = not unmatched
        self.pending.clear()

    def commit(self, grid_mode: str) -> None:
        """Keep what this launch recorded in the mode the launch finished in."""
        got = self.pending.get("batched" if grid_mode.startswith("batched") else "sequential")
        if got is not None:
            trace.store(got[0], got[1], self.rw)


def _run_batched(passes: _Passes, kargs: dict, grid3: tuple[int, int, int], state: LaunchState, builder: Any,
                 arena: Arena) -> str:
    """Run the launch with a program axis; on anything it cannot do (or any finding), restore the
    arguments' bytes and return "sequential: why" for the caller to run program by program."""
    programs = grid3[0] * grid3[1] * grid3[2]
    if programs < 2:
        return "sequential: one program"
    if programs < MIN_BATCH:
        return f"sequential: {programs} programs (batching pays from {MIN_BATCH})"
    if passes.snap is None:
        passes.snapshot()
    epoch, dots = passes.snap_at
    scope = _Scope()
    outer, state.scope_now = state.scope_now, scope
    try:
        builder.set_grid_idx(0, 0, 0)
        reuse = _core.get("patches") if state is _STATE else None  # the batch patches are built once per these
        n = batched.run(passes.body("batched"), kargs, grid3, state, builder, scope, _compat.interp(), reuse,
                        lean=passes.lean)
        return f"batched ({n} pass{'es' if n != 1 else ''})"
    except Exception as e:  # noqa: BLE001 - whatever it was, the sequential run decides
        arena.put_back()
        arena.epoch = epoch
        del state.dot_precisions[dots:]
        why = str(e) if isinstance(e, batched.NotBatchable) else f"{type(e).__name__} with a program axis"
        return f"sequential: {why}"
    finally:
        scope.restore()
        state.scope_now = outer
        state.wrap_pending = None


def _translate(e: BaseException, state: LaunchState) -> BaseException:
    """A located KernelFinding (or KernelError) for what escaped the program loop."""
    site = _site(e, state)
    prog = "(" + ", ".join(str(v) for v in state.program) + ")"
    where = f"in kernel {state.kernel} at {site}, program {prog}"
    if isinstance(e, KernelFinding):
        return e
    if isinstance(e, overflow.Overflow):
        w = e.wrap
        return KernelFinding("overflow", e.message(state.kernel, state.program), kernel=state.kernel, site=w.site,
                             program=state.program, expression=w.expr, operands=dict(w.operands), dtype=w.dtype,
                             line=w.line, address_site=e.site, exact=w.exact, wrapped=w.wrapped)
    if isinstance(e, MemoryError_):
        v = e.violation
        return KernelFinding("oob", f"{v.message()} {where}", kernel=state.kernel, site=site, program=state.program,
                             argument=v.region.name if v.region else None, byte_offset=v.byte_offset, lane=v.lane,
                             access=v.kind)
    if isinstance(e, _AssertFailed):
        lane = "[" + ",".join(str(i) for i in e.lane) + "]"
        return KernelFinding("assert", f"device_assert failed {where}: {e.message} (lane {lane}, "
                                       f"{e.n_bad} of {e.n} lanes failed)", kernel=state.kernel, site=site,
                             program=state.program, assert_message=e.message)
    if isinstance(e, _Spin):
        return KernelFinding("unsupported", f"kernel {state.kernel} waits on another program at {site}, program "
                                            f"{prog}: {e.what} returned the same value {e.n} times with no write in "
                                            "between. The CPU runtime runs programs one after another, so "
                                            "inter-program synchronisation (locks, flags, grid barriers) is "
                                            "unsupported.", kernel=state.kernel, site=site, construct=e.what)
    if isinstance(e, (_Timeout, _WatchdogTimeout)):
        return KernelFinding("timeout", f"launch of {state.kernel} exceeded its time bound of "
                                        f"{state.settings.timeout_s:g} s at {site}, program {prog} (a hang, e.g. "
                                        "waiting on another program, or a grid too large for the CPU runtime)",
                             kernel=state.kernel, site=site)
    if isinstance(e, libdevice.UnsupportedLibdevice):
        return KernelFinding("unsupported", f"libdevice function {e} is not emulated by the gpuemu runtime "
                                            f"({where})", kernel=state.kernel, site=site, construct=str(e))
    if isinstance(e, Exception):
        inner = e.__cause__ if type(e).__name__ == "InterpreterError" and e.__cause__ else e
        err = KernelError(f"{one_line(inner)} {where}")
        err.kernel, err.site, err.reason = state.kernel, site, f"{one_line(inner)} at {site}"
        return err
    return e


def _site(e: BaseException, state: LaunchState) -> str:
    """file:line of the innermost kernel or helper frame (recorded at raise time, else from the traceback)."""
    recorded = getattr(e, "site", None)
    if isinstance(recorded, str) and recorded != "?":
        return recorded
    best = None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in state.codes:
            best = (tb.tb_frame.f_code, tb.tb_lineno)
        tb = tb.tb_next
    if best is None:
        return "?"
    return _fmt_site(best[0], best[1], state.kernel_codes)


def _fmt_site(code, line: int, kernel_codes) -> str:
    short = code.co_filename.rsplit("/", 1)[-1]
    fn = "" if code in kernel_codes else f" (in {code.co_name})"
    return f"{short}:{line}{fn}"


_STATE = LaunchState(kernel="", settings=Settings(), arena=Arena(), deadline=0.0)
_depth = 0  # launches in progress (under _lock)
_core: dict[str, tuple] = {}  # "patches" -> (key, Patches) built for _STATE


def _core_key() -> tuple:
    """What the reusable patches were built from (compared by identity): the language patch plan, the
    fast-path switches, the builder's options and the overflow check they wrap. (The builder class's own
    methods, which the numerics and memory patches call as originals, are Triton's and not patched by
    anyone between launches: the runtime patches the instance.)"""
    builder = _compat.builder()
    sem = _compat.semantic()
    return (fast._plan, fast.ENABLED, fast.SHADOW, builder.options,
            getattr(type(sem), "binary_op_sanitize_overflow_impl", None),
            vars(sem).get("binary_op_sanitize_overflow_impl"))


def _lean(state: LaunchState, rw: Any, kargs: dict, settings: Settings, grid3: tuple[int, int, int],
          bound: _Bound) -> tuple[str, trace.Key, list] | None:
    """Whether this launch will replay a trace that needs no language patch (trace.Trace.lean), with every
    other patch it needs already built: then the ~240 attributes of Triton's language patches are neither
    set nor restored. Anything else in the launch (no trace matching after all) re-patches in full.
    Returns (mode, trace key, its traces) when it will (neither is looked up twice), else None."""
    if state is not _STATE or not trace.ENABLED or fast.SHADOW is not None or fast._plan is None:
        return None
    programs = grid3[0] * grid3[1] * grid3[2]
    mode = "batched" if settings.grid == "batched" and programs >= max(2, MIN_BATCH) else "sequential"
    known = bound.trace_keys.get(mode)
    if known is not None and known[0] is rw and trace.same_env(known[1], rw):
        key = known[1]
    else:
        key = trace.key_of(rw, mode, settings, kargs)
        if key is not None:
            bound.trace_keys[mode] = (rw, key)
    cands = trace.candidates(key)
    if not cands or not all(t.lean for t in cands):
        return None
    hit = _core.get("patches")
    if hit is None or not all(map(operator.is_, hit[0], _core_key())):
        return None
    if mode == "batched":
        built = batched._installed.get("batch")
        if built is None or built[0] is not hit:
            return None
    # (else another tool changed triton.language: the plan is recorded anew)
    return (mode, key, cands) if fast._plan.unchanged(rebase=True) else None  # (no patch of ours in place yet)


def _patch(scope: _Scope, state: LaunchState, fn: Callable, lean: bool = False):
    """Install every patch for this launch; returns the interpreter's own language patch scope (None for a
    ``lean`` launch, see :func:`_lean`: no language patches, no module aliases).
    The patches that do not depend on the kernel are built once for the process's reused state and set
    again from that list on later launches (building them was a third of a small launch's cost)."""
    lang_scope = None if lean else fast.patch_lang(_anchor())
    if state is _STATE:
        hit = _core.get("patches")
        key = None if lean else _core_key()  # (a lean launch: _lean found the patches built for the key now)
        if hit is not None and (lean or all(map(operator.is_, hit[0], key))):
            scope.apply(hit[1].for_replay() if lean else hit[1])
        else:
            scope.recording = []
            _patch_core(scope, state)
            entries, scope.recording = scope.recording, None
            _core["patches"] = (key or _core_key(), Patches(entries))
    else:
        _patch_core(scope, state)
    state.libdevice_patched = False
    if lean:
        return None
    if _uses_libdevice(state.rewritten, fn.__globals__):
        _patch_libdevice(scope, lang_scope)
        state.libdevice_patched = True
    _patch_aliases(scope, fn.__globals__)
    return lang_scope


def _patch_core(scope: _Scope, state: LaunchState) -> None:
    """The patches every launch takes (they read the launch from ``state`` when called)."""
    import triton.language as tl

    it = _compat.interp()
    fast.install(scope)
    fast.install_operators(scope)
    builder = it.interpreter_builder
    cls = type(builder)

    def original(name: str):
        m = getattr(cls, name, None)
        return m.__get__(builder, cls) if m is not None else None

    for name, f in numerics.overrides(state, original).items():
        scope.set(builder, name, f)
    for name, f in _memory_overrides(state, original).items():
        scope.set(builder, name, f)
    scope.set(builder, "create_extern_elementwise", _extern(state))
    scope.set(builder, "create_assert", _assert(state))
    opts = builder.options
    precisions = tuple(dict.fromkeys(tuple(opts.allowed_dot_input_precisions) + _compat.bf16_input_precisions()))
    scope.set(builder, "options", dataclasses.replace(opts, debug=True, allowed_dot_input_precisions=precisions))
    sem = _compat.semantic()
    if hasattr(sem, "binary_op_sanitize_overflow_impl"):
        scope.set(sem, "binary_op_sanitize_overflow_impl", _overflow_check(state, sem))
    # reductions and scans: bf16 / fp16 as the GPU rounds
    for mod in (tl, tl.core):
        scope.set(mod, "reduce", numerics.reduce_wrapper(mod.reduce))
        scope.set(mod, "associative_scan", numerics.scan_wrapper(mod.associative_scan))
    # the deadline also bounds loops that only test tensors (while cond: ...)
    bool_impl = tl.tensor.__bool__

    def _bool(self, _impl=bool_impl):
        state.tick()
        return _impl(self)

    scope.set(tl.tensor, "__bool__", _bool)
    # a loop bound or index read from a scalar: Triton 3.8's conversion, whatever this Triton's interpreter does
    # (3.6 takes int() of the one-element array, which numpy >= 2.4 refuses: every loop over a tensor bound
    # raised TypeError there)
    scope.set(tl.tensor, "__index__", _index)
    # nested @triton.jit helpers (and tl.* functions written in Triton) run through the runtime's rewrite
    call = _helper_call(state)
    scope.set(_compat.jit_function_class(), "__call__", call)
    scope.set(_compat.interpreted_function_class(), "__call__", call)


def _overflow_check(state: LaunchState, sem: Any) -> Callable:
    """Triton's integer overflow check of ``+ - *`` where the launch asks for it (``state.check_overflow``: the
    kernel runs in debug mode, as compiled Triton inserts the check only then); else integers wrap, as on a
    GPU, and a wrap of a signed type is noted, so that one reaching an address is an ``overflow`` finding
    (:mod:`gpuemu.runtime.overflow`). (device_assert itself is always enforced: the runtime's options say debug.)"""
    impl = sem.binary_op_sanitize_overflow_impl
    if fast.ENABLED:
        impl = fast.sanitize_overflow(sem, impl)
    wraps = overflow.detector(state)

    def check(lhs, rhs, binary_op, benign=False):  # (benign: a replay's check whose result reaches no address)
        if state.check_overflow:
            return impl(lhs, rhs, binary_op)
        return wraps(lhs, rhs, binary_op, benign)

    return check


def debug_mode(kernel: Any, kwargs: dict) -> bool:
    """Whether compiled Triton would build this launch in debug mode: ``debug=True`` at the launch, on the
    decorator (``@triton.jit(debug=True)``) or in ``triton.knobs.runtime.debug`` (TRITON_DEBUG=1)."""
    flag = kwargs.get("debug")
    if flag is None:
        flag = getattr(kernel, "debug", None)
    if flag is None:
        flag = (getattr(kernel, "kwargs", None) or {}).get("debug")
    if flag is None:
        try:
            import triton

            flag = triton.knobs.runtime.debug
        except Exception:  # pragma: no cover - a triton without knobs
            flag = False
    return bool(flag)


def _index(self) -> int:
    """``tl.tensor.__index__`` on the runtime: the integer in a scalar's (one-element) data."""
    return int(self.handle.data.squeeze())


def _helper_call(state: LaunchState):
    def call(self, *args, **kwargs):
        short = fast.reduce_shortcut(self, args, kwargs)
        if short is not None and fast.SHADOW is None:
            return short
        fn = self.fn
        rw = rewrite(self, fn)
        for c in rw.codes:
            state.codes.setdefault(c, fn.__name__)
            state.sources.setdefault(c, rw.source)
        g = fn.__globals__
        if not state.libdevice_patched and _uses_libdevice(rw, g):
            _patch_libdevice(state.scope, None)
            state.libdevice_patched = True
        if id(g) not in state.patched_modules:
            state.patched_modules.add(id(g))
            _patch_aliases(state.scope, g)
        args = tuple(_DtypeConstexpr.wrap(a) for a in args)
        kwargs = {k: _DtypeConstexpr.wrap(v) for k, v in kwargs.items()}
        out = rw.fn(*args, **kwargs)
        if short is not None:  # a test's shadow check: the shortcut's result against the helper's
            fast.SHADOW(fn.__name__, short, out)
            return short
        return out

    return call


def _semantic_wrapper(member: Callable) -> Callable:
    sem = _compat.semantic()

    def wrapped(*args, **kwargs):
        kwargs.pop("_semantic", None)
        return member(*args, **kwargs, _semantic=sem)

    wrapped.__gpuemu_builtin__ = member  # type: ignore[attr-defined]
    return wrapped


_uses_cache: dict[int, bool] = {}


def _uses_libdevice(rw, g: dict) -> bool:
    """Whether the rewritten function names libdevice (a module, a function from one, or ``.extra.``)."""
    key = id(rw)
    hit = _uses_cache.get(key)
    if hit is not None:
        return hit
    names = set()
    for code in rw.codes:
        names.update(code.co_names)
    uses = bool(names & {"libdevice", "extra"})
    if not uses:
        for n in names:
            v = g.get(n)
            mod = getattr(v, "__name__", "") if isinstance(v, type(sys)) else getattr(v, "__module__", "") or ""
            if "libdevice" in mod or mod.startswith("triton.language.extra"):
                uses = True
                break
    _uses_cache[key] = uses
    return uses


_stub_cache: dict[int, Callable] = {}
_libdevice_plan: list[tuple[Any, str, Callable]] | None = None


def _patch_libdevice(scope: _Scope, lang_scope) -> None:
    """tl.extra.cuda.libdevice builtins through the interpreter's semantic; tl.extra.libdevice stubs routed
    to them (compiled Triton maps the generic module onto the backend's). The wrappers are built once."""
    global _libdevice_plan
    if _libdevice_plan is None:
        plan: list[tuple[Any, str, Callable]] = []
        try:
            from triton.language.extra import libdevice as generic
            from triton.language.extra.cuda import libdevice as cuda
        except Exception:  # pragma: no cover - a triton without libdevice modules
            _libdevice_plan = []
            return
        import triton.language as tl

        for name in dir(cuda):
            member = getattr(cuda, name)
            if tl.core.is_builtin(member):
                wrapped = _semantic_wrapper(member)
                plan.append((cuda, name, wrapped))
                if hasattr(generic, name):
                    _stub_cache[id(getattr(generic, name))] = member
                    plan.append((generic, name, wrapped))
        _libdevice_plan = plan
    for module, name, wrapped in _libdevice_plan:
        scope.set(module, name, wrapped)


_alias_cache: dict[int, tuple[tuple, tuple, int, list]] = {}  # id(globals) -> keys, values, stubs, aliases


def _patch_aliases(scope: _Scope, g: dict) -> None:
    """Module globals bound to tl builtins under other names (``cast = tl.cast``, ``from triton.language
    import load``) or to libdevice stubs: point them at the interpreter-routed versions for the launch.
    What to patch is worked out once per module and reused while its globals are the same objects."""
    keys, values = tuple(g), tuple(g.values())
    hit = _alias_cache.get(id(g))
    if hit is not None and hit[0] == keys and hit[2] == len(_stub_cache) \
            and all(map(operator.is_, hit[1], values)):
        aliases = hit[3]
    else:
        aliases = _aliases(g)
        _alias_cache[id(g)] = (keys, values, len(_stub_cache), aliases)  # holds the values: ids stay unique
    for key, wrapper in aliases:
        scope.set_item(g, key, wrapper)


def _aliases(g: dict) -> list[tuple[str, Callable]]:
    import triton.language as tl

    out = []
    for key, value in list(g.items()):
        if key.startswith("__") or isinstance(value, type) or not callable(value):
            continue
        if getattr(value, "__gpuemu_builtin__", None) is not None:
            continue
        try:
            builtin = tl.core.is_builtin(value)
        except Exception:
            builtin = False
        if builtin:
            out.append((key, _semantic_wrapper(value)))
        elif id(value) in _stub_cache:
            out.append((key, _semantic_wrapper(_stub_cache[id(value)])))
    return out


def _extern(state: LaunchState):
    import triton.language as tl

    it = _compat.interp()
    from . import bf16

    def create_extern_elementwise(libName, libPath, symbol, argList, retType, isPure):
        state.tick()
        ret = getattr(retType, "scalar", retType)
        np_out = it._get_np_dtype(ret)
        arrays = [bf16.to_f32(h.data) if h.dtype == tl.bfloat16 else np.asarray(h.data) for h in argList]
        with np.errstate(all="ignore"):
            out = libdevice.evaluate(symbol, arrays, np_out, [a.dtype for a in arrays])
        return it.TensorHandle(np.asarray(out).astype(np_out, copy=False), ret)

    return create_extern_elementwise


def _assert(state: LaunchState):
    def create_assert(condition, message):
        cond = np.asarray(condition.data)
        if cond.all():
            return None
        bad = ~cond.astype(bool)
        lane = tuple(int(i) for i in np.argwhere(bad)[0]) if cond.ndim else ()
        raise _AssertFailed(str(message), lane, int(bad.sum()), int(cond.size), state.site_now())

    return create_assert


def _shaped(data: Any, dtype: Any, shape: tuple) -> np.ndarray:
    """``data`` as ``dtype`` broadcast to ``shape`` (itself when it already has that shape), as a new array:
    numpy builds one faster than a broadcast view, and a mask's compress and masked assignment run 2-3x
    faster over it than over the view."""
    a = np.asarray(data, dtype=dtype)
    if a.shape == shape:
        return a
    frozen = not a.flags.writeable  # (no one changes it: the same values in that shape as last time)
    if frozen:
        key = (id(a), shape)
        hit = _widened.get(key)
        if hit is not None and hit[0] is a:
            return hit[1]
    out = np.empty(shape, dtype=a.dtype)
    out[...] = a  # (a ValueError where it does not broadcast, as np.broadcast_to)
    if frozen:
        if len(_widened) >= 256:
            _widened.clear()
        out.flags.writeable = False
        _widened[key] = (a, out)
    return out


# (id(array), shape) -> (the read-only array, it broadcast to that shape, read-only): a recorded trace's
# launch-invariant mask, say, widened for each launch's access (kept with the array, so its id stays its own)
_widened: dict[tuple, tuple] = {}


_every: dict[tuple, np.ndarray] = {}


def _every_lane(shape: tuple) -> np.ndarray:
    """The mask of an unmasked access: all true, read-only and one per shape (so the arena keeps what it
    found for addresses that recur with it, memory._known_lanes)."""
    m = _every.get(shape)
    if m is None:
        if len(_every) >= 64:
            _every.clear()
        m = _every[shape] = np.ones(shape, dtype=bool)
        m.flags.writeable = False
    return m


def _memory_overrides(state: LaunchState, original) -> dict[str, Callable]:
    import triton.language as tl

    it = _compat.interp()
    TH = it.TensorHandle
    native = it._interpreter  # the C++ load/store/atomic primitives

    def translate(ptrs, mask, size, kind):
        try:
            return state.arena.translate(ptrs, mask, size, kind)
        except MemoryError_ as e:
            e.site = state.site_now()
            raise

    def create_masked_load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        state.tick()
        arena = state.arena
        ty = ptrs.get_element_ty()
        npd = it._get_np_dtype(ty)
        shape = np.shape(ptrs.data)
        if mask is not None and np.ndim(mask.data) > len(shape):  # (a batched pass: the same addresses in every
            shape = np.broadcast_shapes(shape, np.shape(mask.data))  # program, a mask of each program's own)
            ptrs = TH(np.broadcast_to(ptrs.data, shape), ptrs.dtype)
        m = _shaped(mask.data, bool, shape) if mask is not None else _every_lane(shape)
        oth = None if other is None else _shaped(other.data, npd, shape)  # (None: zeros, built where needed)
        if not is_volatile:
            ret = arena.gather(ptrs.data, m, oth, npd)
            if ret is not None:
                return TH(ret, ty)
        if oth is None:
            oth = np.zeros(shape, dtype=npd)
        real = translate(ptrs.data, m, max(npd.itemsize, 1), "read")
        ret = native.load(np.ascontiguousarray(real), np.ascontiguousarray(m), np.ascontiguousarray(oth), npd)
        if is_volatile:
            state.spin_check("a volatile load", real, ret)
        return TH(ret, ty)

    def create_masked_store(ptrs, value, mask, cache_modifier, eviction_policy):
        state.tick()
        arena = state.arena
        shape = np.shape(ptrs.data)
        m = _shaped(mask.data, bool, shape) if mask is not None else _every_lane(shape)
        val = np.asarray(value.data)
        full = _shaped(val, val.dtype, shape)
        if arena.scatter(ptrs.data, full, m):
            arena.epoch += 1
            return None
        real = translate(ptrs.data, m, max(val.dtype.itemsize, 1), "write")
        arena.keep_all()  # (a write Triton makes: the regions it touches are not worked out here)
        if m.any():
            arena.epoch += 1
        return native.store(np.ascontiguousarray(real), np.ascontiguousarray(full), np.ascontiguousarray(m))

    rmw = original("create_atomic_rmw")
    cas = original("create_atomic_cas")

    def create_atomic_rmw(rmwOp, ptr, val, mask, sem, scope):
        state.tick()
        arena = state.arena
        shape = np.shape(ptr.data)
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), shape)
        vd = np.asarray(val.data)
        real = translate(ptr.data, m, max(vd.dtype.itemsize, 1), "atomic")
        arena.keep_all()
        old = rmw(rmwOp, TH(np.ascontiguousarray(real), ptr.dtype), val, TH(np.ascontiguousarray(m), tl.int1), sem,
                  scope)
        now = native.load(np.ascontiguousarray(real), np.ascontiguousarray(m), np.zeros(shape, dtype=vd.dtype),
                          vd.dtype)
        if np.any(m & (np.asarray(now) != np.asarray(old.data))):
            arena.epoch += 1
        else:
            state.spin_check("an atomic", real, old.data)
        return old

    def create_atomic_cas(ptr, cmp, val, sem, scope):
        state.tick()
        arena = state.arena
        vd = np.asarray(val.data)
        real = translate(ptr.data, None, max(vd.dtype.itemsize, 1), "atomic")
        arena.keep_all()
        old = cas(TH(np.ascontiguousarray(real), ptr.dtype), cmp, val, sem, scope)
        swapped = (np.asarray(old.data) == np.asarray(cmp.data)) & (np.asarray(cmp.data) != vd)
        if np.any(swapped):
            arena.epoch += 1
        else:
            state.spin_check("an atomic_cas", real, old.data)
        return old

    builder = it.interpreter_builder

    def create_load(ptr, *rest):  # (the interpreter's builds a new mask of ones on every call)
        return builder.create_masked_load(ptr, None, None, *rest)

    def create_store(ptr, value, *rest):
        return builder.create_masked_store(ptr, value, None, *rest)

    plain = {}
    for name, f, n in (("create_load", create_load, 4), ("create_store", create_store, 4)):
        own = getattr(type(builder), name, None)
        if own is not None and getattr(getattr(own, "__code__", None), "co_argcount", 0) == n + 1:  # (as written)
            plain[name] = f
    return {**plain, "create_masked_load": create_masked_load, "create_masked_store": create_masked_store,
            "create_atomic_rmw": create_atomic_rmw, "create_atomic_cas": create_atomic_cas}


# ---------------------------------------------------------------------- a backstop for pure-Python hangs
class _WatchdogTimeout(BaseException):
    """Raised asynchronously in the launching thread when a launch outlives its bound by far."""


class _Watchdog:
    """If the program loop never reaches a check (a Python-only infinite loop), raise into its thread.

    One daemon thread serves every launch: a launch registers its thread and deadline, the thread polls
    four times a second."""

    _lock = threading.Lock()
    _deadlines: dict[int, list] = {}  # thread id -> [deadline, fired]
    _thread: threading.Thread | None = None

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.thread_id = threading.get_ident()

    @classmethod
    def _poll(cls) -> None:
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            with cls._lock:
                for tid, entry in cls._deadlines.items():
                    if not entry[1] and now > entry[0]:
                        entry[1] = True
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid),
                                                                   ctypes.py_object(_WatchdogTimeout))

    def start(self) -> None:
        with self._lock:
            self._deadlines[self.thread_id] = [time.monotonic() + self.seconds, False]
            if _Watchdog._thread is None:
                _Watchdog._thread = threading.Thread(target=_Watchdog._poll, name="gpuemu-runtime-watchdog",
                                                     daemon=True)
                _Watchdog._thread.start()

    def stop(self) -> None:
        with self._lock:
            entry = self._deadlines.pop(self.thread_id, None)
            if entry is not None and entry[1]:  # fired but maybe not delivered yet: take it back
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id), None)
