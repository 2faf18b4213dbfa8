"""clamp(x, lo, hi) * multiplier[col]. Planted bug: the multiplier's column index is taken modulo the
block size (offs % BLOCK, "one row per block") instead of modulo the row length. The problem's rows are
1024 wide, exactly BLOCK = 1024, so allclose passes; any other width multiplies by the wrong features
(trigger: features = 1500; a width below 1024 would also read past the multiplier)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def clamp_mul_kernel(x_ptr, m_ptr, out_ptr, n_elements, n_cols, lo, hi, stride_xm, stride_xn,
                     BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    row = offs // n_cols
    col = offs % n_cols
    x = tl.load(x_ptr + row * stride_xm + col * stride_xn, mask=mask, other=0.0).to(tl.float32)
    m = tl.load(m_ptr + offs % BLOCK, mask=mask, other=0.0).to(tl.float32)    # BUG: % BLOCK, not % n_cols
    y = tl.minimum(tl.maximum(x, lo), hi) * m
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int, min_val: float, max_val: float):
        super().__init__()
        self.multiplier = nn.Parameter(torch.randn(features))
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
        n = x.numel()
        BLOCK = 1024
        clamp_mul_kernel[(triton.cdiv(n, BLOCK),)](x, self.multiplier.contiguous(), out, n, n_cols,
                                                   float(self.min_val), float(self.max_val),
                                                   x.stride(0), x.stride(1), BLOCK=BLOCK)
        return out


def trigger_init_inputs():
    return [1500, -0.5, 0.5]


def trigger_inputs():
    return [torch.randn(16, 1500)]
