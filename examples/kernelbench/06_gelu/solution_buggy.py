"""Exact GELU, elementwise. Planted bug: flat indexing: the kernel walks x's storage as a flat array of
numel elements from x.data_ptr(), as if x were contiguous. The problem's input is contiguous, so allclose
passes; a non-contiguous, non-dense input reads the wrong elements (trigger: x = randn(16, 8192)[:, ::2],
a step-2 column slice: flat element i of the storage is not logical element i)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)    # BUG: assumes contiguous x
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        gelu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
        return out


def trigger_inputs():
    return [torch.randn(16, 8192)[:, ::2]]
