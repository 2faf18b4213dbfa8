"""The ops of shared/OPS.md: fp64 references, error scales and mpmath element checks.

Error scales (the ``scale`` in ``bound = atol + rtol * scale``) follow forward error analysis: a correct
kernel's rounding error is proportional to them, so one rtol per op and dtype fits every input, including
inputs with cancellation (where |ref| is tiny) or huge spread (where |ref| says nothing about the error).
"""

from __future__ import annotations

import dataclasses
import math
import weakref

import mpmath
import torch
import torch.nn.functional as F

from ._spec import ArgSpec, OpSpec

mp = mpmath.mp
A = ArgSpec

# ---------------------------------------------------------------- helpers


def _row(t, index) -> list:
    return [mpmath.mpf(float(v)) for v in t[tuple(index)].reshape(-1).tolist()]


def _mp_gelu(x):
    return x * (1 + mpmath.erf(x / mpmath.sqrt(2))) / 2


def _mp_gelu_tanh(x):
    return x * (1 + mpmath.tanh(mpmath.sqrt(2 / mpmath.pi) * (x + mpmath.mpf("0.044715") * x**3))) / 2


def _mp_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def _mp_lse(row):
    m = max(row)
    # terms below exp(-cut) of the largest one change no digit of the 50 kept (N <= e^12 of them at most):
    # skipping them spares an mpmath exp each where logits spread widely
    cut = m - (mpmath.mp.dps * math.log(10) + 2 * math.log(len(row)) + 10)
    return m + mpmath.log(mpmath.fsum(mpmath.exp(v - m) for v in row if v > cut))


def _elementwise_mp(fn):
    def element(inputs, kwargs, index):
        args = [mpmath.mpf(float(t[tuple(index)])) for t in inputs.values()]
        return fn(*args)

    return element


def _unary_scale(inputs, kwargs, ref):
    # |ref| plus |x|: activations computed through exp/erf lose absolute (not relative) accuracy
    # where they cancel (gelu's x*Phi(x) for x << 0, tanh near 0 via exp).
    return ref.abs() + inputs["x"].abs()


def _gated_scale(act):
    def scale(inputs, kwargs, ref):
        a, b = inputs["a"], inputs["b"]
        return (act(a).abs() + a.abs()) * b.abs()

    return scale


# ---------------------------------------------------------------- elementwise

def _gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


_UNARY = {
    "relu": (torch.relu, lambda x: max(x, 0), "max(x, 0)"),
    "sigmoid": (torch.sigmoid, _mp_sigmoid, "1 / (1 + exp(-x))"),
    "tanh": (torch.tanh, mpmath.tanh, "tanh(x)"),
    "exp": (torch.exp, mpmath.exp, "exp(x)"),
    "gelu": (F.gelu, _mp_gelu, "x * Phi(x), exact erf form"),
    "gelu_tanh": (_gelu_tanh, _mp_gelu_tanh, "tanh approximation of gelu"),
    "silu": (F.silu, lambda x: x * _mp_sigmoid(x), "x * sigmoid(x)"),
    "softplus": (lambda x: torch.logaddexp(x, torch.zeros_like(x)),
                 lambda x: mpmath.log(1 + mpmath.exp(x)), "log(1 + exp(x))"),
}

OPS: dict[str, OpSpec] = {}


def _add(spec: OpSpec) -> None:
    OPS[spec.name] = spec


for _name, (_ref, _mpf, _meaning) in _UNARY.items():
    if _name == "exp":
        # exp(x) computed as exp2(x*log2(e)) carries the rounding of the product, |x| ulps of ref.
        _scale, _doc = (lambda i, k, r: r.abs() * (1 + i["x"].abs())), "|ref| * (1 + |x|)"
    else:
        _scale, _doc = _unary_scale, "|ref| + |x|"
    _add(OpSpec(
        name=_name, signature="f(x)", meaning=_meaning, args=(A("x", ("...", "N")),),
        dims={"N": "tiled"}, has_batch=True,
        reference=(lambda f: (lambda x: f(x)))(_ref), error_scale=_scale, scale_doc=_doc,
        mp_element=_elementwise_mp(_mpf),
    ))

_add(OpSpec(
    name="add", signature="f(x, y)", meaning="x + y, same shape",
    args=(A("x", ("...", "N")), A("y", ("...", "N"))), dims={"N": "tiled"}, has_batch=True,
    reference=lambda x, y: x + y, error_scale=lambda i, k, r: i["x"].abs() + i["y"].abs(),
    scale_doc="|x| + |y|", mp_element=_elementwise_mp(lambda x, y: x + y),
))
_add(OpSpec(
    name="mul", signature="f(x, y)", meaning="x * y, same shape",
    args=(A("x", ("...", "N")), A("y", ("...", "N"))), dims={"N": "tiled"}, has_batch=True,
    reference=lambda x, y: x * y, error_scale=lambda i, k, r: r.abs(), scale_doc="|ref|",
    mp_element=_elementwise_mp(lambda x, y: x * y), magnitude="product",
))
for _name, _act, _mpa, _meaning in (
    ("swiglu", F.silu, lambda a: a * _mp_sigmoid(a), "silu(a) * b"),
    ("geglu", F.gelu, _mp_gelu, "gelu(a) * b"),
    ("geglu_tanh", _gelu_tanh, _mp_gelu_tanh, "gelu_tanh(a) * b"),
):
    _add(OpSpec(
        name=_name, signature="f(a, b)", meaning=_meaning,
        args=(A("a", ("...", "N")), A("b", ("...", "N"))), dims={"N": "tiled"}, has_batch=True,
        reference=(lambda f: (lambda a, b: f(a) * b))(_act), error_scale=_gated_scale(_act),
        scale_doc="(|act(a)| + |a|) * |b|", mp_element=_elementwise_mp((lambda f: lambda a, b: f(a) * b)(_mpa)),
        magnitude="product",
    ))

# ---------------------------------------------------------------- reductions over the last dim


_ROWS: dict[int, dict] = {}  # id(array) -> {(fn, row, dps): value}, dropped when the array is


def _cached(x, fn, row_index, compute):
    """``compute()`` once per (array ``x``, function ``fn``, row, precision): the guards check several elements,
    often of the same row, and a row's mpmath value costs N exps (an attention query's, Nk dots)."""
    per_array = _ROWS.get(id(x))
    if per_array is None:
        per_array = _ROWS[id(x)] = {}
        weakref.finalize(x, _ROWS.pop, id(x), None)
    key = (fn, tuple(row_index), mpmath.mp.dps)
    if key not in per_array:
        per_array[key] = compute()
    return per_array[key]


def _row_result(fn, x, row_index):
    """``fn`` of one row of ``x`` at the working precision, computed once per (array, row, function)."""
    return _cached(x, fn, row_index, lambda: fn(_row(x, row_index)))


def _red_mp(fn):
    def element(inputs, kwargs, index):
        return _row_result(fn, inputs["x"], index)

    return element


def _scan_mp(fn):
    def element(inputs, kwargs, index):
        return _row_result(fn, inputs["x"], index[:-1])[index[-1]]

    return element


_X = (A("x", ("...", "N")),)
_add(OpSpec(
    name="sum", signature="f(x) -> x.shape[:-1]", meaning="sum over last dim", args=_X,
    dims={"N": "reduced"}, has_batch=True, reference=lambda x: x.sum(-1),
    error_scale=lambda i, k, r: i["x"].abs().sum(-1), scale_doc="sum |x|",
    mp_element=_red_mp(mpmath.fsum), magnitude="sum",
))
_add(OpSpec(
    name="mean", signature="f(x) -> x.shape[:-1]", meaning="mean over last dim", args=_X,
    dims={"N": "reduced"}, has_batch=True, reference=lambda x: x.mean(-1),
    error_scale=lambda i, k, r: i["x"].abs().mean(-1), scale_doc="mean |x|",
    mp_element=_red_mp(lambda row: mpmath.fsum(row) / len(row)), magnitude="sum",
))
_add(OpSpec(
    name="amax", signature="f(x) -> x.shape[:-1]", meaning="max over last dim", args=_X,
    dims={"N": "reduced"}, has_batch=True, reference=lambda x: x.amax(-1),
    error_scale=lambda i, k, r: r.abs(), scale_doc="|ref| (exact in any dtype)", mp_element=_red_mp(max),
    exact_reference=True,
))


def _argmax_ref(x):
    # first index on ties: torch.argmax does not promise which tied index it returns
    m = x.amax(-1, keepdim=True)
    n = x.shape[-1]
    idx = torch.arange(n, dtype=torch.int64).expand_as(x)
    return torch.where(x == m, idx, torch.full_like(idx, n)).amin(-1)


_add(OpSpec(
    name="argmax", signature="f(x) -> int64, x.shape[:-1]", meaning="index of the max over last dim; first on ties",
    args=_X, dims={"N": "reduced"}, has_batch=True, reference=_argmax_ref, out_kind="index",
    error_scale=lambda i, k, r: torch.zeros_like(r, dtype=torch.float64), scale_doc="exact match",
    mp_element=_red_mp(lambda row: row.index(max(row))), exact_reference=True,
))


def _prefix(row):
    out, acc = [], mpmath.mpf(0)
    for v in row:
        acc += v
        out.append(acc)
    return out


_add(OpSpec(
    name="cumsum", signature="f(x)", meaning="inclusive prefix sum over last dim", args=_X,
    dims={"N": "reduced"}, has_batch=True, reference=lambda x: x.cumsum(-1),
    error_scale=lambda i, k, r: i["x"].abs().cumsum(-1), scale_doc="prefix sum of |x|",
    mp_element=_scan_mp(_prefix), magnitude="sum",
))


def _softmax_scale(inputs, kwargs, ref):
    x = inputs["x"]
    # exp(x - max) carries the rounding of the exponent's argument: |x - max| ulps for a plain
    # subtraction, |x| + |max| ulps for exp2(x*log2e - max*log2e) (the fast form real kernels use)
    return ref * (1 + x.abs() + x.amax(-1, keepdim=True).abs())


def _mp_softmax(row):
    m = max(row)
    e = [mpmath.exp(v - m) for v in row]
    s = mpmath.fsum(e)
    return [v / s for v in e]


_add(OpSpec(
    name="softmax", signature="f(x)", meaning="softmax over last dim", args=_X, dims={"N": "reduced"},
    has_batch=True, reference=lambda x: torch.softmax(x, -1), error_scale=_softmax_scale,
    scale_doc="ref * (1 + |x| + |max x|)", mp_element=_scan_mp(_mp_softmax), long_rows={"N": 65536},
))


def _mp_log_softmax(row):
    lse = _mp_lse(row)  # once per row: recomputing it per element made the guard cost N^2 mpmath exps
    return [v - lse for v in row]


def _lse_terms(x):
    return x.abs().amax(-1, keepdim=True)


_add(OpSpec(
    name="log_softmax", signature="f(x)", meaning="log-softmax over last dim", args=_X, dims={"N": "reduced"},
    has_batch=True, reference=lambda x: torch.log_softmax(x, -1),
    error_scale=lambda i, k, r: 1 + i["x"].abs() + _lse_terms(i["x"]),
    scale_doc="1 + |x| + max|x|", mp_element=_scan_mp(_mp_log_softmax), long_rows={"N": 65536},
))
_add(OpSpec(
    name="logsumexp", signature="f(x) -> x.shape[:-1]", meaning="log(sum(exp(x))) over last dim", args=_X,
    dims={"N": "reduced"}, has_batch=True, reference=lambda x: torch.logsumexp(x, -1),
    error_scale=lambda i, k, r: 1 + _lse_terms(i["x"]).squeeze(-1), scale_doc="1 + max|x|",
    mp_element=_red_mp(_mp_lse),
))

# ---------------------------------------------------------------- normalisations


def _layernorm_ref(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def _layernorm_scale(inputs, kwargs, ref):
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    mu = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + kwargs.get("eps", 1e-5))
    # the mean is known to eps * mean|x|, which every centred element inherits
    return ((x - mu).abs() + x.abs().mean(-1, keepdim=True)) * rstd * w.abs() + b.abs()


def _mp_mean_var(row):
    n = len(row)
    mu = mpmath.fsum(row) / n
    return row, mu, mpmath.fsum((v - mu) ** 2 for v in row) / n


def _mp_layernorm(inputs, kwargs, index):
    row, mu, var = _row_result(_mp_mean_var, inputs["x"], index[:-1])
    j = index[-1]
    w = mpmath.mpf(float(inputs["weight"][j]))
    b = mpmath.mpf(float(inputs["bias"][j]))
    return (row[j] - mu) / mpmath.sqrt(var + mpmath.mpf(kwargs.get("eps", 1e-5))) * w + b


_add(OpSpec(
    name="layernorm", signature="f(x, weight, bias, eps=1e-5)",
    meaning="(x - mean) / sqrt(var_biased + eps) * weight + bias over last dim",
    args=(A("x", ("...", "N")), A("weight", ("N",), values="normal"), A("bias", ("N",), values="normal")),
    dims={"N": "reduced"},
    has_batch=True, kwargs={"eps": 1e-5}, reference=_layernorm_ref, error_scale=_layernorm_scale,
    scale_doc="(|x - mean| + mean|x|) * rstd * |w| + |b|", mp_element=_mp_layernorm, magnitude="norm",
))


def _rmsnorm_ref(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rmsnorm_scale(inputs, kwargs, ref):
    x, w = inputs["x"], inputs["weight"]
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + kwargs.get("eps", 1e-6))
    return (x.abs() * rstd + 1e-30) * w.abs()


def _mp_mean_square(row):
    return row, mpmath.fsum(v * v for v in row) / len(row)


def _mp_rmsnorm(inputs, kwargs, index):
    row, ms = _row_result(_mp_mean_square, inputs["x"], index[:-1])
    j = index[-1]
    return row[j] / mpmath.sqrt(ms + mpmath.mpf(kwargs.get("eps", 1e-6))) * mpmath.mpf(float(inputs["weight"][j]))


_add(OpSpec(
    name="rmsnorm", signature="f(x, weight, eps=1e-6)", meaning="x / sqrt(mean(x^2) + eps) * weight over last dim",
    args=(A("x", ("...", "N")), A("weight", ("N",), values="normal")), dims={"N": "reduced"}, has_batch=True,
    kwargs={"eps": 1e-6}, reference=_rmsnorm_ref, error_scale=_rmsnorm_scale,
    scale_doc="|x| * rstd * |w|", mp_element=_mp_rmsnorm, magnitude="norm",
))

# ---------------------------------------------------------------- contractions


def _mp_dot(arow, bcol):
    return mpmath.fsum(mpmath.mpf(float(p)) * mpmath.mpf(float(q)) for p, q in zip(arow, bcol))


_MM_LIMITS = {"M": (1, 160), "N": (1, 160), "K": (1, 200)}
_MM_REAL = {"M": (257, 1100), "N": (257, 1100), "K": (257, 1100)}  # a 1024-wide GEMM and its tile edges
_add(OpSpec(
    name="matmul", signature="f(a[M,K], b[K,N]) -> [M,N]", meaning="a @ b",
    args=(A("a", ("M", "K")), A("b", ("K", "N"))), dims={"M": "tiled", "N": "tiled", "K": "contracted"},
    reference=lambda a, b: a @ b, error_scale=lambda i, k, r: i["a"].abs() @ i["b"].abs(),
    scale_doc="|a| @ |b| (forward error bound gamma_K |A||B|)", magnitude="dot", dim_limits=_MM_LIMITS,
    real_sizes=_MM_REAL,
    mp_element=lambda i, k, idx: _mp_dot(i["a"][idx[0], :].tolist(), i["b"][:, idx[1]].tolist()),
))
_add(OpSpec(
    name="bmm", signature="f(a[B,M,K], b[B,K,N]) -> [B,M,N]", meaning="batched a @ b",
    args=(A("a", ("B", "M", "K")), A("b", ("B", "K", "N"))),
    dims={"B": "batch", "M": "tiled", "N": "tiled", "K": "contracted"},
    reference=lambda a, b: a @ b, error_scale=lambda i, k, r: i["a"].abs() @ i["b"].abs(),
    scale_doc="|a| @ |b|", magnitude="dot", dim_limits={"B": (1, 4), "M": (1, 96), "N": (1, 96), "K": (1, 160)},
    real_sizes=_MM_REAL,
    mp_element=lambda i, k, idx: _mp_dot(i["a"][idx[0], idx[1], :].tolist(), i["b"][idx[0], :, idx[2]].tolist()),
))


def _linear_ref(x, w, bias=None):
    out = x @ w.T
    return out if bias is None else out + bias


def _linear_scale(inputs, kwargs, ref):
    s = inputs["x"].abs() @ inputs["w"].abs().T
    b = inputs.get("bias")
    return s if b is None else s + b.abs()


def _mp_linear(i, k, idx):
    v = _mp_dot(i["x"][tuple(idx[:-1])].tolist(), i["w"][idx[-1]].tolist())
    b = i.get("bias")
    return v if b is None else v + mpmath.mpf(float(b[idx[-1]]))


_add(OpSpec(
    name="linear", signature="f(x[...,K], w[N,K], bias[N] or None) -> [...,N]", meaning="x @ w.T + bias",
    args=(A("x", ("...", "K")), A("w", ("N", "K")), A("bias", ("N",), optional=True, values="normal")),
    dims={"N": "tiled", "K": "contracted"}, has_batch=True, reference=_linear_ref, error_scale=_linear_scale,
    scale_doc="|x| @ |w|.T + |bias|", magnitude="dot", dim_limits={"N": (1, 160), "K": (1, 200)},
    real_sizes={"...": _MM_REAL["M"], "N": _MM_REAL["N"], "K": _MM_REAL["K"]},  # x's rows are the GEMM's M
    mp_element=_mp_linear,
))


_LAST_PROBS: tuple = ()  # (q ref, k ref, causal, q version, k version, scores, probs): see _attention_scores


def _attention_scores(q, k, causal):
    """(scores q k^T / sqrt(D), masked; their softmax) in fp64. The reference, the error scale and the rounded
    magnitude all need them for the same q and k, one after the other: computed once for the last (q, k)."""
    global _LAST_PROBS
    last = _LAST_PROBS
    if last and last[0]() is q and last[1]() is k and last[2] == causal and last[3:5] == (q._version, k._version):
        return last[5], last[6]
    d = q.shape[-1]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        nq, nk = q.shape[-2], k.shape[-2]
        i = torch.arange(nq).unsqueeze(-1)
        j = torch.arange(nk).unsqueeze(0)
        s = s.masked_fill(j > i + nk - nq, float("-inf"))
    p = torch.softmax(s, -1)
    _LAST_PROBS = (weakref.ref(q), weakref.ref(k), causal, q._version, k._version, s, p)
    return s, p


def _attention_probs(q, k, causal):
    return _attention_scores(q, k, causal)[1]


def _attention_ref(q, k, v, causal=False):
    return _attention_probs(q, k, bool(causal)) @ v


def _attention_scale(inputs, kwargs, ref):
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    p = _attention_probs(q, k, bool(kwargs.get("causal", False)))
    # a score q.k/sqrt(D) is known to about sqrt(D) * eps * (|q|.|k|)/sqrt(D) = eps * |q|.|k| (rounding
    # errors of a D-term dot product grow like sqrt(D)); it perturbs its weight relatively by that much,
    # and the row's normaliser by the weighted mean of those perturbations
    sabs = q.abs() @ k.abs().transpose(-1, -2)
    pv = p @ v.abs()
    # P @ V and the softmax normaliser are Nk-term sums: their rounding grows like sqrt(Nk) as well
    growth = math.sqrt(k.shape[-2])
    return growth * ((p * (1 + sabs)) @ v.abs() + pv * (p * sabs).sum(-1, keepdim=True))


def _attention_rounded(inputs, kwargs, ref):
    # P cast to the input dtype before P @ V (the tensor-core form of every flash kernel) errs by up to
    # u * P_ij per weight, u * (P @ |V|) in the output: unrelated to the fp32 terms of the scale above.
    # Eager attention (q @ k^T in the input dtype, then softmax) also stores each score s_ij rounded: a
    # relative error u * |s_ij| of its weight, (P*|S|) @ |V| in the output, and the same through the
    # normaliser, (P @ |V|) * rowsum(P*|S|)
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    s, p = _attention_scores(q, k, bool(kwargs.get("causal", False)))
    ps = torch.nan_to_num(p * s.abs(), nan=0.0)
    va = v.abs()
    return p @ va + ps @ va + (p @ va) * ps.sum(-1, keepdim=True)


def _mp_attention_probs(inputs, causal, b, h, i):
    q = inputs["q"][b, h, i].tolist()
    ks = inputs["k"][b, h]
    nq, nk, d = inputs["q"].shape[-2], ks.shape[0], len(q)
    scale = 1 / mpmath.sqrt(d)
    visible = range(nk) if not causal else range(min(nk, i + nk - nq + 1))
    return visible, _mp_softmax([_mp_dot(q, ks[j].tolist()) * scale for j in visible])


def _mp_attention(inputs, kwargs, index):
    b, h, i, dcol = index
    causal = bool(kwargs.get("causal"))
    # one query's probabilities serve its D output elements: computed once per (query, mask)
    visible, p = _cached(inputs["q"], (_mp_attention_probs, causal), (b, h, i),
                         lambda: _mp_attention_probs(inputs, causal, b, h, i))
    vs = inputs["v"][b, h]
    return mpmath.fsum(pj * mpmath.mpf(float(vs[j, dcol])) for pj, j in zip(p, visible))


def _attention_constraints(dims, kwargs):
    if kwargs.get("causal") and dims["Nq"] > dims["Nk"]:
        return "causal attention needs Nq <= Nk (otherwise the first queries see no key)"
    return None


_add(OpSpec(
    name="attention", signature="f(q[B,H,Nq,D], k[B,H,Nk,D], v[B,H,Nk,D], causal=False) -> [B,H,Nq,D]",
    meaning="softmax(q k^T / sqrt(D) (+ causal mask j <= i + Nk - Nq)) v",
    args=(A("q", ("B", "H", "Nq", "D")), A("k", ("B", "H", "Nk", "D")), A("v", ("B", "H", "Nk", "D"))),
    dims={"B": "batch", "H": "batch", "Nq": "tiled", "Nk": "reduced", "D": "head"},
    kwargs={"causal": False}, reference=_attention_ref, error_scale=_attention_scale,
    scale_doc="sqrt(Nk) * ((P*(1+S)) @ |V| + (P @ |V|) * rowsum(P*S)), S = |q| @ |k|^T",
    mp_element=_mp_attention, magnitude="dot", constraints=_attention_constraints,
    rounded=_attention_rounded,
    rounded_doc="P @ |V| + (P*|S|) @ |V| + (P @ |V|) * rowsum(P*|S|) (P cast to the input dtype before P @ V; "
                "eager attention's scores S = q k^T / sqrt(D) stored in the input dtype)",
    dim_limits={"B": (1, 2), "H": (1, 2), "Nq": (1, 160), "Nk": (1, 200), "D": (1, 128)},
    real_sizes={"Nq": (257, 2048), "Nk": (257, 2048), "D": (64, 128)},
    block_aliases={"M": "Nq", "N": "Nk", "DMODEL": "D", "HEAD": "D"}, online_softmax_dim="Nk",
))


def _xent_ref(logits, target):
    return torch.logsumexp(logits, -1) - logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)


def _xent_scale(inputs, kwargs, ref):
    x, t = inputs["logits"], inputs["target"]
    return 1 + x.abs().amax(-1) + x.gather(-1, t.unsqueeze(-1)).squeeze(-1).abs()


def _mp_xent(inputs, kwargs, index):
    x = inputs["logits"]
    return _row_result(_mp_lse, x, index) - mpmath.mpf(float(x[tuple(index)][int(inputs["target"][tuple(index)])]))


_add(OpSpec(
    name="cross_entropy", signature="f(logits[N,C], target[N] int64) -> [N]",
    meaning="logsumexp(logits) - logits[target], per row",
    args=(A("logits", ("N", "C")), A("target", ("N",), kind="index", index_of="C")),
    dims={"N": "batch", "C": "reduced"}, reference=_xent_ref, error_scale=_xent_scale,
    scale_doc="1 + max|logits| + |logits[target]|", mp_element=_mp_xent,
    dim_limits={"N": (1, 16), "C": (1, 1100)}, long_rows={"C": 65536}, block_aliases={"N": "C", "V": "C"},
))


def _rope_halves(x):
    h = x.shape[-1] // 2
    return x[..., :h], x[..., h:]


def _rope_ref(x, cos, sin):
    x1, x2 = _rope_halves(x)
    c = cos.unsqueeze(-2)  # [N,1,D/2] broadcasts over heads
    s = sin.unsqueeze(-2)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def _rope_scale(inputs, kwargs, ref):
    x1, x2 = _rope_halves(inputs["x"])
    c = inputs["cos"].unsqueeze(-2).abs()
    s = inputs["sin"].unsqueeze(-2).abs()
    t = x1.abs() * c + x2.abs() * s
    u = x2.abs() * c + x1.abs() * s
    return torch.cat([t, u], -1)


def _mp_rope(inputs, kwargs, index):
    b, n, h, d = index
    half = inputs["x"].shape[-1] // 2
    x = inputs["x"][b, n, h]
    j = d % half
    c = mpmath.mpf(float(inputs["cos"][n, j]))
    s = mpmath.mpf(float(inputs["sin"][n, j]))
    x1, x2 = mpmath.mpf(float(x[j])), mpmath.mpf(float(x[j + half]))
    return x1 * c - x2 * s if d < half else x2 * c + x1 * s


_add(OpSpec(
    name="rope", signature="f(x[B,N,H,D], cos[N,D/2], sin[N,D/2])",
    meaning="rotate-half (NeoX) rotary embedding: cat(x1*cos - x2*sin, x2*cos + x1*sin)",
    args=(A("x", ("B", "N", "H", "D")), A("cos", ("N", "D/2"), values="unit"), A("sin", ("N", "D/2"), values="unit")),
    dims={"B": "batch", "N": "tiled", "H": "batch", "D": "head"}, reference=_rope_ref, error_scale=_rope_scale,
    scale_doc="|x1||cos| + |x2||sin| (and the mirrored half)", mp_element=_mp_rope, magnitude="product",
    constraints=lambda d, k: None if d["D"] % 2 == 0 else "rope needs an even head dim D",
    dim_limits={"B": (1, 2), "N": (1, 64), "H": (1, 4), "D": (2, 128)},
    block_aliases={"HALF": "D"}, even_dims=("D",),
))
_add(OpSpec(
    name="embedding", signature="f(ids[...] int64, table[V,D]) -> [...,D]", meaning="table[ids]",
    args=(A("ids", ("...", "S"), kind="index", index_of="V"), A("table", ("V", "D"))),
    dims={"S": "tiled", "V": "index", "D": "tiled"}, has_batch=True,
    reference=lambda ids, table: table[ids], error_scale=lambda i, k, r: torch.zeros_like(r),
    scale_doc="exact copy", mp_element=lambda i, k, idx: mpmath.mpf(float(i["table"][int(i["ids"][tuple(idx[:-1])]), idx[-1]])),
    exact_reference=True,
    dim_limits={"S": (1, 64), "V": (1, 300), "D": (1, 300)},
))


# ---------------------------------------------------------------- the framework's eager forms
#
# Each op as PyTorch eager code (and Hugging Face's reference layers) writes it, on tensors in the input
# dtype. Where that code stores an intermediate in the input dtype, the op's ``rounded`` term allows its
# rounding exactly (measured first: with fp32-rounded-once tolerances `F.silu(a) * b` failed 34 of 60 fp16
# cases, HF's RMSNorm 50 of 60, eager rope 57 of 60; see README "Correct as the field means it").


def _eager_rmsnorm(x, weight, eps=1e-6):
    # Hugging Face LlamaRMSNorm.forward: statistics in fp32, normalised value cast back before * weight
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _eager_rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def _eager_rope(x, cos, sin):
    # Hugging Face apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, cos/sin repeated over both halves
    c = torch.cat([cos, cos], -1).unsqueeze(-2)
    s = torch.cat([sin, sin], -1).unsqueeze(-2)
    return x * c + _eager_rotate_half(x) * s


def _eager_attention(q, k, v, causal=False):
    # Hugging Face eager_attention_forward: scores in the input dtype, softmax in fp32 cast back, then P @ V
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        nq, nk = q.shape[-2], k.shape[-2]
        i = torch.arange(nq, device=q.device).unsqueeze(-1)
        j = torch.arange(nk, device=q.device).unsqueeze(0)
        s = s.masked_fill(j > i + nk - nq, float("-inf"))
    return torch.softmax(s, -1, dtype=torch.float32).to(q.dtype) @ v


_EAGER = {
    "relu": (torch.relu, "torch.relu(x)"),
    "sigmoid": (torch.sigmoid, "torch.sigmoid(x)"),
    "tanh": (torch.tanh, "torch.tanh(x)"),
    "exp": (torch.exp, "torch.exp(x)"),
    "gelu": (F.gelu, "F.gelu(x)"),
    "gelu_tanh": (_gelu_tanh, "F.gelu(x, approximate='tanh')"),
    "silu": (F.silu, "F.silu(x)"),
    "softplus": (F.softplus, "F.softplus(x)"),
    "add": (lambda x, y: x + y, "x + y"),
    "mul": (lambda x, y: x * y, "x * y"),
    "swiglu": (lambda a, b: F.silu(a) * b, "F.silu(a) * b"),
    "geglu": (lambda a, b: F.gelu(a) * b, "F.gelu(a) * b"),
    "geglu_tanh": (lambda a, b: _gelu_tanh(a) * b, "F.gelu(a, approximate='tanh') * b"),
    "sum": (lambda x: x.sum(-1), "x.sum(-1)"),
    "mean": (lambda x: x.mean(-1), "x.mean(-1)"),
    "amax": (lambda x: x.amax(-1), "x.amax(-1)"),
    "argmax": (_argmax_ref, "first index of x.amax(-1)"),
    "cumsum": (lambda x: x.cumsum(-1), "x.cumsum(-1)"),
    "softmax": (lambda x: torch.softmax(x, -1), "torch.softmax(x, -1)"),
    "log_softmax": (lambda x: F.log_softmax(x, -1), "F.log_softmax(x, -1)"),
    "logsumexp": (lambda x: torch.logsumexp(x, -1), "torch.logsumexp(x, -1)"),
    "layernorm": (_layernorm_ref, "F.layer_norm(x, x.shape[-1:], weight, bias, eps)"),
    "rmsnorm": (_eager_rmsnorm, "Hugging Face LlamaRMSNorm: weight * (h * rsqrt(mean(h^2) + eps)).to(dtype), h = x.float()"),
    "matmul": (lambda a, b: a @ b, "a @ b"),
    "bmm": (torch.bmm, "torch.bmm(a, b)"),
    "linear": (F.linear, "F.linear(x, w, bias)"),
    "attention": (_eager_attention, "Hugging Face eager attention: softmax(q @ k^T * D^-0.5, dtype=fp32).to(dtype) @ v"),
    "cross_entropy": (lambda logits, target: F.cross_entropy(logits, target, reduction="none"),
                      "F.cross_entropy(logits, target, reduction='none')"),
    "rope": (_eager_rope, "Hugging Face rotary: x * cos + rotate_half(x) * sin"),
    "embedding": (F.embedding, "F.embedding(ids, table)"),
}


def _lse_rounded(x, keepdim=True):
    """Per row: what eager code stores of a logsumexp in the input dtype. torch computes it as max + log(sum(
    exp(x - max))) with x - max, each exp and the sum stored (the log-sum errs by u * (2 + sum_i p_i |x_i - max|)),
    then the log term, then lse itself (|lse - max|, |max|, |lse|)."""
    m = x.amax(-1, keepdim=True)
    lse = torch.logsumexp(x, -1, keepdim=True)
    spread = (torch.softmax(x, -1) * (x - m).abs()).sum(-1, keepdim=True)
    out = 2 + spread + (lse - m).abs() + m.abs() + lse.abs()
    return out if keepdim else out.squeeze(-1)


_MIN_NORMAL = {"fp32": 2.0**-126, "fp16": 2.0**-14, "bf16": 2.0**-126}


def _stored(t, k):
    """|t| as the magnitude of its rounding when stored in the input dtype: below the dtype's smallest normal
    the rounding costs half a subnormal spacing, u * min_normal, whatever |t| (silu(a) of a = -20 is a
    subnormal in fp16)."""
    return t.abs().clamp_min(_MIN_NORMAL.get(k.get("_dtype") or "fp32", 0.0))


def _gated_rounded(act):
    # act(a) stored in the input dtype before * b (eager: F.silu(a) * b)
    return lambda i, k, r: _stored(act(i["a"]), k) * i["b"].abs()


def _rmsnorm_rounded(i, k, r):
    # the normalised value cast to the input dtype before * weight (Hugging Face's RMSNorm)
    x = i["x"]
    return _stored(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + k.get("eps", 1e-6)), k) * i["weight"].abs()


def _layernorm_rounded(i, k, r):
    # mixed-precision forms store the normalised value in the input dtype, then weight * it, then + bias
    x = i["x"]
    xhat = (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + k.get("eps", 1e-5))
    return 2 * _stored(xhat, k) * i["weight"].abs()


def _linear_rounded(i, k, r):
    # addmm in the input dtype: x @ w.T stored before the bias is added
    return (i["x"] @ i["w"].T).abs() if i.get("bias") is not None else torch.zeros_like(r)


_LSE_DOC = ("2 + sum p|x - max| + |lse - max| + |max| + |lse| (the row's x - max, exps, sum, log-sum and "
            "logsumexp stored in the input dtype)")
_ROUNDED = {
    "swiglu": (_gated_rounded(F.silu), "|silu(a)| * |b| (silu(a) stored in the input dtype)"),
    "geglu": (_gated_rounded(F.gelu), "|gelu(a)| * |b| (gelu(a) stored in the input dtype)"),
    "geglu_tanh": (_gated_rounded(_gelu_tanh), "|gelu_tanh(a)| * |b| (gelu_tanh(a) stored in the input dtype)"),
    "rmsnorm": (_rmsnorm_rounded, "|x * rstd| * |w| (the normalised value stored in the input dtype)"),
    "layernorm": (_layernorm_rounded, "2 |xhat| * |w| (xhat and w * xhat stored in the input dtype)"),
    "log_softmax": (lambda i, k, r: _lse_rounded(i["x"]), _LSE_DOC),
    "cross_entropy": (lambda i, k, r: _lse_rounded(i["logits"], keepdim=False), _LSE_DOC),
    "logsumexp": (lambda i, k, r: _lse_rounded(i["x"], keepdim=False), _LSE_DOC),
    "linear": (_linear_rounded, "|x @ w.T| when a bias is added (addmm's product stored in the input dtype)"),
    "rope": (_rope_scale, "|x1||cos| + |x2||sin| (eager rope's products stored in the input dtype)"),
}

for _name, (_fn, _doc) in _EAGER.items():
    OPS[_name] = dataclasses.replace(OPS[_name], eager=_fn, eager_doc=_doc)
for _name, (_fn, _doc) in _ROUNDED.items():
    OPS[_name] = dataclasses.replace(OPS[_name], rounded=_fn, rounded_doc=_doc)
for _name in ("sum", "mean", "logsumexp", "cross_entropy"):  # losses and statistics are often kept in fp32
    OPS[_name] = dataclasses.replace(OPS[_name], wider_output=True)


def known() -> list[str]:
    return sorted(OPS)


def _check_all() -> None:  # import-time sanity: every op names only dims it declares
    for spec in OPS.values():
        for arg in spec.args:
            for d in arg.shape:
                base = d[:-2] if d.endswith("/2") else d
                assert d == "..." or base in spec.dims, (spec.name, d)


_check_all()


