"""Integer overflow in index and address arithmetic: the OVERFLOW finding.

A GPU computes ``int32 * int32`` in int32: ``pid * stride`` past 2**31 wraps, and a pointer offset by the
wrapped value reads or writes the wrong memory (an illegal access where it lands unmapped, silently wrong
output where it lands in mapped memory). The runtime computes integer ``+ - *`` exactly as the GPU does
(numpy int32 arrays wrap in two's complement, and every operand is a numpy array of the kernel's own type:
constants and arguments included), so the wrapped value is the GPU's. What it adds here is *where it came
from*:

- every ``+``, ``-`` and ``*`` (and unary ``-``) of signed integers narrower than 64 bits passes through
  Triton's overflow hook (``binary_op_sanitize_overflow_impl``); outside debug mode (where Triton's own
  assertion fires, as on a GPU built with ``debug=True``) :func:`detector` checks it in numpy (the operands'
  ranges first, then the exact int64 result lane by lane) and, where a lane leaves the type, notes the
  expression, its operands at the first such lane and its source line (:class:`Wrap`);
- from the first wrap of a launch on, the interpreter builder's integer-valued methods carry that note
  along (``TensorHandle.attr``) from operand to result: sums, products, casts (a wrapped int32 cast to int64
  is still wrong), splats, broadcasts, reshapes, selects;
- ``addptr`` (``ptr + offset``) or ``int_to_ptr`` of a noted value raises :class:`Overflow`: the launch's
  ``overflow`` finding, naming the first wrapping expression, not the address it reached.

Bitwise operations (``& | ^ << >>``) and comparisons drop the note: that is how hashes and random number
generators use integers (``(h * P) & (size - 1)``), and a mask is not an address. Unsigned integers are not
checked (their wrap is defined, and Philox-style generators rely on it). A wrap that never reaches an
address (a hash, an RNG stream, a value stored as data) is not a finding.

Before the first wrap nothing of this runs but the range check, which replays of recorded traces already
ran. A recorded trace marks the checks whose operation's result never reaches an address (the same rule,
over the recorded calls); a replay that meets a wrap anywhere else falls back to the ordinary path
(:class:`ReplayWrap`), where the notes are carried; a batched pass that raises :class:`Overflow` re-runs one program at a time, like every finding, so
the program and lane read exactly.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .fast import in_range

KEY = "gpuemu.wrap"  # TensorHandle.attr key of a value derived from a wrapped one
_SIGNED = {"int8": 8, "int16": 16, "int32": 32}
_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}
# builder methods whose result never carries the note: bitwise ops and shifts (hashes), comparisons (masks),
# memory (a loaded value is data; a wrapped address raised before it), floats, and what has no operands
_DROP = ("create_and", "create_or", "create_xor", "create_shl", "create_lshr", "create_ashr", "create_icmp",
         "create_fcmp", "create_load", "create_masked_load", "create_store", "create_masked_store", "create_atomic",
         "create_assert", "create_print", "create_get_program_id", "create_get_num_programs", "create_make_range",
         "create_f", "create_dot", "create_extern", "create_histogram", "create_tensor_pointer", "create_descriptor",
         "create_barrier", "create_inline_asm")


@dataclass(frozen=True)
class Wrap:
    """The first wrapping expression a value came from."""

    expr: str  # "offs = pid_m * stride_m" (the assignment's target where the expression is its whole value)
    operands: tuple[tuple[str, int], ...]  # (name as written, value at the first wrapping lane)
    dtype: str  # "int32"
    exact: int  # the true result at that lane
    wrapped: int  # what the GPU (and the runtime) computes there
    line: int
    site: str  # file:line (in helper)
    program: tuple[int, ...]
    fix: str  # the operand to widen first

    def text(self) -> str:
        ops = ", ".join(f"{n}={v}" for n, v in self.operands)
        return f"{self.expr} wraps {self.dtype} at {ops} (line {self.line})"


class Overflow(Exception):
    """A wrapped value reached an address (raised by ``addptr``; the executor makes it a finding)."""

    def __init__(self, wrap: Wrap, site: str) -> None:
        super().__init__(wrap.text())
        self.wrap, self.site = wrap, site

    def message(self, kernel: str, program: tuple[int, ...]) -> str:
        w = self.wrap
        prog = "(" + ", ".join(str(v) for v in program) + ")"
        return (f"{w.text()}: use .to(tl.int64) (e.g. {w.fix}); {w.exact} becomes {w.wrapped}, which reaches an "
                f"address at {self.site} (kernel {kernel}, {w.site}, program {prog})")


class ReplayWrap(Exception):
    """A recorded replay met a wrapping integer op: it runs the ordinary way, where wraps are traced."""


def detector(state: Any) -> Callable:
    """What the runtime's overflow hook does outside debug mode: nothing, unless a lane of a signed ``+ - *``
    narrower than 64 bits leaves its type; then note it (:func:`_note`)."""

    def wraps(lhs: Any, rhs: Any, binary_op: Any, benign: bool = False) -> None:
        sca = lhs.type.scalar
        bits = _SIGNED.get(sca.name)
        if bits is None:
            return None
        name = getattr(binary_op, "__name__", "")
        op = _NP.get(name)
        if op is None or rhs.type.scalar.name != sca.name:
            return None
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        a, b = lhs.handle.data, rhs.handle.data
        if in_range(a, b, name, lo, hi):
            return None
        exact = op(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))
        bad = (exact < lo) | (exact > hi)
        if not bad.any():
            return None
        if state.replaying:  # a replay carries no notes: where the result may reach an address, the ordinary
            if benign:       # path decides (the trace marked the checks whose results reach none: trace.py)
                return None
            raise ReplayWrap(name)
        _note(state, lhs, rhs, name, sca.name, bits, a, b, exact, bad)
        return None

    return wraps


def _note(state: Any, lhs: Any, rhs: Any, name: str, dtype: str, bits: int, a: np.ndarray, b: np.ndarray,
          exact: np.ndarray, bad: np.ndarray) -> None:
    """Remember the wrap for the builder call that follows (the same two handles), and start carrying notes."""
    idx = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape) if bad.ndim else ()
    av, bv = (np.broadcast_to(np.asarray(x), bad.shape)[idx] for x in (a, b))
    value = int(exact[idx])
    wrapped = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    expr, left, right, line, site = _where(state, name)
    fix = f"{left}.to(tl.int64) {_SYMBOL[name]} {right}" if left != "0" else f"-{right}.to(tl.int64)"
    w = Wrap(expr, ((left, int(av)), (right, int(bv))), dtype, value, wrapped, line, site, tuple(state.program), fix)
    state.wrap_pending = (lhs.handle, rhs.handle, w)
    activate(state)


# ---------------------------------------------------------------------- carrying the note
def activate(state: Any) -> None:
    """Wrap the builder's integer-valued methods so that results carry their operands' note, and ``addptr``
    raises on one. Set in the innermost scope in place (``state.scope_now``: the launch's, a batched pass's, a
    recording's), so they come off with it; once per scope."""
    from . import _compat

    builder = _compat.builder()
    marker = state.taint_mark
    if state.taint_on and marker is not None and builder.__dict__.get("create_addptr") is marker:
        return
    scope = state.scope_now or state.scope
    TH = type(state.wrap_pending[0]) if state.wrap_pending else _compat.interp().TensorHandle
    for name in dir(builder):
        if not name.startswith("create_") or name.startswith(_DROP):
            continue
        f = getattr(builder, name, None)
        if not callable(f):
            continue
        if name in ("create_addptr", "create_int_to_ptr"):
            w = _address(state, f, TH)
        elif name in ("create_add", "create_sub", "create_mul"):
            w = _arith(state, f, TH)
        else:
            w = _carry(f, TH)
        scope.set(builder, name, w)
        if name == "create_addptr":
            state.taint_mark = w
    state.taint_on = True

    def off(state=state) -> None:
        state.taint_on = False

    scope._undo.append(off)


def _noted(out: Any, note: Wrap, TH: type) -> None:
    if type(out) is TH:
        dt = out.dtype
        if getattr(dt, "name", "int1") != "int1" and getattr(dt, "is_int", lambda: False)():
            out.attr = {**out.attr, KEY: note}


def _carry(f: Callable, TH: type) -> Callable:
    def carry(*args, **kwargs):
        out = f(*args, **kwargs)
        for a in args:
            if type(a) is TH and KEY in a.attr:
                _noted(out, a.attr[KEY], TH)
                break
        return out

    return carry


def _arith(state: Any, f: Callable, TH: type) -> Callable:
    def arith(lhs, rhs, *rest):
        out = f(lhs, rhs, *rest)
        p = state.wrap_pending
        if p is not None and p[0] is lhs and p[1] is rhs:
            state.wrap_pending = None
            note = lhs.attr.get(KEY) or rhs.attr.get(KEY) or p[2]  # (an earlier wrap it came from is the first)
            _noted(out, note, TH)
        elif KEY in lhs.attr:
            _noted(out, lhs.attr[KEY], TH)
        elif KEY in rhs.attr:
            _noted(out, rhs.attr[KEY], TH)
        return out

    return arith


def _address(state: Any, f: Callable, TH: type) -> Callable:
    def address(*args, **kwargs):
        for a in args:
            if type(a) is TH and KEY in a.attr:
                raise Overflow(a.attr[KEY], state.site_now())
        return f(*args, **kwargs)

    address.gpuemu_overflow = True
    return address


# ---------------------------------------------------------------------- naming the expression
_positions: dict = {}  # code -> its co_positions() as a list
_trees: dict = {}  # id(Source) -> (the Source, its operations by span: _spans)


def _where(state: Any, op: str) -> tuple[str, str, str, int, str]:
    """(expression, left operand, right operand, file line, site) of the operation the innermost kernel or
    helper frame is evaluating: the instruction's source span (co_positions) in the rewritten source."""
    f = sys._getframe(2)
    while f is not None and f.f_code not in state.codes:
        f = f.f_back
    if f is None:
        return f"an integer {op}", "lhs", "rhs", 0, "?"
    code, line = f.f_code, f.f_lineno
    from .executor import _fmt_site

    site = _fmt_site(code, line, state.kernel_codes)
    src = state.sources.get(code)
    pos = None
    try:
        table = _positions.get(code)
        if table is None:
            table = _positions[code] = list(code.co_positions())
        pos = table[f.f_lasti // 2]
    except (IndexError, AttributeError):
        pass
    if src is None or pos is None or pos[0] is None:
        return f"an integer {op}", "lhs", "rhs", line, site
    lineno, end_lineno, col, end_col = pos
    shift = src.def_line - 1
    hit = _trees.get(id(src))
    if hit is None or hit[0] is not src:
        hit = _trees[id(src)] = (src, _spans(src.text))
    node, target = hit[1].get((lineno - shift, end_lineno - shift, col, end_col), (None, None))
    if node is None:
        text = src.text.splitlines()[lineno - shift - 1].strip() if 0 < lineno - shift <= len(src.text.splitlines()) \
            else f"an integer {op}"
        return text, "lhs", "rhs", lineno, site
    if isinstance(node, ast.BinOp):
        left, right = ast.unparse(node.left), ast.unparse(node.right)
        expr = ast.unparse(node)
    elif isinstance(node, ast.AugAssign):
        left, right = ast.unparse(node.target), ast.unparse(node.value)
        expr = ast.unparse(node)
        target = None
    else:  # unary minus: 0 - x
        left, right = "0", ast.unparse(node.operand)
        expr = ast.unparse(node)
    return (f"{target} = {expr}" if target else expr), left, right, lineno, site


def _spans(text: str) -> dict:
    """Every BinOp / AugAssign / unary minus of a kernel's source by its span (line, end line, column, end
    column), with the name it is assigned to where it is an assignment's whole value."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    out: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp):
            v = node.value
            out[(v.lineno, v.end_lineno, v.col_offset, v.end_col_offset)] = (v, ast.unparse(node.targets[0]))
        elif isinstance(node, (ast.BinOp, ast.AugAssign, ast.UnaryOp)):
            out.setdefault((node.lineno, node.end_lineno, node.col_offset, node.end_col_offset), (node, None))
    return out


__all__ = ["Overflow", "ReplayWrap", "Wrap", "detector", "activate", "KEY"]
