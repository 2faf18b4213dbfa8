"""Inclusive cumsum along a dim of a 2-D tensor: one program per row walks it in BLOCK chunks; each chunk
is scanned with tl.cumsum and offset by the running total of all earlier chunks (the carry)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_om, stride_on, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    carry = tl.zeros((), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        scan = tl.cumsum(x, axis=0) + carry
        tl.store(out_ptr + row * stride_om + cols * stride_on, scan.to(out_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xv = x if self.dim % 2 == 1 else x.t()
        n_rows, n_cols = xv.shape
        out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
        cumsum_kernel[(n_rows,)](xv, out, n_cols, xv.stride(0), xv.stride(1), out.stride(0), out.stride(1),
                                 BLOCK=512)
        return out if self.dim % 2 == 1 else out.t()
