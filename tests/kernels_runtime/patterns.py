"""A corpus of Triton kernel patterns, one or more kernels per construct real kernels use (written for
tests/test_runtime_patterns.py, which runs each on Triton's own interpreter and on gpuemu's runtime and
compares the bits).

Each pattern is a ``Pattern``: ``make()`` builds its inputs (a dict, the same values on every call: fixed
seeds), ``run(inputs)`` allocates fresh outputs, launches its kernel(s) and returns the outputs as a tuple of
tensors. ``run`` never writes into its inputs, so one set of inputs serves every launch.

The dtypes are those on which Triton's interpreter computes what a GPU computes: fp32 (every fp32 ``tl.dot``
asks for ``input_precision="ieee"``), fp16 (elementwise, casts and dot inputs; reductions of fp16 blocks are
not used: the interpreter sums them in one wide accumulator where a GPU rounds each partial sum), int32,
int64, uint32 (through int32 bit casts) and bool. Sizes are small: blocks of 8-64, grids of 1-8 programs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import triton
import triton.language as tl


@dataclass(frozen=True)
class Pattern:
    name: str
    construct: str
    make: Callable[[], dict[str, Any]]
    run: Callable[[dict[str, Any]], tuple]
    # False where the kernel's control flow reads the program id (a loop bound per program, a persistent loop):
    # a trace is recorded from one program and its guards fail for the next, so such launches run the ordinary
    # way on every launch (docs/runtime.md); their bits are checked as for every pattern
    replays: bool = True


PATTERNS: dict[str, Pattern] = {}


def pattern(name: str, construct: str, make: Callable[[], dict[str, Any]], replays: bool = True):
    def add(run):
        assert name not in PATTERNS, name
        PATTERNS[name] = Pattern(name, construct, make, run, replays)
        return run

    return add


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(dtype)


def _randint(lo: int, hi: int, *shape, seed: int, dtype=torch.int32) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=_gen(seed), dtype=torch.int64).to(dtype)


def _nan(*shape, dtype=torch.float32) -> torch.Tensor:
    """A fresh float output whose unwritten elements read NaN (the same on every run)."""
    return torch.full(shape, float("nan"), dtype=dtype)


def _sentinel(*shape, dtype=torch.int32) -> torch.Tensor:
    return torch.full(shape, -7777, dtype=dtype)


# ====================================================================== helpers (@triton.jit, called from kernels)
@triton.jit
def _silu(x):
    return x / (1.0 + tl.exp(-x))


@triton.jit
def _load_row(ptr, row, n, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    return tl.load(ptr + row * stride + offs, mask=mask, other=0.0), mask


@triton.jit
def _mean_var(x, mask, n):
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    return mean, tl.sum(d * d, axis=0) / n


@triton.jit
def _scaled(x, FACTOR: tl.constexpr):
    return _silu(x) * FACTOR  # a helper calling a helper


# ====================================================================== in-place broadcast ops
@triton.jit
def inplace_broadcast_kernel(x_ptr, w_ptr, b_ptr, s_ptr, out_ptr, grow_ptr, M, N, stride_m,
                             BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mrow = rm < M
    mcol = rn < N
    mask = mrow[:, None] & mcol[None, :]
    offs = rm[:, None] * stride_m + rn[None, :]
    acc = tl.load(x_ptr + offs, mask=mask, other=0.0)  # [BM, BN]
    w = tl.load(w_ptr + rn, mask=mcol, other=1.0)  # [BN]
    acc *= w  # [BM, BN] *= [BN]
    s = tl.load(s_ptr)  # a scalar
    acc += s
    bias = tl.load(b_ptr + rn[None, :], mask=mcol[None, :], other=0.0)  # [1, BN]
    acc -= bias
    acc -= 0.25
    acc *= 2.0
    acc /= w
    tl.store(out_ptr + offs, acc, mask=mask)
    # the smaller operand on the left: the name is rebound to the broadcast result, as compiled Triton does
    row = tl.load(w_ptr + rn[None, :], mask=mcol[None, :], other=0.0)  # [1, BN]
    row += acc  # [1, BN] += [BM, BN] -> [BM, BN]
    row -= s
    tl.store(grow_ptr + offs, row, mask=mask)


def _inplace_make():
    return {"x": _randn(20, 24, seed=1), "w": _randn(24, seed=2) + 2.0, "b": _randn(24, seed=3),
            "s": _randn(1, seed=4)}


@pattern("inplace_broadcast_f32", "in-place *= += -= /= with [BN], scalar, [1,BN] operands", _inplace_make)
def _inplace_run(d):
    x = d["x"]
    out, grow = _nan(*x.shape), _nan(*x.shape)
    inplace_broadcast_kernel[(triton.cdiv(20, 8),)](x, d["w"], d["b"], d["s"], out, grow, 20, 24, x.stride(0),
                                                    BM=8, BN=32)
    return out, grow


@triton.jit
def inplace_int_kernel(x_ptr, c_ptr, out_ptr, outf_ptr, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mcol = rn < N
    acc = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mcol[None, :], other=0)  # int32 [BM, BN]
    c = tl.load(c_ptr + rn, mask=mcol, other=1)  # [BN]
    acc *= c
    acc -= 3
    acc += c[None, :]
    acc //= 2  # (C division: toward zero)
    acc %= 7
    acc <<= 1
    acc ^= c
    acc |= 1
    acc >>= 1
    for i in range(3):  # an in-place accumulator in a loop keeps its type
        acc += i * c
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc, mask=mcol[None, :])
    acc += 0.5  # an int block += a Python float: the name is rebound to an fp32 block
    acc *= c
    tl.store(outf_ptr + rm[:, None] * N + rn[None, :], acc, mask=mcol[None, :])


@pattern("inplace_broadcast_int", "in-place int ops (//=, %=, <<=, ^=) with [BN] and [1,BN] operands",
         lambda: {"x": _randint(-50, 50, 16, 12, seed=5), "c": _randint(-6, 7, 12, seed=6)})
def _inplace_int_run(d):
    out, outf = _sentinel(16, 12), _nan(16, 12)
    inplace_int_kernel[(2,)](d["x"], d["c"], out, outf, 12, BM=8, BN=16)
    return out, outf


# ====================================================================== rotary embeddings
@triton.jit
def rotary_half_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, seq, stride_s, stride_h,
                       HALF: tl.constexpr, BS: tl.constexpr):
    pid_s = tl.program_id(0)
    head = tl.program_id(1)
    rows = pid_s * BS + tl.arange(0, BS)
    cols = tl.arange(0, HALF)
    m = (rows < seq)[:, None]
    base = x_ptr + head * stride_h + rows[:, None] * stride_s + cols[None, :]
    x0 = tl.load(base, mask=m, other=0.0).to(tl.float32)
    x1 = tl.load(base + HALF, mask=m, other=0.0).to(tl.float32)
    cs = rows[:, None] * HALF + cols[None, :]
    cos = tl.load(cos_ptr + cs, mask=m, other=1.0)
    sin = tl.load(sin_ptr + cs, mask=m, other=0.0)
    o0 = x0 * cos - x1 * sin
    o1 = x0 * sin + x1 * cos
    ob = out_ptr + head * stride_h + rows[:, None] * stride_s + cols[None, :]
    tl.store(ob, o0, mask=m)  # (converted to the output's dtype by the store)
    tl.store(ob + HALF, o1, mask=m)


def _rotary_make(dtype):
    def make():
        seq, heads, half = 13, 3, 8
        pos = torch.arange(seq, dtype=torch.float32)[:, None]
        inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
        ang = pos * inv[None, :]
        return {"x": _randn(heads, seq, 2 * half, seed=7, dtype=dtype), "cos": ang.cos().contiguous(),
                "sin": ang.sin().contiguous()}
    return make


def _rotary_run(d):
    x = d["x"]
    heads, seq, dim = x.shape
    out = _nan(*x.shape, dtype=x.dtype)
    rotary_half_kernel[(triton.cdiv(seq, 8), heads)](x, d["cos"], d["sin"], out, seq, x.stride(1), x.stride(0),
                                                    HALF=dim // 2, BS=8)
    return (out,)


pattern("rotary_halves_f32", "rotary: x0/x1 halves, o0 = x0*cos - x1*sin, both halves stored",
        _rotary_make(torch.float32))(_rotary_run)
pattern("rotary_halves_f16", "rotary on fp16 x (fp32 math, fp16 store)", _rotary_make(torch.float16))(_rotary_run)


@triton.jit
def rotary_interleaved_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, D: tl.constexpr, HALF: tl.constexpr,
                              BS: tl.constexpr):
    """GPT-J style: the pairs are adjacent elements; deinterleave with reshape + split, rotate, join back."""
    pid = tl.program_id(0)
    rows = pid * BS + tl.arange(0, BS)
    x = tl.load(x_ptr + rows[:, None] * D + tl.arange(0, D)[None, :])
    x0, x1 = tl.split(tl.reshape(x, (BS, HALF, 2)))
    cs = rows[:, None] * HALF + tl.arange(0, HALF)[None, :]
    cos = tl.load(cos_ptr + cs)
    sin = tl.load(sin_ptr + cs)
    o = tl.join(x0 * cos - x1 * sin, x0 * sin + x1 * cos)  # [BS, HALF, 2]
    tl.store(out_ptr + rows[:, None] * D + tl.arange(0, D)[None, :], tl.reshape(o, (BS, D)))


@pattern("rotary_interleaved", "rotary on adjacent pairs: reshape + split, join + reshape",
         lambda: {"x": _randn(16, 16, seed=8), "cos": _randn(16, 8, seed=9), "sin": _randn(16, 8, seed=10)})
def _rotary_il_run(d):
    out = _nan(16, 16)
    rotary_interleaved_kernel[(2,)](d["x"], d["cos"], d["sin"], out, D=16, HALF=8, BS=8)
    return (out,)


# ====================================================================== tl.where chains
@triton.jit
def where_chain_kernel(x_ptr, y_ptr, i_ptr, outf_ptr, outi_ptr, outm_ptr, n, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.load(y_ptr + offs, mask=m, other=0.0)
    f = tl.where(x > 1.0, x * 2.0, tl.where(x < -1.0, 0.0, tl.where(y > x, y, -1.0)))
    f = tl.where(flag > 0, f, -f)  # a scalar condition
    f = tl.where(m, f, float("-inf"))
    tl.store(outf_ptr + offs, f, mask=m)
    i = tl.load(i_ptr + offs, mask=m, other=0)
    k = tl.where(i > 5, i, tl.where(i < -5, -i, tl.where(i % 2 == 0, 100, i * 3)))
    k = tl.where(offs < n // 2, k, 7)
    tl.store(outi_ptr + offs, k, mask=m)
    mixed = tl.where(i > 0, x, 1)  # float and int branches: fp32
    mixed = tl.where(i < -8, 2, mixed)
    tl.store(outm_ptr + offs, mixed, mask=m)


@pattern("where_chains", "nested tl.where, scalar/block branches, int and float, scalar condition",
         lambda: {"x": _randn(100, seed=11, scale=2.0), "y": _randn(100, seed=12),
                  "i": _randint(-12, 12, 100, seed=13)})
def _where_run(d):
    outs = (_nan(100), _sentinel(100), _nan(100))
    where_chain_kernel[(triton.cdiv(100, 32),)](d["x"], d["y"], d["i"], *outs, 100, 2, BLOCK=32)
    return outs


# ====================================================================== mixed-rank broadcasting
@triton.jit
def mixed_rank_kernel(col_ptr, row_ptr, blk_ptr, outer_ptr, plus_ptr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    col = tl.load(col_ptr + pid * BM + rm)[:, None]  # [BM, 1]
    row = tl.load(row_ptr + rn)  # [BN]
    outer = col * row  # [BM, 1] * [BN] -> [BM, BN]
    offs = (pid * BM + rm)[:, None] * BN + rn[None, :]
    blk = tl.load(blk_ptr + offs)
    plus = blk + row - col  # [BM, BN] + [BN] - [BM, 1]
    plus = plus * tl.expand_dims(row, 0) + tl.reshape(col, (BM,))[:, None]
    plus = plus - tl.broadcast_to(col, (BM, BN)) * tl.permute(tl.broadcast_to(row[:, None], (BN, BM)), 1, 0)
    tl.store(outer_ptr + offs, outer)
    tl.store(plus_ptr + offs, plus)


@pattern("mixed_rank_2d", "[BM,1] * [BN], [BM,BN] + [BN] - [BM,1]",
         lambda: {"col": _randn(32, seed=14), "row": _randn(16, seed=15), "blk": _randn(32, 16, seed=16)})
def _mixed_run(d):
    outs = (_nan(32, 16), _nan(32, 16))
    mixed_rank_kernel[(2,)](d["col"], d["row"], d["blk"], *outs, BM=16, BN=16)
    return outs


@triton.jit
def rank3_kernel(x_ptr, v_ptr, u_ptr, y_ptr, s0_ptr, m1_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    pid = tl.program_id(0)
    ia = tl.arange(0, A)[:, None, None]
    ib = tl.arange(0, B)[None, :, None]
    ic = tl.arange(0, C)[None, None, :]
    offs = pid * A * B * C + ia * (B * C) + ib * C + ic
    x = tl.load(x_ptr + offs)  # [A, B, C]
    v = tl.load(v_ptr + tl.arange(0, C))  # [C]
    u = tl.load(u_ptr + tl.arange(0, B))[:, None]  # [B, 1]
    y = x * v + u  # [A,B,C] * [C] + [B,1]
    y = y - tl.sum(y, axis=2, keep_dims=True) / C
    tl.store(y_ptr + offs, y)
    s0 = tl.sum(y, axis=0)  # [B, C]
    tl.store(s0_ptr + pid * B * C + tl.arange(0, B)[:, None] * C + tl.arange(0, C)[None, :], s0)
    m1 = tl.max(y, axis=1)  # [A, C]
    tl.store(m1_ptr + pid * A * C + tl.arange(0, A)[:, None] * C + tl.arange(0, C)[None, :], m1)


@pattern("rank3_broadcast", "3-D [2,4,8] block with [8] and [4,1], reductions over each axis",
         lambda: {"x": _randn(3, 2, 4, 8, seed=17), "v": _randn(8, seed=18), "u": _randn(4, seed=19)})
def _rank3_run(d):
    y, s0, m1 = _nan(3, 2, 4, 8), _nan(3, 4, 8), _nan(3, 2, 8)
    rank3_kernel[(3,)](d["x"], d["v"], d["u"], y, s0, m1, A=2, B=4, C=8)
    return y, s0, m1


# ====================================================================== reductions
@triton.jit
def reduce_axes_kernel(x_ptr, i_ptr, s0_ptr, s1_ptr, sm_ptr, mx0_ptr, mn1_ptr, tot_ptr, is1_ptr, ix0_ptr,
                       M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm[:, None] * N + rn[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(s0_ptr + pid * BN + rn, tl.sum(x, axis=0))
    tl.store(s1_ptr + rm, tl.sum(x, axis=1), mask=rm < M)
    # a row softmax: keep_dims reductions broadcast back over the row
    xm = tl.where(mask, x, float("-inf"))
    e = tl.exp(xm - tl.max(xm, axis=1, keep_dims=True))
    sm = e / tl.sum(e, axis=1, keep_dims=True)
    tl.store(sm_ptr + offs, sm, mask=mask)
    tl.store(mx0_ptr + pid * BN + rn, tl.max(xm, axis=0))
    tl.store(mn1_ptr + rm, tl.min(tl.where(mask, x, float("inf")), axis=1), mask=rm < M)
    tl.store(tot_ptr + pid, tl.sum(x))  # over every axis: a scalar
    xi = tl.load(i_ptr + offs, mask=mask, other=0)
    tl.store(is1_ptr + rm, tl.sum(xi, axis=1), mask=rm < M)
    tl.store(ix0_ptr + pid * BN + rn, tl.xor_sum(xi, axis=0) + tl.max(xi, axis=0) * tl.min(xi, axis=0))


@pattern("reductions_axes", "sum/max/min over axis 0, 1, keep_dims, all axes; int sum/xor_sum",
         lambda: {"x": _randn(20, 24, seed=20), "i": _randint(-1000, 1000, 20, 24, seed=21)})
def _reduce_run(d):
    M, N, BM, BN = 20, 24, 8, 32
    g = triton.cdiv(M, BM)
    outs = (_nan(g, BN), _nan(M), _nan(M, N), _nan(g, BN), _nan(M), _nan(g), _sentinel(M), _sentinel(g, BN))
    reduce_axes_kernel[(g,)](d["x"], d["i"], *outs, M, N, BM=BM, BN=BN)
    return outs


@triton.jit
def max_indices_kernel(x_ptr, i_ptr, v1_ptr, a1_ptr, v0_ptr, a0_ptr, vi_ptr, ai_ptr, aj_ptr, am_ptr,
                       BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * BN + rn[None, :]
    x = tl.load(x_ptr + offs)
    rn = pid * BN + rn  # (per-program slots for the axis-0 results)
    v1, a1 = tl.max(x, axis=1, return_indices=True)
    tl.store(v1_ptr + rm, v1)
    tl.store(a1_ptr + rm, a1)
    v0, a0 = tl.min(x, axis=0, return_indices=True)
    tl.store(v0_ptr + rn, v0)
    tl.store(a0_ptr + rn, a0)
    xi = tl.load(i_ptr + offs)  # small ints: ties
    vi, ai = tl.max(xi, axis=1, return_indices=True, return_indices_tie_break_left=True)
    tl.store(vi_ptr + rm, vi)
    tl.store(ai_ptr + rm, ai)
    _, aj = tl.min(xi, axis=0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(aj_ptr + rn, aj)
    vk, ak = tl.max(x, axis=1, return_indices=True, keep_dims=True)  # [BM, 1] each
    tl.store(am_ptr + rm, tl.argmax(x, axis=1) * 100 + tl.argmin(xi, axis=1) + tl.sum(ak + (x >= vk), axis=1))


@pattern("max_return_indices", "tl.max/tl.min with return_indices (float, int with ties), argmax/argmin",
         lambda: {"x": _randn(16, 16, seed=22), "i": _randint(0, 4, 16, 16, seed=23)})
def _maxidx_run(d):
    outs = (_nan(16), _sentinel(16), _nan(32), _sentinel(32), _sentinel(16), _sentinel(16), _sentinel(32),
            _sentinel(16))
    max_indices_kernel[(2,)](d["x"], d["i"], *outs, BM=8, BN=16)
    return outs


@triton.jit
def _add_pair(a, ia, b, ib):
    return a + b, ia ^ ib


@triton.jit
def reduce_custom_kernel(x_ptr, i_ptr, r1_ptr, r0_ptr, neg_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """tl.reduce with a custom (tuple) combine, keep_dims, and negative axes."""
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * BN + rn[None, :]
    x = tl.load(x_ptr + offs)
    xi = tl.load(i_ptr + offs)
    s, h = tl.reduce((x, xi), 1, _add_pair)
    tl.store(r1_ptr + rm, s + h)
    s0, h0 = tl.reduce((x, xi), 0, _add_pair, keep_dims=True)  # [1, BN]
    tl.store(r0_ptr + pid * BN + rn[None, :], s0 * h0)
    neg = tl.sum(x, axis=-1) + tl.max(tl.cumsum(x, axis=-1), axis=-2, keep_dims=True).reshape(1, BN).sum(-1)
    tl.store(neg_ptr + rm, neg)


@pattern("reduce_custom_negative_axis", "tl.reduce with a tuple combine, keep_dims; axis=-1/-2",
         lambda: {"x": _randn(16, 16, seed=68), "i": _randint(-1000, 1000, 16, 16, seed=69)})
def _reduce_custom_run(d):
    outs = (_nan(16), _nan(2, 16), _nan(16))
    reduce_custom_kernel[(2,)](d["x"], d["i"], *outs, BM=8, BN=16)
    return outs


# ====================================================================== shape manipulation
@triton.jit
def join_split_kernel(a_ptr, b_ptr, j_ptr, s0_ptr, s1_ptr, j2_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    j = tl.join(a, b)  # [BLOCK, 2]
    tl.store(j_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :], j)
    pairs = tl.load(a_ptr + pid * BLOCK + tl.arange(0, BLOCK))  # split a flat block into even/odd lanes
    ev, od = tl.split(tl.reshape(pairs, (BLOCK // 2, 2)))
    half = pid * (BLOCK // 2) + tl.arange(0, BLOCK // 2)
    tl.store(s0_ptr + half, ev)
    tl.store(s1_ptr + half, od * 10.0)
    a2 = tl.reshape(a, (BLOCK // 4, 4))
    b2 = tl.reshape(b, (BLOCK // 4, 4))
    j2 = tl.join(a2, b2 + 1.0)  # 2-D join: [BLOCK/4, 4, 2]
    tl.store(j2_ptr + pid * BLOCK * 2 + tl.arange(0, BLOCK * 2), tl.reshape(j2, (BLOCK * 2,)))


@pattern("join_split", "tl.join (1-D, 2-D), tl.split of a reshape",
         lambda: {"a": _randn(64, seed=24), "b": _randn(64, seed=25)})
def _join_run(d):
    outs = (_nan(64, 2), _nan(32), _nan(32), _nan(128))
    join_split_kernel[(2,)](d["a"], d["b"], *outs, BLOCK=32)
    return outs


@triton.jit
def reshape_permute_kernel(x_ptr, t_ptr, tt_ptr, p_ptr, q_ptr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    base = pid * BM * BN
    x = tl.load(x_ptr + base + rm[:, None] * BN + rn[None, :])  # [BM, BN]
    t = tl.trans(x)  # [BN, BM]
    tl.store(t_ptr + base + rn[:, None] * BM + rm[None, :], t)
    tt = x.T + tl.trans(x, 1, 0)  # the .T property and explicit dims
    tl.store(tt_ptr + base + rn[:, None] * BM + rm[None, :], tt)
    x3 = tl.reshape(x, (2, BM // 2, BN))
    p = tl.permute(x3, (2, 0, 1))  # [BN, 2, BM/2]
    tl.store(p_ptr + base + tl.arange(0, BM * BN), tl.reshape(p, (BM * BN,)))
    q = tl.trans(x3, 1, 0, 2) * 2.0  # [BM/2, 2, BN]
    q = tl.reshape(q, [BM, BN])
    tl.store(q_ptr + base + rm[:, None] * BN + rn[None, :], q)


@pattern("reshape_permute_trans", "tl.reshape / tl.permute / tl.trans / .T, then stored",
         lambda: {"x": _randn(3, 8, 16, seed=26)})
def _reshape_run(d):
    outs = (_nan(3 * 128), _nan(3 * 128), _nan(3 * 128), _nan(3 * 128))
    reshape_permute_kernel[(3,)](d["x"], *outs, BM=8, BN=16)
    return outs


@triton.jit
def interleave_cat_kernel(a_ptr, b_ptr, x_ptr, il_ptr, il2_ptr, cat_ptr, sum_ptr, BLOCK: tl.constexpr,
                          BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    il = tl.interleave(a, b)  # [2 * BLOCK]: a0 b0 a1 b1 ...
    tl.store(il_ptr + pid * 2 * BLOCK + tl.arange(0, 2 * BLOCK), il)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    il2 = tl.interleave(x, x * -1.0)  # [BM, 2 * BN]
    tl.store(il2_ptr + pid * BM * 2 * BN + rm[:, None] * (2 * BN) + tl.arange(0, 2 * BN)[None, :], il2)
    c = tl.cat(a, b * 2.0, can_reorder=True)  # [2 * BLOCK]
    tl.store(cat_ptr + pid * 2 * BLOCK + tl.arange(0, 2 * BLOCK), c)
    tl.store(sum_ptr + pid, tl.sum(c, axis=0))


@pattern("interleave_cat", "tl.interleave (1-D, 2-D), tl.cat(can_reorder=True) stored and reduced",
         lambda: {"a": _randn(64, seed=27), "b": _randn(64, seed=28), "x": _randn(8, 8, seed=29)})
def _il_run(d):
    outs = (_nan(128), _nan(2, 8, 16), _nan(128), _nan(2))
    interleave_cat_kernel[(2,)](d["a"], d["b"], d["x"], *outs, BLOCK=32, BM=8, BN=8)
    return outs


# ====================================================================== loops
@triton.jit
def loops_kernel(x_ptr, unroll_ptr, range_ptr, while_ptr, cnt_ptr, n, start,
                 BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(UNROLL):  # unrolled: i is a constexpr
        offs = (pid * UNROLL + i) * BLOCK + lanes
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0) * (i + 1)
    for j in tl.static_range(0, 8, 3):  # start, stop, step
        acc = acc + j * 0.125
    tl.store(unroll_ptr + pid * BLOCK + lanes, acc)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.range(start, n, BLOCK):  # runtime bounds
        offs = k + lanes
        acc2 = acc2 * 0.5 + tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    for k in tl.range(0, n - start, 2 * BLOCK, num_stages=2):
        acc2 += k
    tl.store(range_ptr + pid * BLOCK + lanes, acc2 + pid)
    cnt = 0
    total = tl.zeros([BLOCK], dtype=tl.int32)
    i = start
    while i < n:  # a scalar while loop on a runtime bound
        total += (i + lanes) % 7
        i += 3 * BLOCK
        cnt += 1
    tl.store(while_ptr + pid * BLOCK + lanes, total)
    tl.store(cnt_ptr + pid, cnt)


@pattern("static_range_and_runtime_loops", "tl.static_range unrolls; tl.range / while with runtime bounds",
         lambda: {"x": _randn(200, seed=30)})
def _loops_run(d):
    outs = (_nan(3, 16), _nan(3, 16), _sentinel(3, 16), _sentinel(3))
    loops_kernel[(3,)](d["x"], *outs, 200, 5, BLOCK=16, UNROLL=4)
    return outs


# ====================================================================== scalar pointers
@triton.jit
def scalar_ptr_kernel(x_ptr, n_ptr, starts_ptr, lens_ptr, scale_ptr, out_ptr, sums_ptr, first_ptr, cnt_ptr,
                      BLOCK: tl.constexpr):
    """Ragged rows: each program reads its row's start and length from memory (scalar loads), loops to the
    length, and stores one scalar per program."""
    pid = tl.program_id(0)
    n = tl.load(n_ptr)  # one element: the number of rows
    start = tl.load(starts_ptr + pid)
    length = tl.load(lens_ptr + pid)
    scale = tl.load(scale_ptr)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    steps = 0
    for k in range(0, length, BLOCK):  # a loaded loop bound
        offs = k + lanes
        acc += tl.load(x_ptr + start + offs, mask=offs < length, other=0.0)
        steps += 1
    tl.store(out_ptr + pid * BLOCK + lanes, acc * scale)
    tl.store(sums_ptr + pid, tl.sum(acc, axis=0))  # a scalar store
    tl.store(first_ptr + pid, tl.load(x_ptr + start) + n)  # a scalar load at a loaded offset
    tl.store(cnt_ptr + pid, steps)


@pattern("scalar_pointer_loads", "tl.load of one element as loop bound / offset, scalar stores",
         lambda: {"x": _randn(120, seed=31), "n": torch.tensor([4], dtype=torch.int32),
                  "starts": torch.tensor([0, 7, 40, 90], dtype=torch.int32),
                  "lens": torch.tensor([7, 33, 1, 30], dtype=torch.int32),
                  "scale": torch.tensor([0.75])}, replays=False)
def _scalar_run(d):
    outs = (_nan(4, 16), _nan(4), _nan(4), _sentinel(4))
    scalar_ptr_kernel[(4,)](d["x"], d["n"], d["starts"], d["lens"], d["scale"], *outs, BLOCK=16)
    return outs


@triton.jit
def scalar_bound_kernel(x_ptr, n_ptr, y_ptr, BLOCK: tl.constexpr):
    """One loop bound shared by every program, loaded from memory."""
    pid = tl.program_id(0)
    n = tl.load(n_ptr)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(pid * BLOCK, n, tl.num_programs(0) * BLOCK):  # a grid-stride loop
        acc += tl.load(x_ptr + k + lanes, mask=k + lanes < n, other=0.0)
    tl.store(y_ptr + pid * BLOCK + lanes, acc)


@pattern("scalar_pointer_bound", "a loop bound loaded from a scalar pointer, grid-stride loop",
         lambda: {"x": _randn(150, seed=32), "n": torch.tensor([137], dtype=torch.int32)}, replays=False)
def _scalar_bound_run(d):
    y = _nan(3, 16)
    scalar_bound_kernel[(3,)](d["x"], d["n"], y, BLOCK=16)
    return (y,)


# ====================================================================== atomics
@triton.jit
def atomics_kernel(bins_ptr, v_ptr, hist_ptr, fsum_ptr, fmax_ptr, cnt_ptr, old_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    b = tl.load(bins_ptr + offs, mask=m, other=0)
    v = tl.load(v_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(hist_ptr + b, 1, mask=m)  # a histogram: many lanes hit one bin
    tl.atomic_add(fsum_ptr + b, v, mask=m & (v > -1.0))  # fp32: the order of the adds shows in the bits
    tl.atomic_max(fmax_ptr + b, v, mask=m)
    old = tl.atomic_add(cnt_ptr, tl.sum(m.to(tl.int32), axis=0))  # a counter shared by programs
    tl.store(old_ptr + pid, old)


@pattern("atomics_masked", "atomic_add (int, fp32) / atomic_max with masks, a shared counter, old values",
         lambda: {"bins": _randint(0, 6, 100, seed=33), "v": _randn(100, seed=34)})
def _atomics_run(d):
    hist = torch.zeros(6, dtype=torch.int32)
    fsum = torch.zeros(6)
    fmax = torch.full((6,), -3.0)
    cnt = torch.zeros(1, dtype=torch.int32)
    old = _sentinel(4)
    atomics_kernel[(4,)](d["bins"], d["v"], hist, fsum, fmax, cnt, old, 100, BLOCK=32)
    return hist, fsum, fmax, cnt, old


@triton.jit
def atomic_cas_kernel(flags_ptr, lock_ptr, won_ptr, prev_ptr, imax_ptr, x_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    prev = tl.atomic_cas(lock_ptr, 0, pid + 1)  # the first program to arrive takes the lock
    tl.store(won_ptr + pid, prev)
    # every program tries to claim each even flag; the first claim sticks
    flags = flags_ptr + lanes
    seen = tl.atomic_cas(flags, tl.zeros([BLOCK], dtype=tl.int32), tl.where(lanes % 2 == 0, pid + 10, 0))
    tl.store(prev_ptr + pid * BLOCK + lanes, seen)
    x = tl.load(x_ptr + pid * BLOCK + lanes)
    tl.atomic_max(imax_ptr + lanes % 4, x, mask=x % 3 != 0)
    tl.atomic_min(imax_ptr + 4 + lanes % 4, x, mask=lanes < BLOCK - pid)
    tl.atomic_xchg(imax_ptr + 8, pid, mask=pid % 2 == 1)


@pattern("atomics_cas_max", "atomic_cas (scalar, block), int atomic_max/min/xchg with masks",
         lambda: {"x": _randint(-100, 100, 3, 16, seed=35)})
def _cas_run(d):
    flags = torch.zeros(16, dtype=torch.int32)
    lock = torch.zeros(1, dtype=torch.int32)
    won, prev = _sentinel(3), _sentinel(3, 16)
    imax = torch.tensor([-1000] * 4 + [1000] * 4 + [-1], dtype=torch.int32)
    atomic_cas_kernel[(3,)](flags, lock, won, prev, imax, d["x"], BLOCK=16)
    return flags, lock, won, prev, imax


# ====================================================================== block pointers
@triton.jit
def block_ptr_kernel(x_ptr, out_ptr, rowsum_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(stride_m, stride_n), offsets=(pid * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(N, 1), offsets=(pid * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    acc = tl.zeros([BM], dtype=tl.float32)
    for _ in range(0, N, BN):
        t = tl.load(src, boundary_check=(0, 1), padding_option="zero")
        acc += tl.sum(t, axis=1)
        tl.store(dst, t * 2.0 + 1.0, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))
    rs = tl.make_block_ptr(rowsum_ptr, shape=(M,), strides=(1,), offsets=(pid * BM,), block_shape=(BM,),
                           order=(0,))
    tl.store(rs, acc, boundary_check=(0,))


@pattern("block_pointers", "make_block_ptr + advance + boundary_check + padding_option='zero'",
         lambda: {"x": _randn(19, 37, seed=36)})
def _bp_run(d):
    x = d["x"]
    out, rs = _nan(19, 37), _nan(19)
    block_ptr_kernel[(triton.cdiv(19, 8),)](x, out, rs, 19, 37, x.stride(0), x.stride(1), BM=8, BN=16)
    return out, rs


@triton.jit
def block_ptr_colmajor_kernel(x_ptr, y_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    """A transposed view read through a column-major block pointer, checked on one dimension only."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(stride_m, stride_n), offsets=(pid_m * BM, pid_n * BN),
                            block_shape=(BM, BN), order=(0, 1))
    t = tl.load(src, boundary_check=(1,), padding_option="zero")
    dst = tl.make_block_ptr(y_ptr, shape=(N, M), strides=(M, 1), offsets=(pid_n * BN, pid_m * BM),
                            block_shape=(BN, BM), order=(1, 0))
    tl.store(dst, tl.trans(t) - 0.5, boundary_check=(0,))


@pattern("block_pointers_colmajor", "block pointer over a transposed view, order=(0,1), 2-D grid",
         lambda: {"x": _randn(20, 16, seed=37)})
def _bp_cm_run(d):
    x = d["x"].t()  # [16, 20], column major
    y = _nan(20, 16)
    block_ptr_colmajor_kernel[(2, 3)](x, y, 16, 20, x.stride(0), x.stride(1), BM=8, BN=8)
    return (y,)


# ====================================================================== scans
@triton.jit
def cumsum_kernel(x_ptr, i_ptr, c0_ptr, c1_ptr, cr_ptr, ci_ptr, cp_ptr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = pid * BM * BN + rm[:, None] * BN + rn[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(c0_ptr + offs, tl.cumsum(x, axis=0))
    tl.store(c1_ptr + offs, tl.cumsum(x, axis=1))
    tl.store(cr_ptr + offs, tl.cumsum(x, axis=1, reverse=True))
    xi = tl.load(i_ptr + offs)
    tl.store(ci_ptr + offs, tl.cumsum(xi, axis=0) + tl.cumsum(xi, 1))
    tl.store(cp_ptr + offs, tl.cumprod(xi % 3 + 1, axis=1))


@pattern("cumsum_2d", "tl.cumsum over axis 0 and 1 (and reverse), int cumsum/cumprod",
         lambda: {"x": _randn(2, 8, 16, seed=38), "i": _randint(-20, 20, 2, 8, 16, seed=39)})
def _cumsum_run(d):
    outs = (_nan(2, 8, 16), _nan(2, 8, 16), _nan(2, 8, 16), _sentinel(2, 8, 16), _sentinel(2, 8, 16))
    cumsum_kernel[(2,)](d["x"], d["i"], *outs, BM=8, BN=16)
    return outs


@triton.jit
def _linear_recurrence(a1, b1, a2, b2):
    return a1 * a2, b1 * a2 + b2


@triton.jit
def _running_max(a, b):
    return tl.maximum(a, b)


@triton.jit
def _add_f(a, b):
    return a + b


@triton.jit
def scan_kernel(a_ptr, b_ptr, i_ptr, h_ptr, run_ptr, rev_ptr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * BN + rn[None, :]
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    _, h = tl.associative_scan((a, b), axis=1, combine_fn=_linear_recurrence)  # h_t = a_t * h_{t-1} + b_t
    tl.store(h_ptr + offs, h)
    xi = tl.load(i_ptr + offs)
    tl.store(run_ptr + offs, tl.associative_scan(xi, 0, _running_max))
    tl.store(rev_ptr + offs, tl.associative_scan(b, 1, _add_f, reverse=True))


@pattern("associative_scan_custom", "tl.associative_scan: tuple linear recurrence, int running max, reverse",
         lambda: {"a": torch.rand(16, 16, generator=_gen(40)), "b": _randn(16, 16, seed=41),
                  "i": _randint(-50, 50, 16, 16, seed=42)})
def _scan_run(d):
    outs = (_nan(16, 16), _sentinel(16, 16), _nan(16, 16))
    scan_kernel[(2,)](d["a"], d["b"], d["i"], *outs, BM=8, BN=16)
    return outs


# ====================================================================== integer wrap-around
@triton.jit
def int_hash_kernel(x_ptr, hu_ptr, lcg_ptr, mix_ptr, n, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)  # int32
    h = x.to(tl.uint32) * 2654435761  # Knuth's multiplicative hash: wraps in uint32
    h ^= h >> 16
    h = h * 0x45D9F3B
    h ^= h >> 16
    tl.store(hu_ptr + offs, h.to(tl.int32, bitcast=True), mask=m)
    g = x * 1103515245 + 12345  # an int32 LCG step: wraps
    g = g + seed
    tl.store(lcg_ptr + offs, g, mask=m)
    k = (offs + 2147483000) * 3 - x * x * 65599  # int32 index arithmetic past the range
    k = k ^ (k >> 7)
    tl.store(mix_ptr + offs, k, mask=m)


@pattern("int_hash_wraps", "uint32/int32 hash and LCG arithmetic that wraps (no debug mode)",
         lambda: {"x": _randint(-2 ** 31, 2 ** 31 - 1, 100, seed=43)})
def _hash_run(d):
    outs = (_sentinel(100), _sentinel(100), _sentinel(100))
    int_hash_kernel[(triton.cdiv(100, 32),)](d["x"], *outs, 100, 2 ** 31 - 5, BLOCK=32)
    return outs


# ====================================================================== int with a Python float
@triton.jit
def int_float_const_kernel(i_ptr, l_ptr, h_ptr, a_ptr, b_ptr, c_ptr, e_ptr, n, alpha,
                           SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    xi = tl.load(i_ptr + offs, mask=m, other=0)  # int32
    xl = tl.load(l_ptr + offs, mask=m, other=0)  # int64
    xh = tl.load(h_ptr + offs, mask=m, other=0.0)  # fp16
    tl.store(a_ptr + offs, xi * SCALE + 0.5, mask=m)  # int32 * float constexpr -> fp32
    tl.store(b_ptr + offs, (xl // 3) * 1.5 - SCALE, mask=m)  # int64 with float literals
    tl.store(c_ptr + offs, xh * SCALE + xi * alpha, mask=m)  # fp16 * constexpr float; int32 * fp32 argument
    pid = tl.program_id(0)
    tl.store(e_ptr + offs, offs * SCALE + pid * SCALE + tl.where(pid > 0, 1, 0.25), mask=m)  # index and scalars


@pattern("int_times_float_constexpr", "int32 / int64 / fp16 blocks with a Python float constexpr and argument",
         lambda: {"i": _randint(-3000, 3000, 50, seed=44), "l": _randint(-10 ** 12, 10 ** 12, 50, seed=45,
                                                                          dtype=torch.int64),
                  "h": _randn(50, seed=46, dtype=torch.float16)})
def _intfloat_run(d):
    outs = (_nan(50), _nan(50), _nan(50, dtype=torch.float16), _nan(50))
    int_float_const_kernel[(2,)](d["i"], d["l"], d["h"], *outs, 50, 0.3, SCALE=0.37, BLOCK=32)
    return outs


@triton.jit
def narrow_int_float_kernel(b_ptr, s_ptr, u_ptr, w_ptr, f_ptr, g_ptr, n, SCALE: tl.constexpr, K: tl.constexpr,
                            BLOCK: tl.constexpr):
    """int8 / int16 / uint8 / uint32 blocks beside Python floats: Triton's promotion makes them fp32."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    b = tl.load(b_ptr + offs, mask=m, other=0)  # int8
    s = tl.load(s_ptr + offs, mask=m, other=0)  # int16
    u = tl.load(u_ptr + offs, mask=m, other=0)  # uint8
    w = tl.load(w_ptr + offs, mask=m, other=0).to(tl.uint32, bitcast=True)  # uint32
    tl.store(f_ptr + offs, b * SCALE + s * 0.25 - u * 1.5, mask=m)
    tl.store(g_ptr + offs, w * SCALE + K, mask=m)  # uint32 with a float constexpr, then an int constexpr


def _narrow_make():
    return {"b": _randint(-128, 128, 40, seed=64, dtype=torch.int8),
            "s": _randint(-30000, 30000, 40, seed=65, dtype=torch.int16),
            "u": _randint(0, 256, 40, seed=66, dtype=torch.uint8),
            "w": _randint(-2 ** 31, 2 ** 31 - 1, 40, seed=67)}


@pattern("narrow_int_with_float_constants", "int8/int16/uint8/uint32 blocks with Python float constants",
         _narrow_make)
def _narrow_float_run(d):
    outs = (_nan(40), _nan(40))
    narrow_int_float_kernel[(2,)](d["b"], d["s"], d["u"], d["w"], *outs, 40, SCALE=0.37, K=5, BLOCK=32)
    return outs


@triton.jit
def narrow_int_wrap_kernel(b_ptr, s_ptr, u_ptr, w_ptr, k_ptr, h_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    """int8 / int16 / uint8 / uint32 blocks beside Python ints keep their type, and wrap in it."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    b = tl.load(b_ptr + offs, mask=m, other=0)
    s = tl.load(s_ptr + offs, mask=m, other=0)
    u = tl.load(u_ptr + offs, mask=m, other=0)
    w = tl.load(w_ptr + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
    kk = b + 100 + s * 3 - u * K
    tl.store(k_ptr + offs, kk.to(tl.int32), mask=m)
    hh = (w + 7) * 3 - (w >> 3) * K
    tl.store(h_ptr + offs, hh.to(tl.int32, bitcast=True), mask=m)


@pattern("narrow_int_wraps", "int8/int16/uint8/uint32 blocks with Python int constants, wrapping", _narrow_make)
def _narrow_wrap_run(d):
    outs = (_sentinel(40), _sentinel(40))
    narrow_int_wrap_kernel[(2,)](d["b"], d["s"], d["u"], d["w"], *outs, 40, K=5, BLOCK=32)
    return outs


# ====================================================================== shapes checked in the kernel
@triton.jit
def shape_check_kernel(x_ptr, y_ptr, r_ptr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :])
    tl.static_assert(x.shape == [BM, BN])
    tl.static_assert(x.shape[0] == BM)
    tl.static_assert(len(x.shape) == 2)
    r = tl.sum(x, axis=1)
    tl.static_assert(r.shape == [BM])
    n = x.shape[1]
    y = x / n + tl.zeros(x.shape, dtype=tl.float32)
    y = y + tl.full((x.shape[0], 1), 2.0, tl.float32)
    rows = tl.arange(0, x.shape[0])
    cols = tl.arange(0, x.shape[1])
    for i in tl.static_range(x.shape[0] // 4):
        y = y + i
    tl.store(y_ptr + pid * BM * BN + rows[:, None] * BN + cols[None, :], y)
    tl.store(r_ptr + pid * r.shape[0] + tl.arange(0, r.shape[0]), r)


@pattern("shape_checks", "tl.static_assert on x.shape, x.shape[0] in arange/zeros/full/static_range",
         lambda: {"x": _randn(2, 8, 16, seed=47)})
def _shape_run(d):
    outs = (_nan(2, 8, 16), _nan(2, 8))
    shape_check_kernel[(2,)](d["x"], *outs, BM=8, BN=16)
    return outs


# ====================================================================== casts
@triton.jit
def casts_kernel(x_ptr, i_ptr, h_ptr, f16_ptr, f16z_ptr, trunc_ptr, i2f_ptr, i2h_ptr, h2f_ptr, bits_ptr,
                 small_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(f16_ptr + offs, x.to(tl.float16), mask=m)  # round to nearest even (and overflow to inf)
    xc = tl.minimum(tl.maximum(x, -60000.0), 60000.0)  # (in range: the interpreter's rtz of an overflow is NaN)
    tl.store(f16z_ptr + offs, xc.to(tl.float16, fp_downcast_rounding="rtz"), mask=m)
    tl.store(trunc_ptr + offs, (x * 1000.0).to(tl.int32), mask=m)  # toward zero
    i = tl.load(i_ptr + offs, mask=m, other=0)
    tl.store(i2f_ptr + offs, i.to(tl.float32), mask=m)  # rounds past 2**24
    tl.store(i2h_ptr + offs, (i % 70000).to(tl.float16), mask=m)
    h = tl.load(h_ptr + offs, mask=m, other=0.0)
    tl.store(h2f_ptr + offs, h.to(tl.float32) * 3.0 + (h > 0).to(tl.float32), mask=m)
    tl.store(bits_ptr + offs, x.to(tl.int32, bitcast=True) ^ i, mask=m)
    s = (i & 0xFFFF).to(tl.int16).to(tl.int32) + (i >> 24).to(tl.int8).to(tl.int32)
    tl.store(small_ptr + offs, s.to(tl.int64) * 4000000000, mask=m)


def _casts_make():
    x = _randn(64, seed=48, scale=3.0)
    x[:8] = torch.tensor([70000.0, -70000.0, 65519.0, 65520.0, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 2.5e-8, -0.0])
    i = _randint(-2 ** 31, 2 ** 31 - 1, 64, seed=49)
    i[:4] = torch.tensor([2 ** 24 + 1, -(2 ** 24) - 3, 2 ** 31 - 1, -2 ** 31], dtype=torch.int32)
    return {"x": x, "i": i, "h": _randn(64, seed=50, dtype=torch.float16)}


@pattern("dtype_casts", "fp32->fp16 (rtne, rtz), float->int truncation, int->float, int narrowing, bitcast",
         _casts_make)
def _casts_run(d):
    n = 60
    outs = (_nan(64, dtype=torch.float16), _nan(64, dtype=torch.float16), _sentinel(64), _nan(64),
            _nan(64, dtype=torch.float16), _nan(64), _sentinel(64), _sentinel(64, dtype=torch.int64))
    casts_kernel[(2,)](d["x"], d["i"], d["h"], *outs, n, BLOCK=32)
    return outs


# ====================================================================== tl.dot
@triton.jit
def dot_kloop_kernel(a_ptr, b_ptr, c_ptr, c16_ptr, M, N, K, sam, sak, sbk, sbn,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC_ARG: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)  # fp16
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if ACC_ARG:
            acc = tl.dot(a, b, acc)
        else:
            acc += tl.dot(a, b)  # fp16 inputs, fp32 accumulator
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)
    tl.store(c16_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=mask)


def _dot_make():
    return {"a": _randn(40, 50, seed=51, dtype=torch.float16), "b": _randn(50, 24, seed=52, dtype=torch.float16)}


def _dot_run(acc_arg):
    def run(d):
        a, b = d["a"], d["b"]
        (M, K), N = a.shape, b.shape[1]
        c, c16 = _nan(M, N), _nan(M, N, dtype=torch.float16)
        dot_kloop_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](
            a, b, c, c16, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            BM=16, BN=16, BK=16, ACC_ARG=acc_arg)
        return c, c16
    return run


pattern("dot_fp16_kloop", "tl.dot fp16 x fp16 -> fp32 acc += in a masked K loop", _dot_make)(_dot_run(False))
pattern("dot_fp16_acc_arg", "acc = tl.dot(a, b, acc) with fp16 inputs", _dot_make)(_dot_run(True))


@triton.jit
def dot_ieee_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((M, BN), dtype=tl.float32)
    for k in tl.static_range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc, input_precision="ieee")
    acc += tl.load(bias_ptr + rn)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.maximum(acc, 0.0))


@pattern("dot_fp32_ieee", "fp32 tl.dot(input_precision='ieee') in an unrolled K loop, bias + relu",
         lambda: {"a": _randn(16, 64, seed=53), "b": _randn(64, 32, seed=54), "bias": _randn(32, seed=55)})
def _dot_ieee_run(d):
    c = _nan(16, 32)
    dot_ieee_kernel[(2,)](d["a"], d["b"], d["bias"], c, M=16, N=32, K=64, BN=16, BK=32)
    return (c,)


# ====================================================================== masked loads with other=
@triton.jit
def masked_other_kernel(x_ptr, fill_ptr, i_ptr, m_ptr, a_ptr, b_ptr, c_ptr, d_ptr, n, BLOCK: tl.constexpr,
                        BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m, other=-3.5)  # a scalar other
    tl.store(a_ptr + offs, a)
    fill = tl.load(fill_ptr + tl.arange(0, BLOCK))
    b = tl.load(x_ptr + offs, mask=m & (offs % 3 != 0), other=fill)  # a block other
    tl.store(b_ptr + offs, b)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask2 = (rm[:, None] + rn[None, :] + pid) % 4 != 0
    c = tl.load(m_ptr + rm[:, None] * BN + rn[None, :], mask=mask2, other=rm[:, None] * 1.0)  # [BM, 1] other
    tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], c)
    i = tl.load(i_ptr + offs, mask=m, other=-1)  # an int scalar other
    tl.store(d_ptr + offs, i)


@pattern("masked_load_other", "tl.load(mask=, other=) with a scalar, a block, a [BM,1] block, int other",
         lambda: {"x": _randn(50, seed=56), "fill": _randn(32, seed=57) + 100.0, "i": _randint(0, 99, 50, seed=58),
                  "m": _randn(8, 8, seed=59)})
def _masked_run(d):
    outs = (_nan(64), _nan(64), _nan(2, 8, 8), _sentinel(64))
    masked_other_kernel[(2,)](d["x"], d["fill"], d["i"], d["m"], *outs, 50, BLOCK=32, BM=8, BN=8)
    return outs


# ====================================================================== 2-D / 3-D grids, num_programs
@triton.jit
def grid2d_kernel(x_ptr, y_ptr, ids_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    npm = tl.num_programs(0)
    npn = tl.num_programs(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm[:, None] * N + rn[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x * (pm + 1) + pn, mask=mask)
    tl.store(ids_ptr + pm * npn + pn, pm * 100 + pn * 10 + npm * npn)


@pattern("grid_2d_num_programs", "tl.program_id(1) on a 2-D grid, tl.num_programs(0/1)",
         lambda: {"x": _randn(20, 30, seed=60)})
def _grid2d_run(d):
    y, ids = _nan(20, 30), _sentinel(3, 4)
    grid2d_kernel[(3, 4)](d["x"], y, ids, 20, 30, BM=8, BN=8)
    return y, ids


@triton.jit
def grid3d_kernel(y_ptr, BLOCK: tl.constexpr):
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    p2 = tl.program_id(2)
    lin = (p0 * tl.num_programs(1) + p1) * tl.num_programs(2) + p2
    lanes = tl.arange(0, BLOCK)
    tl.store(y_ptr + lin * BLOCK + lanes, lanes * 1000 + p0 * 100 + p1 * 10 + p2)


@pattern("grid_3d", "tl.program_id(2) on a (2, 2, 2) grid", lambda: {})
def _grid3d_run(d):
    y = _sentinel(8, 8)
    grid3d_kernel[(2, 2, 2)](y, BLOCK=8)
    return (y,)


@triton.jit
def persistent_kernel(x_ptr, y_ptr, n_tiles, BLOCK: tl.constexpr):
    """A persistent kernel: each program walks tiles pid, pid + num_programs, ..."""
    pid = tl.program_id(0)
    for tile in range(pid, n_tiles, tl.num_programs(0)):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(y_ptr + offs, x * x + pid)


@pattern("persistent_tiles", "a grid-stride (persistent) loop over tiles by tl.num_programs",
         lambda: {"x": _randn(8 * 16, seed=61)}, replays=False)
def _persistent_run(d):
    y = _nan(8 * 16)
    persistent_kernel[(3,)](d["x"], y, 8, BLOCK=16)
    return (y,)


# ====================================================================== helper functions
@triton.jit
def helper_norm_kernel(x_ptr, g_ptr, y_ptr, stats_ptr, n, stride, eps, BLOCK: tl.constexpr,
                       FACTOR: tl.constexpr):
    row = tl.program_id(0)
    x, mask = _load_row(x_ptr, row, n, stride, BLOCK)  # a helper returning a tuple
    mean, var = _mean_var(x, mask, n)
    rstd = 1.0 / tl.sqrt(var + eps)
    g, _ = _load_row(g_ptr, 0, n, 0, BLOCK)
    y = _scaled((x - mean) * rstd * g, FACTOR)  # a helper with a constexpr, calling a helper
    tl.store(y_ptr + row * stride + tl.arange(0, BLOCK), y, mask=mask)
    tl.store(stats_ptr + row * 2, mean)
    tl.store(stats_ptr + row * 2 + 1, rstd)


@pattern("jit_helpers", "@triton.jit helpers: tuple return, constexpr parameter, helper calling a helper",
         lambda: {"x": _randn(5, 40, seed=62), "g": _randn(40, seed=63)})
def _helper_run(d):
    x = d["x"]
    y, stats = _nan(5, 40), _nan(5, 2)
    helper_norm_kernel[(5,)](x, d["g"], y, stats, 40, x.stride(0), 1e-5, BLOCK=64, FACTOR=1.5)
    return y, stats


@triton.jit
def scalar_value_kernel(x_ptr, shift_ptr, scale_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """Scalars loaded through pointers used as values and as an address offset, not as control flow."""
    pid = tl.program_id(0)
    shift = tl.load(shift_ptr)  # an int32 scalar: where this program's window starts
    scale = tl.load(scale_ptr + pid)  # one fp32 scalar per program
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + shift + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, x * scale + shift.to(tl.float32), mask=m)
    tl.store(y_ptr + n + pid, scale)


@pattern("scalar_pointer_value", "scalars loaded through pointers as a multiplier and an address offset",
         lambda: {"x": _randn(80, seed=33), "shift": torch.tensor([5], dtype=torch.int32),
                  "scale": _randn(4, seed=34)})
def _scalar_value_run(d):
    y = _nan(60 + 4)
    scalar_value_kernel[(4,)](d["x"], d["shift"], d["scale"], y, 60, BLOCK=16)
    return (y,)


@triton.jit
def reduce_then_expand_kernel(p_ptr, v_ptr, o_ptr, BT: tl.constexpr, BD: tl.constexpr):
    """A block reduced (tl.sum(pr, 0)) and then expanded (pr[:, None]), as a decode attention's online softmax
    does, with equal block sizes: a batched pass once took the reduction's view of the block for the block's."""
    h = tl.program_id(0)
    offs_t = tl.arange(0, BT)
    offs_d = tl.arange(0, BD)
    pr = tl.exp(tl.load(p_ptr + h * BT + offs_t))
    v = tl.load(v_ptr + offs_t[:, None] * BD + offs_d[None, :])
    total = tl.sum(pr, 0)
    acc = tl.sum(pr[:, None] * v, 0) / total
    tl.store(o_ptr + h * BD + offs_d, acc)


@pattern("reduce_then_expand", "tl.sum of a block, then the block expanded (pr[:, None] * v), BT == BD",
         lambda: {"p": _randn(3 * 16, seed=35), "v": _randn(16 * 16, seed=36)})
def _reduce_then_expand_run(d):
    y = _nan(3 * 16)
    reduce_then_expand_kernel[(3,)](d["p"], d["v"], y, BT=16, BD=16)
    return (y,)
