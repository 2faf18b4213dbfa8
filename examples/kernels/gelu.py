"""gelu(x): exact erf form x * Phi(x). Flat 1-D kernel over a contiguous copy, BLOCK=1024."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct
@triton.jit
def _gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    BLOCK = 1024
    _gelu_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
    return out
