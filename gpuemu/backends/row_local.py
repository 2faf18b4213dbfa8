"""Row-local outputs of an aten graph: the outputs that sampled rows of its large inputs determine.

A graph too large to copy (the cross-entropy loss over an LM head's [tokens, vocab] logits, or its backward
producing the logits' gradient) is checked on sampled rows when its outputs are row-local: the compiled
outputs at up to :data:`gpuemu.hook.large.ROWS` sampled rows are compared with the same graph evaluated
eagerly (in fp64, and in the original dtypes as the control) on the inputs restricted to those rows. What the
check allocates is the sampled rows' share of each value (and the values that do not depend on rows), not the
call's size.

**The analysis** (:func:`plan_rows`) fixes a row count ``N`` (the *row unit*: a token of [B, T, V] logits,
N = B*T; or a sequence, N = B, whose T tokens attention mixes but nothing across sequences does) and gives
every value of the graph a *row state*:

* ``k >= 1``: the value's elements are ``N`` equal contiguous blocks (row-major), block i being what the graph
  computes from the inputs' rows i; ``k`` is the fewest leading dims whose product is a multiple of ``N``
  (their product / N leading indices per row: 1 for [B, T, C] with N = B, T for [B*T, C]). Restricted to
  ``m`` sampled rows it has shape ``[m * prod(shape[:k]) // N, *shape[k:]]``.
* ``WHOLE`` (0): it does not depend on any row-indexed value (a scalar, a weight, a count); computed whole.
* ``SUM``: a sum over every row of per-row terms (a backward graph's weights' gradients: ``sum`` over the row
  dims, ``mm`` of a [C, rows] matrix by a row-indexed one, a layer norm's weight and bias gradients, an embedding's
  gradient scattered from row-indexed indices), or what linear ops (adding two sums, scaling one by a whole value,
  views, ``where(mask, 0, sum)``, a scatter of a sum into zeros) make of sums. The restricted graph gives the
  share of its rows; the shares of chunks of rows that partition every row add up to the value (in fp64).
* ``COLS``: a [C, rows] matrix, a row-indexed [rows, C] one transposed (or an input kept so by the partitioner
  whose every use is as ``mm``'s left operand): its restriction takes the rows' columns.
* ``None``: anything else; never evaluated, and no output depending on it is compared.
* a tuple of these: an op with several outputs (layer norm, split, fused attention), read by ``getitem``.

An input (or a constant) is row-indexed when its leading dims hold one of the candidate's block sizes per row
(:func:`_candidates`: the logits [B, T, V] with k = 2 for N = B*T; the targets [B*T] with k = 1 and a block
of T for N = B); any other input is whole, which is always exact (it only costs memory). The rules below are
identities of indexing (selecting rows commutes with the op), so they hold whatever the tensor means. Rules,
by aten op:

* pointwise ops (with broadcasting; every row-indexed operand has the output's rank and row dims, a whole
  operand is broadcast over the rows), casts, clones, aliases;
* reductions (``sum``, ``amax``, ``logsumexp``, ...), ``(log_)softmax`` and their backward over non-row dims
  (a reduction over a row dim, or over all dims, is ``None``: a mean loss);
* ``view``/``reshape`` of a row-indexed value, always (row-major order keeps each row's block of elements
  together: [B, T, C] -> [B*T, C] -> [B, T, H, D]); ``unsqueeze``, ``squeeze``, ``permute``, ``transpose``,
  ``expand``, ``slice``, ``select``, ``split``, ``cat``, ``tril``/``triu`` away from the row dims (attention's
  [B, T, H, D] -> [B, H, T, D] keeps B in front);
* ``bmm`` and fused attention (``_scaled_dot_product_*_attention`` and their backward) batch by batch: every
  operand row-indexed with the same leading dim (the restricted [m*H, T, D]), or whole of leading dim 1 (a
  broadcast mask); ``native_layer_norm`` over trailing dims (outputs, mean and rstd), the input gradient of
  its backward (the weight's and bias's sum over rows); ``embedding`` of a whole table at row-indexed indices;
* ``gather``/``scatter``/``index_select`` along a non-row dim (indices row-indexed, or whole for
  ``index_select``), ``full``/``zeros_like``-style constants, ``nll_loss_backward`` (the loss's gradient is
  row-local given the scalar incoming gradient and total weight), ``mm``/``addmm`` of row-indexed rows by a
  whole matrix;
* any op whose inputs are all whole is whole; a mutating op, an op not listed, a row dim moved or reduced
  (a mean over the batch dim, a permute that moves B) is ``None``.

A value computed whole can still hold rows: the labels of a causal LM loss arrive padded ([B, T+1]) and are
sliced to [B, T]; a causal mask [1, 1, T, T] is expanded to [B, 1, T, T]. Each of these meets row-indexed
values later (the logits' gradient, fused attention's query) and would be "a whole operand spanning the rows".
So every row unit is also tried *promoting*: a value computed whole from whole values whose leading dims hold
one of the candidate's block sizes per row is computed whole in the restricted graph (it is small: what is
large in the graph is row-indexed) and its sampled rows are taken from it by index (exact, whatever the value
means); from there on it is row-indexed. The plan without promotion is kept on a tie (it computes less).

A plan with ``SUM`` outputs is evaluated on every row, in chunks of ``m`` rows (``m`` divides ``N``: as many as
fit the byte budget), its row-local outputs judged chunk by chunk and its sums once, added up; a plan without is
evaluated on ``m`` sampled rows. A mean over the rows, a max over them, or a sum that meets a row-indexed value
again (a batch norm) is neither: ``None``.

The restricted graph (:class:`RowPlan`.gm) is the graph with each row-indexed value's row dims replaced by one
dim of ``m`` times the block: dims and shapes in the ops' arguments are rewritten, views become reshapes,
and only what the compared outputs need is kept. ``m`` is up to :data:`gpuemu.hook.large.ROWS`, fewer when
that many rows' fp64 evaluation would exceed the byte budget (long sequences).

>>> import torch
>>> from torch.fx.experimental.proxy_tensor import make_fx
>>> gm = make_fx(lambda x: (x.log_softmax(-1), x.mean()))(torch.randn(300, 8))
>>> p = plan_rows(gm, cap_bytes=1 << 20)
>>> sorted(p.outputs), list(p.unchecked.values())
([0], ['aten.mean.default reduces over rows'])
>>> gm = make_fx(lambda x, g: (x.t() @ g, g.sum(0)))(torch.randn(300, 8), torch.randn(300, 4))
>>> p = plan_rows(gm, cap_bytes=1 << 20)
>>> p.outputs, p.n_rows, p.m
({0: SUM, 1: SUM}, 300, 300)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

WHOLE = 0  # the row state of a value that does not depend on row-indexed inputs


class _Kind:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


SUM = _Kind("SUM")  # a sum over the rows of per-row terms (a weight's gradient): each chunk of rows gives its share
COLS = _Kind("COLS")  # a [C, rows] matrix: a row-indexed [rows, C] one transposed (dim 1 holds the rows)
_ZERO_FACTORIES = {"full", "zeros", "new_zeros", "zeros_like", "full_like", "new_full"}
MAX_TRIES = 12  # row units tried per graph (each a walk over the graph, once per compiled graph)

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
_SPLITS = {"split", "split_with_sizes", "unbind", "chunk", "unsafe_split", "unsafe_split_with_sizes"}
_TRIANGLES = {"tril", "triu"}  # (along the last two dims)
# batched along dim 0: bmm and fused attention (query, key, value [B, H, T, D] and their gradients); each
# tensor operand is row-indexed with the same leading dim, or whole of leading dim 1 (a broadcast mask) or 0-dim
_BATCHED = {"bmm", "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
            "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
            "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
            "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
            "_scaled_dot_product_attention_math"}


class _NotRowLocal(Exception):
    """Why a value is not row-local (its message becomes the unchecked output's reason)."""


@dataclass(frozen=True)
class RowPlan:
    """How to check a graph's row-local outputs on ``m`` sampled rows of ``n_rows``.

    ``inputs``: the row state of each placeholder; ``outputs``: graph output index -> row state of the floating
    outputs compared (0: a whole output, compared whole); ``unchecked``: floating outputs not compared -> why;
    ``gm``: the restricted graph, whose outputs are ``outputs``' in order; ``est_bytes``: an upper bound on what
    its fp64 and original-dtype evaluations allocate; ``shapes``: the placeholders' traced shapes (a call with
    others is not checked by this plan); ``takes_rows``: ``gm`` takes one more input after the placeholders', the
    sampled rows' indices (int64 [m]), with which it takes the rows of values computed whole.
    """

    n_rows: int
    m: int
    inputs: tuple
    outputs: dict
    unchecked: dict
    gm: Any = field(repr=False)
    est_bytes: int = 0
    shapes: tuple = ()
    takes_rows: bool = False


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
    """The fewest leading dims of ``shape`` whose product is a multiple of ``n`` (None when no prefix's is): the
    row dims of a value whose ``n`` rows are ``n`` equal contiguous blocks of its elements (row-major)."""
    if shape is None or n <= 0:
        return None
    p = 1
    for k, s in enumerate(shape, 1):
        p *= s
        if p == 0:
            return None
        if p % n == 0:
            return k
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
    def __init__(self, gm: Any, n_rows: int, m: int, blocks: frozenset = frozenset({1}), *,
                 promote: bool = False) -> None:
        self.gm, self.n, self.m, self.blocks, self.promote = gm, n_rows, m, blocks, promote
        self.state: dict = {}
        self.cause: dict = {}
        self.rewrite: dict = {}  # node -> (target, args, kwargs) of its restricted version
        self.taken: set = set()  # whole values given the row state of their shape (computed whole, rows taken)

    # ------------------------------------------------------------------ helpers
    def k(self, node: Any) -> int | None:
        return self.state.get(node, WHOLE) if hasattr(node, "op") else WHOLE

    def rows_of(self, node: Any, k: int) -> None:
        """Check that a row-indexed result's leading ``k`` dims are its row dims (the fewest whose product is a
        multiple of the row count: each row a block of that product / N leading indices)."""
        if _prefix(_shape(node), self.n) != k:
            raise _NotRowLocal(f"{_qualname(node)}: rows not kept")

    def block(self, shape: tuple, k: int) -> int:
        """Leading indices per row of a row-indexed value (1: row dims of product N; T: [B*T, C] with B rows)."""
        return math.prod(shape[:k]) // self.n

    def restricted(self, shape: tuple, k: int) -> list:
        return [self.m * self.block(shape, k), *shape[k:]]

    def row_input(self, shape: tuple | None) -> int:
        """The row state of an input or a constant of ``shape``: row-indexed when its row dims hold one of the
        candidate's block sizes per row (a weight whose leading dim happens to be a multiple of N stays whole;
        either is exact, whole only costs memory)."""
        k = _prefix(shape, self.n)
        if k is None or self.block(shape, k) not in self.blocks:
            return WHOLE
        return k

    # ------------------------------------------------------------------ the walk
    def run(self) -> None:
        for node in self.gm.graph.nodes:
            if node.op == "output":
                continue
            try:
                st = self.visit(node)
                if st == WHOLE and self.promote and node.op == "call_function" and _is_tensor(node) \
                        and self.row_input(_shape(node)):
                    st = self.row_input(_shape(node))  # (rows taken from the whole value: exact, whatever it is)
                    self.taken.add(node)
                self.state[node] = st
            except _NotRowLocal as e:
                self.state[node] = None
                self.cause[node] = str(e)

    def visit(self, node: Any) -> Any:
        import operator

        if node.op == "placeholder":
            if _is_tensor(node) and _shape(node) is None:
                raise _NotRowLocal(f"input {node.name} has a symbolic shape")
            st = self.row_input(_shape(node))
            return COLS if st == WHOLE and self.cols_input(node) else st
        if node.op == "get_attr":
            return WHOLE
        if node.op == "call_function" and node.target is operator.getitem and hasattr(node.args[0], "op"):
            st = self.state.get(node.args[0], WHOLE)
            if isinstance(st, tuple):
                i = node.args[1]
                if not isinstance(i, int) or not -len(st) <= i < len(st):
                    raise _NotRowLocal("getitem: an index out of range")
                if st[i] is None:
                    raise _NotRowLocal(self.cause.get((node.args[0], i % len(st)), "not row-local"))
                return st[i]
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
        if any(self.k(a) is SUM or self.k(a) is COLS for a in ins):
            return self.summed(node, name, vals)
        if any(isinstance(self.k(a), tuple) for a in ins):
            raise _NotRowLocal(f"{_qualname(node)} takes a tuple of values")
        if name in _POINTWISE:
            k = self.pointwise(node, schema, vals)
        elif name in _SPLITS:
            return self.split(node, schema, vals)
        elif name == "sum" and self.over_rows(vals):
            return self.row_sum(node, schema, vals)
        elif name in ("index_put", "_unsafe_masked_index_put_accumulate"):
            return self.index_put(node, vals)
        elif name == "embedding_dense_backward":
            return self.embedding_backward(node, vals)
        elif name == "var_mean":
            k = self.along(node, schema, vals, reduction=True)
            return self.each(node, lambda i, s: k)
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
        elif name in _BATCHED:
            return self.batched(node, vals)
        elif name == "embedding":
            k = self.embedding(node, vals)
        elif name in _TRIANGLES:
            k = self.k(vals["self"])
            if k > len(_shape(vals["self"]) or ()) - 2:
                raise _NotRowLocal(f"{_qualname(node)} works along a row dim")
        elif name == "cat":
            k = self.cat(node, schema, vals)
        elif name in ("native_layer_norm", "native_layer_norm_backward"):
            return self.layer_norm(node, name, vals)
        elif "loss" in name and "backward" not in name and vals.get("reduction", 1) != 0:
            raise _NotRowLocal(f"{_qualname(node)} reduces over rows")
        else:
            raise _NotRowLocal(f"{_qualname(node)} is not known to be row-local")
        if k and k is not COLS:
            self.rows_of(node, k)
        return k

    def each(self, node: Any, state_of: Any) -> tuple:
        """The row states of a node with several outputs (``state_of(i, shape)``: an int, or a string saying why
        output i is not row-local), read by getitem."""
        vals = node.meta.get("val")
        if not isinstance(vals, (list, tuple)):
            raise _NotRowLocal(f"{_qualname(node)}: outputs unknown")
        out = []
        for i, v in enumerate(vals):
            st = state_of(i, tuple(v.shape) if hasattr(v, "shape") else None)
            if isinstance(st, str):
                self.cause[(node, i)] = st
                st = None
            elif st is SUM:
                pass
            elif st and (not hasattr(v, "shape") or _prefix(tuple(v.shape), self.n) != st):
                self.cause[(node, i)] = f"{_qualname(node)}: rows not kept"
                st = None
            out.append(st)
        return tuple(out)

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
            if k == 1 and dims == [1, 0]:
                return COLS  # (a [rows, C] matrix transposed: the rows' side of a weight gradient's product)
            if dims[:k] != list(range(k)):
                raise moved
            vals = dict(vals, dims=[0] + [d - k + 1 for d in dims[k:]])
        elif name == "transpose":
            d0, d1 = _norm_dim(vals["dim0"], len(shape)), _norm_dim(vals["dim1"], len(shape))
            if k == 1 and len(shape) == 2 and {d0, d1} == {0, 1}:
                return COLS
            if d0 != d1 and min(d0, d1) < k:
                raise moved
            vals = dict(vals, dim0=max(d0 - k + 1, 0), dim1=max(d1 - k + 1, 0))
        elif name == "t":
            if k == 1 and len(shape) == 2:
                return COLS
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
        k = self.row_input(out)
        if k == WHOLE or "size" not in vals:
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

    def split(self, node: Any, schema: Any, vals: dict) -> tuple:
        """``split``/``chunk``/``unbind`` along a dim past the rows: every piece keeps the rows."""
        k = self.k(vals["self"])
        shape = _shape(vals["self"])
        if shape is None:
            raise _NotRowLocal(f"{_qualname(node)}: no static shape")
        d = _norm_dim(vals.get("dim", 0), len(shape))
        if d < k:
            raise _NotRowLocal(f"{_qualname(node)} works along a row dim")
        self.rewrite[node] = (node.target, *_unbind(schema, dict(vals, dim=d - k + 1)))
        return self.each(node, lambda i, s: k)

    def batched(self, node: Any, vals: dict) -> Any:
        """bmm and fused attention: batch i of every output is computed from batch i of every operand."""
        tensors = [v for v in _flat(list(vals.values())) if hasattr(v, "op") and _is_tensor(v)]
        lead = {(_shape(v) or (None,))[0] for v in tensors if self.k(v) != WHOLE}
        for v in tensors:
            s = _shape(v)
            if s is None:
                raise _NotRowLocal(f"{_qualname(node)}: an operand without a static shape")
            if self.k(v) == WHOLE:
                if s and s[0] != 1:
                    raise _NotRowLocal(f"{_qualname(node)}: a whole operand spans the rows")
            elif self.k(v) != 1 or len(lead) != 1:
                raise _NotRowLocal(f"{_qualname(node)}: operands with different row dims")
        (b,) = lead

        def state(i: int, s: tuple | None) -> Any:
            if s is None or len(s) == 0:
                return WHOLE  # (a count or a random-number state: integers, never compared)
            return 1 if s[0] == b else f"{_qualname(node)}: output {i} is not batched like its operands"

        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            return self.each(node, state)
        st = state(0, _shape(node))
        if isinstance(st, str):
            raise _NotRowLocal(st)
        if st:
            self.rows_of(node, st)
        return st

    def embedding(self, node: Any, vals: dict) -> int:
        """Rows of a whole table at row-indexed indices: output [*indices.shape, dim]."""
        if self.k(vals["weight"]) != WHOLE:
            raise _NotRowLocal(f"{_qualname(node)}: a row-indexed table")
        return self.k(vals["indices"])

    def cat(self, node: Any, schema: Any, vals: dict) -> int:
        parts = vals["tensors"]
        ks = {self.k(p) for p in parts}
        shapes = [_shape(p) for p in parts]
        if len(ks) != 1 or WHOLE in ks or any(s is None for s in shapes):
            raise _NotRowLocal(f"{_qualname(node)}: operands with different row dims")
        k = ks.pop()
        if any(s[:k] != shapes[0][:k] for s in shapes):
            raise _NotRowLocal(f"{_qualname(node)}: operands with different rows")
        d = _norm_dim(vals.get("dim", 0), len(shapes[0]))
        if d < k:
            raise _NotRowLocal(f"{_qualname(node)} works along a row dim")
        self.rewrite[node] = (node.target, *_unbind(schema, dict(vals, dim=d - k + 1)))
        return k

    # ------------------------------------------------------------------ sums over the rows
    def cols_input(self, node: Any) -> bool:
        """An input [C, rows] (a saved activation the partitioner kept transposed) whose every use is as the left
        operand of ``mm``: the rows' side of a weight gradient's product."""
        s = _shape(node)
        if s is None or len(s) != 2 or s[1] % self.n or s[1] // self.n not in self.blocks \
                or not node.users:
            return False
        return all(_opname(u) == "mm" and u.args and u.args[0] is node and node not in u.args[1:]
                   for u in node.users)

    def over_rows(self, vals: dict) -> bool:
        """A sum of a row-indexed value over (at least) every row dim."""
        x = vals.get("self")
        k, shape = self.k(x), _shape(x) if hasattr(x, "op") else None
        if not isinstance(k, int) or k < 1 or shape is None:
            return False
        dims = vals.get("dim")
        if dims is None or dims == []:
            return True
        dims = dims if isinstance(dims, (list, tuple)) else [dims]
        return set(range(k)) <= {_norm_dim(d, len(shape)) for d in dims}

    def row_sum(self, node: Any, schema: Any, vals: dict) -> Any:
        """The rows' share of a sum over every row: the restricted value summed over its one row dim (and the
        other dims summed), reshaped to the full result's shape."""
        x = vals["self"]
        k, shape, out = self.k(x), _shape(x), _shape(node)
        if out is None:
            raise _NotRowLocal(f"{_qualname(node)}: no static shape")
        dims = vals.get("dim")
        if dims is None or dims == []:
            new = list(range(1 + len(shape) - k))
        else:
            dims = [_norm_dim(d, len(shape)) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
            new = [0] + sorted({d - k + 1 for d in dims if d >= k})
        self.rewrite[node] = (_sum_rows, (x, new, list(out), vals.get("dtype")), {})
        return SUM

    def index_put(self, node: Any, vals: dict) -> Any:
        """``index_put(zeros, [row-indexed indices], row-indexed values, accumulate=True)``: an embedding's
        gradient, a scatter-add of every row's values: a sum over the rows."""
        idx, v = [i for i in vals["indices"] if i is not None], vals["values"]
        if "mask" in vals:  # (_unsafe_masked_index_put_accumulate: a mask beside the indices, always accumulating)
            idx.append(vals["mask"])
        k = self.k(v)
        ok = ((vals.get("accumulate") or "mask" in vals) and _is_zeros(vals["self"]) and self.k(vals["self"]) == WHOLE
              and idx
              and isinstance(k, int) and k >= 1 and None not in vals["indices"]
              and all(self.k(i) == k and (_shape(i) or ())[:k] == (_shape(v) or ())[:k] for i in idx))
        if not ok:
            raise _NotRowLocal(f"{_qualname(node)} is not known to be row-local")
        return SUM

    def embedding_backward(self, node: Any, vals: dict) -> Any:
        """A table's gradient: every row's gradient added at its indices, a sum over the rows."""
        g, idx = vals["grad_output"], vals["indices"]
        k = self.k(g)
        ok = (isinstance(k, int) and k >= 1 and self.k(idx) == k and not vals.get("scale_grad_by_freq")
              and (_shape(idx) or ())[:k] == (_shape(g) or ())[:k])
        if not ok:
            raise _NotRowLocal(f"{_qualname(node)} is not known to be row-local")
        return SUM

    def summed(self, node: Any, name: str, vals: dict) -> Any:
        """Ops on sums over the rows (and on [C, rows] matrices): linear ones keep a sum (shares of the chunks of
        rows add up to the whole); anything else is not known to."""
        tensors = {n: v for n, v in vals.items() if hasattr(v, "op")}
        states = {n: self.k(v) for n, v in tensors.items()}
        sums = [n for n, st in states.items() if st is SUM]
        others = [n for n, st in states.items() if st is not SUM]
        whole_rest = all(states[n] == WHOLE for n in others)
        if name in ("t", "transpose", "permute") and states.get("self") is COLS and len(states) == 1:
            swap = (name == "t" or name == "permute" and [_norm_dim(d, 2) for d in vals["dims"]] == [1, 0]
                    or name == "transpose" and {_norm_dim(vals["dim0"], 2), _norm_dim(vals["dim1"], 2)} == {0, 1})
            if swap:
                self.rows_of(node, 1)
                return 1  # (a [C, rows] matrix transposed back: rows again)
        if name == "mm":
            a, b = vals["self"], vals["mat2"]
            ka, kb = self.k(a), self.k(b)
            sa, sb = _shape(a), _shape(b)
            if ka is COLS and kb == 1 and sa and sb and len(sb) == 2 and sa[1] // self.n == sb[0] // self.n:
                return SUM  # (sum over the rows of row i's outer products: the weight's gradient of a linear layer)
            if sums and whole_rest:
                return SUM
        elif name in ("add", "sub") and not others and len(sums) == 2:
            return SUM
        elif name in ("mul", "div") and len(sums) == 1 and whole_rest and (name == "mul" or sums == ["self"]):
            return SUM
        elif name in ("neg", "clone", "alias", "detach", "_to_copy", "convert_element_type", "sum") \
                or name in _VIEWS or name in ("permute", "transpose", "t", "unsqueeze", "squeeze", "expand"):
            if sums == ["self"] and whole_rest:
                return SUM
        elif name == "where":  # (where(mask, 0, sum): a masked gradient)
            if sums and whole_rest and len(sums) == 1 and sums[0] in ("self", "other") \
                    and _is_zeros(vals["other" if sums[0] == "self" else "self"]):
                return SUM
        elif name in ("index_put", "_unsafe_masked_index_put_accumulate"):  # (a sum scattered into zeros at whole
            # indices: the position embedding's gradient)
            if sums == ["values"] and whole_rest and (vals.get("accumulate") or "mask" in vals) \
                    and _is_zeros(vals["self"]):
                return SUM
        elif name == "embedding_dense_backward":  # (the same, as one op)
            if sums == ["grad_output"] and whole_rest and not vals.get("scale_grad_by_freq"):
                return SUM
        what = "a [C, rows] matrix" if any(st is COLS for st in states.values()) else "a sum over rows"
        raise _NotRowLocal(f"{_qualname(node)} of {what} is not known to keep it")

    def layer_norm(self, node: Any, name: str, vals: dict) -> tuple:
        """Normalized over trailing dims past the rows: the output (its gradient) and the per-row statistics are
        row-local; the weight's and bias's gradients sum over the rows."""
        x = vals["input"]
        k, shape = self.k(x), _shape(x)
        if shape is None or not k or k > len(shape) - len(vals["normalized_shape"]):
            raise _NotRowLocal(f"{_qualname(node)} works along a row dim")
        if any(self.k(vals.get(w)) != WHOLE for w in ("weight", "bias")):
            raise _NotRowLocal(f"{_qualname(node)}: a row-indexed weight")
        if name == "native_layer_norm_backward" and any(self.k(vals[a]) != k for a in ("grad_out", "mean", "rstd")):
            raise _NotRowLocal(f"{_qualname(node)}: operands with different row dims")
        if name == "native_layer_norm":
            return self.each(node, lambda i, s: k)
        return self.each(node, lambda i, s: k if i == 0 else SUM)  # (the weight's, bias's: sums over rows)


def _sum_rows(x: Any, dims: list, shape: list, dtype: Any = None) -> Any:
    """(The restricted graph's) sum over the rows' dim and ``dims``, shaped as the full graph's sum."""
    import torch

    return torch.ops.aten.sum.dim_IntList(x, dims, False, dtype=dtype).reshape(shape)


def _is_zeros(a: Any) -> bool:
    """A constant zero: the scalar 0, or a factory node filling with 0 (``full(..., 0)``, ``zeros``)."""
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return a == 0
    if not hasattr(a, "op") or a.op != "call_function" or _opname(a) not in _ZERO_FACTORIES:
        return False
    if _opname(a) in ("zeros", "new_zeros", "zeros_like"):
        return True
    schema = getattr(a.target, "_schema", None)
    fill = _bind(schema, a).get("fill_value") if schema is not None else None
    return isinstance(fill, (int, float)) and not isinstance(fill, bool) and fill == 0


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

    last = [n for n in gm.graph.nodes if n.op == "placeholder"][-1:]
    taken = an.taken & need
    rows = None
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = g.placeholder(n.name)
            if taken and n in last:
                rows = g.placeholder("gpuemu_sampled_rows")  # (the sampled rows' indices: RowPlan.takes_rows)
        elif n in taken:
            s = _shape(n)
            k = an.state[n]
            b = an.block(s, k)
            whole = g.node_copy(n, lambda a: env[a])
            blocks = g.call_function(torch.ops.aten.reshape.default, (whole, [an.n, b, *s[k:]]))
            picked = g.call_function(torch.ops.aten.index_select.default, (blocks, 0, rows))
            env[n] = g.call_function(torch.ops.aten.reshape.default, (picked, an.restricted(s, k)))
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

    ``cap_bytes`` bounds what the restricted evaluations may allocate (the hook's ``max_scratch_bytes``, and on
    CUDA a quarter of free memory when the plan is made); ``rows`` caps the sampled rows (default
    :data:`gpuemu.hook.large.ROWS`), fewer when that many rows exceed ``cap_bytes`` (whole sequences of a
    long context). The row unit is tried from each input's leading dims (:func:`_candidates`: the tokens of
    [B, T] logits, or the sequences B of [B, T] token ids, which attention keeps apart) and the plan comparing
    the most row-indexed outputs is kept (on a tie, the one with more rows).
    """
    from ..hook.large import ROWS

    rows = rows or ROWS
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    best: RowPlan | None = None
    why = None  # (the first candidate's: the others are tried in case it is not the row unit)
    for n, blocks in _candidates(placeholders)[:MAX_TRIES]:
        for promote in (False, True):
            plan = _plan_for(gm, placeholders, n, min(n, rows), cap_bytes, blocks, promote)
            if isinstance(plan, str):
                why = why or plan
            elif best is None or (_row_outputs(plan), plan.n_rows, not plan.takes_rows) > \
                    (_row_outputs(best), best.n_rows, not best.takes_rows):
                best = plan
    return best if best is not None else why or "no input with rows"


def _candidates(placeholders: list) -> list[tuple[int, frozenset]]:
    """Row units to try: (row count N, leading indices per row an input may hold). Every proper prefix of an
    input's dims gives one (a [B, T, V] input: N = B*T, each row one index; and N = B, a row T or T*V indices
    of a flattened [B*T, V] value); integer inputs (token ids, targets) first, then the largest. The block sizes
    come from the input that proposed N only: a weight whose leading dim is a multiple of N is not taken for
    rows by coincidence (the rows of a value computed in the graph need no such guess)."""
    import torch

    found: dict = {}
    order = []
    for p in placeholders:
        s = _shape(p)
        if not s:
            continue
        val = p.meta.get("val")
        key = (0 if not val.is_floating_point() else 1, -math.prod(s))
        for j in range(1, max(len(s), 2)):
            n = math.prod(s[:j])
            if n <= 1:
                continue
            blocks = frozenset(math.prod(s[j:l]) for l in range(j, len(s) + 1))
            order.append((key, -j, n, blocks))
    for _, _, n, blocks in sorted(order, key=lambda t: (t[0], t[1])):
        found.setdefault(n, blocks)
    return list(found.items())


def _row_outputs(plan: RowPlan) -> int:
    return sum(1 for k in plan.outputs.values() if k != WHOLE)


def _plan_for(gm: Any, placeholders: list, n: int, m: int, cap_bytes: int,
              blocks: frozenset = frozenset({1}), promote: bool = False, fixed: bool = False) -> RowPlan | str:
    an = _Analysis(gm, n, m, blocks, promote=promote)
    an.run()
    outs = _outputs(gm)
    checked: dict = {}
    unchecked: dict = {}
    for i, o in enumerate(outs):
        if not hasattr(o, "op") or o.op == "placeholder" or not _is_float(o):
            continue  # (an input passed through, an integer output, None: nothing to compare)
        k = an.state.get(o)
        if k is None or isinstance(k, tuple):
            unchecked[i] = an.cause.get(o, "not row-local")
        elif k == WHOLE and o.op == "get_attr":
            continue
        else:
            checked[i] = k
    if not any(k != WHOLE for k in checked.values()):
        first = next(iter(unchecked.values()), "no floating output")
        return f"no output is row-local: {first}"
    keep = [outs[i] for i in checked]
    need = _needed(keep)
    sums = any(k is SUM for k in checked.values())
    if sums and not fixed:  # every row is evaluated, in chunks of m rows that divide them: as few chunks as fit
        m = n
    est = _peak_bytes(gm, an, need, m)
    if isinstance(est, str):
        return est
    if sums and not fixed or est > cap_bytes:  # fewer rows (whole sequences are large): the most that fit
        fit = m
        if est > cap_bytes:
            lo, hi = 0, m  # (the peak grows with the rows: the largest count within the cap, by bisection)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if _peak_bytes(gm, an, need, mid) <= cap_bytes else (lo, mid)
            fit = lo
        if sums:
            fit = max((d for d in range(1, fit + 1) if n % d == 0), default=0)
        if not fit:
            return "sampled rows exceed max_scratch_bytes"
        return _plan_for(gm, placeholders, n, fit, cap_bytes, blocks, promote, fixed=True)
    try:
        rgm = _restricted_graph(gm, an, keep)
    except Exception as e:  # (an op the builder cannot copy: no plan, and it says why)
        return f"restricted graph: {type(e).__name__}: {e}"
    states = tuple(an.state.get(p, WHOLE) for p in placeholders)
    return RowPlan(n_rows=n, m=m, inputs=states, outputs=checked, unchecked=unchecked, gm=rgm, est_bytes=est,
                   shapes=tuple(_shape(p) for p in placeholders), takes_rows=bool(an.taken & need))


def _peak_bytes(gm: Any, an: _Analysis, need: set, m: int) -> int | str:
    """An upper bound on what the restricted graph's three evaluations hold at once with ``m`` rows: each value in
    fp64 from its node to its last use (inputs and outputs throughout), three times (the fp64 run, the control in
    the original dtypes, whose outputs are kept, and the control on inputs nudged by an ulp, whose moves are kept in
    fp64); or why it is not known (a symbolic shape)."""
    order = [n for n in gm.graph.nodes if n in need]
    size: dict = {}
    keep_set = set(_outputs(gm))
    for node in order:
        s = _shape(node)
        if s is None and (_is_tensor(node) or (node.op == "placeholder" and "val" not in node.meta)):
            return f"no static shape at {node.name}"
        k = an.state[node]
        whole = k is SUM or (not k and k is not COLS)
        size[node] = 0 if s is None else 8 * (math.prod(s) if whole else m * math.prod(s) // an.n)
        if k is SUM and node in keep_set:
            size[node] *= 3  # (and the chunks' sums in fp64: the reference's and the control's)
        if node in an.taken:
            size[node] += 8 * math.prod(s)  # (computed whole before its rows are taken; counted till its last use)
    return 3 * _live_peak(order, size, _last_uses(order), {n for n in order if n.op == "placeholder"})


def whole_peak_bytes(gm: Any) -> int | None:
    """An upper bound on what the whole-graph judge holds at once when it re-runs ``gm``: each value in fp64 from
    its node to its last use (views free; the inputs' fp64 copies and the outputs throughout), three times (the
    fp64 run, the control in the original dtypes and the control nudged by an ulp); None when a shape is symbolic.
    Measured on an H100 (bench/gpu_session_l.md): GPT-2's forward at 64 x 256 tokens takes 1 GB of inputs and its
    fp64 re-run peaked at 76 GB, its [16384, 50257] logits and their softmax in fp64."""
    order = [n for n in gm.graph.nodes if n.op != "output"]
    last = _last_uses(order)
    keep = set(_outputs(gm))
    views = {node for node in order if node.op == "call_function" and getattr(node.target, "is_view", False)}
    for i in range(len(order) - 1, -1, -1):  # (a view keeps its base alive: till the view's last use, or the end)
        node = order[i]
        base = node.args[0] if node in views and node.args and hasattr(node.args[0], "op") else None
        if base is not None:
            if node in keep:
                keep.add(base)
            last[base] = max(last.get(base, i), last.get(node, i))
    size: dict = {}
    for node in order:
        if _is_tensor(node):
            s = _shape(node)
            if s is None:
                return None
            size[node] = 0 if node in views else 8 * math.prod(s)
        else:
            size[node] = 0
    return 3 * _live_peak(order, size, last, keep | {n for n in order if n.op == "placeholder"})


def _last_uses(order: list) -> dict:
    """Each node's last use: the position in ``order`` of the last node that reads it."""
    last: dict = {}
    for i, node in enumerate(order):
        for a in _flat(list(node.args) + list(node.kwargs.values())):
            if hasattr(a, "op"):
                last[a] = i
    return last


def _live_peak(order: list, size: dict, last: dict, alive: set) -> int:
    """The most bytes alive at once, each node's ``size`` held from its position in ``order`` to its ``last`` use
    (those in ``alive`` to the end)."""
    dies: dict = {}
    for a, j in last.items():
        if a not in alive:
            dies.setdefault(j, []).append(a)
    live = peak = 0
    for i, node in enumerate(order):
        live += size[node]
        peak = max(peak, live)
        live -= sum(size[a] for a in dies.get(i, ()))
    return peak


def take_rows(t: Any, k: int, idx: list[int], n: int | None = None) -> Any:
    """Rows ``idx`` of ``n`` of ``t`` whose leading ``k`` dims flatten to ``n`` blocks of equal length (default:
    one index a row): shape [len(idx) * block, *t.shape[k:]], indexed without copying anything but those rows
    (``t`` may be a strided view)."""
    import numpy as np
    import torch

    if k is SUM or k == WHOLE:
        return t
    if k is COLS:  # (a [C, rows] matrix: the rows' columns)
        r = t.shape[1] // n
        flat = np.asarray(idx, dtype=np.int64)
        flat = (flat[:, None] * r + np.arange(r, dtype=np.int64)[None, :]).reshape(-1)
        return t.index_select(1, torch.as_tensor(flat, device=t.device))
    lead = math.prod(t.shape[:k])
    r = lead // n if n else 1
    flat = np.asarray(idx, dtype=np.int64)
    if r != 1:
        flat = (flat[:, None] * r + np.arange(r, dtype=np.int64)[None, :]).reshape(-1)
    if k == 1:
        return t.index_select(0, torch.as_tensor(flat, device=t.device))
    coords = np.unravel_index(flat, tuple(t.shape[:k]))
    return t[tuple(torch.as_tensor(c, device=t.device) for c in coords)]


__all__ = ["RowPlan", "plan_rows", "take_rows", "whole_peak_bytes", "WHOLE", "SUM", "COLS"]
