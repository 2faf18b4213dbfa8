"""Row-local outputs of an aten graph: the outputs that sampled rows of its large inputs determine.

A graph too large to copy (the cross-entropy loss over an LM head's [tokens, vocab] logits, or its backward
producing the logits' gradient) is checked on sampled rows when its outputs are row-local: the compiled
outputs at up to :data:`gpuemu.hook.large.ROWS` sampled rows are compared with the same graph evaluated
eagerly (in fp64, and in the original dtypes as the control) on the inputs restricted to those rows. What the
check allocates is the sampled rows' share of each value (and the values that do not depend on rows), not the
call's size.

**The analysis** (:func:`plan_rows`) gives every value of the graph a *row state*:

* ``k >= 1``: the value's leading ``k`` dims flatten to the row index (their product is the row count ``N``,
  the leading dims' product of an input), and its rows at the sampled indices are what the graph
  computes from the inputs' rows at those indices. Restricted, it has shape ``[m, *shape[k:]]``.
* ``WHOLE`` (0): it does not depend on any row-indexed value (a scalar, a weight, a count); computed whole.
* ``None``: anything else; never evaluated, and no output depending on it is compared.

Every input whose leading dims multiply to ``N`` is row-indexed (the logits [B, T, V] with k = 2, the targets
[B*T] with k = 1, a saved [N, 1] log-sum-exp); the rules below are identities of indexing (selecting rows
commutes with the op), so they hold whatever the tensor means. Rules, by aten op:

* pointwise ops (with broadcasting; every row-indexed operand has the output's rank and row dims, a whole
  operand is broadcast over the rows), casts, clones, aliases;
* reductions (``sum``, ``amax``, ``logsumexp``, ...), ``(log_)softmax`` and their backward over non-row dims
  (a reduction over a row dim, or over all dims, is ``None``: a mean loss);
* ``view``/``reshape`` whose result has a leading-dims product of ``N`` (row-major order keeps each row's
  elements together); ``unsqueeze``, ``squeeze``, ``permute``, ``transpose``, ``expand``, ``slice``,
  ``select`` away from the row dims;
* ``gather``/``scatter``/``index_select`` along a non-row dim (indices row-indexed, or whole for
  ``index_select``), ``full``/``zeros_like``-style constants, ``nll_loss_backward`` (the loss's gradient is
  row-local given the scalar incoming gradient and total weight), ``mm``/``addmm`` of row-indexed rows by a
  whole matrix;
* any op whose inputs are all whole is whole; a mutating op, an op not listed, or a row dim moved is ``None``.

The restricted graph (:class:`RowPlan`.gm) is the graph with each row-indexed value's row dims replaced by one
dim of ``m``: dims and shapes in the ops' arguments are rewritten, views become reshapes, and only what the
compared outputs need is kept.

>>> import torch
>>> from torch.fx.experimental.proxy_tensor import make_fx
>>> gm = make_fx(lambda x: (x.log_softmax(-1), x.sum()))(torch.randn(300, 8))
>>> p = plan_rows(gm, cap_bytes=1 << 20)
>>> sorted(p.outputs), list(p.unchecked.values())
([0], ['aten.sum.default reduces over rows'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

WHOLE = 0  # the row state of a value that does not depend on row-indexed inputs
MAX_TRIES = 8  # row counts tried per graph (each a walk over the graph, once per compiled graph)

_POINTWISE = {
    "add", "sub", "rsub", "mul", "div", "true_divide", "neg", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1",
    "abs", "sqrt", "rsqrt", "pow", "tanh", "sigmoid", "relu", "gelu", "silu", "erf", "sin", "cos", "square",
    "reciprocal", "sign", "where", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
    "bitwise_and", "bitwise_or", "bitwise_not", "maximum", "minimum", "clamp", "clamp_min", "clamp_max", "isnan",
    "isinf", "masked_fill", "nan_to_num", "floor", "ceil", "round", "trunc", "remainder", "fmod", "floor_divide",
    "_to_copy", "convert_element_type", "clone", "alias", "detach", "lift_fresh_copy", "threshold_backward",
    "gelu_backward", "sigmoid_backward", "tanh_backward", "silu_backward", "fill",
}
_REDUCTIONS = {"sum", "mean", "amax", "amin", "logsumexp", "argmax", "argmin", "prod", "any", "all", "var", "std",
               "linalg_vector_norm"}
_SOFTMAX = {"_softmax", "_log_softmax", "softmax", "log_softmax", "_softmax_backward_data",
            "_log_softmax_backward_data"}
_ALONG = {"gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "select", "slice", "narrow",
          "cumsum", "cumprod"}
_VIEWS = {"view", "reshape", "_unsafe_view"}
_LIKE = {"full_like", "zeros_like", "ones_like", "empty_like"}
_FACTORIES = {"full", "zeros", "ones", "empty", "new_full", "new_zeros", "new_ones", "new_empty"}


class _NotRowLocal(Exception):
    """Why a value is not row-local (its message becomes the unchecked output's reason)."""


@dataclass(frozen=True)
class RowPlan:
    """How to check a graph's row-local outputs on ``m`` sampled rows of ``n_rows``.

    ``inputs``: the row state of each placeholder; ``outputs``: graph output index -> row state of the floating
    outputs compared (0: a whole output, compared whole); ``unchecked``: floating outputs not compared -> why;
    ``gm``: the restricted graph, whose outputs are ``outputs``' in order; ``est_bytes``: an upper bound on what
    its fp64 and original-dtype evaluations allocate; ``shapes``: the placeholders' traced shapes (a call with
    others is not checked by this plan).
    """

    n_rows: int
    m: int
    inputs: tuple
    outputs: dict
    unchecked: dict
    gm: Any = field(repr=False)
    est_bytes: int = 0
    shapes: tuple = ()


def _opname(node: Any) -> str:
    t = node.target
    packet = getattr(t, "_overloadpacket", None)
    if packet is not None:
        return packet.__name__
    return str(getattr(t, "__name__", t)).split(".")[0]


def _qualname(node: Any) -> str:
    t = node.target
    return str(t) if hasattr(t, "_overloadpacket") else str(getattr(t, "__name__", t))


def _shape(node: Any) -> tuple | None:
    """The static shape of ``node``'s tensor value, or None (not a tensor, or a symbolic size)."""
    import torch

    val = node.meta.get("val") if hasattr(node, "meta") else None
    if not isinstance(val, torch.Tensor) or not all(type(s) is int for s in val.shape):
        return None
    return tuple(val.shape)


def _prefix(shape: tuple | None, n: int) -> int | None:
    """The fewest leading dims of ``shape`` whose product is ``n`` (None when no prefix is)."""
    if shape is None:
        return None
    p = 1
    for k, s in enumerate(shape, 1):
        p *= s
        if p == n:
            return k
        if p > n or p == 0:
            return None
    return None


def _norm_dim(d: Any, rank: int) -> int:
    if not isinstance(d, int) or isinstance(d, bool):
        raise _NotRowLocal("a symbolic dim")
    r = max(rank, 1)
    if not -r <= d < r:
        raise _NotRowLocal("a dim out of range")
    return d % r


class _Reshape:
    """A whole operand broadcast over the rows, reshaped to the restricted rank when the graph is built."""

    def __init__(self, node: Any, shape: list) -> None:
        self.node, self.shape = node, shape


class _Analysis:
    def __init__(self, gm: Any, n_rows: int, m: int) -> None:
        self.gm, self.n, self.m = gm, n_rows, m
        self.state: dict = {}
        self.cause: dict = {}
        self.rewrite: dict = {}  # node -> (target, args, kwargs) of its restricted version

    # ------------------------------------------------------------------ helpers
    def k(self, node: Any) -> int | None:
        return self.state.get(node, WHOLE) if hasattr(node, "op") else WHOLE

    def rows_of(self, node: Any, k: int) -> None:
        """Check that a row-indexed result has ``k`` leading dims multiplying to the row count."""
        shape = _shape(node)
        if shape is None or len(shape) < k or math.prod(shape[:k]) != self.n:
            raise _NotRowLocal(f"{_qualname(node)}: rows not kept")

    def restricted(self, shape: tuple, k: int) -> list:
        return [self.m, *shape[k:]]

    # ------------------------------------------------------------------ the walk
    def run(self) -> None:
        for node in self.gm.graph.nodes:
            if node.op == "output":
                continue
            try:
                self.state[node] = self.visit(node)
            except _NotRowLocal as e:
                self.state[node] = None
                self.cause[node] = str(e)

    def visit(self, node: Any) -> int | None:
        if node.op == "placeholder":
            if _is_tensor(node) and _shape(node) is None:
                raise _NotRowLocal(f"input {node.name} has a symbolic shape")
            k = _prefix(_shape(node), self.n)
            return k if k is not None else WHOLE
        if node.op == "get_attr":
            return WHOLE
        ins = [a for a in _flat(list(node.args) + list(node.kwargs.values())) if hasattr(a, "op")]
        for a in ins:
            if self.state.get(a, WHOLE) is None:
                self.cause[node] = self.cause.get(a, "not row-local")
                raise _NotRowLocal(self.cause[node])
        schema = getattr(node.target, "_schema", None)
        name = _opname(node)
        if (schema is not None and schema.is_mutable) or (schema is None and name.endswith("_")
                                                          and not name.endswith("__")) or name == "setitem":
            raise _NotRowLocal(f"{_qualname(node)} mutates its arguments")  # (and would mutate the user's)
        if all(self.k(a) == WHOLE for a in ins) and name not in _FACTORIES:
            return WHOLE
        if node.op != "call_function" or schema is None:
            raise _NotRowLocal(f"{_qualname(node)} is not known to be row-local")
        vals = _bind(schema, node)
        if name in _POINTWISE:
            k = self.pointwise(node, schema, vals)
        elif name in _REDUCTIONS or name in _SOFTMAX or name in _ALONG:
            k = self.along(node, schema, vals, reduction=name in _REDUCTIONS)
        elif name in _VIEWS:
            k = self.view(node, vals)
        elif name in ("unsqueeze", "squeeze", "permute", "transpose", "t", "expand"):
            k = self.shape_op(node, name, schema, vals)
        elif name in _LIKE:
            k = self.k(vals["self"])
            self.rows_of(node, k)
        elif name in _FACTORIES:
            k = self.factory(node, schema, vals)
        elif name == "nll_loss_backward":
            k = self.nll_backward(node, vals)
        elif name in ("mm", "addmm"):
            k = self.matmul(node, vals)
        elif "loss" in name and "backward" not in name and vals.get("reduction", 1) != 0:
            raise _NotRowLocal(f"{_qualname(node)} reduces over rows")
        else:
            raise _NotRowLocal(f"{_qualname(node)} is not known to be row-local")
        if k:
            self.rows_of(node, k)
        return k

    # ------------------------------------------------------------------ rules
    def pointwise(self, node: Any, schema: Any, vals: dict) -> int:
        out = _shape(node)
        if out is None:
            raise _NotRowLocal(f"{_qualname(node)}: no static shape")
        tensors = {n: v for n, v in vals.items() if hasattr(v, "op") and _is_tensor(v)}
        if any(_shape(v) is None for v in tensors.values()):
            raise _NotRowLocal(f"{_qualname(node)}: an operand without a static shape")
        ks = {self.k(v) for v in tensors.values()} - {WHOLE}
        if len(ks) != 1:
            raise _NotRowLocal(f"{_qualname(node)}: operands with different row dims")
        k = ks.pop()
        new = dict(vals)
        for n, v in tensors.items():
            s = _shape(v)
            if self.k(v) != WHOLE:
                if len(s) != len(out) or s[:k] != out[:k]:
                    raise _NotRowLocal(f"{_qualname(node)}: a row-indexed operand is broadcast")
                continue
            at_rows = len(s) - (len(out) - k)  # a whole operand's dims that fall on the output's row dims
            if at_rows > 0:
                if any(d != 1 for d in s[:at_rows]):
                    raise _NotRowLocal(f"{_qualname(node)}: a whole operand spans the rows")
                new[n] = _Reshape(v, [1, *s[at_rows:]])
        if new != vals:
            self.rewrite[node] = (node.target, *_unbind(schema, new))
        return k

    def along(self, node: Any, schema: Any, vals: dict, *, reduction: bool) -> int:
        """Ops working along ``dim`` (reductions, softmax, gather, slice, ...): every dim must be past the rows."""
        tensors = {n: v for n, v in vals.items() if hasattr(v, "op")}
        rows = {n: v for n, v in tensors.items() if self.k(v) != WHOLE}
        ks = {self.k(v) for v in rows.values()}
        whole_ok = {"index"} if _opname(node) == "index_select" else set()  # (the indices taken from each row)
        if len(ks) != 1 or set(tensors) - set(rows) != whole_ok:
            raise _NotRowLocal(f"{_qualname(node)}: operands with different row dims")
        k = ks.pop()
        base = rows.get("self", rows.get("grad_output", next(iter(rows.values()))))
        shape = _shape(base)
        if shape is None:
            raise _NotRowLocal(f"{_qualname(node)}: no static shape")
        if any(_shape(v) is None or _shape(v)[:k] != shape[:k] for v in rows.values()):
            raise _NotRowLocal(f"{_qualname(node)}: operands with different rows")
        if "dim" not in vals or vals["dim"] is None or vals["dim"] == []:
            raise _NotRowLocal(f"{_qualname(node)} reduces over rows" if reduction
                               else f"{_qualname(node)}: no dim")
        dims = vals["dim"] if isinstance(vals["dim"], (list, tuple)) else [vals["dim"]]
        dims = [_norm_dim(d, len(shape)) for d in dims]
        if any(d < k for d in dims):
            raise _NotRowLocal(f"{_qualname(node)} reduces over rows" if reduction
                               else f"{_qualname(node)} works along a row dim")
        new = [d - k + 1 for d in dims]
        vals = dict(vals, dim=new if isinstance(vals["dim"], (list, tuple)) else new[0])
        self.rewrite[node] = (node.target, *_unbind(schema, vals))
        return k

    def view(self, node: Any, vals: dict) -> int:
        import torch

        k_in = self.k(vals["self"])
        out = _shape(node)
        k = _prefix(out, self.n)
        if k is None or k_in is None:
            raise _NotRowLocal(f"{_qualname(node)} mixes rows")
        self.rewrite[node] = (torch.ops.aten.reshape.default, (vals["self"], self.restricted(out, k)), {})
        return k

    def shape_op(self, node: Any, name: str, schema: Any, vals: dict) -> int:
        import torch

        k = self.k(vals["self"])
        shape = _shape(vals["self"])
        out = _shape(node)
        if shape is None or out is None:
            raise _NotRowLocal(f"{_qualname(node)}: no static shape")
        moved = _NotRowLocal(f"{_qualname(node)} moves a row dim")
        if name == "unsqueeze":
            d = _norm_dim(vals["dim"], len(out))
            if d < k:  # a size-1 dim among the rows: the restricted value is unchanged
                self.rewrite[node] = (torch.ops.aten.alias.default, (vals["self"],), {})
                return k + 1
            vals = dict(vals, dim=d - k + 1)
        elif name == "squeeze":
            dims = vals.get("dim")
            if dims is None:
                raise moved
            dims = dims if isinstance(dims, (list, tuple)) else [dims]
            dims = [_norm_dim(d, len(shape)) for d in dims]
            if any(d < k for d in dims):
                raise moved
            new = [d - k + 1 for d in dims]
            vals = dict(vals, dim=new if isinstance(vals["dim"], (list, tuple)) else new[0])
        elif name == "permute":
            dims = [_norm_dim(d, len(shape)) for d in vals["dims"]]
            if dims[:k] != list(range(k)):
                raise moved
            vals = dict(vals, dims=[0] + [d - k + 1 for d in dims[k:]])
        elif name == "transpose":
            d0, d1 = _norm_dim(vals["dim0"], len(shape)), _norm_dim(vals["dim1"], len(shape))
            if d0 != d1 and min(d0, d1) < k:
                raise moved
            vals = dict(vals, dim0=max(d0 - k + 1, 0), dim1=max(d1 - k + 1, 0))
        elif name == "t":
            if len(shape) >= 2:
                raise moved
        elif name == "expand":
            if len(out) != len(shape) or out[:k] != shape[:k]:
                raise moved
            vals = dict(vals, size=self.restricted(out, k))
        self.rewrite[node] = (node.target, *_unbind(schema, vals))
        return k

    def factory(self, node: Any, schema: Any, vals: dict) -> int:
        """A constant (``full``, ``zeros``, ``new_zeros``): its rows are the constant, at any index."""
        out = _shape(node)
        k = _prefix(out, self.n)
        if k is None:
            return WHOLE
        self.rewrite[node] = (node.target, *_unbind(schema, dict(vals, size=self.restricted(out, k))))
        return k

    def nll_backward(self, node: Any, vals: dict) -> int:
        """grad_input[i, target_i] = -grad_output (/ total_weight): row i needs row i of self, target (and of
        grad_output without reduction) and the scalars."""
        ok = (self.k(vals["self"]) == 1 and len(_shape(vals["self"]) or ()) == 2 and self.k(vals["target"]) == 1
              and self.k(vals.get("weight")) == WHOLE and self.k(vals["total_weight"]) == WHOLE
              and self.k(vals["grad_output"]) == (1 if vals["reduction"] == 0 else WHOLE))
        if not ok:
            raise _NotRowLocal(f"{_qualname(node)}: rows not aligned")
        return 1

    def matmul(self, node: Any, vals: dict) -> int:
        a, b = (vals["self"], vals["mat2"]) if _opname(node) == "mm" else (vals["mat1"], vals["mat2"])
        bias = vals.get("self") if _opname(node) == "addmm" else None
        bias_ok = bias is None or (self.k(bias) == WHOLE and len(_shape(bias) or (0, 0)) <= 1) or self.k(bias) == 1
        if self.k(a) != 1 or self.k(b) != WHOLE or not bias_ok:
            raise _NotRowLocal(f"{_qualname(node)} mixes rows")
        return 1


def _flat(xs: Any) -> list:
    out: list = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flat(x))
        elif isinstance(x, dict):
            out.extend(_flat(list(x.values())))
        else:
            out.append(x)
    return out


def _bind(schema: Any, node: Any) -> dict:
    """The node's arguments by their schema names (defaults filled in)."""
    vals = {}
    for i, a in enumerate(schema.arguments):
        if i < len(node.args) and not a.kwarg_only:
            vals[a.name] = node.args[i]
        elif a.name in node.kwargs:
            vals[a.name] = node.kwargs[a.name]
        elif a.has_default_value():
            vals[a.name] = a.default_value
    return vals


def _unbind(schema: Any, vals: dict) -> tuple[tuple, dict]:
    args, kwargs = [], {}
    for a in schema.arguments:
        if a.name not in vals:
            continue
        if a.kwarg_only:
            kwargs[a.name] = vals[a.name]
        else:
            args.append(vals[a.name])
    return tuple(args), kwargs


def _outputs(gm: Any) -> list:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return list(out.args[0]) if isinstance(out.args[0], (list, tuple)) else [out.args[0]]


def _is_tensor(node: Any) -> bool:
    import torch

    return isinstance(node.meta.get("val") if hasattr(node, "meta") else None, torch.Tensor)


def _is_float(node: Any) -> bool:
    import torch

    val = node.meta.get("val") if hasattr(node, "meta") else None
    return isinstance(val, torch.Tensor) and val.is_floating_point()


def _needed(keep: list) -> set:
    """``keep`` and every node they are computed from."""
    need: set = set()
    stack = list(keep)
    while stack:
        n = stack.pop()
        if n in need:
            continue
        need.add(n)
        stack.extend(a for a in _flat(list(n.args) + list(n.kwargs.values())) if hasattr(a, "op"))
    return need


def _restricted_graph(gm: Any, an: _Analysis, keep: list) -> Any:
    """The graph with every kept value restricted to the sampled rows; outputs: ``keep``'s nodes."""
    import torch
    import torch.fx

    need = _needed(keep)
    g = torch.fx.Graph()
    env: dict = {}

    def arg(a: Any) -> Any:
        if isinstance(a, _Reshape):
            return g.call_function(torch.ops.aten.reshape.default, (env[a.node], a.shape))
        if hasattr(a, "op"):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        return a

    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = g.placeholder(n.name)
        elif n in need:
            if n in an.rewrite:
                target, args, kwargs = an.rewrite[n]
                env[n] = g.call_function(target, arg(args), {k: arg(v) for k, v in kwargs.items()})
            else:
                env[n] = g.node_copy(n, lambda a: env[a])
    g.output(tuple(env[n] for n in keep))
    return torch.fx.GraphModule(gm, g)


def plan_rows(gm: Any, *, cap_bytes: int, rows: int | None = None) -> RowPlan | str:
    """The plan of a sampled-rows check of ``gm``, or why there is none (a string).

    ``cap_bytes`` bounds what the restricted evaluations may allocate (the hook's ``max_scratch_bytes``);
    ``rows`` caps the sampled rows (default :data:`gpuemu.hook.large.ROWS`). Each input's leading-dims product
    is tried as the row count, the largest inputs' first (a training graph's largest input may be a weight,
    its rows the tokens of a smaller one), and the plan comparing the most row-indexed outputs is kept.
    """
    from ..hook.large import ROWS

    rows = rows or ROWS
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sized = sorted(((math.prod(s), s) for s in map(_shape, placeholders) if s), reverse=True)
    tried: set = set()
    best: RowPlan | None = None
    why = None  # (the largest input's: the others are tried in case it is not the one with rows)
    for _, shape in sized:
        n = math.prod(shape[:-1]) if len(shape) >= 2 else shape[0] if shape else 0
        if n <= 1 or n in tried or len(tried) >= MAX_TRIES:
            continue
        tried.add(n)
        plan = _plan_for(gm, placeholders, n, min(n, rows), cap_bytes)
        if isinstance(plan, str):
            why = why or plan
        elif best is None or _row_outputs(plan) > _row_outputs(best):
            best = plan
    return best if best is not None else why or "no input with rows"


def _row_outputs(plan: RowPlan) -> int:
    return sum(1 for k in plan.outputs.values() if k != WHOLE)


def _plan_for(gm: Any, placeholders: list, n: int, m: int, cap_bytes: int) -> RowPlan | str:
    an = _Analysis(gm, n, m)
    an.run()
    outs = _outputs(gm)
    checked: dict = {}
    unchecked: dict = {}
    for i, o in enumerate(outs):
        if not hasattr(o, "op") or o.op == "placeholder" or not _is_float(o):
            continue  # (an input passed through, an integer output, None: nothing to compare)
        k = an.state.get(o)
        if k is None:
            unchecked[i] = an.cause.get(o, "not row-local")
        elif k == WHOLE and o.op == "get_attr":
            continue
        else:
            checked[i] = k
    if not any(k != WHOLE for k in checked.values()):
        first = next(iter(unchecked.values()), "no floating output")
        return f"no output is row-local: {first}"
    keep = [outs[i] for i in checked]
    est = _peak_bytes(gm, an, _needed(keep), m)
    if isinstance(est, str):
        return est
    if est > cap_bytes:
        return "sampled rows exceed max_scratch_bytes"
    try:
        rgm = _restricted_graph(gm, an, keep)
    except Exception as e:  # (an op the builder cannot copy: no plan, and it says why)
        return f"restricted graph: {type(e).__name__}: {e}"
    states = tuple(an.state.get(p, WHOLE) for p in placeholders)
    return RowPlan(n_rows=n, m=m, inputs=states, outputs=checked, unchecked=unchecked, gm=rgm, est_bytes=est,
                   shapes=tuple(_shape(p) for p in placeholders))


def _peak_bytes(gm: Any, an: _Analysis, need: set, m: int) -> int | str:
    """An upper bound on what the restricted graph's two evaluations hold at once: each value in fp64 from its
    node to its last use (inputs and outputs throughout), twice (the control in the original dtypes after the
    fp64 run, whose outputs are kept); or why it is not known (a symbolic shape)."""
    order = [n for n in gm.graph.nodes if n in need]
    last: dict = {}
    for i, node in enumerate(order):
        for a in _flat(list(node.args) + list(node.kwargs.values())):
            if hasattr(a, "op"):
                last[a] = i
    dies: dict = {}
    for a, j in last.items():
        if a.op != "placeholder":
            dies.setdefault(j, []).append(a)
    live = peak = 0
    size: dict = {}
    for i, node in enumerate(order):
        s = _shape(node)
        if s is None and (_is_tensor(node) or (node.op == "placeholder" and "val" not in node.meta)):
            return f"no static shape at {node.name}"
        k = an.state[node]
        size[node] = 0 if s is None else 8 * (math.prod(s) if not k else m * math.prod(s[k:]))
        live += size[node]
        peak = max(peak, live)
        live -= sum(size[a] for a in dies.get(i, ()))
    return 2 * peak


def take_rows(t: Any, k: int, idx: list[int]) -> Any:
    """Rows ``idx`` of ``t`` whose leading ``k`` dims flatten to the row index: shape [len(idx), *t.shape[k:]],
    indexed without copying anything but those rows (``t`` may be a strided view)."""
    import numpy as np
    import torch

    if k == WHOLE:
        return t
    if k == 1:
        return t.index_select(0, torch.tensor(idx, device=t.device))
    coords = np.unravel_index(np.asarray(idx), tuple(t.shape[:k]))
    return t[tuple(torch.as_tensor(c, device=t.device) for c in coords)]


__all__ = ["RowPlan", "plan_rows", "take_rows", "WHOLE"]
