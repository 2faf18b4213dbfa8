"""mean(x) -> x.shape[:-1]: mean over the last dim. One block per row, BLOCK_N = next_pow2(N)."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct
@triton.jit
def _mean_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, (tl.sum(x, axis=0) / N).to(y_ptr.dtype.element_ty))


def mean(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=x.dtype, device=x.device)
    _mean_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape[:-1])


# ---------------------------------------------------------------- buggy: divides by BLOCK_N
@triton.jit
def _mean_block_div_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
    # BUG: tl.sum(x) / BLOCK_N counts the zero padding lanes (only right when N is a power of two)
    tl.store(y_ptr + row, (tl.sum(x, axis=0) / BLOCK_N).to(y_ptr.dtype.element_ty))


def mean_block_div(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=x.dtype, device=x.device)
    _mean_block_div_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape[:-1])
