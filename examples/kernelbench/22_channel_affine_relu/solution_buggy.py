"""relu(x * scale[c] + shift[c]) over [B, C, L]. Planted bug: the channel of flat index i is computed as
(i // C) % C (dividing by the channel count instead of the length). The problem's tensor has
C = L = 64, where both are the same, so allclose passes; whenever C != L most elements get another
channel's scale and shift (trigger: C = 32, L = 100)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def channel_affine_relu_kernel(x_ptr, s_ptr, t_ptr, out_ptr, n_elements, C, L, stride_xb, stride_xc, stride_xl,
                               BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    b = offs // (C * L)
    c = (offs // L) % C
    l = offs % L
    x = tl.load(x_ptr + b * stride_xb + c * stride_xc + l * stride_xl, mask=mask, other=0.0).to(tl.float32)
    ch = (offs // C) % C               # BUG: channel of the parameters from the wrong dim (C, not L)
    s = tl.load(s_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    t = tl.load(t_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, tl.maximum(x * s + t, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.shift = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, L = x.shape
        out = torch.empty((B, C, L), device=x.device, dtype=x.dtype)
        n = x.numel()
        BLOCK = 1024
        channel_affine_relu_kernel[(triton.cdiv(n, BLOCK),)](x, self.scale.contiguous(), self.shift.contiguous(),
                                                             out, n, C, L, x.stride(0), x.stride(1), x.stride(2),
                                                             BLOCK=BLOCK)
        return out


def trigger_init_inputs():
    return [32]


def trigger_inputs():
    return [torch.randn(8, 32, 100)]
