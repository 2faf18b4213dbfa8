"""Three Triton launchers for the gate's walk-through (docs/gate.md): one correct, one silently wrong, one that is
right only for what its callers guarantee."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr, PAD: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=PAD).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _softmax(x, pad):
    x2 = x.reshape(-1, x.shape[-1])
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), x2.stride(1), y.stride(0),
                                    BLOCK_N=triton.next_power_of_2(x2.shape[1]), PAD=pad)
    return y.reshape(x.shape)


def row_softmax(x):
    """Correct: padding lanes load -inf, so they add exp(-inf) = 0 to the denominator."""
    return _softmax(x, float("-inf"))


def row_softmax_tail(x):
    """Buggy: padding lanes load 0.0, so exp(0 - max) leaks into the denominator whenever N is not a power of two.
    torch.allclose on a [64, 256] input passes: there is no padding there."""
    return _softmax(x, 0.0)


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def flat_add(x, y):
    """Right for contiguous inputs only: it walks the raw storage (its callers pass .contiguous() tensors)."""
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _add_kernel[(triton.cdiv(out.numel(), 1024),)](x, y, out, out.numel(), BLOCK=1024)
    return out
