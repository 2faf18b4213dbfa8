"""MoE grouped GEMM over expert offsets: out[t] = x[t] @ w[e] for every token t in expert e's row range.

Tokens are already sorted by expert: rows expert_offsets[e] .. expert_offsets[e + 1] - 1 of x belong to
expert e, and each expert's rows are multiplied by its own weight w[e]. One program computes one
BLOCK_M x BLOCK_N tile of one expert (grid = tiles of the largest expert x N tiles x E); tiles past an
expert's end are fully masked. fp32 accumulation, one rounding to x.dtype.

Arguments (all positional, as get_inputs() gives them):
  x               floating [T, K] (fp16 in the example; fp32 / bf16 too), any strides
  w               same dtype, [E, K, N], any strides; an nn.Linear-style [E, N, K] stack is passed as
                  w.transpose(1, 2)
  expert_offsets  int32 or int64 [E + 1], monotone non-decreasing, expert_offsets[0] == 0,
                  expert_offsets[E] == T (an expert may own zero rows); indices into dim 0 of x
Returns a new contiguous [T, N] tensor of x.dtype.
Constraints: T, K, N >= 1, E >= 1.

Bug (moe_gemm_buggy): the launcher sizes the grid for balanced routing, cdiv(T // E, BLOCK_M) row tiles
per expert, instead of for the largest expert, and returns a zero-initialised output. The example routes
exactly T / E = 64 tokens to every expert, so allclose passes; with imbalanced routing any expert owning
more than cdiv(T // E, 16) * 16 rows leaves its last rows at zero (e.g. T = 100, E = 4,
offsets [0, 60, 70, 90, 100]: rows 32..59 of expert 0 stay 0).
"""
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 16, 64, 64


def reference(x, w, expert_offsets):
    out = x.new_zeros((x.shape[0], w.shape[2]))
    for e in range(w.shape[0]):
        start, end = int(expert_offsets[e]), int(expert_offsets[e + 1])
        out[start:end] = x[start:end] @ w[e]
    return out


def get_inputs():
    g = torch.Generator().manual_seed(0)
    T, E, K, N = 512, 8, 256, 256
    x = torch.randn(T, K, generator=g).to(torch.float16)
    w = (torch.randn(E, K, N, generator=g) / K ** 0.5).to(torch.float16)
    expert_offsets = torch.arange(0, T + 1, T // E, dtype=torch.int32)   # 64 tokens per expert
    return [x, w, expert_offsets]


# ---------------------------------------------------------------- correct
@triton.jit
def _moe_gemm_kernel(x_ptr, w_ptr, off_ptr, out_ptr, N, K,
                     stride_xt, stride_xk, stride_we, stride_wk, stride_wn, stride_off,
                     stride_ot, stride_on,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.program_id(2)
    start = tl.load(off_ptr + e * stride_off).to(tl.int64)
    end = tl.load(off_ptr + (e + 1) * stride_off).to(tl.int64)
    rows = start + pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    row_mask = rows < end
    w_base = w_ptr + e.to(tl.int64) * stride_we
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(x_ptr + rows[:, None] * stride_xt + kk[None, :] * stride_xk,
                    mask=row_mask[:, None] & (kk[None, :] < K), other=0.0)
        b = tl.load(w_base + kk[:, None] * stride_wk + offs_n[None, :] * stride_wn,
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(out_ptr + rows[:, None] * stride_ot + offs_n[None, :] * stride_on,
             acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & (offs_n[None, :] < N))


def moe_gemm(x, w, expert_offsets):
    T, K = x.shape
    E, _, N = w.shape
    out = torch.empty((T, N), dtype=x.dtype, device=x.device)
    max_rows = int((expert_offsets[1:] - expert_offsets[:-1]).max()) if E > 0 else 0
    grid = (max(triton.cdiv(max_rows, BLOCK_M), 1), triton.cdiv(N, BLOCK_N), E)
    _moe_gemm_kernel[grid](x, w, expert_offsets, out, N, K,
                           x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2),
                           expert_offsets.stride(0), out.stride(0), out.stride(1),
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out


# ---------------------------------------------------------------- buggy: grid sized for balanced routing
def moe_gemm_buggy(x, w, expert_offsets):
    T, K = x.shape
    E, _, N = w.shape
    out = torch.zeros((T, N), dtype=x.dtype, device=x.device)
    # BUG: tokens per expert taken as T // E (balanced routing); an expert with more rows than the
    # grid's cdiv(T // E, BLOCK_M) tiles cover keeps its last rows at zero
    tokens_per_expert = T // E
    grid = (max(triton.cdiv(tokens_per_expert, BLOCK_M), 1), triton.cdiv(N, BLOCK_N), E)
    _moe_gemm_kernel[grid](x, w, expert_offsets, out, N, K,
                           x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2),
                           expert_offsets.stride(0), out.stride(0), out.stride(1),
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out
