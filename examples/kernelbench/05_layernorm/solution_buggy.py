"""LayerNorm over the last dim. Planted bug: one-pass variance, var = E[x^2] - E[x]^2 in fp32. For rows
with mean ~0 (the problem's randn input) it is accurate and allclose passes; for rows whose mean is large
against their spread the two terms cancel catastrophically (trigger: x = 3000 + randn, where E[x^2] ~ 9e6
has an fp32 ulp of 1 while the variance is ~1; the variance can even come out negative -> NaN)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, N, eps, stride_xm, stride_xn, stride_om, stride_on,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    var = tl.sum(x * x, axis=0) / N - mean * mean     # BUG: one-pass variance, cancels for |mean| >> std
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + cols * stride_on, ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty),
             mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N = x.shape[-1]
        x2 = x.reshape(-1, N)
        out = torch.empty(x2.shape, device=x.device, dtype=x.dtype)
        layernorm_kernel[(x2.shape[0],)](x2, self.ln.weight.contiguous(), self.ln.bias.contiguous(), out, N,
                                         self.ln.eps, x2.stride(0), x2.stride(1), out.stride(0), out.stride(1),
                                         BLOCK=triton.next_power_of_2(N))
        return out.reshape(x.shape)


def trigger_inputs():
    return [3000.0 + torch.randn(16, 1024)]
