"""add(x, y): elementwise x + y, same shape. Flat 1-D kernel, BLOCK=1024."""
import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------- correct: flattens contiguous copies
def add(x, y):
    xc, yc = x.contiguous(), y.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    BLOCK = 1024
    _add_kernel[(triton.cdiv(n, BLOCK),)](xc, yc, out, n, BLOCK=BLOCK)
    return out


# ---------------------------------------------------------------- buggy: flat indexing of non-contiguous inputs
def add_stride(x, y):
    # BUG: no .contiguous(): the flat kernel walks the raw storage, so transposed / sliced inputs are misread
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    BLOCK = 1024
    _add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out
