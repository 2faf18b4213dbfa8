"""attention(q, k, v, causal) on head-major [B, H, T, D] tensors, B x H x T x D past 2^31 at production size.

Flash attention: one BLOCK_M query block of one (batch, head) per program, an online softmax over BLOCK_N key
blocks (causal: only up to the diagonal, keys j <= i + Nk - Nq), fp32 math, exp2 with the scale folded in.
``attention_i32`` computes the (batch, head) base offset ``b * stride_b + h * stride_h`` in int32 (both ids and
strides are int32): past 2^31 elements the later heads' base wraps. ``attention_i64`` widens the ids first.
"""
import math

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N = 64, 64  # 32 x 32 for fp32 (64 x 64 x 128 fp32 tiles need more shared memory than sm_80 has)


@triton.jit
def _attn(q_ptr, k_ptr, v_ptr, o_ptr, H, Nq, Nk, sm_scale,
          sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
          D, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
          WIDE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_hz = tl.program_id(1)
    b = pid_hz // H
    h = pid_hz % H
    if WIDE:
        b = b.to(tl.int64)
        h = h.to(tl.int64)
    q_base = q_ptr + b * sqb + h * sqh  # int32 unless WIDE
    k_base = k_ptr + b * skb + h * skh
    v_base = v_ptr + b * svb + h * svh
    o_base = o_ptr + b * sob + h * soh
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    q = tl.load(q_base + offs_m[:, None] * sqm + offs_d[None, :], mask=(offs_m[:, None] < Nq) & d_ok[None, :],
                other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    shift = Nk - Nq
    hi = Nk
    if CAUSAL:
        hi = tl.minimum(Nk, (pid_m + 1) * BLOCK_M + shift)
    for start in range(0, hi, BLOCK_N):
        keys = start + offs_n
        kt = tl.load(k_base + keys[None, :] * skn + offs_d[:, None], mask=(keys[None, :] < Nk) & d_ok[:, None],
                     other=0.0)
        s = tl.dot(q, kt, input_precision="ieee") * qk_scale
        ok = keys[None, :] < Nk
        if CAUSAL:
            ok = ok & (keys[None, :] <= offs_m[:, None] + shift)
        s = tl.where(ok, s, float("-inf"))  # (a fully masked row keeps m = -inf: m_safe keeps exp2 finite)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vv = tl.load(v_base + keys[:, None] * svn + offs_d[None, :], mask=(keys[:, None] < Nk) & d_ok[None, :],
                     other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(vv.dtype), vv, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * som + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < Nq) & d_ok[None, :])


def _attention(q, k, v, causal, wide):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    o = torch.empty((B, H, Nq, D), dtype=q.dtype, device=q.device)
    bm, bn = (BLOCK_M, BLOCK_N) if q.element_size() <= 2 else (32, 32)
    grid = (triton.cdiv(Nq, bm), B * H)
    _attn[grid](q, k, v, o, H, Nq, Nk, 1.0 / math.sqrt(D),
                q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2), D,
                CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=max(16, triton.next_power_of_2(D)),
                WIDE=wide)
    return o


def attention_i32(q, k, v, causal=False):
    return _attention(q, k, v, causal, False)


def attention_i64(q, k, v, causal=False):
    return _attention(q, k, v, causal, True)
