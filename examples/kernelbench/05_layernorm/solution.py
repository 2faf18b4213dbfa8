"""LayerNorm over the last dim: one program per row (leading dims flattened through reshape), the row in
one block; two-pass statistics (mean, then the mean of squared deviations) in fp32."""
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
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + cols * stride_on, (d * rstd * w + b).to(out_ptr.dtype.element_ty),
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
