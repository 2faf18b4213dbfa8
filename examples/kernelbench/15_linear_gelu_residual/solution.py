"""Fused x + GELU(x @ W^T + b): one Triton GEMM with fp32 (ieee) dots; the epilogue adds the bias, applies
the exact erf GELU and adds the residual tile of x."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_gelu_residual_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                                stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + kk[:, None] * stride_wk + rn[None, :] * stride_wn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    out_mask = (rm[:, None] < M) & (rn[None, :] < N)
    h = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    g = 0.5 * h * (1.0 + tl.math.erf(h * 0.7071067811865476))
    res = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xk, mask=out_mask, other=0.0)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on,
             (res.to(tl.float32) + g).to(out_ptr.dtype.element_ty), mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        M, K = x.shape
        w, b = self.linear.weight, self.linear.bias
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BLOCK_M, BLOCK_N, BLOCK_K = 16, 64, 64
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_gelu_residual_kernel[grid](x, w, b, out, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                          out.stride(0), out.stride(1),
                                          BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        return out
