"""Dev check of the example kernel corpus (examples/kernels/manifest.yaml).

    TRITON_INTERPRET=1 python examples/kernels/_check.py [name-filter ...]

For every manifest entry:
  1. randn float32 inputs at allclose_shapes (seed 0; integer args uniform in range):
     torch.allclose(out.double(), ref, atol=1e-2, rtol=1e-2) must pass (buggy and correct alike).
  2. buggy: the trigger input must give an error far beyond float precision
     (normwise relative error >= 1e-2 or non-finite, and >= 100x torch's own error in that dtype); for the
     class "precision" (bugs of a few ulps by nature), >= 3x torch's own error in that dtype.
  3. correct: a battery of shapes (1, 2, 3, primes, 2^k +- 1, multi-block), layouts (transposed, step-2 slices,
     offset views, permuted 4-D), dtypes (fp32, fp16) and values (randn*1000, 1e4 + randn, ties, tiny) must stay
     within float error: err <= 16 * max(torch's own error in that dtype, rounding of the exact result) plus a
     conditioning allowance for ops whose output is sensitive to |x| * eps (softmax family, attention).
Prints one line per launcher and exits non-zero on any failure.
"""
import importlib.util
import math
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before the kernel modules are imported

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import yaml  # noqa: E402

np.seterr(all="ignore")
warnings.filterwarnings("ignore")
torch.set_num_threads(2)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
F32, F16 = torch.float32, torch.float16


# ============================================================================ op table
def _attention_ref(q, k, v, causal=False):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        Nq, Nk = q.shape[-2], k.shape[-2]
        i = torch.arange(Nq)[:, None]
        j = torch.arange(Nk)[None, :]
        s = s.masked_fill(j > i + Nk - Nq, float("-inf"))
    return torch.softmax(s, -1) @ v


def _rope_ref(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def _rms_ref(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# op -> (arg names, reference fn, primary args that value transforms apply to)
OPS = {
    "softmax": (["x"], lambda x: torch.softmax(x, -1), ["x"]),
    "matmul": (["a", "b"], lambda a, b: a @ b, ["a", "b"]),
    "attention": (["q", "k", "v"], _attention_ref, ["q", "k"]),
    "layernorm": (["x", "weight", "bias"], lambda x, w, b, eps=1e-5: F.layer_norm(x, (x.shape[-1],), w, b, eps), ["x"]),
    "rmsnorm": (["x", "weight"], _rms_ref, ["x"]),
    "cross_entropy": (["logits", "target"],
                      lambda l, t: torch.logsumexp(l, -1) - l.gather(-1, t[:, None])[:, 0], ["logits"]),
    "logsumexp": (["x"], lambda x: torch.logsumexp(x, -1), ["x"]),
    "argmax": (["x"], lambda x: torch.argmax(x, -1), ["x"]),
    "cumsum": (["x"], lambda x: torch.cumsum(x, -1), ["x"]),
    "sum": (["x"], lambda x: x.sum(-1), ["x"]),
    "mean": (["x"], lambda x: x.mean(-1), ["x"]),
    "add": (["x", "y"], lambda x, y: x + y, ["x", "y"]),
    "exp": (["x"], torch.exp, ["x"]),
    "gelu": (["x"], lambda x: F.gelu(x), ["x"]),
    "gelu_tanh": (["x"], lambda x: F.gelu(x, approximate="tanh"), ["x"]),
    "swiglu": (["a", "b"], lambda a, b: F.silu(a) * b, ["a"]),
    "rope": (["x", "cos", "sin"], _rope_ref, ["x"]),
    "embedding": (["ids", "table"], lambda ids, table: table[ids], ["table"]),
}
# integer args: name -> (name of the tensor whose dim gives the range, that dim)
INT_ARGS = {("cross_entropy", "target"): ("logits", 1), ("embedding", "ids"): ("table", 0)}
# ops whose output error legitimately scales with |x| * eps (exp of a rounded scaled input)
COND_OPS = {"softmax", "attention", "logsumexp", "cross_entropy", "exp"}


# ============================================================================ inputs
def _values(kind, shape, gen):
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "randn":
        return x
    if kind == "spread":
        return x * 1000
    if kind == "spread10":
        return x * 10
    if kind == "mean1e4":
        return 1e4 + x
    if kind == "shift10":
        return 10 + x
    if kind == "ties":
        return x.round()
    if kind == "tiny":
        return x * 1e-3
    if kind == "negative":
        return -x.abs() - 0.1
    raise ValueError(kind)


def _layout(t, layout):
    """A tensor with t's values in the requested memory layout."""
    if layout == "contig" or t.dim() == 0:
        return t.contiguous()
    if layout == "T":  # last two dims stored transposed (1-D: falls back to step2)
        if t.dim() == 1:
            return _layout(t, "step2")
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "step2":  # every other element of a twice-as-wide last dim
        base = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        v = base[..., ::2]
        v.copy_(t)
        return v
    if layout == "offset":  # view into a larger buffer at a nonzero storage offset
        base = torch.zeros(t.numel() + 7, dtype=t.dtype)
        v = base[7:].view(t.shape)
        v.copy_(t)
        return v
    if layout == "perm":  # 4-D: dims 1 and 2 stored swapped ([B,N,H,D] memory seen as [B,H,N,D])
        if t.dim() < 3:
            return _layout(t, "T")
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    raise ValueError(layout)


def make_inputs(op, shapes, dtype=F32, values="randn", layouts=None, seed=0):
    """fp64 master values -> dtype; returns (kernel inputs in dtype/layout, fp64 copies of exactly those values)."""
    names, _, primary = OPS[op]
    gen = torch.Generator().manual_seed(seed)
    layouts = layouts or {}
    args, ref_args = [], []
    for name in names:
        shape = shapes[name]
        if (op, name) in INT_ARGS:
            src, dim = INT_ARGS[(op, name)]
            t = torch.randint(0, shapes[src][dim], shape, generator=gen, dtype=torch.int64)
            args.append(_layout(t, layouts.get(name, "contig")))
            ref_args.append(t)
            continue
        kind = values if name in primary else "randn"
        t = _values(kind, shape, gen).to(dtype)
        args.append(_layout(t, layouts.get(name, "contig")))
        ref_args.append(t.double())
    return args, ref_args


# ============================================================================ error measures
def measure(op, out, args, ref_args, kwargs, dtype):
    """Returns (err, rel, base, tol). err: max abs error vs fp64; rel: err / max|ref|;
    base: max(torch's own error in dtype, rounding of the exact result to dtype); tol: allowed error."""
    ref_fn = OPS[op][1]
    ref = ref_fn(*ref_args, **kwargs)
    if op == "argmax":
        bad = int((out.cpu() != ref).sum())
        return float(bad), float(bad), 0.0, 0.0
    if out.shape != ref.shape:
        return float("inf"), float("inf"), 0.0, 0.0
    o = out.double()
    finite = torch.isfinite(ref.to(dtype))  # where the exact result overflows dtype, inf is the right answer
    if not torch.equal(torch.isfinite(o), finite):
        return float("inf"), float("inf"), 0.0, 0.0
    if not bool(finite.any()):
        return 0.0, 0.0, 0.0, 0.0
    err = (o - ref)[finite].abs().max().item()
    scale = ref[finite].abs().max().item()
    rnd = (ref.to(dtype).double() - ref)[finite].abs().max().item()
    try:
        nat = [a if not a.is_floating_point() else a.to(dtype) for a in ref_args]
        tb = ref_fn(*nat, **kwargs).double()
        base = max(rnd, (tb - ref)[finite].abs().max().item())
    except Exception:  # an op torch cannot run in that dtype on CPU
        base = rnd
    eps = torch.finfo(dtype).eps
    tol = 16 * base + 4 * eps * scale
    if op in COND_OPS:  # exp of x rounded to ~|x| eps: relative output error ~ |x|_max * eps
        if op == "attention":  # largest |score| = |q.k| / sqrt(D)
            q, k = ref_args[0], ref_args[1]
            xmax = (q @ k.transpose(-1, -2)).abs().max().item() / math.sqrt(q.shape[-1])
        else:
            xmax = ref_args[0].abs().max().item()
        tol += 4 * eps * xmax * (scale if op in ("softmax", "attention", "exp") else 1.0)
    return err, err / max(scale, 1e-300), base, tol


# ============================================================================ batteries for correct launchers
ROW_NS = [1, 2, 3, 17, 63, 64, 65, 127, 128, 129, 257]


def _row_shapes(op, lead, N):
    if op in ("layernorm",):
        return {"x": [*lead, N], "weight": [N], "bias": [N]}
    if op == "rmsnorm":
        return {"x": [*lead, N], "weight": [N]}
    if op == "cross_entropy":
        return {"logits": [lead[0] if lead else 1, N], "target": [lead[0] if lead else 1]}
    if op in ("add",):
        return {"x": [*lead, N], "y": [*lead, N]}
    if op == "swiglu":
        return {"a": [*lead, N], "b": [*lead, N]}
    return {"x": [*lead, N]}


def battery(op):
    """Yields (description, shapes, kwargs, dtype, values, layouts)."""
    names = OPS[op][0]
    if op == "matmul":
        mkn = [(1, 1, 1), (2, 3, 5), (17, 63, 33), (64, 64, 64), (65, 129, 33), (3, 257, 2), (33, 65, 97)]
        for dt in (F32, F16):
            for M, K, N in mkn:
                yield f"{M}x{K}x{N}", {"a": [M, K], "b": [K, N]}, {}, dt, "randn", {}
        for lay in ({"a": "T"}, {"b": "T"}, {"a": "step2", "b": "offset"}, {"a": "T", "b": "T"}):
            yield f"33x65x17 {lay}", {"a": [33, 65], "b": [65, 17]}, {}, F32, "randn", lay
        yield "17x129x17 a,b*10", {"a": [17, 129], "b": [129, 17]}, {}, F16, "spread10", {}
        yield "17x129x17 a,b*1000", {"a": [17, 129], "b": [129, 17]}, {}, F32, "spread", {}
        yield "17x129x17 a,b=1e4+randn", {"a": [17, 129], "b": [129, 17]}, {}, F32, "mean1e4", {}
        return
    if op == "attention":
        cfgs = [(1, 1, 1, 1, 1), (1, 2, 17, 17, 16), (1, 1, 3, 65, 24), (2, 1, 64, 64, 32), (1, 1, 33, 129, 40),
                (1, 1, 5, 70, 80), (1, 1, 1, 257, 64), (1, 1, 16, 16, 128)]
        for dt in (F32, F16):
            for B, H, Nq, Nk, D in cfgs:
                for causal in (False, True):
                    sh = {"q": [B, H, Nq, D], "k": [B, H, Nk, D], "v": [B, H, Nk, D]}
                    yield f"B{B} H{H} Nq{Nq} Nk{Nk} D{D} causal={causal}", sh, {"causal": causal}, dt, "randn", {}
        sh = {"q": [2, 3, 17, 40], "k": [2, 3, 65, 40], "v": [2, 3, 65, 40]}
        for lay in ({"q": "perm", "k": "perm", "v": "perm"}, {"k": "T", "v": "step2", "q": "offset"}):
            yield f"Nq17 Nk65 D40 {lay}", sh, {"causal": True}, F32, "randn", lay
        sh = {"q": [1, 1, 33, 40], "k": [1, 1, 129, 40], "v": [1, 1, 129, 40]}
        yield "Nq33 Nk129 D40 q,k*10", sh, {"causal": False}, F32, "spread10", {}
        yield "Nq33 Nk129 D40 q,k*10", sh, {"causal": True}, F16, "spread10", {}
        yield "Nq33 Nk129 D40 q,k*1000", sh, {"causal": True}, F32, "spread", {}
        yield "Nq33 Nk129 D40 q,k=10+randn", sh, {"causal": False}, F32, "shift10", {}
        return
    if op == "rope":
        cfgs = [(1, 1, 1, 2), (1, 3, 2, 6), (2, 17, 3, 34), (1, 5, 4, 64), (1, 7, 1, 96), (2, 4, 3, 130), (1, 3, 5, 48)]
        for dt in (F32, F16):
            for B, N, H, D in cfgs:
                yield f"B{B} N{N} H{H} D{D}", {"x": [B, N, H, D], "cos": [N, D // 2], "sin": [N, D // 2]}, {}, dt, \
                    "randn", {}
        sh = {"x": [2, 9, 3, 48], "cos": [9, 24], "sin": [9, 24]}
        for lay in ({"x": "perm"}, {"x": "step2", "cos": "step2", "sin": "T"}, {"x": "offset", "cos": "offset"}):
            yield f"B2 N9 H3 D48 {lay}", sh, {}, F32, "randn", lay
        yield "B2 N9 H3 D48 x*1000", sh, {}, F32, "spread", {}
        yield "B2 N9 H3 D48 x*1000", sh, {}, F16, "spread", {}
        return
    if op == "embedding":
        cfgs = [([1], 1, 1), ([17], 7, 3), ([3, 5], 50, 65), ([65], 100, 128), ([2, 3, 4], 9, 33)]
        for dt in (F32, F16):
            for ids, V, D in cfgs:
                yield f"ids{ids} V{V} D{D}", {"ids": ids, "table": [V, D]}, {}, dt, "randn", {}
        for lay in ({"table": "step2"}, {"table": "T"}, {"table": "offset", "ids": "T"}):
            yield f"ids[5,7] V50 D65 {lay}", {"ids": [5, 7], "table": [50, 65]}, {}, F32, "randn", lay
        return
    # row-wise and elementwise ops: last dim N, 3 rows
    kw = {"layernorm": {"eps": 1e-5}, "rmsnorm": {"eps": 1e-6}}.get(op, {})
    for dt in (F32, F16):
        for N in ROW_NS:
            yield f"[3,{N}]", _row_shapes(op, [3], N), kw, dt, "randn", {}
    if op != "cross_entropy":
        yield "[2,3,65]", _row_shapes(op, [2, 3], 65), kw, F32, "randn", {}
        yield "[1000]", _row_shapes(op, [], 1000), kw, F32, "randn", {}
    for N in (65, 129):
        for lay in ("T", "step2", "offset"):
            yield f"[3,{N}] {lay}", _row_shapes(op, [3], N), kw, F32, "randn", {n: lay for n in names}
    yield "[3,64] T", _row_shapes(op, [3], 64), kw, F16, "randn", {n: "T" for n in names}
    yield "[3,129] x*1000", _row_shapes(op, [3], 129), kw, F32, "spread", {}
    yield "[3,129] x*1000", _row_shapes(op, [3], 129), kw, F16, "spread", {}
    yield "[3,257] 1e4+x", _row_shapes(op, [3], 257), kw, F32, "mean1e4", {}
    yield "[3,129] 10+x", _row_shapes(op, [3], 129), kw, F16, "shift10", {}
    yield "[3,129] x*1e-3", _row_shapes(op, [3], 129), kw, F32, "tiny", {}
    if op == "argmax":
        for N in (17, 65, 129):
            yield f"[4,{N}] ties", _row_shapes(op, [4], N), kw, F32, "ties", {}
            yield f"[4,{N}] negative", _row_shapes(op, [4], N), kw, F32, "negative", {}
        yield "[4,65] ties", _row_shapes(op, [4], 65), kw, F16, "ties", {}


# ============================================================================ triggers for buggy launchers
# launcher name -> (shapes, kwargs, dtype, values, layouts)
TRIGGERS = {
    "softmax_tail_leak": ({"x": [4, 257]}, {}, F32, "randn", {}),
    "softmax_no_max": ({"x": [4, 256]}, {}, F32, "spread", {}),
    "softmax_stride": ({"x": [64, 256]}, {}, F32, "randn", {"x": "T"}),
    "matmul_acc_overwrite": ({"a": [64, 128], "b": [128, 64]}, {}, F32, "randn", {}),
    "matmul_stride": ({"a": [64, 64], "b": [64, 64]}, {}, F32, "randn", {"a": "T"}),
    "attention_scale_bug": ({"q": [1, 2, 64, 40], "k": [1, 2, 64, 40], "v": [1, 2, 64, 40]},
                            {"causal": False}, F32, "randn", {}),
    "attention_causal_topleft": ({"q": [1, 2, 16, 32], "k": [1, 2, 64, 32], "v": [1, 2, 64, 32]},
                                 {"causal": True}, F32, "randn", {}),
    "flash_attention_no_rescale": ({"q": [1, 2, 64, 32], "k": [1, 2, 256, 32], "v": [1, 2, 256, 32]},
                                   {"causal": False}, F32, "randn", {}),
    "flash_attention_tail_leak": ({"q": [1, 2, 64, 32], "k": [1, 2, 65, 32], "v": [1, 2, 65, 32]},
                                  {"causal": False}, F32, "randn", {}),
    "flash_attention_causal_off_by_one": ({"q": [1, 2, 64, 32], "k": [1, 2, 64, 32], "v": [1, 2, 64, 32]},
                                          {"causal": True}, F32, "randn", {}),
    "layernorm_naive_var": ({"x": [4, 256], "weight": [256], "bias": [256]}, {"eps": 1e-5}, F32, "mean1e4", {}),
    "layernorm_pad_leak": ({"x": [4, 257], "weight": [257], "bias": [257]}, {"eps": 1e-5}, F32, "shift10", {}),
    "rmsnorm_block_div": ({"x": [4, 257], "weight": [257]}, {"eps": 1e-6}, F32, "randn", {}),
    "rmsnorm_eps_outside": ({"x": [4, 256], "weight": [256]}, {"eps": 1e-6}, F32, "tiny", {}),
    "cross_entropy_no_max": ({"logits": [8, 128], "target": [8]}, {}, F32, "spread", {}),
    "cross_entropy_tail_leak": ({"logits": [8, 65], "target": [8]}, {}, F32, "randn", {}),
    "logsumexp_no_rescale": ({"x": [8, 256]}, {}, F32, "spread10", {}),
    "argmax_last_tie": ({"x": [8, 64]}, {}, F32, "ties", {}),
    "argmax_pad_zero": ({"x": [8, 65]}, {}, F32, "negative", {}),
    "cumsum_no_carry": ({"x": [4, 65]}, {}, F32, "randn", {}),
    "sum_acc_overwrite": ({"x": [4, 129]}, {}, F32, "randn", {}),
    "mean_block_div": ({"x": [4, 257]}, {}, F32, "shift10", {}),
    "add_stride": ({"x": [64, 256], "y": [64, 256]}, {}, F32, "randn", {"x": "T"}),
    "gelu_tanh_overflow": ({"x": [4, 256]}, {}, F32, "spread", {}),
    "swiglu_b_stride": ({"a": [64, 256], "b": [64, 256]}, {}, F32, "randn", {"b": "T"}),
    "rope_half_offset": ({"x": [2, 8, 4, 48], "cos": [8, 24], "sin": [8, 24]}, {}, F32, "randn", {}),
    "embedding_stride": ({"ids": [64], "table": [128, 64]}, {}, F32, "randn", {"table": "step2"}),
    "gelu_tanh_as_exact": ({"x": [4, 256]}, {}, F32, "randn", {}),
    "exp_short_log2e": ({"x": [4, 256]}, {}, F32, "spread10", {}),
    "softmax_short_log2e": ({"x": [4, 256]}, {}, F32, "spread10", {}),
    "gelu_short_rsqrt2": ({"x": [4, 256]}, {}, F32, "randn", {}),
    "swiglu_bf16_gate": ({"a": [4, 256], "b": [4, 256]}, {}, F32, "randn", {}),
    "sum_low_precision_acc": ({"x": [4, 1000]}, {}, F16, "shift10", {}),
    "matmul_low_precision_acc": ({"a": [64, 200], "b": [200, 64]}, {}, F16, "shift10", {}),
}


# a precision bug's trigger must err by this many times torch's own error in that dtype (or the rounding of the
# exact result, if larger); the other classes need a normwise relative error >= 1e-2 and 100x
PRECISION_LOUD = 3


# ============================================================================ driver
_modules = {}


def load(target):
    path, fn = target.split(":")
    if path not in _modules:
        name = "gpuemu_example_" + Path(path).stem
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _modules[path] = mod
    return getattr(_modules[path], fn)


def run(fn, op, shapes, kwargs, dtype, values, layouts, seed=0):
    args, ref_args = make_inputs(op, shapes, dtype, values, layouts, seed)
    out = fn(*args, **kwargs)
    return out, args, ref_args


def allclose_ok(fn, entry):
    op = entry["op"]
    shapes = entry.get("allclose_shapes") or DEFAULT_ALLCLOSE[op]
    kwargs = entry.get("allclose_kwargs") or {}
    torch.manual_seed(0)
    names = OPS[op][0]
    args = []
    for name in names:  # plain torch.randn / randint with the global seed, as a user would write it
        if (op, name) in INT_ARGS:
            src, dim = INT_ARGS[(op, name)]
            args.append(torch.randint(0, shapes[src][dim], shapes[name]))
        else:
            args.append(torch.randn(shapes[name]))
    ref = OPS[op][1](*[a.double() if a.is_floating_point() else a for a in args], **kwargs)
    out = fn(*args, **kwargs)
    return torch.allclose(out.double(), ref.double(), atol=1e-2, rtol=1e-2)


DEFAULT_ALLCLOSE = {  # allclose shapes for correct launchers (manifest gives them for buggy ones)
    "softmax": {"x": [64, 256]}, "matmul": {"a": [64, 64], "b": [64, 64]},
    "attention": {"q": [1, 2, 64, 32], "k": [1, 2, 64, 32], "v": [1, 2, 64, 32]},
    "layernorm": {"x": [64, 256], "weight": [256], "bias": [256]}, "rmsnorm": {"x": [64, 256], "weight": [256]},
    "cross_entropy": {"logits": [64, 128], "target": [64]}, "logsumexp": {"x": [64, 64]}, "argmax": {"x": [64, 256]},
    "cumsum": {"x": [64, 64]}, "sum": {"x": [64, 128]}, "mean": {"x": [64, 256]},
    "add": {"x": [64, 256], "y": [64, 256]}, "exp": {"x": [64, 256]}, "gelu": {"x": [64, 256]}, "gelu_tanh": {"x": [64, 256]},
    "swiglu": {"a": [64, 256], "b": [64, 256]}, "rope": {"x": [2, 32, 4, 64], "cos": [32, 32], "sin": [32, 32]},
    "embedding": {"ids": [64], "table": [128, 64]},
}


def run_battery(fn, op):
    """Runs the battery; returns (cases, list of (case, err, rel, base, tol) or (case, exception))."""
    results = []
    for desc, shapes, kwargs, dtype, values, layouts in battery(op):
        case = f"{desc} {'fp16' if dtype == F16 else 'fp32'} {values}"
        try:
            out, args, ref_args = run(fn, op, shapes, kwargs, dtype, values, layouts)
            results.append((case,) + measure(op, out, args, ref_args, kwargs, dtype))
        except Exception as e:  # noqa: BLE001
            results.append((case, e))
    return results


def main(filters):
    manifest = yaml.safe_load((HERE / "manifest.yaml").read_text())
    t_all = time.time()
    failures = []
    n_ok = n_bug = 0
    for entry in manifest:
        target, op = entry["target"], entry["op"]
        name = target.split(":")[1]
        if filters and not any(f in target for f in filters):
            continue
        t0 = time.time()
        fn = load(target)
        msgs = []
        ok = allclose_ok(fn, entry)
        if not ok:
            msgs.append("allclose FAILED at allclose_shapes")
        results = run_battery(fn, op)
        bad = [r for r in results if len(r) == 2 or r[1] > r[4]]
        if entry["correct"]:
            n_ok += 1
            good = [r for r in results if len(r) == 5]
            worst = max(good, key=lambda r: r[1] / r[4] if r[4] > 0 else (0.0 if r[1] == 0 else math.inf))
            w_rel = max(r[2] for r in good)
            w_torch = max(r[1] / r[3] if r[3] > 0 else (0.0 if r[1] == 0 else math.inf) for r in good)
            tol_ratio = worst[1] / worst[4] if worst[4] > 0 else 0.0
            for r in bad:
                msgs.append(f"{r[0]}: raised {r[1]!r}" if len(r) == 2 else
                            f"{r[0]}: err={r[1]:.3g} rel={r[2]:.3g} torch={r[3]:.3g} tol={r[4]:.3g}")
            print(f"[{'ok ' if not msgs else 'FAIL'}] {name:34s} {op:13s} correct   {len(results):2d} cases, "
                  f"worst rel={w_rel:.1e} err/torch={w_torch:5.1f} err/tol={tol_ratio:.2f} ({worst[0]})  "
                  f"{time.time() - t0:.1f}s")
        else:
            n_bug += 1
            shown = "no trigger"
            if name not in TRIGGERS:
                msgs.append("no trigger defined")
            else:
                shapes, kwargs, dtype, values, layouts = TRIGGERS[name]
                out, args, ref_args = run(fn, op, shapes, kwargs, dtype, values, layouts)
                err, rel, base, tol = measure(op, out, args, ref_args, kwargs, dtype)
                if op == "argmax":
                    loud = err > 0
                    shown = f"{int(err)} wrong indices"
                else:
                    if entry["bug"] == "precision":  # a few ulps by nature: clearly above a correct kernel's error
                        loud = (not math.isfinite(err)) or err >= PRECISION_LOUD * base
                    else:
                        loud = (not math.isfinite(err)) or (rel >= 1e-2 and err >= 100 * base)
                    shown = f"err={err:.3g} rel={rel:.3g}" + (f" ({err / base:.0e}x torch)" if base > 0 else "")
                if not loud:
                    msgs.append(f"trigger not loud: {shown}")
            crashed = [r for r in bad if len(r) == 2]
            for r in crashed:
                msgs.append(f"battery {r[0]}: raised {r[1]!r}")
            print(f"[{'ok ' if not msgs else 'FAIL'}] {name:34s} {op:13s} {entry['bug']:30s} allclose "
                  f"{'passes' if ok else 'FAILS '}; trigger {entry['trigger']!r}: {shown}; "
                  f"battery flags {len(bad)}/{len(results)}  {time.time() - t0:.1f}s")
        for m in msgs:
            print("       ", m)
        if msgs:
            failures.append(name)
    print(f"\n{n_ok} correct + {n_bug} buggy launchers, {len({e['op'] for e in manifest})} ops, "
          f"{time.time() - t_all:.1f}s total; failures: {failures or 'none'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
