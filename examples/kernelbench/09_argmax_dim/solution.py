"""argmax along a dim of a 2-D tensor: one program per row walks the row in BLOCK chunks keeping the
running max and the smallest index that reaches it (strict > across chunks, min index within a chunk), so
ties resolve to the first occurrence like torch.argmax. Inputs without NaN."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    best = tl.full((), float("-inf"), dtype=tl.float32)
    best_idx = tl.full((), 0, dtype=tl.int64)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        idx = tl.min(tl.where((x == m) & (cols < n_cols), cols, n_cols), axis=0).to(tl.int64)
        take = m > best
        best_idx = tl.where(take, idx, best_idx)
        best = tl.where(take, m, best)
    tl.store(out_ptr + row, best_idx)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xv = x if self.dim % 2 == 1 else x.t()
        n_rows, n_cols = xv.shape
        out = torch.empty((n_rows,), device=x.device, dtype=torch.int64)
        argmax_kernel[(n_rows,)](xv, out, n_cols, xv.stride(0), xv.stride(1), BLOCK=512)
        return out
