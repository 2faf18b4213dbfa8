"""Fused Linear + bias + ReLU + scale. Planted bug: the K loop runs in_features // BLOCK_K whole tiles and
drops the K mask, so the last in_features % 64 input features never contribute. The problem's
in_features = 1024 is a multiple of BLOCK_K = 64, so allclose passes; any other in_features is wrong
(trigger: in_features = 1000, the last 40 features ignored)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_scale_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, scale,
                             stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, K // BLOCK_K):          # BUG: floor division drops the K % BLOCK_K tail
        kk = kt * BLOCK_K + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk, mask=rm[:, None] < M, other=0.0)
        w = tl.load(w_ptr + kk[:, None] * stride_wk + rn[None, :] * stride_wn, mask=rn[None, :] < N, other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    y = tl.maximum(acc + bias[None, :], 0.0) * scale
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, y.to(out_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        M, K = x.shape
        w, b = self.linear.weight, self.linear.bias
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BLOCK_M, BLOCK_N, BLOCK_K = 16, 64, 64
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_relu_scale_kernel[grid](x, w, b, out, M, N, K, float(self.scale), x.stride(0), x.stride(1),
                                       w.stride(0), w.stride(1), out.stride(0), out.stride(1),
                                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        return out


def trigger_init_inputs():
    return [1000, 512, 2.0]


def trigger_inputs():
    return [torch.randn(16, 1000)]
