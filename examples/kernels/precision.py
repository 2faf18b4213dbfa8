"""Precision bugs: kernels that are right to 2-3 digits and pass a loose tolerance, and are still wrong.

Each keeps an intermediate in the input dtype (or uses an approximation) where a correct kernel keeps
fp32 (or the exact formula). The fixed atol=1e-5 / rtol=1e-2 check accepts them on most inputs; a
tolerance calibrated on the op's error scale does not.
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
