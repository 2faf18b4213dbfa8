"""Sum over one dim of a 3-D tensor: the tensor is viewed as [A, R, C] (R the reduced dim) through its
strides; one program per (a, BLOCK_C columns) walks R in BLOCK_R chunks with an fp32 accumulator."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(x_ptr, out_ptr, R, C, stride_xa, stride_xr, stride_xc, stride_oa, stride_oc,
                   BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    a = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + rows
        tile = tl.load(x_ptr + a * stride_xa + r[:, None] * stride_xr + cols[None, :] * stride_xc,
                       mask=(r[:, None] < R) & (cols[None, :] < C), other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=0)
    tl.store(out_ptr + a * stride_oa + cols * stride_oc, acc.to(out_ptr.dtype.element_ty), mask=cols < C)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim % x.dim()
        xv = x.movedim(d, 1)                       # [A, R, C] view, no copy
        A, R, C = xv.shape
        out = torch.empty((A, C), device=x.device, dtype=x.dtype)
        BLOCK_R, BLOCK_C = 32, 64
        grid = (A, triton.cdiv(C, BLOCK_C))
        sum_dim_kernel[grid](xv, out, R, C, xv.stride(0), xv.stride(1), xv.stride(2), out.stride(0), out.stride(1),
                             BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C)
        return out.unsqueeze(1).movedim(1, d)
