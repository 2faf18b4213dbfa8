"""matmul(a[M, K], b[K, N]) with M x K past 2^31 at production size (tokens x hidden activations).

Tiled: one BLOCK_M x BLOCK_N tile per program, a loop over K in BLOCK_K steps, fp32 accumulation.
``matmul_i32`` addresses A's rows as ``offs_m * stride_am`` in int32: for rows past 2^31 / K the product wraps
and the tile reads another part of A (the classic of every hand-written GEMM). ``matmul_i64`` widens the row
offsets first. Both are exact wherever the products fit.
"""
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, WIDE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if WIDE:
        rows = offs_m.to(tl.int64)
    else:
        rows = offs_m
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak  # int32 row offsets unless WIDE
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (k + offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k + offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rows[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _mm(a, b, wide):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, WIDE=wide)
    return c


def matmul_i32(a, b):
    return _mm(a, b, False)


def matmul_i64(a, b):
    return _mm(a, b, True)
