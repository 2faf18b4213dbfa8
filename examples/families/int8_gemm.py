"""int8 scaled GEMM (W8A8): out[m, n] = (sum_k a[m, k] * b[k, n]) * scale_a[m] * scale_b[n].

The products are summed exactly in int32 (tl.dot of two int8 tiles), then dequantised in fp32 by the
per-row scale of A (per-token activation scale) and the per-column scale of B (per-channel weight scale),
and rounded once to the output dtype.

Arguments (all positional, as get_inputs() gives them):
  a        int8 [M, K], any strides; values in [-128, 127]
  b        int8 [K, N], any strides; a weight stored [N, K] (nn.Linear layout) is passed as w.t()
  scale_a  floating [M] (fp32 in the example; fp16 / bf16 allowed), values > 0, any stride
  scale_b  floating [N], same dtype as scale_a, values > 0, any stride
Returns a new contiguous [M, N] tensor of dtype scale_a.dtype.
Constraints: M, N, K >= 1; K <= 1024 keeps |sum| < 2**24, so the int32 -> fp32 step of the reference is
exact (the kernel's int32 sum itself is exact up to K = 2**31 / 2**14 = 131072).
Note: with fp16 scales the reference, run in its own dtype, rounds the int32 sum to fp16 first and can
overflow to inf past 65504; evaluate it in fp64 (upcast the scales), as gpuemu does.

Bug (int8_gemm_buggy): the K loop runs `K // BLOCK_K` full tiles with no K mask ("K is a multiple of the
tile"), so the last K % BLOCK_K columns of A / rows of B are never summed. The example has K = 512, a
multiple of BLOCK_K = 64, so allclose passes; any K that is not a multiple of 64 (K = 1..63 gives an
all-zero output, K = 100 drops 36 of the 100 terms) is wrong.
"""
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64


def reference(a, b, scale_a, scale_b):
    # the exact integer sums, on any device (CUDA has no int32 matmul): |a_ik b_kj| <= 2^14, so every partial sum
    # of K < 2^39 terms is an integer below 2^53, exact in float64
    acc = torch.matmul(a.to(torch.float64), b.to(torch.float64))
    return acc.to(scale_a.dtype) * scale_a[:, None] * scale_b[None, :]


def get_inputs():
    g = torch.Generator().manual_seed(0)
    M, N, K = 256, 256, 512
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (K, N), dtype=torch.int8, generator=g)
    scale_a = torch.rand(M, generator=g) * 0.02 + 0.001
    scale_b = torch.rand(N, generator=g) * 0.02 + 0.001
    return [a, b, scale_a, scale_b]


# ---------------------------------------------------------------- correct
@triton.jit
def _int8_gemm_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_sa, stride_sb,
                      stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0)
        acc += tl.dot(a, b, out_dtype=tl.int32)
    sa = tl.load(sa_ptr + offs_m * stride_sa, mask=offs_m < M, other=0.0).to(tl.float32)
    sb = tl.load(sb_ptr + offs_n * stride_sb, mask=offs_n < N, other=0.0).to(tl.float32)
    out = acc.to(tl.float32) * sa[:, None] * sb[None, :]
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             out.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def int8_gemm(a, b, scale_a, scale_b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=scale_a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _int8_gemm_kernel[grid](a, b, scale_a, scale_b, c, M, N, K,
                            a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            scale_a.stride(0), scale_b.stride(0), c.stride(0), c.stride(1),
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


# ---------------------------------------------------------------- buggy: K loop truncated to whole tiles
@triton.jit
def _int8_gemm_buggy_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                            stride_am, stride_ak, stride_bk, stride_bn, stride_sa, stride_sb,
                            stride_cm, stride_cn,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    # BUG: K // BLOCK_K whole tiles; the K % BLOCK_K remainder is never loaded (no K mask either)
    num_k_tiles = K // BLOCK_K
    for kt in range(0, num_k_tiles):
        kk = kt * BLOCK_K + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=offs_m[:, None] < M, other=0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=offs_n[None, :] < N, other=0)
        acc += tl.dot(a, b, out_dtype=tl.int32)
    sa = tl.load(sa_ptr + offs_m * stride_sa, mask=offs_m < M, other=0.0).to(tl.float32)
    sb = tl.load(sb_ptr + offs_n * stride_sb, mask=offs_n < N, other=0.0).to(tl.float32)
    out = acc.to(tl.float32) * sa[:, None] * sb[None, :]
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             out.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def int8_gemm_buggy(a, b, scale_a, scale_b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=scale_a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _int8_gemm_buggy_kernel[grid](a, b, scale_a, scale_b, c, M, N, K,
                                  a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                  scale_a.stride(0), scale_b.stride(0), c.stride(0), c.stride(1),
                                  BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c
