"""Recorded kernels: one launch's builder calls, replayed as straight-line Python on later launches.

Most of a launch's time is not numpy: it is the kernel's own Python and Triton's semantic layer (type
checks, casts, broadcasts, constexpr handling) deciding, for every ``tl.*`` call, which builder method to
call with which handles. For a given kernel and specialisation (constexpr values, argument types, grid
mode, settings) those decisions do not depend on the values, except where the kernel's Python looks at a
value. So a launch of a specialisation records (once launches with the same arguments recurred: see
:func:`recordable`), at the level of the interpreter's builder (with
the runtime's memory, numerics and batched-grid patches in place), every call the kernel body made:

- a **builder call** (``create_add``, ``create_masked_load``, ...): its method name, its arguments (handles
  by the slot that produced them, everything else as recorded constants) and the slot of its result;
- an **opaque call**, where the work happens outside the builder (``tl.reduce`` / ``tl.associative_scan``
  and their runtime wrappers, the integer overflow check, ``.T``): the launch's current function is called
  again at replay with tensors rebuilt from the recorded types, and the builder calls inside it are not
  recorded (they run again inside it);
- a **guard**, wherever the kernel's Python reads a value (``bool(t)`` in an ``if`` or ``while``,
  ``t.__index__()`` in ``range(t)``, ``str(t)``): the value seen. At replay the same conversion runs on the
  new value; any other outcome means the control flow would differ, and the launch is run again from the
  memory it started with, the ordinary way (:class:`Diverged`). Guards on the arguments themselves
  (``range(0, N, BLOCK)``) are checked first, before anything runs, so another ``N`` costs nothing.

The record is compiled into one Python function (one line per call), and later launches of the same
specialisation run that function instead of the kernel. Everything that reads or writes memory, rounds,
checks bounds or counts the deadline is the launch's own builder method, called as before, so results are
bit for bit those of the ordinary path (``tests/test_runtime_trace.py`` checks the corpus with and
without). A replay that raises anything (a finding, an error, a divergence) restores the arguments' bytes
and re-runs the launch the ordinary way, so a finding's program, lane and line read exactly as before.

What is not recorded (the launch runs as before): a handle that did not come from a recorded call or an
argument (a tensor descriptor, say), a result the recorder does not know, traces longer than
:data:`MAX_OPS`. ``ENABLED = False`` turns recording and replay off.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
import threading
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from . import fast as _fast
from .fast import in_range

ENABLED = True
MAX_OPS = 50_000  # calls per recorded pass; a longer body (a long unrolled loop) runs as before
MAX_KEYS = 256  # specialisations kept (least recently used dropped; a trace holds its folded constants)
MAX_TRACES = 4  # traces per specialisation (one per outcome of the argument guards, most recent first)
MAX_FAILS = 3  # replays of a specialisation that diverged or raised before it is no longer recorded
# When a launch records (see recordable): a recording costs about two to three ordinary launches (the
# recorder's wrappers, then compiling ~30 us a line) and a replay saves most of one, so it pays from about three
# replays. Recording a specialisation on its second launch made fuzzing 1.3-1.7x slower: a fuzz run launches
# each case twice (the determinism rerun) and a kernel whose loop counts follow the arguments needs a trace
# per case. So a launch records only once launches with the same arguments recurred.
RECORD_AFTER = 2  # ordinary launches with the same specialisation and argument values before one records

_lock = threading.Lock()
_cache: "OrderedDict[Key, _Entry]" = OrderedDict()
# for tests and the benchmark ("invariant": replays that took their launch-invariant values from the memo)
stats = {"recorded": 0, "replayed": 0, "diverged": 0, "untraceable": 0, "invariant": 0}


class Diverged(Exception):
    """A guard saw another value than the recording: the kernel's control flow differs."""

    def __init__(self, early: bool) -> None:
        super().__init__("early" if early else "late")
        self.early = early


class ReplayFailed(BaseException):
    """A replay raised after it may have touched memory: the launch must re-run the ordinary way.
    A BaseException so that the batched runner's ``except Exception`` (its fallback to one program at a
    time) lets it through to the executor."""


class _Untraceable(Exception):
    pass


class _Entry:
    __slots__ = ("traces", "fails", "keep", "runs")

    def __init__(self, keep: Any) -> None:
        self.traces: list[Trace] = []
        self.fails = 0
        self.keep = keep  # the rewritten kernel: its id is in the key, so it must stay alive
        self.runs: dict[tuple, int] = {}  # argument values -> launches with them that ran the ordinary way


class Key:
    """A trace key: the tuple :func:`key_of` builds, hashed once (a launch looks its key up two or three
    times, and a tuple of tuples hashes every part again on each lookup)."""

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple) -> None:
        self.parts = parts
        self._hash = hash(parts)  # TypeError for an unhashable part (key_of returns None then)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is Key and self._hash == other._hash and self.parts == other.parts)


_type_sigs: dict[int, tuple] = {}  # id(pointer or scalar type) -> (the type, its part of a key)


def _type_sig(ty: Any) -> tuple:
    """A tensor argument's type as part of a key (pointer types are not hashable: by name, constness and
    address space); argument types recur (the launch caches them per dtype), so each is described once."""
    hit = _type_sigs.get(id(ty))
    if hit is None or hit[0] is not ty:
        if len(_type_sigs) > 4096:
            _type_sigs.clear()
        hit = _type_sigs[id(ty)] = (ty, ("t", str(ty), getattr(ty, "const", None),
                                         getattr(ty, "address_space", None)))
    return hit[1]


def key_of(rw: Any, mode: str, settings: Any, kargs: dict) -> Key | None:
    """What a trace is valid for, apart from its guards; None when an argument cannot be part of a key."""
    import triton.language as tl

    tensor = tl.core.tensor

    def sig(v: Any) -> Any:
        if type(v) is tensor:
            return _type_sig(v.type)
        if type(v) is tuple:
            return ("()",) + tuple(sig(x) for x in v)
        hash(v)  # a constexpr or a dtype: part of the key by value
        return ("c", type(v), v)

    try:
        # (a scalar or pointer argument's type inline: most arguments are one)
        parts = tuple([(name, _type_sig(v.type) if type(v) is tensor else sig(v)) for name, v in kargs.items()])
        return Key((id(rw.fn), mode, settings, parts, env_of(rw)))
    except TypeError:
        return None


_names: dict[int, tuple] = {}  # id(rewritten function) -> (it, the global names its code reads)


def _global_names(rw: Any) -> tuple:
    """The global names the rewritten kernel's code (and its helpers') reads, worked out once per function."""
    hit = _names.get(id(rw.fn))
    if hit is not None and hit[0] is rw.fn:
        return hit[1]
    found: dict[str, None] = {}
    for code in rw.codes:
        found.update(dict.fromkeys(code.co_names))
    names = tuple(found)
    _names[id(rw.fn)] = (rw.fn, names)
    return names


def env_of(rw: Any) -> tuple:
    """What the kernel's Python saw besides its arguments: the objects its global names are bound to now
    (a module constant, a helper, ``tl`` itself), the language patch plan (a new one is recorded when
    another tool changed ``triton.language``) and whether the fast paths are on. The objects are held by
    the key, so their ids stay unique while it lives."""
    values = tuple(map(rw.fn.__globals__.get, _global_names(rw)))
    return (_fast.ENABLED, id(_fast._plan), _fast._plan, tuple(map(id, values)), _Held(values))


def same_env(key: Key, rw: Any) -> bool:
    """Whether :func:`env_of` ``(rw)`` would now give ``key``'s part (so a launch with the arguments ``key`` was
    built from has ``key`` again): the same fast-path switch and plan, each global name bound to the same object."""
    env = key.parts[-1]
    if env[0] != _fast.ENABLED or env[2] is not _fast._plan:
        return False
    return all(map(operator.is_, map(rw.fn.__globals__.get, _global_names(rw)), env[4].values))


class _Held:
    """Objects a key keeps alive without comparing them (equal for any two)."""

    __slots__ = ("values",)

    def __init__(self, values: tuple) -> None:
        self.values = values

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Held)

    def __hash__(self) -> int:
        return 0


def inputs_of(kargs: dict) -> list:
    """The handles of every tensor argument, in order (the trace's inputs)."""
    import triton.language as tl

    tensor = tl.core.tensor
    out: list = []

    def walk(v: Any) -> None:
        if type(v) is tensor:
            out.append(v.handle)
        elif type(v) is tuple:
            for x in v:
                walk(x)

    for v in kargs.values():
        walk(v)
    return out


def candidates(key: Key | None) -> list["Trace"]:
    if key is None or not ENABLED:
        return []
    with _lock:
        e = _cache.get(key)
        if e is None:
            return []
        _cache.move_to_end(key)
        return list(e.traces)


def recordable(key: Key | None, inputs: list, keep: Any = None) -> bool:
    """Whether this launch, which no trace of its specialisation replays, should record one: once
    :data:`RECORD_AFTER` launches with the same arguments (``inputs``: their handles; the values, pointers
    included, are all a guard on the arguments can read) ran the ordinary way, and while the
    specialisation's replays have failed fewer than :data:`MAX_FAILS` times."""
    if key is None or not ENABLED:
        return False
    values = tuple(h.data.tobytes() if type(h.data) is np.ndarray else repr(h.data) for h in inputs)
    with _lock:
        e = _cache.get(key)
        if e is None:
            e = _cache[key] = _Entry(keep)
            while len(_cache) > MAX_KEYS:
                _cache.popitem(last=False)
        n = e.runs.get(values, 0)
        if n < RECORD_AFTER or e.fails >= MAX_FAILS:
            if len(e.runs) >= 64:
                e.runs.clear()
            e.runs[values] = n + 1
            return False
        del e.runs[values]
        return True


def store(key: Key, trace: "Trace", keep: Any) -> None:
    with _lock:
        e = _cache.get(key)
        if e is None:
            e = _cache[key] = _Entry(keep)
            while len(_cache) > MAX_KEYS:
                _cache.popitem(last=False)
        e.traces.insert(0, trace)
        del e.traces[MAX_TRACES:]
        stats["recorded"] += 1


def replayed(t: "Trace") -> None:
    """A launch replayed ``t`` (counted once per launch); rebuilds it with direct lines once it has been
    replayed :data:`UPGRADE_AFTER` times (after this launch's first pass: its next launch replays the rebuilt
    trace)."""
    t.launches += 1
    stats["replayed"] += 1
    if t.plan is not None and t.launches >= UPGRADE_AFTER:
        t.upgrade()


def failed(key: Key, trace: "Trace") -> None:
    """A replay of ``trace`` diverged after its start or raised: drop it, count it against the key."""
    with _lock:
        e = _cache.get(key)
        if e is None:
            return
        if trace in e.traces:
            e.traces.remove(trace)
        e.fails += 1
        stats["diverged"] += 1


def clear() -> None:
    with _lock:
        _cache.clear()
        _Memo.clear_all()


# ---------------------------------------------------------------------- recording
class Recorder:
    """Records one pass of a kernel body (see the module docstring)."""

    def __init__(self, inputs: list) -> None:
        import triton.language as tl

        self.tl = tl
        self.TH = None
        self.slots: dict[int, int] = {}  # id(handle) -> slot
        self.handles: list = []  # every slot's handle (kept alive: ids stay unique while recording)
        self.lines: list[tuple[str, int | None, bool]] = []  # (code, slot it defines or None, folded)
        self.dep: set[int] = set()  # slots whose value can differ between replays (the rest are folded)
        self.touched = False  # the call being encoded reads a slot in dep
        # launch-invariant values (see _Memo): the slots that can differ between two replays whose arguments and
        # program ids are equal (what memory and effects return, and everything computed from them), the lines
        # that compute only from arguments, program ids and constants, and the program-id lines (the memo's key)
        self.vary: set[int] = set()
        self.varied = False  # the call being encoded reads a slot in vary
        self.invariant: set[int] = set()  # line numbers
        self.roots: list[int] = []  # line numbers of program-id calls
        self.guards_pre: list[str] = []
        self.pre_lean = True  # every argument guard is computed from the data (see guard)
        self.consts: list = []
        self.const_ids: dict[int, int] = {}
        self.depth = 0
        self.ok = True
        self.calls: dict[int, tuple] = {}  # line -> (builder method, arguments) of calls _direct may replace
        self.n_inputs = len(inputs)
        for h in inputs:
            self.dep.add(self._define(h))

    # -------------------------------------------------------------- encoding
    def _define(self, h: Any) -> int:
        s = len(self.handles)
        self.handles.append(h)
        self.slots[id(h)] = s
        return s

    def _const(self, x: Any) -> str:
        return _intern(self.consts, self.const_ids, x)

    def _slot(self, h: Any) -> int:
        s = self.slots.get(id(h))
        if s is None or self.handles[s] is not h:
            raise _Untraceable("a handle that no recorded call produced")
        if s in self.dep:
            self.touched = True
        if s in self.vary:
            self.varied = True
        return s

    def _enc(self, x: Any) -> str:
        t = type(x)
        if t is self.TH:
            return f"v{self._slot(x)}"
        if t is self.tl.core.tensor:
            return f"T(v{self._slot(x.handle)}, {self._const(x.type)})"
        if x is None or t is bool or t is int or t is str:
            return repr(x)
        if t is list:
            return "[" + ", ".join(self._enc(v) for v in x) + "]"
        if t is tuple:
            return "(" + "".join(self._enc(v) + ", " for v in x) + ")"
        if t is dict:
            raise _Untraceable("a dict argument")
        return self._const(x)

    def _call(self, target: str, args: tuple, kwargs: dict) -> str:
        self.touched = self.varied = False
        parts = [self._enc(a) for a in args] + [f"{k}={self._enc(v)}" for k, v in kwargs.items()]
        return f"{target}({', '.join(parts)})"

    def _outputs(self, out: Any, expr: str, handles: bool, pure: bool, root: bool = False) -> None:
        """Emit ``expr`` and bind the handles it returns (builder results are handles, opaque results
        tensors). A call that is ``pure`` (no effect but its result) and read no slot that can differ
        between replays is folded: its recorded results are constants of the trace. One that is pure, or a
        program id (``root``), and read nothing memory or an effect gave is launch-invariant."""
        folded = pure and not self.touched
        inv = (pure or root) and not self.varied
        first = len(self.lines)
        self._emit(out, expr, handles, folded)
        for n in range(first, len(self.lines)):
            if not self.lines[n][2]:
                if inv:
                    self.invariant.add(n)
                if root and self.lines[n][1] is not None:
                    self.roots.append(n)
            if not inv and self.lines[n][1] is not None:
                self.vary.add(self.lines[n][1])

    def _emit(self, out: Any, expr: str, handles: bool, folded: bool) -> None:
        TH, tensor = self.TH, self.tl.core.tensor

        def handle_of(x: Any) -> Any:
            if handles:
                return x if type(x) is TH else _MISSING
            return x.handle if type(x) is tensor and type(x.handle) is TH else _MISSING

        if out is None:
            if not folded:
                self.lines.append((expr, None, False))
            return
        if type(out) is tuple or type(out) is list:
            hs = [handle_of(x) for x in out]
            if any(h is _MISSING for h in hs):
                raise _Untraceable(f"a result of {type(out[0]).__name__}")
            if not folded:
                self.lines.append((f"_r = {expr}", None, False))
            for i, h in enumerate(hs):
                s = self._define(h)
                if not folded:
                    self.dep.add(s)
                self.lines.append((f"v{s} = _r[{i}]" + ("" if handles else ".handle"), s, folded))
            return
        h = handle_of(out)
        if h is _MISSING:
            if handles and expr.startswith("b.get_") and expr.split("(")[0].endswith("_ty"):
                return  # a type, not a value
            raise _Untraceable(f"a result of {type(out).__name__}")
        s = self._define(h)
        if not folded:
            self.dep.add(s)
        self.lines.append((f"v{s} = {expr}" + ("" if handles else ".handle"), s, folded))

    def _note_builder(self, name: str, f: Callable, args: tuple, kwargs: dict, out: Any, expr: str,
                      pure: bool, root: bool = False) -> None:
        n = len(self.lines)
        self._outputs(out, expr, True, pure, root)
        if not kwargs and len(self.lines) == n + 1 and not self.lines[n][2] and (
                name in _DIRECT and getattr(f, "__module__", None) in _DIRECT_FROM or name in _WIDENING
                or name == "create_expand_dims"):
            self.calls[n] = (name, args)

    def _fail(self) -> None:
        self.ok = False
        stats["untraceable"] += 1

    # -------------------------------------------------------------- the wrappers
    def _record_then_run(self, f: Callable, args: tuple, kwargs: dict, expr_of: Callable[[], Any],
                         note: Callable[[Any, Any], None]) -> Any:
        """Run ``f``; record it as ``expr_of()`` (before the call: its arguments' slots) and note its outputs with
        ``note(out, expr)`` (after). Calls ``f`` makes are not recorded (depth; the wrappers call this only at depth 0
        of a recording still going); an untraceable step ends the recording, never the launch."""
        try:
            expr = expr_of()
        except _Untraceable:
            self._fail()
            expr = None
        self.depth += 1
        try:
            out = f(*args, **kwargs)
        finally:
            self.depth -= 1
        if expr is not None and self.ok:
            try:
                note(out, expr)
            except _Untraceable:
                self._fail()
        return out

    def builder_method(self, name: str, f: Callable) -> Callable:
        rec = self
        pure = not any(w in name for w in _IMPURE)
        root = name in _ROOTS

        def call(*args, **kwargs):
            if rec.depth or not rec.ok:  # the hot path, before building the closures below
                return f(*args, **kwargs)
            return rec._record_then_run(f, args, kwargs, lambda: rec._call(f"b.{name}", args, kwargs),
                                        lambda out, expr: rec._note_builder(name, f, args, kwargs, out, expr, pure,
                                                                            root))

        return call

    def opaque(self, index: int, f: Callable) -> Callable:
        """A call whose work happens outside the builder: recorded as one call of ``O[index]``."""
        rec = self
        is_reduce = self.targets[index][1] == "reduce"
        is_overflow = self.targets[index][1] == "binary_op_sanitize_overflow_impl"

        def call(*args, **kwargs):
            if rec.depth or not rec.ok:
                return f(*args, **kwargs)
            fast = []  # set when the reduction is recorded in its fast form, which returns its one result's handle

            def expr_of():
                expr = rec._call(f"O[{index}]", args, kwargs)
                if is_overflow:
                    pre = rec._overflow_precheck(args, kwargs)
                    if pre is not None:
                        return f"{pre} or {expr}"
                if is_reduce:
                    one = rec._reduce_expr(args, kwargs)
                    if one is not None:
                        fast.append(True)
                        return one
                return expr

            def note(out, expr):
                if not fast:
                    rec._outputs(out, expr, False, True)
                elif type(out) is not rec.tl.core.tensor:
                    raise _Untraceable("a reduction without one tensor result")
                else:
                    rec._outputs(out.handle, expr, True, True)

            return rec._record_then_run(f, args, kwargs, expr_of, note)

        return call

    def _overflow_precheck(self, args: tuple, kwargs: dict) -> str | None:
        """For Triton's integer overflow check of ``lhs <op> rhs`` (add, sub or mul of two blocks or scalars of
        one integer type narrower than 64 bits): an expression true when every value of the operands' ranges
        combined stays inside the type (:func:`gpuemu.runtime.fast.in_range`, as the runtime's own check decides),
        so the check, which passes then, need not run.
        Anything else is checked as recorded."""
        tl = self.tl
        if kwargs or len(args) != 3:
            return None
        lhs, rhs, binop = args
        if type(lhs) is not tl.core.tensor or type(rhs) is not tl.core.tensor:
            return None
        sca, rs = lhs.type.scalar, rhs.type.scalar
        op = getattr(binop, "__name__", "")
        if type(sca) is not tl.core.dtype or type(rs) is not tl.core.dtype or sca.name != rs.name \
                or not sca.is_int() or sca.int_bitwidth >= 64 or op not in ("add", "sub", "mul"):
            return None
        return (f"IR({self._operand_range(lhs.handle)}, {self._operand_range(rhs.handle)}, {op!r}, "
                f"{sca.get_int_min_value()}, {sca.get_int_max_value()})")

    def _operand_range(self, h: Any) -> str:
        """An operand of the overflow pre-check: its data, or for a recorded constant (the same array at every
        replay: an arange, a splat of a constexpr) its (min, max), found once here."""
        s = self._slot(h)
        data = h.data
        if s not in self.dep and type(data) is np.ndarray and data.size and data.dtype.kind in "iu":
            return f"({int(data.min())}, {int(data.max())})"
        return f"v{s}.data"

    def _reduce_expr(self, args: tuple, kwargs: dict) -> str | None:
        """``tl.reduce(x, axis, combine_fn, keep_dims)`` as one numpy reduction (:func:`_reduce`) where the
        launch's chain (batched grid, numerics, the interpreter's ReduceOps) computes exactly that: one
        fp32/fp64/int32/int64 block, an integer axis, tl.max / tl.min / tl.sum's combine function."""
        tl = self.tl
        names = ("input", "axis", "combine_fn", "keep_dims")
        if len(args) > 4 or any(k not in names for k in kwargs):
            return None
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k in bound:
                return None
            bound[k] = v
        x, axis, fn = bound.get("input"), bound.get("axis"), bound.get("combine_fn")
        keep = bound.get("keep_dims", False)
        axis = axis.value if type(axis) is tl.constexpr else axis
        keep = keep.value if type(keep) is tl.constexpr else keep
        if type(x) is not tl.core.tensor or type(x.type) is not tl.core.block_type or type(axis) is not int \
                or type(keep) is not bool:
            return None
        sca = x.type.element_ty
        if type(sca) is not tl.core.dtype or sca.name not in ("fp32", "fp64", "int32", "int64"):
            return None
        std = tl.standard
        # (the ufunc reductions np.nanmax / np.nanmin / np.sum run for an ndarray, without their Python wrappers)
        op = {id(std._elementwise_max): np.fmax.reduce, id(std._elementwise_min): np.fmin.reduce,
              id(std._sum_combine): np.add.reduce}.get(id(fn))
        rank = len(x.type.shape)
        if op is None or not 0 <= axis < rank:
            return None
        from ._compat import interp

        npd = interp()._get_np_dtype(sca)
        return (f"R(v{self._slot(x.handle)}, {axis}, {self._const(op)}, {keep}, {self._const(npd)}, "
                f"{self._const(sca)}, {rank}, TH)")

    def transpose(self, prop: property) -> property:
        rec = self

        def get(t):
            if rec.depth or not rec.ok:
                return prop.fget(t)
            try:
                rec.touched = rec.varied = False
                expr = f"{rec._enc(t)}.T"
            except _Untraceable:
                rec._fail()
                expr = None
            rec.depth += 1
            try:
                out = prop.fget(t)
            finally:
                rec.depth -= 1
            if expr is not None and rec.ok:
                try:
                    rec._outputs(out, expr, False, True)
                except _Untraceable:
                    rec._fail()
            return out

        return property(get)

    def guard(self, conv: str, f: Callable) -> Callable:
        """``bool`` / ``operator.index`` / ``str`` / ``repr`` of a tensor: its result must recur."""
        rec = self

        def call(t):
            out = f(t)
            if rec.depth or not rec.ok:
                return out
            try:
                s = rec._slot(t.handle)
                expr = f"{conv}(T(v{s}, {rec._const(t.type)}))"
                want = repr(out) if type(out) in (bool, int) else rec._const(out)
            except _Untraceable:
                rec._fail()
                return out
            if s not in rec.dep:  # a folded value: the same at every replay
                return out
            if s < rec.n_inputs:
                # an argument (a scalar, never with a program axis): what the interpreter's conversions
                # compute from its data, without a tensor or the language patches
                if conv == "index":
                    expr = f"int(v{s}.data.squeeze())"
                elif conv == "bool":
                    expr = f"(bool(v{s}.data) if v{s}.data.size == 1 else True)"
                else:
                    rec.pre_lean = False
                rec.guards_pre.append(f"if {expr} != {want}: raise D(True)")
            else:
                if s not in rec.vary:  # (the same value at every replay with these arguments and program ids)
                    rec.invariant.add(len(rec.lines))
                rec.lines.append((f"if {expr} != {want}: raise D(False)", None, False))
            return out

        return call

    # -------------------------------------------------------------- installing and finishing
    def install(self, scope: Any, builder: Any, sem: Any) -> None:
        """Wrap the launch's current builder methods, reductions, scans, overflow check and tensor
        conversions (call after every other patch of the pass is in)."""
        import operator

        tl = self.tl
        it = type(builder).__module__
        import sys

        self.TH = sys.modules[it].TensorHandle
        for name in dir(builder):
            if name.startswith(("create_", "get_")) and not name.endswith("_ty"):
                f = getattr(builder, name, None)
                if callable(f):
                    scope.set(builder, name, self.builder_method(name, f))
        self.targets: list[tuple[Any, str]] = []
        for obj, name in ((tl, "reduce"), (tl.core, "reduce"), (tl, "associative_scan"),
                          (tl.core, "associative_scan"), (sem, "binary_op_sanitize_overflow_impl")):
            if hasattr(obj, name):
                self.targets.append((obj, name))
                scope.set(obj, name, self.opaque(len(self.targets) - 1, getattr(obj, name)))
        tensor = tl.core.tensor
        scope.set(tensor, "T", self.transpose(tensor.__dict__["T"]))
        for dunder, conv in (("__bool__", "bool"), ("__index__", "index"), ("__str__", "str"),
                             ("__repr__", "repr")):
            scope.set(tensor, dunder, self.guard(conv, getattr(tensor, dunder)))
        self._index = operator.index

    def finish(self) -> "Trace | None":
        if not self.ok or len(self.lines) > MAX_OPS:
            if self.ok:
                stats["untraceable"] += 1
            return None

        _mark_benign_checks(self.lines, self.targets)
        # the slots the live lines read, and of those the ones whose handle attributes (the batched grid's
        # "_rank") are read: by expand_dims and gather, maybe by what an opaque call runs; only those handles get
        # their recorded attributes back at replay
        self.used, ranked = set(), set()
        for code, _, folded in self.lines:
            if folded:
                continue
            slots = {int(m) for m in _SLOT.findall(code)}
            self.used |= slots
            if "create_expand_dims(" in code or "create_gather(" in code or "O[" in code:
                ranked |= slots
        plan = _Plan(self, ranked)
        upgradable = DIRECT and bool(plan.calls) or MEMO and bool(plan.invariant)
        source = None
        if upgradable and UPGRADE_AFTER == 0:  # built with direct lines and a memo at once (see UPGRADE_AFTER)
            try:
                source = plan.direct_source()
                ns: dict[str, Any] = {}
                exec(compile(source, "<gpuemu recorded kernel>", "exec"), ns)
                upgradable = False
            except Exception:  # noqa: BLE001 - as recorded, then
                source = None
        if source is None:
            source = plan.source({}, set())
            ns = {}
            exec(compile(source, "<gpuemu recorded kernel>", "exec"), ns)
        t = Trace(ns["_replay"], tuple(plan.consts), tuple(self.targets), len(self.lines))
        if upgradable:
            t.plan = plan  # direct lines and a memo once launches replay it: see Trace.upgrade
        # a replay that needs no language patch: no guard (tensor conversions), no transpose property, no
        # opaque call but the overflow check (which calls only the semantic layer and the builder)
        live = [code for code, _, folded in self.lines if not folded]
        sanitize = {i for i, (_, name) in enumerate(self.targets) if name == "binary_op_sanitize_overflow_impl"}
        t.lean = self.pre_lean and not any(
            "raise D(" in code or ".T" in code or any(int(i) not in sanitize for i in re.findall(r"O\[(\d+)\]", code))
            for code in live)
        t.source = source
        return t


_ARITH = re.compile(r"\bb\.create_(?:add|sub|mul)\(v(\d+), v(\d+)\)")
_CHECKED = re.compile(r"\bO\[(\d+)\]\(T\(v(\d+), [^)]*\), T\(v(\d+), ")


def _mark_benign_checks(lines: list, targets: list) -> None:
    """Mark the integer overflow checks whose operation's result never reaches an address (``benign=True`` in
    the recorded call): a replay that sees such an op wrap goes on (a hash, an RNG step, a value stored as
    data), one that sees any other wrap falls back to the ordinary path, which names it
    (:mod:`gpuemu.runtime.overflow`). Reaching is what the ordinary path's notes follow: from the operands of
    ``addptr`` / ``int_to_ptr`` back through every recorded call but the ones that drop a note."""
    from .overflow import _DROP

    sanitize = {i for i, (_, name) in enumerate(targets) if name == "binary_op_sanitize_overflow_impl"}
    if not sanitize:
        return
    made: dict[int, int] = {}  # slot -> the line that defines it
    for n, (code, slot, _) in enumerate(lines):
        if slot is not None:
            made[slot] = n
    todo = [int(m) for code, _, folded in lines if not folded and ("b.create_addptr(" in code
            or "b.create_int_to_ptr(" in code) for m in _SLOT.findall(code.split(" = ", 1)[-1])]
    reach: set[int] = set()
    while todo:
        s = todo.pop()
        if s in reach:
            continue
        reach.add(s)
        n = made.get(s)
        if n is None:
            continue
        code = lines[n][0]
        call = re.search(r"\bb\.(create_\w+)\(", code)
        if call is not None and call.group(1).startswith(_DROP):
            continue
        todo += [int(m) for m in _SLOT.findall(code.split(" = ", 1)[-1]) if int(m) != s]
    for n, (code, slot, folded) in enumerate(lines):
        m = _CHECKED.search(code)
        if folded or m is None or int(m.group(1)) not in sanitize or not code.endswith(")"):
            continue
        a, b = m.group(2), m.group(3)
        for k in range(n + 1, min(len(lines), n + 64)):
            op = _ARITH.search(lines[k][0])
            if op is not None and op.group(1) == a and op.group(2) == b:
                if lines[k][1] not in reach:
                    lines[n] = (code[:-1] + ", benign=True)", slot, folded)
                break


def _intern(consts: list, ids: dict[int, int], x: Any) -> str:
    """``x`` as a constant of the trace (``C[k]``), each object once."""
    k = ids.get(id(x))
    if k is None or consts[k] is not x:
        k = len(consts)
        consts.append(x)
        ids[id(x)] = k
    return f"C[{k}]"


class _Ref:
    """A recorded handle as a direct line needs it: its slot, data dtype and shape, and Triton type."""

    __slots__ = ("slot", "dtype", "shape", "ty", "plain")

    def __init__(self, slot: int, h: Any) -> None:
        data = h.data
        self.slot, self.ty = slot, h.dtype
        self.plain = type(data) is np.ndarray and getattr(h.dtype, "name", "") != "bf16"
        self.dtype, self.shape = (data.dtype, data.shape) if type(data) is np.ndarray else (None, None)


class _Plan:
    """What a trace's source is built from, without the recorded data: the lines, the folded constants and
    handle attributes as constant expressions, and the builder calls a direct line may replace with their
    operands and results described by :class:`_Ref` (so a trace can be rebuilt with direct lines later,
    holding only dtypes and shapes)."""

    def __init__(self, rec: Recorder, ranked: set[int]) -> None:
        self.lines, self.guards_pre, self.n_inputs = rec.lines, rec.guards_pre, rec.n_inputs
        self.consts, self.const_ids = rec.consts, rec.const_ids
        self.invariant, self.roots = rec.invariant, rec.roots
        # (a memo's key is the bytes of the arguments and program ids)
        self.keyable = all(type(rec.handles[s].data) is np.ndarray for s in range(rec.n_inputs))
        self.folded = {s: rec._const(rec.handles[s]) for code, s, folded in rec.lines
                       if folded and s is not None and s in rec.used}
        self.attrs: dict[int, str] = {}
        for _, s, folded in rec.lines:
            attr = getattr(rec.handles[s], "attr", None) if s is not None and not folded and s in ranked else None
            if attr:
                self.attrs[s] = rec._const(dict(attr))
        TH = rec.TH
        self.calls: dict[int, tuple] = {}
        self.outs: dict[int, tuple] = {}  # slot -> (its _Ref, its recorded attributes)
        if DIRECT:
            refs: dict[int, _Ref] = {}  # one per slot, however many calls read it
            slots, handles = rec.slots, rec.handles

            def ref(a: Any) -> Any:
                if type(a) is not TH:
                    return a
                k = slots.get(id(a))
                if k is None:
                    return a
                r = refs.get(k)
                if r is None:
                    r = refs[k] = _Ref(k, a)
                return r

            for n, (name, args) in rec.calls.items():
                s = rec.lines[n][1]
                if s is not None:
                    self.calls[n] = (name, tuple(map(ref, args)))
                    h = handles[s]
                    self.outs[s] = (ref(h), getattr(h, "attr", None) or None)

    def const(self, x: Any) -> str:
        return _intern(self.consts, self.const_ids, x)

    def source(self, direct: dict[int, str], dead: set[int], memo: bool = False) -> str:
        """The replay function's text: every live line in order; with ``memo``, where some of them are
        launch-invariant, the form that computes those only for arguments and program ids it has not seen
        (:meth:`_memo_source`)."""
        if memo and self.keyable:
            text = self._memo_source(direct, dead)
            if text is not None:
                return text
        consts, live = self._parts(direct, dead)
        body = self._prologue() + ["    " + c for c in consts] + ["    " + t for _, text in live for t in text]
        body.append("    return None")
        return "\n".join(body)

    def _prologue(self) -> list[str]:
        """The function's header, the arguments unpacked and the guards on them."""
        body = [_HEADER]
        if self.n_inputs:
            body.append("    " + "".join(f"v{i}, " for i in range(self.n_inputs)) + "= I")
        return body + ["    " + g for g in self.guards_pre]

    def _parts(self, direct: dict[int, str], dead: set[int]) -> tuple[list[str], list[tuple[int, list[str]]]]:
        """(the folded constants' assignments, every live line as (its number, its text lines: the call, direct
        where ``direct`` has it, then the attributes its handle gets back)); ``dead`` lines are left out."""
        consts, live = [], []
        for n, (code, s, folded) in enumerate(self.lines):
            if folded:
                if s in self.folded:
                    consts.append(f"v{s} = {self.folded[s]}")
                continue
            if n in dead:
                continue
            attrs = [f"v{s}.attr.update({self.attrs[s]})"] if s in self.attrs else []
            live.append((n, [direct.get(n, code)] + attrs))
        return consts, live

    def _memo_source(self, direct: dict[int, str], dead: set[int]) -> str | None:
        """Constants and program ids first; then, keyed by the bytes of the arguments and program ids, either
        every line (a key not in the trace's memo ``M``: the launch-invariant values later lines read are put
        in it at the end) or only the lines that are not launch-invariant, after the memo's values. None
        where no line would be skipped."""
        roots = set(self.roots)
        consts, live = self._parts(direct, dead)
        rooted = [(n, text) for n, text in live if n in roots]
        running = [(n, text) for n, text in live if n not in roots]
        skipped = [n for n, _ in running if n in self.invariant]
        if not skipped:
            return None
        made = {self.lines[n][1] for n in skipped if self.lines[n][1] is not None}
        read: set[int] = set()
        for n, text in running:
            if n not in self.invariant:
                for t in text:
                    read |= {int(m) for m in _SLOT.findall(_ASSIGNED.sub("", t, count=1))}
        kept = sorted(made & read)
        values = "(" + "".join(f"v{s}, " for s in kept) + ")"
        key = "(" + "".join(f"v{i}.data.tobytes(), " for i in range(self.n_inputs)) \
            + "".join(f"v{self.lines[n][1]}.data.tobytes(), " for n, _ in rooted) + ")"
        body = self._prologue() + ["    " + c for c in consts]
        body += ["    " + t for _, text in rooted for t in text]
        body += [f"    _k = {key}", "    _m = M.get(_k)", "    if _m is None:"]
        for n, text in running:
            body += ["        " + t for t in text]
            s = self.lines[n][1]
            if s in made and s in read:  # (read-only from here on, as a reuse gives it: see _Memo)
                body.append(f"        M.freeze(v{s})")
        body += [f"        M.put(_k, {values})", "    else:"]
        body.append(f"        {values[1:-1]} = _m" if kept else "        pass")
        body += ["        " + t for n, text in running if n not in self.invariant for t in text]
        body.append("    return None")
        return "\n".join(body)

    def direct_source(self) -> str:
        """The source with direct lines (:func:`_direct`) and without the widened blocks no line reads."""
        direct, widened = _direct(self)
        if widened:  # the overflow pre-check reads a widened block's range: its operand's is the same
            for n, (code, _, folded) in enumerate(self.lines):
                if not folded and code.startswith("IR(") and " or " in code:
                    direct[n] = _narrow_check(code, widened)
        read: set[int] = set()
        for n, (code, _, folded) in enumerate(self.lines):
            if not folded:
                read |= {int(m) for m in _SLOT.findall(direct.get(n, code).split(" = ", 1)[-1])}
        read |= {int(m) for g in self.guards_pre for m in _SLOT.findall(g)}
        dead = {n for n, (name, _) in self.calls.items() if name in _WIDENING and self.lines[n][1] not in read}
        return self.source(direct, dead, memo=MEMO)


def _direct(plan: _Plan) -> tuple[dict[int, str], dict[int, tuple[str, str]]]:
    """Lines that compute in numpy directly instead of calling the builder: a call of an elementwise
    method (:data:`_DIRECT`) that was the interpreter's own (or the runtime's numerics wrapper, which
    changes nothing but bf16) on handles none of which is bf16, whose numpy function is shown, once per
    process, to give the interpreter's method's result bit for bit (:func:`_direct_ops`), and whose
    result at recording had the dtype and shape the numpy function gives for these operands (so the
    interpreter cast nothing). An operand that a splat or broadcast widened is taken before it where
    numpy's broadcasting gives the result's shape (its values are the widened block's), so the block
    need not be built; an expand_dims is a view with the new axis where the recording shows it goes.
    Returns (line -> its code, widened slot -> (its operand's data expression, the widening call to run
    again where the block is still needed))."""
    ops = _direct_ops()
    widened: dict[int, tuple] = {}  # slot -> (operand expression shaped to broadcast alike, (dtype, shape),
    #                                 the operand's own data expression, the call that widened it)
    for n, (name, args) in plan.calls.items():
        code, s, _ = plan.lines[n]
        if name not in _WIDENING:
            continue
        src = args[1] if name == "create_splat" else args[0]
        out, attr = plan.outs[s]
        if type(src) is not _Ref or src.dtype is None or out.dtype is None or src.dtype != out.dtype:
            continue  # (a widening that also converts: its operand does not stand for it)
        r, own = len(out.shape), f"v{src.slot}.data"
        call = code.split(" = ", 1)[1]
        if attr:  # (the handle the call makes again gets the attributes it had)
            call = f"{plan.const(_with_attr)}({call}, {plan.const(dict(attr))})"
        if name == "create_splat" and len(src.shape) == 1 and src.shape[0] > 1:  # one value per program
            widened[s] = (f"{own}[:{', None' * (r - 1)}]", (src.dtype, (src.shape[0],) + (1,) * (r - 1)), own, call)
        else:
            widened[s] = (own, (src.dtype, src.shape), own, call)
    direct: dict[int, str] = {}
    for n, (name, args) in plan.calls.items():
        code, s, _ = plan.lines[n]
        out = plan.outs[s][0]
        if out.dtype is None:
            continue
        if name == "create_expand_dims":  # a view with a new axis: the recorded one shows where it goes
            src, axis = args
            if type(src) is not _Ref or src.dtype != out.dtype or type(axis) is not int:
                continue
            for ax in (axis + 1, axis):  # (with a program axis in front, or without)
                if 0 <= ax <= len(src.shape) and out.shape == src.shape[:ax] + (1,) + src.shape[ax:]:
                    at = "".join(":, " for _ in range(ax)) + "None"
                    direct[n] = f"v{s} = TH(v{src.slot}.data[{at}], {plan.const(out.ty)})"
                    break
            continue
        fn = ops.get(name)
        if fn is None or not all(type(a) is _Ref and a.plain for a in args):
            continue
        if fn is _AddPtr:
            elt = getattr(args[0].ty, "element_ty", None)
            if elt is None:
                continue
            fn = _AddPtr(max(1, elt.primitive_bitwidth // 8))
        plain = [(f"v{a.slot}.data", (a.dtype, a.shape)) for a in args]
        narrow = [widened[a.slot][:2] if a.slot in widened else p for a, p in zip(args, plain)]
        for operands in ([narrow, plain] if narrow != plain else [plain]):
            # the same dtype and shape as the recorded result: the interpreter's method computed fn on these
            # operands' data (shown for the method by _direct_ops) and cast nothing; a narrow operand
            # broadcasts to the values of the block it stands for
            if _result_dtype(fn, tuple(d for _, (d, _) in operands)) == out.dtype \
                    and _broadcast_shape(tuple(sh for _, (_, sh) in operands)) == out.shape:
                direct[n] = f"v{s} = TH({plan.const(fn)}({', '.join(e for e, _ in operands)}), {plan.const(out.ty)})"
                break
    return direct, {s: (w[2], w[3]) for s, w in widened.items()}


_MISSING = object()

MEMO = True  # upgraded traces keep their launch-invariant values per key (see _Memo)
MEMO_KEYS = 64  # keys a trace's memo keeps (the oldest goes first): a pass of a batched launch, a program of a
#                sequential one has its own
MEMO_TRIES = 2 * MEMO_KEYS  # keys a memo stores with no value reused before it stops storing (a sequential grid of
#                             more programs than it keeps, say, would only evict)
MEMO_BYTES = 64 << 20  # array bytes all memos hold together (the least recently stored go first)


class _Memo:
    """One trace's launch-invariant values by key: what the lines that read neither memory nor an effect
    computed from the launch's arguments and program ids (addresses, masks, offsets, their overflow checks),
    kept for a later replay with the same arguments and program ids (a training step's relaunch, a fuzz case
    run on other values), which then runs only the other lines. The arrays kept are made read-only: a write to
    one raises, and the launch runs the ordinary way. Bounded: :data:`MEMO_KEYS` keys per trace,
    :data:`MEMO_BYTES` over every trace."""

    __slots__ = ("entries", "stored", "reused")
    _order: "OrderedDict[tuple, int]" = OrderedDict()  # (memo id, key) -> bytes, the least recently stored first
    _memos: "dict[int, _Memo]" = {}
    _bytes = 0

    def __init__(self) -> None:
        self.entries: dict[tuple, tuple] = {}
        self.stored = self.reused = 0

    def get(self, key: tuple) -> tuple | None:
        values = self.entries.get(key)
        if values is not None:
            self.reused += 1
            stats["invariant"] += 1
        return values

    def freeze(self, h: Any) -> None:
        """Make a value the memo will keep read-only as soon as it is computed (so what reads it in this
        replay, the arena's lanes, already sees it as a reuse will); not where the memo stopped storing."""
        if type(h.data) is np.ndarray and (self.reused or self.stored < MEMO_TRIES):
            h.data.flags.writeable = False

    def put(self, key: tuple, values: tuple) -> None:
        if self.stored >= MEMO_TRIES and not self.reused:
            return
        self.stored += 1
        size = 0
        for h in values:
            d = h.data
            if type(d) is np.ndarray:
                size += d.nbytes
        if size > MEMO_BYTES // 8:
            return
        for h in values:
            if type(h.data) is np.ndarray:
                h.data.flags.writeable = False
        cls = _Memo
        with _lock:
            if key in self.entries:
                cls._drop(id(self), key)
            elif len(self.entries) >= MEMO_KEYS:
                cls._drop(id(self), next(iter(self.entries)))
            self.entries[key] = values
            cls._memos[id(self)] = self  # (kept while it holds an entry: its id stays its own)
            cls._order[(id(self), key)] = size
            cls._bytes += size
            while cls._bytes > MEMO_BYTES:
                cls._drop(*next(iter(cls._order)))

    @classmethod
    def _drop(cls, mid: int, key: tuple) -> None:
        memo = cls._memos[mid]
        del memo.entries[key]
        cls._bytes -= cls._order.pop((mid, key))
        if not memo.entries:
            del cls._memos[mid]

    @classmethod
    def clear_all(cls) -> None:
        for m in cls._memos.values():
            m.entries.clear()
        cls._memos.clear()
        cls._order.clear()
        cls._bytes = 0

DIRECT = True  # elementwise builder calls computed in numpy directly at replay (see _direct)
# launches that replay a trace before it is rebuilt with direct lines and a memo (trace.Trace.upgrade); 0: built
# so when recorded. A specialisation records only once launches with the same arguments recurred
# (RECORD_AFTER), so its next launches are likely to replay: building it at once costs the recording launch
# about what the rebuild would cost the first replay, and the next launch reuses invariant values already
UPGRADE_AFTER = 0


class _AddPtr:
    """``create_addptr`` for one element size: the pointers plus size times the offsets as uint64 (what the
    interpreter computes; the probe in :func:`_direct_ops` shows it)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, ptrs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        return ptrs + self.size * offsets.astype(np.uint64)

    def __eq__(self, other: object) -> bool:
        return type(other) is _AddPtr and other.size == self.size

    def __hash__(self) -> int:
        return hash(self.size)


# builder methods a replay may compute directly: the numpy function the interpreter's method applies to
# its operands' data (binary_op, unary_op, ternary_op(np.where))
_DIRECT = {
    "create_fadd": np.add, "create_fsub": np.subtract, "create_fmul": np.multiply, "create_fdiv": np.divide,
    "create_add": np.add, "create_sub": np.subtract, "create_mul": np.multiply,
    "create_minimumf": np.minimum, "create_maximumf": np.maximum, "create_minnumf": np.fmin,
    "create_maxnumf": np.fmax, "create_minsi": np.minimum, "create_maxsi": np.maximum,
    "create_and": np.bitwise_and, "create_or": np.bitwise_or, "create_xor": np.bitwise_xor,
    "create_icmpSLT": np.less, "create_icmpSLE": np.less_equal, "create_icmpSGT": np.greater,
    "create_icmpSGE": np.greater_equal, "create_icmpEQ": np.equal, "create_icmpNE": np.not_equal,
    "create_fcmpOLT": np.less, "create_fcmpOLE": np.less_equal, "create_fcmpOGT": np.greater,
    "create_fcmpOGE": np.greater_equal, "create_fcmpOEQ": np.equal, "create_fcmpUNE": np.not_equal,
    "create_exp": np.exp, "create_exp2": np.exp2, "create_log": np.log, "create_log2": np.log2,
    "create_sqrt": np.sqrt, "create_precise_sqrt": np.sqrt, "create_fneg": np.negative,
    "create_select": np.where, "create_addptr": _AddPtr,
}
_DIRECT_FROM = ("triton.runtime.interpreter", "gpuemu.runtime.numerics")
_WIDENING = ("create_splat", "create_broadcast")  # their operand may stand in for them in a direct line
_SLOT = re.compile(r"\bv(\d+)\b")
_ASSIGNED = re.compile(r"^(v\d+|_r) = ")  # a line's target (not a slot it reads)
_HEADER = "def _replay(I, b, O, C, T, D, index, R, TH, IR, M):"
_direct_checked: dict[str, Callable] | None = None


_dtypes: dict[tuple, Any] = {}


def _result_dtype(fn: Callable, dtypes: tuple) -> Any:
    """The dtype ``fn`` returns for operands of ``dtypes`` (None where it refuses them)."""
    key = (fn, dtypes)
    if key not in _dtypes:
        try:
            with np.errstate(all="ignore"):
                _dtypes[key] = fn(*(np.zeros(1, dtype=d) for d in dtypes)).dtype
        except Exception:  # noqa: BLE001 - operands it does not take: not computed directly
            _dtypes[key] = None
    return _dtypes[key]


def _broadcast_shape(shapes: tuple) -> tuple | None:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


def _with_attr(h: Any, attr: dict) -> Any:
    h.attr.update(attr)
    return h


def _narrow_check(code: str, widened: dict[int, tuple[str, str]]) -> str:
    """An overflow pre-check line (``IR(a, b, ...) or O[k](...)``) reading each widened block's range from
    its operand (the same values), and rebuilding the block only in the check that runs when the pre-check
    cannot show the operation safe."""
    pre, rest = code.split(" or ", 1)
    pre = re.sub(r"\bv(\d+)\.data\b", lambda m: widened[int(m.group(1))][0] if int(m.group(1)) in widened
                 else m.group(0), pre)
    rest = _SLOT.sub(lambda m: widened[int(m.group(1))][1] if int(m.group(1)) in widened else m.group(0), rest)
    return pre + " or " + rest


def _direct_ops() -> dict[str, Callable]:
    """The entries of :data:`_DIRECT` whose numpy function gives the interpreter's own method's result bit
    for bit, shown once per process on probe operands (fp32, fp16 and fp64 values with zeros, infinities,
    NaN and subnormals; int32 and int64 values with both extremes; a boolean mask), so a Triton whose
    interpreter computes one of them otherwise keeps the builder's call for it."""
    global _direct_checked
    if _direct_checked is not None:
        return _direct_checked
    from ._compat import builder as make_builder
    from ._compat import interp

    import triton.language as tl

    it, b = interp(), make_builder()
    TH = it.TensorHandle
    rng = np.random.default_rng(0)
    specials = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.4e38, 88.7, -103.9, 0.5]
    probes: dict[str, list] = {}
    for npd, ty in ((np.float32, tl.float32), (np.float16, tl.float16), (np.float64, tl.float64)):
        with np.errstate(all="ignore"):  # (fp16: 3.4e38 becomes inf)
            x = np.concatenate([np.array(specials), rng.standard_normal(51) * 40]).astype(npd)
        probes.setdefault("f", []).append((TH(x, ty), TH(np.roll(x, 7), ty)))
    for npd, ty in ((np.int32, tl.int32), (np.int64, tl.int64)):
        info = np.iinfo(npd)
        x = np.concatenate([np.array([0, 1, -1, info.min, info.max, 7, -7], dtype=npd),
                            rng.integers(-1000, 1000, 57).astype(npd)])
        probes.setdefault("i", []).append((TH(x, ty), TH(np.roll(x, 5), ty)))
    cond = TH(rng.random(64) < 0.5, tl.int1)
    ok: dict[str, Callable] = {}
    cls = type(b)
    for name, fn in _DIRECT.items():
        meth = getattr(cls, name, None)
        if meth is None:
            continue
        if fn is _AddPtr:
            try:
                good = True
                for ty in (tl.float32, tl.float16, tl.int8, tl.int64, tl.int1):
                    pt = tl.pointer_type(ty)
                    size = max(1, ty.primitive_bitwidth // 8)
                    p = TH(np.array([1 << 45, (1 << 45) + 8 * 7, 2**63 + 5], dtype=np.uint64), pt)
                    for x, _ in probes["i"]:
                        o = TH(x.data[:3], x.dtype)
                        want, got = np.asarray(meth(b, p, o).data), _AddPtr(size)(p.data, o.data)
                        good &= want.dtype == got.dtype and want.shape == got.shape \
                            and want.tobytes() == got.tobytes()
                if good:
                    ok[name] = fn
            except Exception:  # noqa: BLE001 - not computed directly
                pass
            continue
        kinds = ("f",) if name.startswith(("create_f", "create_exp", "create_log", "create_sqrt", "create_precise",
                                           "create_min", "create_max")) and not name.endswith("si") else ("i",)
        if name == "create_select":
            kinds = ("f", "i")
        try:
            with np.errstate(all="ignore"):
                good = True
                for kind in kinds:
                    for x, y in probes[kind]:
                        if name == "create_select":
                            want, got = meth(b, cond, x, y).data, fn(cond.data, x.data, y.data)
                        elif fn in (np.exp, np.exp2, np.log, np.log2, np.sqrt, np.negative):
                            want, got = meth(b, x).data, fn(x.data)
                        else:
                            want, got = meth(b, x, y).data, fn(x.data, y.data)
                        want = np.asarray(want)
                        if want.dtype != got.dtype or want.shape != got.shape or want.tobytes() != got.tobytes():
                            good = False
                if good:
                    ok[name] = fn
        except Exception:  # noqa: BLE001 - a method this probe cannot call: not computed directly
            continue
    _direct_checked = ok
    return ok


def _reduce(h: Any, axis: int, op: Callable, keep: bool, npd: Any, sca: Any, rank: int, TH: Any) -> Any:
    """What the launch's ``tl.reduce`` chain returns (as a handle) for one fp32/fp64/int32/int64 block
    reduced by np.nanmax / np.nanmin / np.sum (their ufunc reductions): the batched grid moves the axis behind the program axis and
    keeps a per-program scalar as one value per program; the interpreter's ReduceOps casts the result back
    to the input's type (or wraps a scalar in a one-element array)."""
    data = h.data
    if data.ndim == rank + 1:  # a program axis in front
        r = op(data, axis=axis + 1, keepdims=keep).astype(npd)
        if rank == 1 and not keep:
            r = r.reshape(data.shape[0])
        return TH(r, sca)
    r = op(data, axis=axis, keepdims=keep)
    r = r.astype(npd) if getattr(r, "shape", ()) else np.array([r], dtype=npd)
    return TH(r, sca)


# builder methods whose effect is more than their result (memory, the program's place in the grid, the
# launch's report, findings): never folded, whatever their arguments
_IMPURE = ("load", "store", "atomic", "program_id", "num_programs", "assert", "print", "barrier", "dot",
           "block_ptr", "advance", "descriptor", "grid", "histogram", "extern")
# the builder methods whose results are the program's place in the grid: with the arguments, the key of a
# trace's launch-invariant values (_Memo)
_ROOTS = ("create_get_program_id", "create_get_num_programs")


@functools.lru_cache(maxsize=1)
def _modules() -> tuple:
    """(triton.language.core, Triton's interpreter): their tensor classes are what a replay builds."""
    import triton.language as tl

    from ._compat import interp

    return tl.core, interp()


class Trace:
    """A recorded pass, compiled: ``run(inputs, builder)`` redoes its calls on new argument handles."""

    _ids = itertools.count()

    def __init__(self, fn: Callable, consts: tuple, targets: tuple, n_ops: int) -> None:
        self.fn = fn
        self.consts = consts
        self.targets = targets
        self.n_ops = n_ops
        self.id = next(self._ids)
        self.source = ""  # the compiled function's text (for reading a trace)
        self.lean = False  # replays without triton.language patched (see Recorder.finish)
        self.plan: _Plan | None = None  # for upgrade(), which the executor calls once UPGRADE_AFTER launches
        self.launches = 0  # replayed it (counted by the executor, once per launch)
        self.memo = _Memo()  # its launch-invariant values by key, once upgraded (see _Plan._memo_source)

    def run(self, inputs: list, builder: Any) -> None:
        core, it = _modules()
        ops = [getattr(obj, name) for obj, name in self.targets]
        self.fn(inputs, builder, ops, self.consts, core.tensor, Diverged, operator.index, _reduce, it.TensorHandle,
                in_range, self.memo)


    def upgrade(self) -> None:
        """Rebuild with direct lines (a trace replayed this often will be again; recording, on the path of
        every new specialisation, does not pay for them)."""
        plan, self.plan = self.plan, None
        try:
            source = plan.direct_source()
            ns: dict[str, Any] = {}
            exec(compile(source, "<gpuemu recorded kernel>", "exec"), ns)
        except Exception:  # noqa: BLE001 - the trace stays as recorded
            return
        self.fn, self.consts, self.source = ns["_replay"], tuple(plan.consts), source


__all__ = ["ENABLED", "Diverged", "Key", "ReplayFailed", "Recorder", "Trace", "key_of", "inputs_of", "candidates",
           "recordable", "store", "replayed", "failed", "clear", "stats"]
