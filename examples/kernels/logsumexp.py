"""logsumexp(x) -> x.shape[:-1]: log(sum(exp(x))) over the last dim. Online version, loop over BLOCK_N=64 chunks."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct
@triton.jit
def _logsumexp_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + offs * stride_xn, mask=offs < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m_i = m_new
    tl.store(y_ptr + row, (m_i + tl.log(l_i)).to(y_ptr.dtype.element_ty))


def logsumexp(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=x.dtype, device=x.device)
    _logsumexp_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=64)
    return y.reshape(x.shape[:-1])


# ---------------------------------------------------------------- buggy: missing online rescale of the running sum
@triton.jit
def _logsumexp_no_rescale_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + offs * stride_xn, mask=offs < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        # BUG: l_i is not rescaled by exp(m_i - m_new) when the running max grows (wrong once N > BLOCK_N)
        l_i = l_i + tl.sum(tl.exp(x - m_new), axis=0)
        m_i = m_new
    tl.store(y_ptr + row, (m_i + tl.log(l_i)).to(y_ptr.dtype.element_ty))


def logsumexp_no_rescale(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0],), dtype=x.dtype, device=x.device)
    _logsumexp_no_rescale_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), BLOCK_N=64)
    return y.reshape(x.shape[:-1])
