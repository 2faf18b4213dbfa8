"""Min over a dim of a 2-D tensor: one program per output row, BLOCK-wide chunks, padding lanes at +inf,
both strides of the input passed to the kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def min_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.full((BLOCK,), float("inf"), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols, other=float("inf"))
        acc = tl.minimum(acc, x.to(tl.float32))
    tl.store(out_ptr + row, tl.min(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xv = x if self.dim % 2 == 1 else x.t()
        n_rows, n_cols = xv.shape
        out = torch.empty((n_rows,), device=x.device, dtype=x.dtype)
        min_kernel[(n_rows,)](xv, out, n_cols, xv.stride(0), xv.stride(1), BLOCK=1024)
        return out
