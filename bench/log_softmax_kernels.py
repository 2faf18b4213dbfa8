"""log_softmax launchers for `make bench`'s cost rows: the op whose mpmath guard cost 99% of a fuzz run (issue 14).

Not part of the corpus (examples/kernels/manifest.yaml): bench.py times them and reports gpuemu's own share.
One block per row up to MAX_BLOCK columns; past it an online logsumexp over MAX_BLOCK-wide chunks, then a
second pass writing x - lse. Strided rows and columns."""
import torch
import triton
import triton.language as tl

MAX_BLOCK = 4096
LOG2E = 1.4426950408889634


@triton.jit
def _log_softmax_kernel(x_ptr, y_ptr, N, stride_xr, stride_xc, stride_yr,
                        BLOCK_N: tl.constexpr, CHUNKED: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xr
    y_row = y_ptr + row * stride_yr
    if CHUNKED:
        m_i = tl.full([], float("-inf"), tl.float32)
        l_i = tl.full([], 0.0, tl.float32)
        for start in range(0, N, BLOCK_N):
            offs = start + tl.arange(0, BLOCK_N)
            x = tl.load(x_row + offs * stride_xc, mask=offs < N, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m_i, tl.max(x, axis=0))
            l_i = l_i * tl.exp2((m_i - m_new) * 1.4426950408889634) \
                + tl.sum(tl.exp2((x - m_new) * 1.4426950408889634), axis=0)
            m_i = m_new
        lse = m_i + tl.log(l_i)
        for start in range(0, N, BLOCK_N):
            offs = start + tl.arange(0, BLOCK_N)
            x = tl.load(x_row + offs * stride_xc, mask=offs < N, other=0.0).to(tl.float32)
            tl.store(y_row + offs, (x - lse).to(y_ptr.dtype.element_ty), mask=offs < N)
    else:
        offs = tl.arange(0, BLOCK_N)
        x = tl.load(x_row + offs * stride_xc, mask=offs < N, other=float("-inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        lse = m + tl.log(tl.sum(tl.exp2((x - m) * 1.4426950408889634), axis=0))
        tl.store(y_row + offs, (x - lse).to(y_ptr.dtype.element_ty), mask=offs < N)


def log_softmax(x):
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]) if x.dim() != 2 else x
    rows, n = x2.shape
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    if rows and n:
        chunked = n > MAX_BLOCK
        block = MAX_BLOCK if chunked else triton.next_power_of_2(n)
        _log_softmax_kernel[(rows,)](x2, y, n, x2.stride(0), x2.stride(1), y.stride(0), BLOCK_N=block,
                                     CHUNKED=chunked)
    return y.reshape(shape)
