"""attention(q[B,H,Nq,D], k[B,H,Nk,D], v[B,H,Nk,D], causal=False) -> [B,H,Nq,D], plain (non-flash) version.

One program per (BLOCK_M=16 queries, batch*head); all keys at once: BLOCK_N = max(16, next_pow2(Nk)),
BLOCK_D = max(16, next_pow2(D)). Scores and softmax in fp32; dots with input_precision="ieee".
Causal: query i sees keys j <= i + Nk - Nq (bottom-right aligned).
"""
import math

import torch
import triton
import triton.language as tl

import gpuemu

# The whole key range and head dim sit in one tile: past 128 keys or a head dim of 128 the launch needs more
# shared memory than an sm_80/sm_90 block may have (fp32 at Nk=129, D=128: 256 x 128 tiles of K and V; gpuemu
# predicts the refusal on the CPU, and the H200 refused D=129 at 278,528 B), so the launchers declare both.
SUPPORTED = gpuemu.requires(max_dims={"D": 128, "Nk": 128})


@triton.jit
def _attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, Nq, Nk, D, sm_scale,
                 sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                 CAUSAL: tl.constexpr, ALIGN_TOP_LEFT: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < Nq) & d_ok, other=0.0)
    k = tl.load(k_ptr + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd,
                mask=(offs_n[:, None] < Nk) & d_ok, other=0.0)
    v = tl.load(v_ptr + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd,
                mask=(offs_n[:, None] < Nk) & d_ok, other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * sm_scale
    valid = offs_n[None, :] < Nk
    if CAUSAL:
        if ALIGN_TOP_LEFT:
            # BUG: causal mask j <= i ignores the Nk - Nq offset (only right when Nq == Nk)
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        else:
            valid = valid & (offs_n[None, :] <= offs_m[:, None] + (Nk - Nq))
    s = tl.where(valid, s, float("-inf"))
    m = tl.max(s, axis=1)
    m = tl.where(m == float("-inf"), 0.0, m)  # rows that see no key (padding rows)
    p = tl.exp(s - m[:, None])
    l = tl.sum(p, axis=1)
    l = tl.where(l == 0.0, 1.0, l)
    acc = tl.dot(p, v.to(tl.float32), input_precision="ieee")
    out = acc / l[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < Nq) & d_ok)


def _launch(q, k, v, causal, sm_scale, BLOCK_D, align_top_left=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    o = torch.empty((B, H, Nq, D), dtype=q.dtype, device=q.device)
    BLOCK_M = 16
    BLOCK_N = max(16, triton.next_power_of_2(Nk))
    grid = (triton.cdiv(Nq, BLOCK_M), B * H)
    _attn_kernel[grid](q, k, v, o, H, Nq, Nk, D, sm_scale, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                       CAUSAL=bool(causal), ALIGN_TOP_LEFT=align_top_left,
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    return o


# ---------------------------------------------------------------- correct
@SUPPORTED
def attention(q, k, v, causal=False):
    D = q.shape[-1]
    BLOCK_D = max(16, triton.next_power_of_2(D))
    return _launch(q, k, v, causal, 1.0 / math.sqrt(D), BLOCK_D)


# ---------------------------------------------------------------- buggy: wrong normalisation
@SUPPORTED
def attention_scale_bug(q, k, v, causal=False):
    D = q.shape[-1]
    BLOCK_D = max(16, triton.next_power_of_2(D))
    # BUG: scales by 1/sqrt(BLOCK_D), the padded head dim, instead of 1/sqrt(D)
    sm_scale = 1.0 / math.sqrt(BLOCK_D)
    return _launch(q, k, v, causal, sm_scale, BLOCK_D)


# ---------------------------------------------------------------- buggy: causal mask without the Nk - Nq offset
@SUPPORTED
def attention_causal_topleft(q, k, v, causal=False):
    D = q.shape[-1]
    BLOCK_D = max(16, triton.next_power_of_2(D))
    return _launch(q, k, v, causal, 1.0 / math.sqrt(D), BLOCK_D, align_top_left=True)
