"""Triton launchers for the ops examples/kernels has no correct kernel of, for bench/production_sizes.py.

Written for production sizes: every offset that can pass 2^31 is computed in int64 (``pid.to(tl.int64)``), rows
are streamed in BLOCK chunks. relu, sigmoid, silu, softplus, tanh, mul, geglu, geglu_tanh (elementwise, flat),
amax and log_softmax (one row per program), bmm and linear (tiled GEMM, fp32 accumulation).
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _expm1(y):
    u = tl.exp(y)  # Kahan: (u - 1) * y / log(u) is exp(y) - 1 to a few ulps, also for small y
    return tl.where(u == 1.0, y, tl.where(tl.abs(y) < 0.5, (u - 1.0) * y / tl.log(u), u - 1.0))


@triton.jit
def _log1p(t):
    u = 1.0 + t  # Goldberg: log(u) * t / (u - 1) is log(1 + t) to a few ulps, also for small t
    return tl.where(u == 1.0, t, tl.log(u) * t / (u - 1.0))


@triton.jit
def _tanh(z):
    em = _expm1(-2.0 * tl.abs(z))  # tanh |z| = -expm1(-2|z|) / (2 + expm1(-2|z|)): no cancellation near 0
    th = -em / (2.0 + em)
    return tl.where(z < 0, -th, th)


@triton.jit
def _unary(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    if OP == "relu":
        y = tl.maximum(x, 0.0)
    elif OP == "sigmoid":
        y = 1.0 / (1.0 + tl.exp(-x))
    elif OP == "silu":
        y = x / (1.0 + tl.exp(-x))
    elif OP == "softplus":  # (in fp64, rounded once: fp32's bound for a lone softplus / tanh is about an ulp)
        xd = x.to(tl.float64)
        y = (tl.maximum(xd, 0.0) + _log1p(tl.exp(-tl.abs(xd)))).to(tl.float32)
    elif OP == "tanh":
        y = _tanh(x.to(tl.float64)).to(tl.float32)
    elif OP == "geglu":  # exact gelu (erf), as the op's meaning
        g = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
        y = g * tl.load(y_ptr + offs, mask=m, other=0.0).to(tl.float32)
    elif OP == "mul":
        y = x * tl.load(y_ptr + offs, mask=m, other=0.0).to(tl.float32)
    else:  # geglu_tanh
        g = 0.5 * x * (1.0 + _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
        y = g * tl.load(y_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _elementwise(op, x, y=None):
    xc = x.contiguous()
    yc = y.contiguous() if y is not None else xc
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _unary[(triton.cdiv(n, BLOCK),)](xc, yc, out, n, OP=op, BLOCK=BLOCK)
    return out


def relu(x):
    return _elementwise("relu", x)


def sigmoid(x):
    return _elementwise("sigmoid", x)


def silu(x):
    return _elementwise("silu", x)


def softplus(x):
    return _elementwise("softplus", x)


def tanh(x):
    return _elementwise("tanh", x)


def mul(x, y):
    return _elementwise("mul", x, y)


def geglu(a, b):
    return _elementwise("geglu", a, b)


def geglu_tanh(a, b):
    return _elementwise("geglu_tanh", a, b)


@triton.jit
def _rows(x_ptr, out_ptr, N, stride_x, stride_o, OP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, N, BLOCK):
        m = tl.maximum(m, tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32))
    mx = tl.max(m, axis=0)
    if OP == "amax":
        tl.store(out_ptr + row, mx.to(out_ptr.dtype.element_ty))
    else:  # log_softmax
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, N, BLOCK):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
            s += tl.exp(x - mx)
        lse = mx + tl.log(tl.sum(s, axis=0))
        for start in range(0, N, BLOCK):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0).to(tl.float32)
            tl.store(out_ptr + row * stride_o + start + cols, (x - lse).to(out_ptr.dtype.element_ty),
                     mask=start + cols < N)


def _row_op(op, x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    if op == "amax":
        out = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
        _rows[(x2.shape[0],)](x2, out, N, x2.stride(0), 1, OP=op, BLOCK=4096)
        return out.reshape(x.shape[:-1])
    out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _rows[(x2.shape[0],)](x2, out, N, x2.stride(0), out.stride(0), OP=op, BLOCK=4096)
    return out.reshape(x.shape)


def amax(x):
    return _row_op("amax", x)


def log_softmax(x):
    return _row_op("log_softmax", x)


@triton.jit
def _gemm(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, s_bias,
          HAS_BIAS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n, bat = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    rm = pid_m.to(tl.int64) * BM + tl.arange(0, BM)
    rn = pid_n.to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + bat * sab + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + bat * sbb + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn * s_bias, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(c_ptr + bat * scb + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def bmm(a, b):
    B, M, K = a.shape
    N = b.shape[2]
    c = torch.empty((B, M, N), dtype=a.dtype, device=a.device)
    _gemm[(triton.cdiv(M, 64), triton.cdiv(N, 64), B)](a, b, a, c, M, N, K, a.stride(0), a.stride(1), a.stride(2),
                                                       b.stride(0), b.stride(1), b.stride(2), c.stride(0),
                                                       c.stride(1), c.stride(2), 0, HAS_BIAS=False, BM=64, BN=64,
                                                       BK=32)
    return c


def linear(x, w, bias=None):
    K = x.shape[-1]
    x2 = x.reshape(-1, K)
    M, N = x2.shape[0], w.shape[0]
    c = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _gemm[(triton.cdiv(M, 64), triton.cdiv(N, 64), 1)](x2, w, bias if bias is not None else x2, c, M, N, K, 0,
                                                       x2.stride(0), x2.stride(1), 0, w.stride(1), w.stride(0), 0,
                                                       c.stride(0), c.stride(1), bias.stride(0) if bias is not None
                                                       else 0, HAS_BIAS=bias is not None,
                                                       BM=64, BN=64, BK=32)
    return c.reshape(*x.shape[:-1], N)
