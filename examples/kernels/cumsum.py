"""cumsum(x): inclusive prefix sum over the last dim. Loop over BLOCK_N=64 chunks."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct: carries the running total across chunks
@triton.jit
def _cumsum_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    carry = tl.full([], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        c = tl.cumsum(x, axis=0) + carry
        tl.store(y_ptr + row * stride_ym + offs, c.to(y_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _cumsum_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0), BLOCK_N=64)
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: no carry between chunks
@triton.jit
def _cumsum_no_carry_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        # BUG: each chunk's prefix sum restarts at 0; the total of earlier chunks is never carried (N > BLOCK_N)
        c = tl.cumsum(x, axis=0)
        tl.store(y_ptr + row * stride_ym + offs, c.to(y_ptr.dtype.element_ty), mask=mask)


def cumsum_no_carry(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _cumsum_no_carry_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0), BLOCK_N=64)
    return y.reshape(x.shape)
