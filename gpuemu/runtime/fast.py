"""Per-launch costs the runtime pays once per process, and fast paths for the interpreter's hot spots.

Measured with cProfile on the corpus (triton 3.8, a one-program copy kernel, 200 launches): Triton's
``_patch_lang`` walked ``inspect.getmembers`` of tl, tl.core, tl.tensor and tl.math on every launch
(≈ 30% of a small launch), and the integer overflow check that Triton's semantic runs on every ``+``,
``-`` and ``*`` of integers (``binary_op_sanitize_overflow_impl``: two casts to int64, the op, two
constants, two compares, an ``and`` and a device_assert, each through the semantic layer) was ≈ 40% of
the kernel's own time, although index arithmetic almost never overflows.

Both keep their results exactly:

- :func:`patch_lang` applies the very attribute values Triton's ``_patch_lang`` sets, recorded from one
  real call (the builtin wrappers are the interpreter's own lambdas). Before applying the plan it checks
  that every attribute still holds the value it held when the plan was recorded; if anything changed
  (another tool patched the language, a Triton internal moved), it records a fresh plan.
- :func:`sanitize_overflow` computes the same int64 result the semantic layer would, with numpy directly;
  only when some lane leaves the operand type's range does it run Triton's own check, which raises the
  device assertion with Triton's message.
"""

from __future__ import annotations

import threading
import types
from typing import Any

import numpy as np

from . import _compat

_MISSING = object()
_plan_lock = threading.Lock()
_plan: list[tuple[Any, str, Any, Any]] | None = None  # (object, attribute, value before, value patched)


class LangScope:
    """The language patches of one launch; ``restore()`` puts every attribute back."""

    def __init__(self, undo: list[tuple[Any, str, Any]]) -> None:
        self._undo = undo

    def restore(self) -> None:
        while self._undo:
            obj, name, old = self._undo.pop()
            if old is _MISSING:
                try:
                    delattr(obj, name)
                except AttributeError:
                    pass
            else:
                setattr(obj, name, old)


def _same(a: Any, b: Any) -> bool:
    # bound methods of a class attribute are new objects on every getattr: equal, not identical
    return a is b or (type(a) is types.MethodType and type(b) is types.MethodType and a == b)


def _record(anchor: Any) -> list[tuple[Any, str, Any, Any]]:
    """Run Triton's own _patch_lang once, note (object, name, before, after) for every attribute it set,
    and undo it."""
    it = _compat.interp()
    scope = it._patch_lang(anchor)
    theirs = getattr(it, "_MISSING", _MISSING)  # the interpreter's own "no such attribute" marker
    changes = [(obj, name, _MISSING if before is theirs else before) for obj, name, before in scope._changes]
    order: dict[tuple[int, str], tuple[Any, str, Any]] = {}
    for obj, name, before in changes:  # an attribute set twice: the first value before, the last after
        order.setdefault((id(obj), name), (obj, name, before))
    plan = [(obj, name, before, getattr(obj, name, _MISSING)) for obj, name, before in order.values()]
    scope.restore()
    return plan


def patch_lang(anchor: Any) -> LangScope:
    """Triton's interpreter language patches (``_patch_lang(anchor)``) from the recorded plan."""
    global _plan
    with _plan_lock:
        plan = _plan
        if plan is None or not all(_same(getattr(obj, name, _MISSING), before) for obj, name, before, _ in plan):
            plan = _plan = _record(anchor)
    undo = []
    for obj, name, before, after in plan:
        undo.append((obj, name, before))
        if after is _MISSING:
            delattr(obj, name)
        else:
            setattr(obj, name, after)
    return LangScope(undo)


_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def sanitize_overflow(semantic: Any, original: Any):
    """A replacement for ``semantic.binary_op_sanitize_overflow_impl`` (bound ``original``) that checks in
    numpy first and runs Triton's check only for a launch whose values overflow."""

    def check(lhs, rhs, binary_op):
        sca = lhs.type.scalar
        if sca.int_bitwidth >= 64 or not semantic.builder.options.sanitize_overflow:
            return None
        op = _OPS.get(getattr(binary_op, "__name__", ""))
        if op is None or getattr(binary_op, "__self__", None) is not semantic or rhs.type.scalar != sca \
                or not sca.is_int():
            return original(lhs, rhs, binary_op)
        # what the semantic computes: both operands cast to int64 (numpy astype), the op in int64 (wrapping)
        with np.errstate(all="ignore"):
            ret = op(np.asarray(lhs.handle.data).astype(np.int64), np.asarray(rhs.handle.data).astype(np.int64))
        if ((ret <= sca.get_int_max_value()) & (ret >= sca.get_int_min_value())).all():
            return None
        return original(lhs, rhs, binary_op)

    return check


# ---------------------------------------------------------------------- the language's hot constructors
# Every op builds a tl.tensor and most a block_type; both spent most of their time re-deriving the same
# things from the shape (a tuple of constexprs, the element count, the power-of-2 check). These are the
# same constructors with those results cached per shape. A shape is cached only where Triton's own check
# accepts it (every dim a power of 2, within the numel limit), so a shape it rejects still goes through
# whatever check is live (the batched grid's accepts a leading program axis of any size).
_tensor_shapes: dict[tuple, tuple] = {}
_valid_shapes: dict[tuple, int] = {}


def install(scope: Any) -> None:
    """Patch the interpreter's hot helpers for one launch (``scope.set`` restores them)."""
    import math

    import triton.language as tl
    from triton._utils import TRITON_MAX_TENSOR_NUMEL

    core = tl.core
    constexpr, block_type = core.constexpr, core.block_type
    one = constexpr(1)

    def tensor_init(self, handle, type):
        self.handle = handle
        if type.is_block():
            shape = type.shape
            try:
                hit = _tensor_shapes.get(shape)
            except TypeError:  # an unhashable shape: build it as Triton does
                hit = None
                shape = None
            if hit is None:
                dims = () if shape is None else shape
                hit = (tuple([constexpr(s) for s in type.shape]), constexpr(math.prod(type.shape)))
                if shape is not None:
                    _tensor_shapes[dims] = hit
            self.shape, self.numel = hit
        else:
            self.shape, self.numel = (), one
        self.type = type
        self.dtype = type.scalar

    bt_init0 = block_type.__init__

    def block_type_init(self, element_ty, shape):
        if type(shape) in (list, tuple) and all(type(d) is int for d in shape):
            key = tuple(shape)
            numel = _valid_shapes.get(key)
            if numel is None and key and all(d > 0 and d & (d - 1) == 0 for d in key):
                numel = math.prod(key)
                if numel <= TRITON_MAX_TENSOR_NUMEL:
                    _valid_shapes[key] = numel
                else:
                    numel = None
            if numel is not None:
                self.element_ty = element_ty
                self.shape = key
                self.numel = numel
                self.name = f'<{key}, {element_ty}>'
                return
        bt_init0(self, element_ty, shape)

    scope.set(core.tensor, "__init__", tensor_init)
    scope.set(block_type, "__init__", block_type_init)

    it = _compat.interp()
    np_dtype0 = it._get_np_dtype
    cache: dict = {}
    scalar = core.dtype

    def get_np_dtype(tt):
        if type(tt) is block_type:
            tt = tt.element_ty
        if type(tt) is scalar:  # hashed and compared by name
            hit = cache.get(tt)
            if hit is None:
                hit = cache[tt] = np_dtype0(tt)
            return hit
        return np_dtype0(tt)

    scope.set(it, "_get_np_dtype", get_np_dtype)
