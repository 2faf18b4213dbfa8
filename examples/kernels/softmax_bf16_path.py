"""softmax(x) in two launches with a dtype dispatch, the way kernels with a bf16 fast path are written:
launch 1 computes each row's max and sum of exp over BLOCK_N chunks (any row stride); launch 2 normalises.
The bf16 path takes a smaller block (register budget) and needs unit inner stride for its vectorised loads:
it refuses other input with a ValueError before launching anything (a clear refusal, not a wrong answer)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_stats_kernel(x_ptr, stats_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m_i = m_new
    tl.store(stats_ptr + 2 * row, m_i)
    tl.store(stats_ptr + 2 * row + 1, l_i)


@triton.jit
def _normalise_kernel(x_ptr, stats_ptr, y_ptr, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr,
                      LOOP: tl.constexpr):
    row = tl.program_id(0)
    m = tl.load(stats_ptr + 2 * row)
    inv = 1.0 / tl.load(stats_ptr + 2 * row + 1)
    end = N if LOOP else BLOCK_N
    for start in range(0, end, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride_xm + offs, mask=offs < N, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + row * stride_ym + offs, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=offs < N)


def _launch(x, bug):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    M = x2.shape[0]
    bf16 = x.dtype == torch.bfloat16
    block = min(triton.next_power_of_2(N), 512 if bf16 else 4096)
    if bf16 and x2.stride(1) != 1:  # checked before any launch: a refusal, not a half-run call
        raise ValueError("softmax: the bf16 path needs unit inner stride (vectorised loads); call .contiguous()")
    stats = torch.empty((M, 2), dtype=torch.float32, device=x.device)
    _row_stats_kernel[(M,)](x2, stats, N, x2.stride(0), x2.stride(1), BLOCK_N=block)
    if x2.stride(1) != 1:
        x2 = x2.contiguous()
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    # the fp32/fp16 block always covers the row (N <= 4096 in practice); the bf16 one may not
    _normalise_kernel[(M,)](x2, stats, y, N, x2.stride(0), y.stride(0), BLOCK_N=block, LOOP=not bug or N > 4096)
    return y.reshape(x.shape)


# ---------------------------------------------------------------- correct
def softmax_bf16_path(x):
    return _launch(x, bug=False)


# ---------------------------------------------------------------- buggy: the bf16 block does not cover the row
def softmax_bf16_path_unlooped(x):
    # BUG: launch 2 runs one block per row (no loop), fine while the block covers the row: always for fp32/fp16
    # rows up to 4096, but the bf16 block is capped at 512, so bf16 rows longer than 512 keep uninitialised tails
    return _launch(x, bug=True)
