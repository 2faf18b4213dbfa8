"""sum(x) -> x.shape[:-1]: sum over the last dim. Loop over BLOCK_N=128 chunks, fp32 vector accumulator."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct
@triton.jit
def _sum_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def sum(x):  # noqa: A001 (op name)
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=x.dtype, device=x.device)
    _sum_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=128)
    return y.reshape(x.shape[:-1])


# ---------------------------------------------------------------- buggy: accumulator overwrite
@triton.jit
def _sum_acc_overwrite_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        # BUG: '=' instead of '+=': only the last chunk is summed once N > BLOCK_N
        acc = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def sum_acc_overwrite(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=x.dtype, device=x.device)
    _sum_acc_overwrite_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=128)
    return y.reshape(x.shape[:-1])
