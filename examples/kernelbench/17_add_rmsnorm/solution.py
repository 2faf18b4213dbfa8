"""Fused residual add + RMSNorm: one program per row, the row in one block, h = x + residual in fp32,
out = h * rsqrt(mean(h^2) + eps) * weight; strides of both inputs honoured."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, N, eps, stride_xm, stride_xn, stride_rm, stride_rn,
                       stride_om, stride_on, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32) \
        + tl.load(r_ptr + row * stride_rm + cols * stride_rn, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(h * h, axis=0) / N
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + cols * stride_on, (h * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        M, N = x.shape
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        add_rmsnorm_kernel[(M,)](x, residual, self.weight.contiguous(), out, N, float(self.eps),
                                 x.stride(0), x.stride(1), residual.stride(0), residual.stride(1),
                                 out.stride(0), out.stride(1), BLOCK=triton.next_power_of_2(N))
        return out
