"""matmul(a[M,K], b[K,N]) -> [M,N] with the whole K in one tile: a correct kernel a GPU refuses at large K.

BLOCK_M = BLOCK_N = 128 and BLOCK_K = next_power_of_2(K): one tl.dot per output tile, no loop. Its operand tiles
live in shared memory, (128 + 128) x BLOCK_K elements, so past K = 128 (fp32) or 256 (fp16, bf16) the launch needs
more than the 227 KiB an sm_90 block may have and Triton refuses it (OutOfResources). The values are right
wherever it launches: gpuemu reports the refused sizes as LIMIT lines, states the envelope (K <= 128 for fp32) and
exits 0; with `--supports all` (manifest `supports: all`) the refusals fail the gate. K past 8192 is refused on the
host (a ValueError before any launch: REJECTED).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_whole_k_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                           stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
    b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    acc = tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul_whole_k(a, b):
    M, K = a.shape
    N = b.shape[1]
    if K > 8192:  # a 128 x 16384 tile is past Triton's largest block (2^20 elements): refused before any launch
        raise ValueError(f"matmul_whole_k: K = {K} > 8192, the largest whole-K tile")
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    BM, BN, BK = 128, 128, max(16, triton.next_power_of_2(K))
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _matmul_whole_k_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 c.stride(0), c.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_stages=1)
    return c
