"""cross_entropy(logits[N,C], target[N] int64) -> [N]: logsumexp(logits) - logits[target], per row."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct: one block per row, BLOCK_C = next_pow2(C)
@triton.jit
def _cross_entropy_kernel(x_ptr, t_ptr, y_ptr, C, stride_xn, stride_xc, stride_t, BLOCK_C: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xn
    offs = tl.arange(0, BLOCK_C)
    mask = offs < C
    x = tl.load(x_row + offs * stride_xc, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    t = tl.load(t_ptr + row * stride_t)
    x_t = tl.load(x_row + t * stride_xc).to(tl.float32)
    tl.store(y_ptr + row, (lse - x_t).to(y_ptr.dtype.element_ty))


def cross_entropy(logits, target):
    N, C = logits.shape
    y = torch.empty((N,), dtype=logits.dtype, device=logits.device)
    _cross_entropy_kernel[(N,)](logits, target, y, C, logits.stride(0), logits.stride(1), target.stride(0),
                                BLOCK_C=triton.next_power_of_2(C))
    return y


# ---------------------------------------------------------------- correct: online logsumexp over BLOCK_C=64 chunks
@triton.jit
def _cross_entropy_online_kernel(x_ptr, t_ptr, y_ptr, C, stride_xn, stride_xc, stride_t, BLOCK_C: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xn
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    for start in range(0, C, BLOCK_C):
        offs = start + tl.arange(0, BLOCK_C)
        x = tl.load(x_row + offs * stride_xc, mask=offs < C, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m_i = m_new
    t = tl.load(t_ptr + row * stride_t)
    x_t = tl.load(x_row + t * stride_xc).to(tl.float32)
    tl.store(y_ptr + row, (m_i + tl.log(l_i) - x_t).to(y_ptr.dtype.element_ty))


def cross_entropy_online(logits, target):
    N, C = logits.shape
    y = torch.empty((N,), dtype=logits.dtype, device=logits.device)
    _cross_entropy_online_kernel[(N,)](logits, target, y, C, logits.stride(0), logits.stride(1), target.stride(0),
                                       BLOCK_C=64)
    return y


# ---------------------------------------------------------------- buggy: no max subtraction
@triton.jit
def _cross_entropy_no_max_kernel(x_ptr, t_ptr, y_ptr, C, stride_xn, stride_xc, stride_t, BLOCK_C: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xn
    offs = tl.arange(0, BLOCK_C)
    mask = offs < C
    x = tl.load(x_row + offs * stride_xc, mask=mask, other=float("-inf")).to(tl.float32)
    # BUG: log(sum(exp(x))) without subtracting the max: exp overflows to inf for logits above ~88
    lse = tl.log(tl.sum(tl.exp(x), axis=0))
    t = tl.load(t_ptr + row * stride_t)
    x_t = tl.load(x_row + t * stride_xc).to(tl.float32)
    tl.store(y_ptr + row, (lse - x_t).to(y_ptr.dtype.element_ty))


def cross_entropy_no_max(logits, target):
    N, C = logits.shape
    y = torch.empty((N,), dtype=logits.dtype, device=logits.device)
    _cross_entropy_no_max_kernel[(N,)](logits, target, y, C, logits.stride(0), logits.stride(1), target.stride(0),
                                       BLOCK_C=triton.next_power_of_2(C))
    return y


# ---------------------------------------------------------------- buggy: tail-mask leak in the online loop
@triton.jit
def _cross_entropy_tail_leak_kernel(x_ptr, t_ptr, y_ptr, C, stride_xn, stride_xc, stride_t, BLOCK_C: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xn
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    for start in range(0, C, BLOCK_C):
        offs = start + tl.arange(0, BLOCK_C)
        # BUG: other=0.0 instead of -inf: padding lanes of the last chunk add exp(0 - m) to the sum when C % 64 != 0
        x = tl.load(x_row + offs * stride_xc, mask=offs < C, other=0.0).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m_i = m_new
    t = tl.load(t_ptr + row * stride_t)
    x_t = tl.load(x_row + t * stride_xc).to(tl.float32)
    tl.store(y_ptr + row, (m_i + tl.log(l_i) - x_t).to(y_ptr.dtype.element_ty))


def cross_entropy_tail_leak(logits, target):
    N, C = logits.shape
    y = torch.empty((N,), dtype=logits.dtype, device=logits.device)
    _cross_entropy_tail_leak_kernel[(N,)](logits, target, y, C, logits.stride(0), logits.stride(1), target.stride(0),
                                          BLOCK_C=64)
    return y
