"""gelu_tanh(x): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Flat 1-D kernel, BLOCK=1024.
tanh is written with exp (no libdevice under the interpreter)."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct: tanh(z) = sign(z) (1 - e^-2|z|) / (1 + e^-2|z|)
@triton.jit
def _gelu_tanh_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = tl.exp(-2.0 * tl.abs(z))
    th = (1.0 - t) / (1.0 + t)
    th = tl.where(z < 0, -th, th)
    y = 0.5 * x * (1.0 + th)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu_tanh(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    BLOCK = 1024
    _gelu_tanh_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
    return out


# ---------------------------------------------------------------- buggy: tanh via (e^2z - 1)/(e^2z + 1)
@triton.jit
def _gelu_tanh_overflow_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    # BUG: tanh as (e^2z - 1)/(e^2z + 1): e^2z overflows to inf for z > ~44 (x > ~10) and gives inf/inf = nan
    e = tl.exp(2.0 * z)
    th = (e - 1.0) / (e + 1.0)
    y = 0.5 * x * (1.0 + th)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu_tanh_overflow(x):
    xc = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    BLOCK = 1024
    _gelu_tanh_overflow_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
    return out
