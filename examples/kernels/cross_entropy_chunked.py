"""cross_entropy(logits[N,C], target[N]) -> [N] the way vocabulary-sized kernels do it: one block per row up to
BLOCK_C=4096 classes, past that an online logsumexp over 4096-class chunks (running max, rescaled sum), exp2 form."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_BLOCK = 4096


@triton.jit
def _xent_chunked_kernel(x_ptr, t_ptr, y_ptr, C, stride_xn, stride_xc, stride_t,
                         BLOCK_C: tl.constexpr, CHUNKED: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xn
    if CHUNKED:
        m_i = tl.full([], float("-inf"), tl.float32)
        l_i = tl.full([], 0.0, tl.float32)
        for start in range(0, C, BLOCK_C):
            offs = start + tl.arange(0, BLOCK_C)
            x = tl.load(x_row + offs * stride_xc, mask=offs < C, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m_i, tl.max(x, axis=0))
            if BUG:
                # BUG: the chunk's terms are exp2(x) instead of exp2(x - m_new): unscaled against the running
                # sum (and inf past x ~ 88); the one-block path below is right, so only C > 4096 shows it
                l_i = l_i * tl.exp2((m_i - m_new) * 1.4426950408889634) + tl.sum(tl.exp2(x * 1.4426950408889634), axis=0)
            else:
                l_i = l_i * tl.exp2((m_i - m_new) * 1.4426950408889634) \
                    + tl.sum(tl.exp2((x - m_new) * 1.4426950408889634), axis=0)
            m_i = m_new
        lse = m_i + tl.log(l_i)
    else:
        offs = tl.arange(0, BLOCK_C)
        x = tl.load(x_row + offs * stride_xc, mask=offs < C, other=float("-inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        lse = m + tl.log(tl.sum(tl.exp2((x - m) * 1.4426950408889634), axis=0))
    t = tl.load(t_ptr + row * stride_t)
    x_t = tl.load(x_row + t * stride_xc).to(tl.float32)
    tl.store(y_ptr + row, (lse - x_t).to(y_ptr.dtype.element_ty))


def _launch(logits, target, bug):
    N, C = logits.shape
    y = torch.empty((N,), dtype=logits.dtype, device=logits.device)
    chunked = C > MAX_BLOCK
    block = MAX_BLOCK if chunked else triton.next_power_of_2(C)
    _xent_chunked_kernel[(N,)](logits, target, y, C, logits.stride(0), logits.stride(1), target.stride(0),
                               BLOCK_C=block, CHUNKED=chunked, BUG=bug)
    return y


# ---------------------------------------------------------------- correct
def cross_entropy_chunked(logits, target):
    return _launch(logits, target, bug=False)


# ---------------------------------------------------------------- buggy: no max subtraction in the chunked path
def cross_entropy_chunked_no_max(logits, target):
    return _launch(logits, target, bug=True)
