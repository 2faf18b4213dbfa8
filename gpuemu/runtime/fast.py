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
- :func:`sanitize_overflow` bounds the result from the operands' min and max, then computes the same int64
  result the semantic layer would, with numpy directly; only when some lane leaves the operand type's
  range does it run Triton's own check, which raises the device assertion with Triton's message.

Then the semantic layer itself, for the cases where its checks, casts and broadcasts are the identity:
:func:`install` (tl.tensor / block_type constructors and _get_np_dtype cached per shape and dtype),
:func:`install_operators` (+ - * / and comparisons, pointer offsets, tl.where, tl.load, tl.store) and
:func:`reduce_shortcut` (tl.max / tl.min / tl.sum). Each calls the same (patched) builder methods and
Triton's own scalar_constant, cast and overflow check, and hands anything else to Triton's path.
``ENABLED = False`` turns these off; tests/test_runtime_fast.py compares the corpus with and without them,
and op by op (``SHADOW``) against Triton's path.
"""

from __future__ import annotations

import itertools
import operator
import threading
import types
from typing import Any

import numpy as np

from . import _compat

ENABLED = True  # the constructors, the overflow check and the operators below; tests compare without them
# Tests set SHADOW to a callable(name, fast result, Triton's result): every fast path then also runs Triton's
# path for the same arguments and hands both results over (a store writes the same values twice).
SHADOW: Any = None
_MISSING = object()
_plan_lock = threading.Lock()
_plan: "_Plan | None" = None


class LangScope:
    """The language patches of one launch; ``restore()`` puts every attribute back."""

    def __init__(self, plan: "_Plan | None") -> None:
        self._plan = plan

    def restore(self) -> None:
        plan, self._plan = self._plan, None
        if plan is None:
            return
        list(map(setattr, plan.set_objs, plan.set_names, plan.set_values))
        for obj, name in plan.absent:
            try:
                delattr(obj, name)
            except AttributeError:
                pass


class _Plan:
    """The attributes Triton's _patch_lang sets, as columns (applied and checked with map, in C)."""

    def __init__(self, entries: list[tuple[Any, str, Any, Any]]) -> None:
        self._columns(entries)

    def _columns(self, entries: list[tuple[Any, str, Any, Any]]) -> None:
        """(object, name, value before, value the patch sets) of every attribute, as the columns below."""
        self.objs = [e[0] for e in entries]
        self.names = [e[1] for e in entries]
        self.befores = [e[2] for e in entries]
        self.afters = [e[3] for e in entries]
        kept = [e for e in entries if e[2] is not _MISSING]
        self.set_objs = [e[0] for e in kept]
        self.set_names = [e[1] for e in kept]
        self.set_values = [e[2] for e in kept]
        self.absent = [(e[0], e[1]) for e in entries if e[2] is _MISSING]
        # for the quick check: per object, the names whose value getattr reads straight from the object's own
        # __dict__ (a module's functions, a class's plain functions), looked up there by one itemgetter each
        own: dict[int, tuple[Any, list, list, int]] = {}  # id(object) -> (it, names, befores, its group)
        self.rest = []  # (object, name, before) read with getattr
        self.kept_at = {i: k for k, i in enumerate(i for i, e in enumerate(entries) if e[2] is not _MISSING)}
        self.where: dict[int, tuple] = {}  # entry -> ("own", its object's group, place in it) or ("rest", place)
        for i, (obj, name, before, _) in enumerate(entries):
            d = getattr(obj, "__dict__", None)
            try:
                direct = before is not _MISSING and name in d and d[name] is before \
                    and getattr(obj, name, _MISSING) is before
            except TypeError:  # no __dict__
                direct = False
            if direct:
                if id(obj) not in own:
                    own[id(obj)] = (obj, [], [], len(own))
                group = own[id(obj)]
                self.where[i] = ("own", group[3], len(group[1]))
                group[1].append(name)
                group[2].append(before)
            else:
                self.where[i] = ("rest", len(self.rest))
                self.rest.append((obj, name, before))
        self.own = [(obj, operator.itemgetter(*names) if len(names) > 1 else (lambda d, n=names[0]: (d[n],)),
                     tuple(befores)) for obj, names, befores, _ in own.values()]

    def unchanged(self, rebase: bool = False) -> bool:
        """Every attribute still holds what the plan found (or a patch Triton's interpreter left behind).
        ``rebase``: where it holds a patch left behind, take what it holds now as what the plan found (the
        quick check below passes again, and a launch puts back what it found); only where no launch's patches
        are in place (the start of a launch that is not inside another): else the plan would take them for
        the language."""
        # the common case, in C: every value read from its object's own dict, compared as a tuple (identity
        # first; a replaced value passes only if it claims equality to the original: a function, class or
        # builtin never does)
        try:
            if all(get(obj.__dict__) == befores for obj, get, befores in self.own) \
                    and all(getattr(o, n, _MISSING) is b for o, n, b in self.rest):
                return True
        except KeyError:  # a name no longer in the object's own dict (deleted, or inherited now)
            pass
        now = list(map(getattr, self.objs, self.names, itertools.repeat(_MISSING, len(self.objs))))
        changed = list(itertools.compress(range(len(now)), map(operator.is_not, now, self.befores)))
        if not changed:
            return True
        if not all(_unchanged(now[i], self.befores[i], self.afters[i]) for i in changed):
            return False
        if rebase:  # (the same plan object: the keys of the traces recorded under it stay valid)
            self._rebase(changed, now)
        return True

    def _rebase(self, changed: list[int], now: list) -> None:
        """Take ``now``'s values of the ``changed`` entries as what the plan found: in place where each stays
        what it was (present, read from its object's own dict or not), else every column anew."""
        for i in changed:
            before, value = self.befores[i], now[i]
            where = self.where[i]
            own = getattr(self.objs[i], "__dict__", {}).get(self.names[i], _MISSING) if where[0] == "own" else value
            if before is _MISSING or value is _MISSING or own is not value:
                self._columns(list(zip(self.objs, self.names, now, self.afters)))
                return
        for i in changed:
            value, where = now[i], self.where[i]
            self.befores[i] = value
            self.set_values[self.kept_at[i]] = value
            if where[0] == "rest":
                obj, name, _ = self.rest[where[1]]
                self.rest[where[1]] = (obj, name, value)
            else:
                obj, get, befores = self.own[where[1]]
                self.own[where[1]] = (obj, get, befores[:where[2]] + (value,) + befores[where[2] + 1:])


def _same(a: Any, b: Any) -> bool:
    # bound methods of a class attribute are new objects on every getattr: equal, not identical
    return a is b or (type(a) is types.MethodType and type(b) is types.MethodType and a == b)


def _unchanged(now: Any, before: Any, after: Any) -> bool:
    """The attribute still holds what the plan found, or a patch Triton's interpreter left behind: a plain
    TRITON_INTERPRET launch of a kernel that calls a helper (tl.sum, tl.max) leaves tl.core's range,
    static_range, static_assert, multiple_of, max_contiguous and max_constancy patched with functions of its
    own and static_print as the builtin print, what the plan itself sets (see _compat.unpatched_language); the
    plan sets them as the interpreter does and puts Triton's own definitions back afterwards, or what it found
    where a launch rebased it (see _Plan.unchanged)."""
    return _same(now, before) or _same(now, after) or _compat._is_interpreter_patch(now)


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
        if plan is None or not plan.unchanged():
            plan = _plan = _Plan(_record(anchor))
    list(map(setattr, plan.objs, plan.names, plan.afters))  # Triton's patches only set attributes
    return LangScope(plan)


_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def sanitize_overflow(semantic: Any, original: Any):
    """A replacement for ``semantic.binary_op_sanitize_overflow_impl`` (bound ``original``) that checks in
    numpy first and runs Triton's check only for a launch whose values overflow."""

    bounds: dict[str, tuple[int, int]] = {}

    def check(lhs, rhs, binary_op):
        sca = lhs.type.scalar
        if sca.int_bitwidth >= 64 or not semantic.builder.options.sanitize_overflow:
            return None
        op = _OPS.get(getattr(binary_op, "__name__", ""))
        rs = rhs.type.scalar
        if op is None or getattr(binary_op, "__self__", None) is not semantic or type(rs) is not type(sca) \
                or rs.name != sca.name or not sca.is_int():
            return original(lhs, rhs, binary_op)
        lo_hi = bounds.get(sca.name)
        if lo_hi is None:
            lo_hi = bounds[sca.name] = (sca.get_int_min_value(), sca.get_int_max_value())
        a, b = np.asarray(lhs.handle.data), np.asarray(rhs.handle.data)
        if in_range(a, b, binary_op.__name__, lo_hi[0], lo_hi[1]):
            return None
        # lane by lane, as the semantic computes: both operands cast to int64 (numpy astype), the op in int64
        # (wrapping, silently: numpy arrays do not warn on integer overflow)
        ret = op(a.astype(np.int64), b.astype(np.int64))
        if ((ret >= lo_hi[0]) & (ret <= lo_hi[1])).all():
            return None
        return original(lhs, rhs, binary_op)

    return check


def in_range(a: np.ndarray | tuple[int, int], b: np.ndarray | tuple[int, int], op: str, lo: int, hi: int) -> bool:
    """Whether ``a <op> b`` ("add", "sub" or "mul") stays inside [lo, hi] for every pair of values in the
    operands' ranges (exact Python ints from each one's min and max; an operand may be given as its (min, max)
    already, as a replay does for a recorded constant): then no lane overflows, whatever pairs the broadcast
    makes. False for an empty operand (nothing shown)."""
    if type(a) is tuple:
        la, ha = a
    elif a.size == 1:  # a scalar (most operands of index arithmetic): no reduction needed
        la = ha = int(a.reshape(-1)[0])
    elif a.size:
        la, ha = int(a.min()), int(a.max())
    else:
        return False
    if type(b) is tuple:
        lb, hb = b
    elif b.size == 1:
        lb = hb = int(b.reshape(-1)[0])
    elif b.size:
        lb, hb = int(b.min()), int(b.max())
    else:
        return False
    if op == "add":
        return lo <= la + lb and ha + hb <= hi
    if op == "sub":
        return lo <= la - hb and ha - lb <= hi
    c = (la * lb, la * hb, ha * lb, ha * hb)
    return lo <= min(c) and max(c) <= hi


# ---------------------------------------------------------------------- the language's hot constructors
# Every op builds a tl.tensor and most a block_type; both spent most of their time re-deriving the same
# things from the shape (a tuple of constexprs, the element count, the power-of-2 check). These are the
# same constructors with those results cached per shape. A shape is cached only where Triton's own check
# accepts it (every dim a power of 2, within the numel limit), so a shape it rejects still goes through
# whatever check is live (the batched grid's accepts a leading program axis of any size).
ONE: Any = None  # constexpr(1): the numel of every scalar tensor the constructor below builds
# Triton keeps shapes as its own tl.tuple (block_type.shape: ints; tensor.shape: constexprs), which kernels and
# Triton's semantic layer rely on (``shape.values``, ``[1] + shape.values``, ``x.shape == [4, 8]``): the
# constructors below build one tl.tuple per shape and share it.
_shape_tuples: dict[tuple, Any] = {}  # plain shape -> the block_type shape (tl.tuple of ints) for it
_tensor_shapes: dict[int, tuple] = {}  # id(a block_type shape) -> (it, tensor shape (tl.tuple of constexprs), numel)
_valid_shapes: dict[tuple, int] = {}
_names: dict[tuple, str] = {}  # (shape, scalar dtype name) -> block_type name


def shape_tuple(key: tuple) -> Any:
    """The tl.tuple Triton's block_type keeps for the plain shape ``key`` (one shared object per shape)."""
    hit = _shape_tuples.get(key)
    if hit is None:
        import triton.language as tl

        if len(_shape_tuples) >= 4096:
            _shape_tuples.clear()
        hit = _shape_tuples[key] = tl.core.tuple(list(key))
    return hit


def install(scope: Any) -> None:
    """Patch the interpreter's hot helpers for one launch (``scope.set`` restores them)."""
    if not ENABLED:
        return
    import math

    import triton.language as tl
    from triton._utils import TRITON_MAX_TENSOR_NUMEL

    global ONE
    core = tl.core
    constexpr, block_type, tltuple = core.constexpr, core.block_type, core.tuple
    if ONE is None:
        ONE = constexpr(1)
    one = ONE
    empty = tltuple([])

    def tensor_init(self, handle, type):
        self.handle = handle
        if type.is_block():
            shape = type.shape
            hit = _tensor_shapes.get(id(shape))
            if hit is None or hit[0] is not shape:
                dims = [int(s) for s in shape]
                hit = (shape, tltuple([constexpr(s) for s in dims]), constexpr(math.prod(dims)))
                if len(_tensor_shapes) >= 4096:
                    _tensor_shapes.clear()
                _tensor_shapes[id(shape)] = hit  # (holds the shape: its id stays its own)
            self.shape, self.numel = hit[1], hit[2]
        else:
            self.shape, self.numel = empty, one
        self.type = type
        self.dtype = type.scalar

    bt_init0 = block_type.__init__

    def block_type_init(self, element_ty, shape):
        kind = type(shape)
        if kind is tltuple:
            shape = shape.values
            kind = list
        if kind in (list, tuple) and all(type(d) is int for d in shape):
            key = tuple(shape)
            numel = _valid_shapes.get(key)
            if numel is None and key and all(d > 0 and d & (d - 1) == 0 for d in key):
                numel = math.prod(key)
                if numel <= TRITON_MAX_TENSOR_NUMEL:
                    _valid_shapes[key] = numel
                else:
                    numel = None
            if numel is None and key:  # not a shape Triton accepts by itself: whatever check is live decides
                numel = core.validate_block_shape(key)  # (raises as Triton's constructor would)
            if numel is not None:
                self.element_ty = element_ty
                self.shape = shape_tuple(key)
                self.numel = numel
                nkey = (key, element_ty.name) if type(element_ty) is core.dtype else None
                name = _names.get(nkey) if nkey is not None else None
                if name is None:
                    name = f'<{self.shape}, {element_ty}>'
                    if nkey is not None:
                        _names[nkey] = name
                self.name = name
                return
        bt_init0(self, element_ty, list(shape) if type(shape) is tuple else shape)

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

    # the interpreter's value handle (a dataclass: generated __init__, then __post_init__'s size check): the
    # same fields; the check decided here where the data is an array no wider than a scalar type's width,
    # else by the class's own __post_init__ (pointers, int1, anything wider, which it refuses)
    TH = it.TensorHandle
    post = TH.__post_init__
    no_attr = _MISSING
    ndarray = np.ndarray

    def handle_init(self, data, dtype, attr=no_attr):
        self.data = data
        self.dtype = dtype
        self.attr = {} if attr is no_attr else attr
        if type(dtype) is not scalar or type(data) is not ndarray or data.itemsize * 8 > dtype.primitive_bitwidth:
            post(self)

    scope.set(TH, "__init__", handle_init)


# ---------------------------------------------------------------------- binary operators
# ``a + b`` on tl.tensors goes: the interpreter's wrapper, tl.tensor.__add__, tl.add, semantic.add,
# binary_op_type_checking_impl (the computation type, two casts, broadcasting), then the builder. When
# both operands already have the same scalar type (and the same shape, or one is a scalar), or one is a
# Python number that Triton's rules give the tensor's type (a float with a float tensor, an int in range
# with an int32/int64 tensor), every step but the constant, a splat and the builder call is the identity.
# These operators do just those, through the same (patched) builder and Triton's own scalar_constant and
# overflow check, and return the same types. Anything else (mixed dtypes, pointers, unsigned or narrow
# ints, bools, blocks of different shapes, fp16/bf16 division) goes through Triton's path unchanged.
_FLOATS = ("fp16", "bf16", "fp32", "fp64")
_INTS = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
_OPERATORS = {  # name: (float builder method, signed int builder method, float dtypes, bool result, reflected)
    "__add__": ("create_fadd", "create_add", _FLOATS, False, False),
    "__radd__": ("create_fadd", "create_add", _FLOATS, False, True),
    "__sub__": ("create_fsub", "create_sub", _FLOATS, False, False),
    "__rsub__": ("create_fsub", "create_sub", _FLOATS, False, True),
    "__mul__": ("create_fmul", "create_mul", _FLOATS, False, False),
    "__rmul__": ("create_fmul", "create_mul", _FLOATS, False, True),
    "__truediv__": ("create_fdiv", None, ("fp32", "fp64"), False, False),  # fp16/bf16 divide in fp32
    "__rtruediv__": ("create_fdiv", None, ("fp32", "fp64"), False, True),
    "__lt__": ("create_fcmpOLT", "create_icmpSLT", _FLOATS, True, False),
    "__le__": ("create_fcmpOLE", "create_icmpSLE", _FLOATS, True, False),
    "__gt__": ("create_fcmpOGT", "create_icmpSGT", _FLOATS, True, False),
    "__ge__": ("create_fcmpOGE", "create_icmpSGE", _FLOATS, True, False),
    "__eq__": ("create_fcmpOEQ", "create_icmpEQ", _FLOATS, True, False),
    "__ne__": ("create_fcmpUNE", "create_icmpNE", _FLOATS, True, False),
}
_SANITIZED = {"create_add": "add", "create_sub": "sub", "create_mul": "mul"}


def _shadowed(name: str, fast_fn: Any, slow_fn: Any) -> Any:
    """``fast_fn`` as installed: itself, or under a test's SHADOW also Triton's path, both results compared."""
    if SHADOW is None:
        return fast_fn

    def both(*args, **kwargs):
        out = fast_fn(*args, **kwargs)
        SHADOW(name, out, slow_fn(*args, **kwargs))
        return out

    return both


def install_operators(scope: Any) -> None:
    """Fast tensor operators for one launch; call after the language patches are in."""
    if not ENABLED:
        return
    import triton.language as tl

    core = tl.core
    tensor, scalar, block_type, constexpr = core.tensor, core.dtype, core.block_type, core.constexpr
    sem = _compat.semantic()
    b = sem.builder
    int1 = tl.int1

    pointer = core.pointer_type
    signed = ("int8", "int16", "int32", "int64")

    def addptr(ptr, off):
        """``ptr + off`` (semantic.add for a pointer and a signed int offset: broadcast, then addptr); None
        where Triton's path must decide."""
        kind = type(off)
        if kind is constexpr:
            off = off.value
            kind = type(off)
        if kind is int:
            if not -2**31 <= off < 2**31:
                return None
            off = sem.scalar_constant(off, tl.int32)  # what to_tensor makes of it
        elif kind is not tensor:
            return None
        to = off.type
        o_block = type(to) is block_type
        so = to.element_ty if o_block else to
        if type(so) is not scalar or so.name not in signed:
            return None
        tp = ptr.type
        p_block = type(tp) is block_type
        pty = tp.element_ty if p_block else tp
        if p_block and o_block:
            if tp.shape is not to.shape and tp.shape != to.shape:
                return None
            ty, ph, oh = tp, ptr.handle, off.handle
        elif p_block:
            ty, ph, oh = tp, ptr.handle, b.create_splat(block_type(so, tp.shape), off.handle)
        elif o_block:
            ty = block_type(pty, to.shape)
            ph, oh = b.create_splat(ty, ptr.handle), off.handle
        else:
            ty, ph, oh = tp, ptr.handle, off.handle
        return tensor(b.create_addptr(ph, oh), ty)

    def make(name: str, fop: str, iop: str | None, floats: tuple, boolean: bool, reflected: bool):
        slow = getattr(tensor, name)  # the interpreter's wrapper of Triton's operator
        sanitized = _SANITIZED.get(iop) if iop else None
        is_add = fop == "create_fadd"

        def op(self, other, *rest, **kwargs):
            if rest or kwargs:
                return slow(self, other, *rest, **kwargs)
            kind = type(other)
            if kind is constexpr:  # Triton's operators unwrap it first
                other = other.value
                kind = type(other)
            ta = self.type
            a_block = type(ta) is block_type
            sa = ta.element_ty if a_block else ta
            if type(sa) is not scalar:
                if is_add and type(sa) is pointer:
                    r = addptr(self, other)
                    if r is not None:
                        return r
                return slow(self, other)
            if is_add and kind is tensor and not reflected:
                to = other.type
                if type(to.element_ty if type(to) is block_type else to) is pointer:
                    r = addptr(other, self)  # int + ptr: Triton swaps them
                    if r is not None:
                        return r
                    return slow(self, other)
            nm = sa.name
            if kind is tensor:
                to = other.type
                o_block = type(to) is block_type
                so = to.element_ty if o_block else to
                if type(so) is not scalar or so.name != nm:
                    return slow(self, other)
            elif kind is float or kind is int:
                if nm in _INTS:
                    lo, hi = _INTS[nm]
                    if kind is not int or not lo <= other <= hi:
                        return slow(self, other)
                elif nm not in floats or (kind is int and not -2**63 <= other < 2**64):
                    # (a narrow or unsigned int beside a Python number: Triton's promotion decides, not this type)
                    return slow(self, other)
                other = sem.scalar_constant(other, sa)  # Triton's constant of the tensor's type
                o_block = False
            else:
                return slow(self, other)
            if nm in floats:
                method = fop
            elif nm in _INTS and iop is not None:
                method = iop
            else:
                return slow(self, other)
            lhs, rhs = (other, self) if reflected else (self, other)
            l_block, r_block = (o_block, a_block) if reflected else (a_block, o_block)
            if l_block and r_block:
                if lhs.type.shape is not rhs.type.shape and lhs.type.shape != rhs.type.shape:
                    return slow(self, other)
                ty = lhs.type
            elif l_block:  # the scalar is splat to the block's shape, as broadcast_impl_value does
                ty = lhs.type
                rhs = tensor(b.create_splat(block_type(sa, ty.shape), rhs.handle), ty)
            elif r_block:
                ty = block_type(sa, rhs.type.shape)
                lhs = tensor(b.create_splat(ty, lhs.handle), ty)
            else:
                ty = lhs.type
            if sanitized is not None and method is iop:
                sem.binary_op_sanitize_overflow_impl(lhs, rhs, getattr(sem, sanitized))
            handle = getattr(b, method)(lhs.handle, rhs.handle)
            return tensor(handle, ty.with_element_ty(int1) if boolean else ty)

        op.__name__ = name
        return op

    for name, spec in _OPERATORS.items():
        scope.set(tensor, name, _shadowed(name, make(name, *spec), getattr(tensor, name)))

    def number(v, sa):
        """Triton's constant for a Python number beside a tensor of scalar type ``sa`` where its rules give
        the number that type (binary_op_type_checking_impl); None otherwise."""
        kind, nm = type(v), sa.name
        if kind is not float and kind is not int:
            return None
        if nm in _INTS:
            lo, hi = _INTS[nm]
            if kind is not int or not lo <= v <= hi:
                return None
        elif nm not in _FLOATS or (kind is int and not -2**63 <= v < 2**64):
            return None
        return sem.scalar_constant(v, sa)

    def select(slow):
        def where(condition, x, y, *rest, **kwargs):
            """tl.where(block condition, x, y) where x and y have one scalar type (or are numbers typed as
            the other) and are blocks of the condition's shape or scalars: splats and create_select, as
            semantic.where does after its casts and broadcasts."""
            if rest or kwargs or type(condition) is not tensor:
                return slow(condition, x, y, *rest, **kwargs)
            ct = condition.type
            if type(ct) is not block_type or type(ct.element_ty) is not scalar or ct.element_ty.name != "int1":
                return slow(condition, x, y)
            xv = x.value if type(x) is constexpr else x
            yv = y.value if type(y) is constexpr else y
            if type(xv) is tensor:
                xt = xv.type
                sa = xt.element_ty if type(xt) is block_type else xt
            elif type(yv) is tensor:
                yt = yv.type
                sa = yt.element_ty if type(yt) is block_type else yt
            else:
                return slow(condition, x, y)
            if type(sa) is not scalar or (sa.name not in _FLOATS and sa.name not in _INTS):
                return slow(condition, x, y)
            shape = ct.shape
            handles = []
            for v in (xv, yv):
                if type(v) is not tensor:
                    v = number(v, sa)
                    if v is None:
                        return slow(condition, x, y)
                vt = v.type
                if type(vt) is block_type:
                    if vt.element_ty is not sa and (type(vt.element_ty) is not scalar or vt.element_ty.name != sa.name):
                        return slow(condition, x, y)
                    if vt.shape is not shape and vt.shape != shape:
                        return slow(condition, x, y)
                    handles.append(v.handle)
                else:
                    if type(vt) is not scalar or vt.name != sa.name:
                        return slow(condition, x, y)
                    handles.append(v)
            ty = block_type(sa, shape)
            hs = [h if type(h) is not tensor else b.create_splat(ty, h.handle) for h in handles]
            return tensor(b.create_select(condition.handle, hs[0], hs[1]), ty)

        return where

    for mod in (tl, core):
        scope.set(mod, "where", _shadowed("where", select(getattr(mod, "where")), getattr(mod, "where")))

    pointer_cls = pointer  # (the loaders' first parameter is called pointer, as tl.load's is)
    cache = sem._str_to_load_cache_modifier("")
    eviction = sem._str_to_eviction_policy("")

    def to_block(t, shape, elt):
        """``t`` (a tensor) as a block of ``shape`` cast to ``elt``, as semantic.load/store make their
        ``other``/``value``: a scalar is splat, a block must already have that shape (None otherwise)."""
        tt = t.type
        if type(tt) is block_type:
            if tt.shape is not shape and tt.shape != shape:
                return None
        else:
            ty = block_type(tt, shape)
            t = tensor(b.create_splat(ty, t.handle), ty)
        return sem.cast(t, elt)

    def loader(slow):
        def load(pointer, mask=None, other=None, *rest, **kwargs):
            """tl.load of a block of pointers with an int1 mask block of its shape (or none) and an optional
            ``other``: what semantic.load does for it (splat and cast ``other`` with Triton's own cast, then
            the builder's masked load), without its argument checks and broadcasts."""
            if rest or kwargs or type(pointer) is not tensor:
                return slow(pointer, mask, other, *rest, **kwargs)
            pt = pointer.type
            if type(pt) is not block_type or type(pt.element_ty) is not pointer_cls:
                return slow(pointer, mask, other)
            elt = pt.element_ty.element_ty
            if type(elt) is not scalar or elt.name == "int1":
                return slow(pointer, mask, other)
            shape = pt.shape
            if mask is None:
                if other is not None:
                    return slow(pointer, mask, other)
                return tensor(b.create_load(pointer.handle, cache, eviction, False), block_type(elt, shape))
            mt = mask.type if type(mask) is tensor else None
            if type(mt) is not block_type or (mt.shape is not shape and mt.shape != shape) or type(mt.element_ty) is not scalar \
                    or mt.element_ty.name != "int1":
                return slow(pointer, mask, other)
            if other is not None:
                if type(other) is constexpr:
                    other = other.value
                o = other if type(other) is tensor else sem.to_tensor(other) if type(other) in (int, float) else None
                o = to_block(o, shape, elt) if o is not None else None
                if o is None:
                    return slow(pointer, mask, other)
                other = o
            return tensor(b.create_masked_load(pointer.handle, mask.handle, other.handle if other is not None else None, cache,
                                               eviction, False), block_type(elt, shape))

        return load

    for mod in (tl, core):
        scope.set(mod, "load", _shadowed("load", loader(getattr(mod, "load")), getattr(mod, "load")))

    store_cache = sem._str_to_store_cache_modifier("")
    void = tl.void

    def storer(slow):
        def store(pointer, value, mask=None, *rest, **kwargs):
            """tl.store to a block of pointers with a value of its shape (or a scalar or number, splat) and an
            int1 mask block of its shape (or none): Triton's cast of the value, then the builder's store, as
            semantic.store issues them, without its argument checks and broadcasts."""
            if rest or kwargs or type(pointer) is not tensor:
                return slow(pointer, value, mask, *rest, **kwargs)
            pt = pointer.type
            if type(pt) is not block_type or type(pt.element_ty) is not pointer_cls or pt.element_ty.is_const():
                return slow(pointer, value, mask)
            elt = pt.element_ty.element_ty
            if type(elt) is not scalar or elt.name == "int1":
                return slow(pointer, value, mask)
            shape = pt.shape
            if mask is not None:
                mt = mask.type if type(mask) is tensor else None
                if type(mt) is not block_type or (mt.shape is not shape and mt.shape != shape) or type(mt.element_ty) is not scalar \
                        or mt.element_ty.name != "int1":
                    return slow(pointer, value, mask)
            v = value.value if type(value) is constexpr else value
            v = v if type(v) is tensor else sem.to_tensor(v) if type(v) in (int, float) else None
            v = to_block(v, shape, elt) if v is not None else None
            if v is None:
                return slow(pointer, value, mask)
            if mask is None:
                return tensor(b.create_store(pointer.handle, v.handle, store_cache, eviction), void)
            return tensor(b.create_masked_store(pointer.handle, v.handle, mask.handle, store_cache, eviction), void)

        return store

    for mod in (tl, core):
        scope.set(mod, "store", _shadowed("store", storer(getattr(mod, "store")), getattr(mod, "store")))


# ---------------------------------------------------------------------- tl.max / tl.min / tl.sum
# Each is a @triton.jit helper whose body, for the dtypes below, only calls tl.reduce with its combine
# function (max/min: no bf16 promotion, no upcast below 32 bits, no indices; sum: no dtype picked for
# these dtypes). Calling that reduce directly skips the helper's rewritten body and its argument handling.
_REDUCE_PARAMS = {
    "max": ("input", "axis", "return_indices", "return_indices_tie_break_left", "keep_dims"),
    "min": ("input", "axis", "return_indices", "return_indices_tie_break_left", "keep_dims"),
    "sum": ("input", "axis", "keep_dims", "dtype"),
}
_MINMAX_DTYPES = ("fp32", "fp64", "int32", "int64", "uint32", "uint64")
_SUM_DTYPES = ("fp16", "bf16", "fp32", "fp64", "int32", "int64", "uint32", "uint64")
_reducers: dict[int, tuple[str, Any]] | None = None


def reduce_shortcut(jitfn: Any, args: tuple, kwargs: dict) -> Any:
    """The result of ``jitfn(*args, **kwargs)`` for tl.max / tl.min / tl.sum where the helper's body would
    only call tl.reduce; None where the helper must run."""
    global _reducers
    if not ENABLED:
        return None
    import triton.language as tl

    if _reducers is None:
        std = tl.standard
        _reducers = {id(std.max): ("max", std._elementwise_max), id(std.min): ("min", std._elementwise_min),
                     id(std.sum): ("sum", std._sum_combine)}
    hit = _reducers.get(id(jitfn))
    if hit is None:
        return None
    name, combine = hit
    params = _REDUCE_PARAMS[name]
    if len(args) > len(params):
        return None
    bound = dict(zip(params, args))
    for k, v in kwargs.items():
        if k in bound or k not in params:
            return None
        bound[k] = v
    x = bound.get("input")
    if type(x) is not tl.core.tensor:
        return None
    unwrap = tl.core._unwrap_if_constexpr
    if unwrap(bound.get("return_indices", False)) is not False or unwrap(bound.get("dtype", None)) is not None:
        return None
    ty = x.type
    sca = ty.element_ty if type(ty) is tl.core.block_type else ty
    if type(sca) is not tl.core.dtype or sca.name not in (_SUM_DTYPES if name == "sum" else _MINMAX_DTYPES):
        return None
    return tl.core.reduce(x, bound.get("axis", None), combine, keep_dims=bound.get("keep_dims", False))
