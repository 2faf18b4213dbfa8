"""Mean over a dim. Planted bug: fp16 accumulation: the loaded fp32 values are cast to fp16 "to halve the
register footprint" and summed in fp16. For randn rows of 1024 (the problem's input) the sum stays far
below fp16's 65504 and its rounding (~1e-3 relative) vanishes in the mean, so allclose passes; rows whose
sum exceeds 65504 overflow to inf (trigger: x = 100 + randn, row sum ~102400), and long rows of large
values lose most of their digits."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float16)          # BUG: fp16 accumulator
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        acc += tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols, other=0.0).to(tl.float16)
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


def trigger_inputs():
    return [100.0 + torch.randn(16, 1024)]
