"""Fused residual add + RMSNorm, with the new residual as a second output (the pre-norm transformer step):

    h   = x + residual
    out = h * rsqrt(mean(h ** 2, dim=-1) + eps) * weight
    returns (out, h)

One program per row, the whole row in one BLOCK_N = next_power_of_2(N) block (masked tail); h is formed
and normalised in fp32 and stored rounded to x.dtype.

Arguments (all positional, as get_inputs() gives them):
  x         floating [M, N] (fp16 in the example; fp32 / bf16 too), any strides
  residual  same dtype and shape, any strides
  weight    same dtype, [N], any stride
  eps       python float > 0 (1e-6 in the example)
Returns (out, h): two new contiguous [M, N] tensors of x.dtype.
Constraints: M >= 1, 1 <= N <= 65536.
The example is fp16: run in bf16, the reference itself (mean, rsqrt and products each rounded to bf16) is
several bf16 ulps off the exact result, enough to fail allclose(atol=rtol=1e-2) against any fp32-internal
kernel; compare bf16 outputs with the reference evaluated in fp64.

Bug (add_rmsnorm_buggy): the mean of squares divides by BLOCK_N (the padded block width) instead of N.
The padded lanes are masked to 0, so the sum is right, but the mean is scaled by N / BLOCK_N. The example
has N = 1024 = BLOCK_N, so allclose passes; any N that is not a power of two is wrong, by a factor
sqrt(BLOCK_N / N) on every output element (N = 1000: +1.2 %; N = 257: x1.41; N = 100: x1.13).
"""
import torch
import triton
import triton.language as tl


def reference(x, residual, weight, eps):
    h = x + residual
    var = h.pow(2).mean(dim=-1, keepdim=True)
    return h * torch.rsqrt(var + eps) * weight, h


def get_inputs():
    g = torch.Generator().manual_seed(0)
    M, N = 128, 1024
    x = torch.randn(M, N, generator=g).to(torch.float16)
    residual = torch.randn(M, N, generator=g).to(torch.float16)
    weight = (1.0 + 0.1 * torch.randn(N, generator=g)).to(torch.float16)
    return [x, residual, weight, 1e-6]


# ---------------------------------------------------------------- correct
@triton.jit
def _add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, o_ptr, h_ptr, N, eps,
                        sxm, sxn, srm, srn, sw, som, son, shm, shn,
                        BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * sxm + offs * sxn, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * srm + offs * srn, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(h_ptr + row * shm + offs * shn, h.to(h_ptr.dtype.element_ty), mask=mask)
    var = tl.sum(h * h, 0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs * sw, mask=mask, other=0.0).to(tl.float32)
    tl.store(o_ptr + row * som + offs * son, (h * rstd * w).to(o_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, x, residual, weight, eps):
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    h = torch.empty((M, N), dtype=x.dtype, device=x.device)
    kernel[(M,)](x, residual, weight, out, h, N, eps,
                 x.stride(0), x.stride(1), residual.stride(0), residual.stride(1), weight.stride(0),
                 out.stride(0), out.stride(1), h.stride(0), h.stride(1),
                 BLOCK_N=triton.next_power_of_2(N))
    return out, h


def add_rmsnorm(x, residual, weight, eps):
    return _launch(_add_rmsnorm_kernel, x, residual, weight, eps)


# ---------------------------------------------------------------- buggy: mean over the padded block width
@triton.jit
def _add_rmsnorm_buggy_kernel(x_ptr, r_ptr, w_ptr, o_ptr, h_ptr, N, eps,
                              sxm, sxn, srm, srn, sw, som, son, shm, shn,
                              BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * sxm + offs * sxn, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * srm + offs * srn, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(h_ptr + row * shm + offs * shn, h.to(h_ptr.dtype.element_ty), mask=mask)
    # BUG: mean over BLOCK_N lanes (padding included) instead of the N real elements
    var = tl.sum(h * h, 0) / BLOCK_N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs * sw, mask=mask, other=0.0).to(tl.float32)
    tl.store(o_ptr + row * som + offs * son, (h * rstd * w).to(o_ptr.dtype.element_ty), mask=mask)


def add_rmsnorm_buggy(x, residual, weight, eps):
    return _launch(_add_rmsnorm_buggy_kernel, x, residual, weight, eps)
