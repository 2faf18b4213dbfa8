"""A launch's specialisation for one target, computed with Triton's own binder.

``JITFunction.run`` turns arguments into (signature, constexprs, attrs, options) with a binder made by
``create_function_from_signature(signature, params, backend)`` and ``JITFunction._pack_args``; the lint calls
the same two functions with the backend of the *named* target (not the current device's, there is none), so
what it compiles is exactly what Triton would compile on that GPU for that launch: pointer and integer
arguments divisible by 16 get ``tt.divisibility``, integers equal to 1 become constexprs, and so on.
Both exist with these signatures in Triton 3.4-3.9; older versions get a clear error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .targets import Target
from .tools import ToolError


@dataclass(frozen=True)
class Specialization:
    """What Triton compiles for one launch on one target."""

    signature: dict[str, str]
    constexprs: dict  # {(param index,): value}, Triton's own form
    attrs: dict  # {(param index,): [["tt.divisibility", 16]]}
    options: dict  # the backend's options (num_warps, num_stages, ...)
    arg_names: tuple[str, ...]

    def key(self) -> str:
        """A stable text of the whole specialisation (part of the artifact cache key)."""
        return json.dumps({"signature": self.signature,
                           "constexprs": sorted((list(k), _plain(v)) for k, v in self.constexprs.items()),
                           "attrs": sorted((list(k), _plain(v)) for k, v in self.attrs.items()),
                           "options": {k: _plain(v) for k, v in sorted(self.options.items())}}, sort_keys=True)

    def describe(self) -> dict[str, Any]:
        """For people: argument types, constexpr values and divisibility by parameter name."""
        def name(path) -> str:
            return ".".join([self.arg_names[path[0]], *map(str, path[1:])])

        return {"signature": {k: v for k, v in self.signature.items() if v != "constexpr"},
                "constexprs": {name(k): _plain(v) for k, v in self.constexprs.items()},
                "divisible_by_16": sorted(name(k) for k, v in self.attrs.items() if v),
                "num_warps": self.options.get("num_warps"), "num_stages": self.options.get("num_stages"),
                "num_ctas": self.options.get("num_ctas")}


def _plain(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    value = getattr(v, "value", None)  # tl.constexpr
    if value is not None and not callable(value):
        return _plain(value)
    fn = getattr(v, "fn", None)  # a JITFunction passed as a constexpr: name and source hash
    if fn is not None and hasattr(v, "cache_key"):
        return f"jit:{fn.__qualname__}:{v.cache_key}"
    return repr(v)


_BINDERS: dict[tuple[int, int], tuple[Any, Any, Any]] = {}  # (id(fn), capability) -> (fn, backend, binder)


def triton_target(target: Target):
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", target.capability, 32)


def specialize(fn: Any, args: tuple, kwargs: dict, target: Target) -> Specialization:
    """Triton's specialisation of ``fn(*args, **kwargs)`` on ``target``.

    Raises :class:`ToolError` when the installed Triton lacks the binder API (before 3.4).
    """
    try:
        from triton.compiler import make_backend
        from triton.runtime.jit import create_function_from_signature
    except ImportError as e:
        raise ToolError(f"gpuemu lint needs Triton >= 3.4 for ahead-of-time specialisation ({e}); "
                        f"upgrade triton") from None
    if not hasattr(fn, "_pack_args"):
        import triton

        raise ToolError(f"gpuemu lint needs Triton >= 3.4 (JITFunction._pack_args); found triton "
                        f"{triton.__version__}: upgrade triton")
    cached = _BINDERS.get((id(fn), target.capability))
    if cached is None or cached[0] is not fn:
        backend = make_backend(triton_target(target))
        cached = (fn, backend, create_function_from_signature(fn.signature, fn.params, backend))
        _BINDERS[(id(fn), target.capability)] = cached
    _, backend, binder = cached
    kw = dict(kwargs)
    kw["debug"] = kw.get("debug", getattr(fn, "debug", None)) or False
    try:
        bound, specialization, opts = binder(*args, **kw)
        options, signature, constexprs, attrs = fn._pack_args(backend, kw, bound, specialization, opts)
    except (TypeError, KeyError, AssertionError) as e:
        raise ToolError(f"{fn.fn.__name__}: cannot specialise the recorded launch for {target.name}: "
                        f"{type(e).__name__}: {e}") from None
    return Specialization(signature=dict(signature), constexprs=dict(constexprs), attrs=dict(attrs),
                          options=dict(options.__dict__), arg_names=tuple(fn.arg_names))
