"""Min over a dim. Planted bug: the kernel addresses row r, column c as r * n_cols + c (row-major,
contiguous rows assumed) instead of using the input's strides. The problem's input is a contiguous
[16, 4096] tensor, so allclose passes; a transposed or sliced input is read from the wrong elements
(trigger: x = randn(4096, 16).t(), a column-major [16, 4096] view)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def min_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.full((BLOCK,), float("inf"), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("inf"))   # BUG: strides ignored
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
        min_kernel[(n_rows,)](xv, out, n_cols, BLOCK=1024)
        return out


def trigger_inputs():
    return [torch.randn(4096, 16).t()]
