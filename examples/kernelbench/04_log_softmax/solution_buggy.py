"""log_softmax over a dim. Planted bug: no max subtraction: lse = log(sum(exp(x))) computed directly.
In fp32 that is fine while exp(x) stays finite, so the problem's randn input passes allclose; logits
above ~88.7 overflow exp to inf and the whole row becomes -inf (trigger: randn * 100)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def log_softmax_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_om, stride_on, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        s += tl.exp(x)          # BUG: exp of the raw logits, overflows for x > ~88.7
    lse = tl.log(tl.sum(s, axis=0))
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride_om + cols * stride_on, (x - lse).to(out_ptr.dtype.element_ty),
                 mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xv = x if self.dim % 2 == 1 else x.t()
        n_rows, n_cols = xv.shape
        out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
        log_softmax_kernel[(n_rows,)](xv, out, n_cols, xv.stride(0), xv.stride(1), out.stride(0), out.stride(1),
                                      BLOCK=min(1024, triton.next_power_of_2(n_cols)))
        return out if self.dim % 2 == 1 else out.t()


def trigger_inputs():
    return [torch.randn(16, 2048) * 100]
