"""GQA attention: out = softmax(q @ k_h^T / sqrt(D) [+ causal mask]) @ v_h, query head h reading kv head
h // (Hq // Hkv) (grouped-query attention; Hkv == Hq is MHA, Hkv == 1 is MQA).

Flash-attention style: one program per (BLOCK_M queries, batch, query head), looping over BLOCK_N keys with
an online softmax (running max m, running sum l, accumulator rescaled by exp(m_old - m_new) whenever the
max grows), fp32 statistics, p cast to v's dtype for the second dot, one final division by l.

Arguments (all positional, as get_inputs() gives them):
  q       floating [B, Hq, N, D] (fp16 in the example; fp32 / bf16 too), any strides
  k       same dtype, [B, Hkv, N, D], any strides (e.g. a view of a [B, N, Hkv, D] projection)
  v       same dtype and shape as k, any strides
  causal  bool: key j is visible to query i only when j <= i
Returns a new contiguous [B, Hq, N, D] tensor of q.dtype.
Constraints: Hq % Hkv == 0; N >= 1; 1 <= D <= 256 (padded to a power of two inside, masked).

Bug (gqa_attention_buggy): the online-softmax update forgets to rescale the accumulator,
acc = acc + p @ v instead of acc = acc * alpha + p @ v (the running sum l is still rescaled). With one
key block (N <= BLOCK_N = 128 in fp16/bf16; 32 in fp32) alpha multiplies a zero accumulator and nothing is
lost, so the example (fp16, N = 128) passes; any N past the block gives several key blocks and earlier blocks are
over-weighted by exp(m_new - m_old) (e.g. N = 129, or N = 200 causal: the second query block sees two key blocks).
"""
import math

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N = 64, 128

# what the example call cannot show gpuemu (dims as `--show-schema` names them: q.3 = D): the head dim's contract, as
# the docstring states it. Past it (BLOCK_D = 512) the kernel's values are right on the CPU, but on an H100 a launch
# with a strided k gave wrong values at D = 257 and 276, with any num_warps / num_stages, and right ones once k was
# made contiguous (bench/gpu_session_i.md): outside the contract, it is not drawn.
GPUEMU_SCHEMA = {"dims": {"q.3": {"max": 256}}}


def reference(q, k, v, causal):
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def get_inputs():
    g = torch.Generator().manual_seed(0)
    B, Hq, Hkv, N, D = 2, 8, 2, 128, 64
    q = torch.randn(B, Hq, N, D, generator=g).to(torch.float16)
    k = torch.randn(B, Hkv, N, D, generator=g).to(torch.float16)
    v = torch.randn(B, Hkv, N, D, generator=g).to(torch.float16)
    return [q, k, v, True]


# ---------------------------------------------------------------- correct
@triton.jit
def _gqa_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, Hq, N, D, GROUP, sm_scale,
                          sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                          sob, soh, son, sod,
                          CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    kvh = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_n0 = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < N) & (offs_d[None, :] < D), other=0.0)
    k_base = k_ptr + b * skb + kvh * skh
    v_base = v_ptr + b * svb + kvh * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)
    else:
        hi = N
    for n0 in range(0, hi, BLOCK_N):
        offs_n = n0 + offs_n0
        kv_mask = (offs_n[:, None] < N) & (offs_d[None, :] < D)
        k = tl.load(k_base + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * sm_scale
        valid = offs_n[None, :] < N
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < N) & (offs_d[None, :] < D))


def _launch(kernel, q, k, v, causal):
    B, Hq, N, D = q.shape
    Hkv = k.shape[1]
    if Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    if k.stride(-1) != 1 and k.is_cuda:
        # Triton 3.6 on sm_90 miscompiles this loop for a k whose head dim is not contiguous (fp16/bf16, D = 17,
        # num_warps 4): an out-of-range shared-memory access at the loop (compute-sanitizer), non-deterministic
        # output or an illegal address (bench/gpu_session_l.md; gpuemu's layout fuzzing found it). Copied instead.
        k = k.contiguous()
    o = torch.empty((B, Hq, N, D), dtype=q.dtype, device=q.device)
    # fp32 tiles are twice the bytes: 32 x 32 blocks there (at 64 x 128 an fp32 launch with D = 100 took 44 s to
    # compile for sm_90 and one with D = 130 took 190 s, register spills for ptxas; at 32 x 32, 3 s and 6 s)
    bm, bn = (32, 32) if q.dtype == torch.float32 else (BLOCK_M, BLOCK_N)
    grid = (triton.cdiv(N, bm), B * Hq)
    kernel[grid](q, k, v, o, Hq, N, D, Hq // Hkv, 1.0 / math.sqrt(D),
                 *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                 CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn,
                 BLOCK_D=max(16, triton.next_power_of_2(D)))
    return o


def gqa_attention(q, k, v, causal):
    return _launch(_gqa_attention_kernel, q, k, v, causal)


# ---------------------------------------------------------------- buggy: accumulator never rescaled
@triton.jit
def _gqa_attention_buggy_kernel(q_ptr, k_ptr, v_ptr, o_ptr, Hq, N, D, GROUP, sm_scale,
                                sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                                sob, soh, son, sod,
                                CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    kvh = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_n0 = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < N) & (offs_d[None, :] < D), other=0.0)
    k_base = k_ptr + b * skb + kvh * skh
    v_base = v_ptr + b * svb + kvh * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)
    else:
        hi = N
    for n0 in range(0, hi, BLOCK_N):
        offs_n = n0 + offs_n0
        kv_mask = (offs_n[:, None] < N) & (offs_d[None, :] < D)
        k = tl.load(k_base + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * sm_scale
        valid = offs_n[None, :] < N
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=kv_mask, other=0.0)
        # BUG: the accumulator is not rescaled by alpha when the running max grows
        acc = acc + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < N) & (offs_d[None, :] < D))


def gqa_attention_buggy(q, k, v, causal):
    return _launch(_gqa_attention_buggy_kernel, q, k, v, causal)
