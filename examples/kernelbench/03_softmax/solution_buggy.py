"""Row softmax. Planted bug: tail-mask leak. The masked load fills padding lanes with 0.0 instead of
-inf, so every padding lane adds exp(0 - max) to the denominator. The problem's width 1024 is a power of
two (no padding lanes), so allclose passes; any other width is wrong (trigger: width 513, 511 padding
lanes in a 1024 block)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_om, stride_on, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)  # BUG: other=0
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_om + cols * stride_on, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
        softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                                  BLOCK=triton.next_power_of_2(n_cols))
        return out


def trigger_inputs():
    return [torch.randn(16, 513)]
