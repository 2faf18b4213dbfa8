"""Seeing Triton launches: kernel, constexprs, grid.

``JITFunction.run(self, *args, grid, warmup, **kwargs)`` has this signature in Triton 3.0-3.9 and sees
every launch (autotuner and heuristics forward to it); under TRITON_INTERPRET=1 the kernel object is an
``InterpretedFunction`` with the same ``run``. Triton's own launch hook gets neither arguments nor
constexprs and never fires under the interpreter, so both ``run`` methods are wrapped at class level,
but only while someone listens: the first interceptor or ``observe_launches`` block puts the wrapper in
place, and the last one to leave restores Triton's own ``run`` (so the production hook, which adds its
interceptor only while armed, leaves launches between samples exactly as Triton makes them).
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

_state = threading.local()
_installed = False
_install_lock = threading.RLock()
_wrapped: list = []  # (class, Triton's run, our wrapper) while installed


@dataclass(frozen=True)
class Launch:
    kernel: str
    constexprs: dict[str, Any] = field(default_factory=dict)
    grid: tuple[int, ...] | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "constexprs": dict(self.constexprs),
                "grid": list(self.grid) if self.grid is not None else None, "options": dict(self.options)}


def in_launch() -> bool:
    """True while a Triton kernel runs on this thread (allocations inside are the runtime's own)."""
    return getattr(_state, "depth", 0) > 0


def _observers() -> list:
    obs = getattr(_state, "observers", None)
    if obs is None:
        obs = _state.observers = []
    return obs


def _is_constexpr(param: inspect.Parameter) -> bool:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return False
    name = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
    return str(name).split(".")[-1] == "constexpr"


_signatures: dict[int, tuple] = {}  # id(kernel function) -> (it, its code and defaults, signature, constexprs,
#                                      whether every parameter is plain)


def _signature(fn) -> tuple:
    """(signature, names of its constexpr parameters, whether every parameter is plain: see :func:`_bind`) of a
    kernel's function, worked out once per function while its code and defaults stay (inspect.signature alone
    was half of describing a launch)."""
    hit = _signatures.get(id(fn))
    now = (getattr(fn, "__code__", None), getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None))
    if hit is None or hit[0] is not fn or hit[1] != now:
        if len(_signatures) > 4096:
            _signatures.clear()
        sig = inspect.signature(fn)
        hit = _signatures[id(fn)] = (fn, now, sig, frozenset(k for k, p in sig.parameters.items()
                                                            if _is_constexpr(p)), _all_plain(sig))
    return hit[2], hit[3], hit[4]


def _describe(kernel_obj, args, grid, kwargs) -> Launch:
    fn = getattr(kernel_obj, "fn", None)
    name = getattr(fn, "__name__", type(kernel_obj).__name__)
    constexprs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    try:
        sig, constexpr_names, plain = _signature(fn)
        params = sig.parameters
        call_kwargs = {k: v for k, v in kwargs.items() if k in params}
        options = {k: v for k, v in kwargs.items() if k not in params and _plain(v)}
        arguments = _bind(sig, plain, args, call_kwargs)
        constexprs = {k: v for k, v in arguments.items() if k in constexpr_names and _plain(v)}
        g = grid(dict(arguments)) if callable(grid) else grid
        grid_t = tuple(int(x) for x in g) if g is not None else None
    except Exception:  # describing must never break the launch
        grid_t = None
    return Launch(kernel=name, constexprs=constexprs, grid=grid_t, options=options)


_EMPTY = inspect.Parameter.empty


def _all_plain(sig: inspect.Signature) -> bool:
    """Every parameter positional-or-keyword (no ``*args``, keyword-only or positional-only one)."""
    return all(p.kind is p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())


def bind_plain(params: Any, args: tuple, kwargs: dict, partial: bool) -> dict | None:
    """The arguments by parameter name, in parameter order, defaults applied, for a function whose every
    parameter is positional-or-keyword (``params``: its signature's parameters, :func:`_all_plain`) -- what
    inspect's bind (``partial``: bind_partial) and apply_defaults give, without their machinery. None where
    inspect must answer: more arguments than parameters, a keyword repeating a positional argument or,
    unless ``partial``, a missing argument (inspect's error says which)."""
    names = tuple(params)
    n = len(args)
    if n > len(names) or any(k in kwargs for k in names[:n]):
        return None
    out = dict(zip(names, args))
    for name in names[n:]:
        if name in kwargs:
            out[name] = kwargs[name]
        elif params[name].default is not _EMPTY:
            out[name] = params[name].default
        elif not partial:
            return None
    return out


def _bind(sig: inspect.Signature, plain: bool, args: tuple, kwargs: dict) -> dict:
    """``sig.bind_partial(*args, **kwargs)`` with defaults applied, as a dict in parameter order; without
    inspect's machinery where every parameter is ``plain`` (:func:`bind_plain`; inspect's binding was a third
    of describing a launch)."""
    out = bind_plain(sig.parameters, args, kwargs, partial=True) if plain else None
    if out is not None:
        return out
    bound = sig.bind_partial(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, bool, str)) or v is None


_interceptors: list = []  # process-wide, in order of installation; see add_interceptor
_observing = 0  # observe_launches blocks open on any thread: only then is a launch described


def add_interceptor(fn) -> None:
    """Route every Triton launch through ``fn(kernel, args, kwargs, grid, warmup, call_next)``.

    ``kernel`` is the JITFunction / InterpretedFunction, ``args``/``kwargs`` as given to ``run``, and
    ``call_next(args, kwargs, grid)`` continues the chain (eventually Triton's own ``run``). An
    interceptor may run the launch elsewhere (a CPU runtime), around it (a shadow check) or not at all;
    it must return what ``run`` returns. Interceptors chain in installation order; adding one twice is a
    no-op, so every tool can add its own without clobbering another's.

    An interceptor may carry a ``wants(kernel, args) -> bool`` attribute: when it answers False the
    launch skips it without building the chain, so an unsampled launch costs one cheap call per interceptor.
    """
    with _install_lock:
        install()
        if fn not in _interceptors:
            _interceptors.append(fn)


def remove_interceptor(fn) -> None:
    """Take ``fn`` out of the chain; the last listener to leave restores Triton's own ``run``."""
    with _install_lock:
        if fn in _interceptors:
            _interceptors.remove(fn)
        uninstall_if_idle()


def uninstall_if_idle() -> bool:
    """Restore Triton's own ``run`` methods when no interceptor and no observer is left; True if restored."""
    global _installed
    with _install_lock:
        if _interceptors or _observing or not _installed:
            return False
        for cls, original, wrapper in _wrapped:
            if cls.__dict__.get("run") is wrapper:  # another tool may have wrapped over us: leave it
                cls.run = original
        _wrapped.clear()
        _installed = False
        return True


def _next_wanting(kernel, args, start: int) -> int:
    for j in range(start, len(_interceptors)):
        wants = getattr(_interceptors[j], "wants", None)
        if wants is None or wants(kernel, args):
            return j
    return -1


def _chain(original, kernel, index: int):
    def call_next(args, kwargs, grid, warmup=False):
        j = _next_wanting(kernel, args, index)
        if j < 0:
            return original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
        return _interceptors[j](kernel, args, kwargs, grid, warmup, _chain(original, kernel, j + 1))

    return call_next


def _wrap(original):
    def run(self, *args, grid, warmup, **kwargs):
        if not _observing:  # the production path: no description, no bookkeeping
            if not _interceptors:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            j = _next_wanting(self, args, 0)
            if j < 0:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            return _interceptors[j](self, args, kwargs, grid, warmup, _chain(original, self, j + 1))
        observers = getattr(_state, "observers", None)
        launch = None
        if observers and not warmup:
            launch = _describe(self, args, grid, kwargs)
            for obs in observers:
                obs.append(launch)
        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            if not warmup:
                for check in getattr(_state, "guards", ()):
                    check(self, args, kwargs)  # may refuse the launch (a GPU-less OutOfResources)
            result = _chain(original, self, 0)(args, kwargs, grid, warmup)
            if launch is not None and observers and hasattr(result, "asm"):  # a CompiledKernel: a real GPU launch
                _note_compiled(observers, launch, result)
            return result
        finally:
            _state.depth -= 1

    run.__gpuemu_wrapped__ = original  # type: ignore[attr-defined]
    run.__wrapped__ = original  # type: ignore[attr-defined]
    return run


def install() -> None:
    """Wrap ``JITFunction.run`` and ``InterpretedFunction.run`` once (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        try:
            from triton.runtime.jit import JITFunction
        except Exception:  # no triton: nothing to observe
            _installed = True
            return
        classes = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except Exception:  # pragma: no cover - very old triton
            pass
        for cls in classes:
            if not hasattr(cls.run, "__gpuemu_wrapped__"):
                original = cls.run
                cls.run = _wrap(original)
                _wrapped.append((cls, original, cls.run))
        _installed = True


def _note_compiled(observers: list, launch: Launch, compiled: Any) -> None:
    """Put what the compiled kernel says about its dots into the launch's record, as the CPU runtime does."""
    import dataclasses

    from .dots import compiled_dot_precision

    precision = compiled_dot_precision(compiled)
    if precision is None:
        return
    done = dataclasses.replace(launch, options={**launch.options, "dot_precision": precision,
                                                "dot_precision_source": "compiled kernel (TTIR)"})
    for obs in observers:
        for i in range(len(obs) - 1, -1, -1):
            if obs[i] is launch:
                obs[i] = done
                break


@contextlib.contextmanager
def guarding(check) -> Iterator[None]:
    """Call ``check(kernel, args, kwargs)`` before every launch on this thread inside the block (observed
    launches only: used inside :func:`observe_launches`); it refuses a launch by raising."""
    guards = getattr(_state, "guards", None)
    if guards is None:
        guards = _state.guards = []
    guards.append(check)
    try:
        yield
    finally:
        guards.remove(check)


@contextlib.contextmanager
def observe_launches() -> Iterator[list[Launch]]:
    """Collect the Triton launches made on this thread inside the block.

    >>> with observe_launches() as seen:
    ...     pass
    >>> seen
    []
    """
    global _observing
    with _install_lock:
        install()
        _observing += 1
    seen: list[Launch] = []
    obs = _observers()
    obs.append(seen)
    try:
        yield seen
    finally:
        obs.remove(seen)
        with _install_lock:
            _observing -= 1
            uninstall_if_idle()
