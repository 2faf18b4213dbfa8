"""exp(x). Flat 1-D kernels over a contiguous copy, BLOCK=1024: libm exp, and the exp2 form fast kernels use."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct: tl.exp
@triton.jit
def _exp_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, tl.exp(x).to(out_ptr.dtype.element_ty), mask=mask)


def exp(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _exp_kernel[(triton.cdiv(n, 1024),)](xc, out, n, BLOCK=1024)
    return out


# ---------------------------------------------------------------- correct: exp2(x * log2(e))
@triton.jit
def _exp_exp2_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # the product x*log2(e) is rounded: a relative error of ~|x| ulps in the result (legitimate, not a bug)
    y = tl.exp2(x * 1.4426950408889634)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def exp_exp2(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _exp_exp2_kernel[(triton.cdiv(n, 1024),)](xc, out, n, BLOCK=1024)
    return out
