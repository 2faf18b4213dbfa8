"""attention(q[B,H,Nq,D], k[B,H,Nk,D], v[B,H,Nk,D], causal=False) -> [B,H,Nq,D], flash-attention version.

One program per (BLOCK_M=16 queries, batch*head); loop over key blocks of BLOCK_N=64 with an online softmax
in base 2 (exp2, scale folded with log2(e)); BLOCK_D = max(16, next_pow2(D)). P is cast to the input dtype
before the P @ V dot (as in the Triton tutorial: fp16 P for fp16 inputs, a legitimate extra error).
Dots use input_precision="ieee". Causal: query i sees keys j <= i + Nk - Nq.
"""
import math

import torch
import triton
import triton.language as tl

import gpuemu

# Q, K and V tiles of the whole (padded) head dim: past 128 a launch needs 282,688 B of shared memory, more
# than an sm_80/sm_90 block may have (gpuemu predicts the refusal on the CPU), so the launchers declare it.
SUPPORTED = gpuemu.requires(max_dims={"D": 128})


def _launch(kernel, q, k, v, causal):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    o = torch.empty((B, H, Nq, D), dtype=q.dtype, device=q.device)
    BLOCK_M, BLOCK_N = 16, 64
    BLOCK_D = max(16, triton.next_power_of_2(D))
    qk_scale = 1.4426950408889634 / math.sqrt(D)  # log2(e) / sqrt(D): softmax done with exp2
    grid = (triton.cdiv(Nq, BLOCK_M), B * H)
    kernel[grid](q, k, v, o, H, Nq, Nk, D, qk_scale, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                 CAUSAL=bool(causal), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    return o


# ---------------------------------------------------------------- correct
@triton.jit
def _flash_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, Nq, Nk, D, qk_scale,
                            sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                            CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < Nq) & d_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start_n in range(0, Nk, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ok = (offs_n[:, None] < Nk) & d_ok
        k = tl.load(k_ptr + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kv_ok, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=kv_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        valid = offs_n[None, :] < Nk
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None] + (Nk - Nq))
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that have seen no key yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < Nq) & d_ok)


@SUPPORTED
def flash_attention(q, k, v, causal=False):
    return _launch(_flash_attention_kernel, q, k, v, causal)


# ---------------------------------------------------------------- buggy: missing online-softmax rescale
@triton.jit
def _flash_attention_no_rescale_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, Nq, Nk, D, qk_scale,
                                       sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                                       CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < Nq) & d_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start_n in range(0, Nk, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ok = (offs_n[:, None] < Nk) & d_ok
        k = tl.load(k_ptr + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kv_ok, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=kv_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        valid = offs_n[None, :] < Nk
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None] + (Nk - Nq))
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that have seen no key yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        # BUG: missing acc *= alpha: earlier key blocks keep the stale running max once it grows (Nk > BLOCK_N)
        acc = acc + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < Nq) & d_ok)


@SUPPORTED
def flash_attention_no_rescale(q, k, v, causal=False):
    return _launch(_flash_attention_no_rescale_kernel, q, k, v, causal)


# ---------------------------------------------------------------- buggy: tail-mask leak
@triton.jit
def _flash_attention_tail_leak_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, Nq, Nk, D, qk_scale,
                                      sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                                      CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < Nq) & d_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start_n in range(0, Nk, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ok = (offs_n[:, None] < Nk) & d_ok
        k = tl.load(k_ptr + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kv_ok, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=kv_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        # BUG: only the causal mask is applied; padded keys (offs_n >= Nk) are zero-filled, score 0 and enter l_i
        if CAUSAL:
            s = tl.where(offs_n[None, :] <= offs_m[:, None] + (Nk - Nq), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that have seen no key yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < Nq) & d_ok)


@SUPPORTED
def flash_attention_tail_leak(q, k, v, causal=False):
    return _launch(_flash_attention_tail_leak_kernel, q, k, v, causal)


# ---------------------------------------------------------------- buggy: off-by-one causal mask
@triton.jit
def _flash_attention_causal_off_by_one_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, Nq, Nk, D, qk_scale,
                                              sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                                              CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < Nq) & d_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start_n in range(0, Nk, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ok = (offs_n[:, None] < Nk) & d_ok
        k = tl.load(k_ptr + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kv_ok, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=kv_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        valid = offs_n[None, :] < Nk
        if CAUSAL:
            # BUG: off-by-one, '<' instead of '<=': a query never sees its own (diagonal) key
            valid = valid & (offs_n[None, :] < offs_m[:, None] + (Nk - Nq))
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that have seen no key yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < Nq) & d_ok)


@SUPPORTED
def flash_attention_causal_off_by_one(q, k, v, causal=False):
    return _launch(_flash_attention_causal_off_by_one_kernel, q, k, v, causal)
