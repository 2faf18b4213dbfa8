"""Row L2 normalisation: one program per row, the row in one power-of-two block (masked tail), fp32 sum of
squares of the row scaled by its largest magnitude, strides of input and output passed to the kernel.

The scaling matters: torch.norm does not underflow, and an unscaled sum of squares does for |x| < ~1e-19 in fp32
(x * x is 0, the norm 0, the output inf): gpuemu's `tiny` values found that in an earlier version of this file."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2norm_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_om, stride_on, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
    big = tl.max(tl.abs(x), axis=0)
    xs = x / big
    norm = tl.sqrt(tl.sum(xs * xs, axis=0))
    tl.store(out_ptr + row * stride_om + cols * stride_on, (xs / norm).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
        l2norm_kernel[(n_rows,)](x, out, n_cols, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                                 BLOCK=triton.next_power_of_2(n_cols))
        return out
