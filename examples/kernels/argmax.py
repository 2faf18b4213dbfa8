"""argmax(x) -> int64, x.shape[:-1]: index of the max over the last dim, first index on ties."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct: loop over BLOCK_N=64 chunks
@triton.jit
def _argmax_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    best = tl.full([], float("-inf"), tl.float32)
    best_i = tl.full([], 0, tl.int64)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + offs * stride_xn, mask=offs < N, other=float("-inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        i = tl.min(tl.where(x == m, offs, N), axis=0).to(tl.int64)  # first index of the block max
        take = m > best  # strict: an equal max in a later chunk keeps the earlier index
        best_i = tl.where(take, i, best_i)
        best = tl.where(take, m, best)
    tl.store(y_ptr + row, best_i)


def argmax(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=torch.int64, device=x.device)
    _argmax_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=64)
    return y.reshape(x.shape[:-1])


# ---------------------------------------------------------------- buggy: last index on ties
@triton.jit
def _argmax_last_tie_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    # BUG: tl.max over the matching indices returns the LAST index of the max on ties
    i = tl.max(tl.where(x == m, offs, -1), axis=0)
    tl.store(y_ptr + row, i.to(tl.int64))


def argmax_last_tie(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=torch.int64, device=x.device)
    _argmax_last_tie_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape[:-1])


# ---------------------------------------------------------------- buggy: padding loaded as 0.0
@triton.jit
def _argmax_pad_zero_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    # BUG: other=0.0 instead of -inf: a row whose values are all negative returns a padding index >= N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
    i = tl.argmax(x, axis=0)
    tl.store(y_ptr + row, i.to(tl.int64))


def argmax_pad_zero(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=torch.int64, device=x.device)
    _argmax_pad_zero_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape[:-1])
