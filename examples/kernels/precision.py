"""Precision bugs: kernels that are right to 2-6 digits and pass a loose tolerance, and are still wrong.

Each keeps an intermediate in a lower precision than a correct kernel (the input dtype, or bf16 whatever
the input), uses an approximation, or a truncated constant, where a correct kernel keeps fp32, the exact
formula and the constant to full precision. A fixed atol=1e-5 / rtol=1e-2 check accepts them on most
inputs (the truncated constants on every input); a tolerance calibrated on the op's error scale does not.
"""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- gelu: the tanh approximation shipped as exact gelu
@triton.jit
def _gelu_tanh_as_exact_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # BUG: the tanh approximation where the op is the exact erf form (differs by up to ~5e-4)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
    y = 0.5 * x * (1.0 + t)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu_tanh_as_exact(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _gelu_tanh_as_exact_kernel[(triton.cdiv(n, 1024),)](xc, out, n, BLOCK=1024)
    return out


# ---------------------------------------------------------------- sum: running total kept in the input dtype
@triton.jit
def _sum_low_acc_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    # BUG: the running total lives in the input dtype: every block's partial sum is rounded to fp16/bf16
    acc = tl.zeros([1], tl.float32).to(x_ptr.dtype.element_ty)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        chunk = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
        acc = (acc.to(tl.float32) + tl.sum(chunk, axis=0)).to(x_ptr.dtype.element_ty)
    tl.store(y_ptr + row + tl.arange(0, 1), acc.to(y_ptr.dtype.element_ty))


def sum_low_precision_acc(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=x.dtype, device=x.device)
    _sum_low_acc_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=16)
    return y.reshape(x.shape[:-1])


# ---------------------------------------------------------------- matmul: accumulator in the input dtype
@triton.jit
def _matmul_low_acc_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                           stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # BUG: the accumulator is the output dtype, so each K block's contribution is rounded to fp16
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32).to(c_ptr.dtype.element_ty)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = (acc.to(tl.float32) + tl.dot(a, b, input_precision="ieee")).to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul_low_precision_acc(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    _matmul_low_acc_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
    return c


# ---------------------------------------------------------------- truncated constants
# Each is right to 4-6 digits: within rtol=1e-2 of |ref| everywhere, so a fixed |ref|-relative check can never
# see it, and wrong in every fp32 result by far more than a correct kernel's rounding.

@triton.jit
def _exp_short_log2e_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # BUG: log2(e) truncated to 1.4427: exp2(x * 1.4427) = exp(x * (1 + 3.4e-6)), relative error 3.4e-6 * |x|
    y = tl.exp2(x * 1.4427)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def exp_short_log2e(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _exp_short_log2e_kernel[(triton.cdiv(n, 1024),)](xc, out, n, BLOCK=1024)
    return out


@triton.jit
def _softmax_short_log2e_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
    # BUG: log2(e) truncated to 1.4427: every weight is exp((x - max) * (1 + 3.4e-6)), off by 3.4e-6 * |x - max|
    xs = x * 1.4427
    m = tl.max(xs, axis=0)
    e = tl.where(mask, tl.exp2(xs - m), 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_short_log2e(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_short_log2e_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0),
                                                BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


@triton.jit
def _gelu_short_rsqrt2_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # BUG: 1/sqrt(2) truncated to 0.7071 (relative 1.5e-5 in erf's argument)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu_short_rsqrt2(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _gelu_short_rsqrt2_kernel[(triton.cdiv(n, 1024),)](xc, out, n, BLOCK=1024)
    return out


# ---------------------------------------------------------------- swiglu: the gate rounded to bf16 whatever the dtype
@triton.jit
def _swiglu_bf16_gate_kernel(a_ptr, b_ptr, out_ptr, N, stride_am, stride_an, stride_bm, stride_bn, stride_om,
                             BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        a = tl.load(a_ptr + row * stride_am + offs * stride_an, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + row * stride_bm + offs * stride_bn, mask=mask, other=0.0).to(tl.float32)
        # BUG: the activation is rounded to bf16 (a kernel written for bf16 models), costing fp32 and fp16
        # inputs up to 2^-9 relative error: 8 bits of mantissa where the dtype has 24 or 11
        g = (a / (1.0 + tl.exp(-a))).to(tl.bfloat16).to(tl.float32)
        tl.store(out_ptr + row * stride_om + offs, (g * b).to(out_ptr.dtype.element_ty), mask=mask)


def swiglu_bf16_gate(a, b):
    N = a.shape[-1]
    a2, b2 = a.reshape(-1, N), b.reshape(-1, N)
    out = torch.empty((a2.shape[0], N), dtype=a.dtype, device=a.device)
    _swiglu_bf16_gate_kernel[(a2.shape[0],)](a2, b2, out, N, a2.stride(0), a2.stride(1), b2.stride(0), b2.stride(1),
                                             out.stride(0), BLOCK_N=min(1024, triton.next_power_of_2(N)))
    return out.reshape(a.shape)


# ---------------------------------------------------------------- buggy: bf16 logits narrowed to fp16 inside
@triton.jit
def _softmax_fp16_narrow_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr,
                                NARROW: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=float("-inf"))
    if NARROW:  # BUG: the bf16 path goes through fp16 ("as wide as we need for logits"): a bf16 logit past
        x = x.to(tl.float16)  # fp16's 65,504 becomes inf, the row's max inf and the row NaN
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x - m), 0.0)
    tl.store(y_ptr + row * stride_ym + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax_fp16_narrow(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_fp16_narrow_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0),
                                                BLOCK_N=triton.next_power_of_2(N), NARROW=x.dtype == torch.bfloat16)
    return y.reshape(x.shape)
