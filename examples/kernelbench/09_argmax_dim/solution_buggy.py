"""argmax along a dim. Planted bug: tie-breaking: within a chunk the kernel keeps the largest index that
reaches the max (tl.max over the matching indices), and across chunks it takes a later chunk on >=, so a
tied maximum resolves to its LAST occurrence; torch.argmax returns the first. randn rows (the problem's
input) have no ties, so allclose passes; rows with repeated values disagree (trigger: small integers,
torch.randint(0, 4, ...).float(), where every row's max appears ~250 times)."""
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
        # BUG: last occurrence wins (max index, '>='); torch.argmax returns the first
        idx = tl.max(tl.where((x == m) & (cols < n_cols), cols, -1), axis=0).to(tl.int64)
        take = m >= best
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


def trigger_inputs():
    return [torch.randint(0, 4, (16, 1024)).float()]
