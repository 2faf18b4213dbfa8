"""Mean over a dim of a 2-D tensor: one program per row, fp32 accumulator over BLOCK-wide chunks,
divided by the true length."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        acc += tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, (tl.sum(acc, axis=0) / n_cols).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xv = x if self.dim % 2 == 1 else x.t()
        n_rows, n_cols = xv.shape
        out = torch.empty((n_rows,), device=x.device, dtype=x.dtype)
        mean_kernel[(n_rows,)](xv, out, n_cols, xv.stride(0), xv.stride(1), BLOCK=1024)
        return out
