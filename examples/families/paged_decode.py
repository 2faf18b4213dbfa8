"""Paged-KV decode attention: one query token per sequence attends to its cached keys/values, which live
in fixed-size pages of a shared cache.

For sequence b and query head h (kv head h // (Hq // Hkv)), token t (0 <= t < seq_lens[b]) of the sequence
lives in page block_table[b, t // page_size], slot t % page_size:
    out[b, h] = softmax_t(q[b, h] . k[t] / sqrt(D)) @ v[t]
One program per (sequence, query head) walks the sequence's pages with an online softmax (fp32 running
max / sum / accumulator), masking the slots of the last page that lie past seq_lens[b].

Arguments (all positional, as get_inputs() gives them):
  q            floating [B, Hq, D] (fp16 in the example; fp32 / bf16 too), any strides
  k_cache      same dtype, [num_pages, page_size, Hkv, D], any strides
  v_cache      same dtype and shape as k_cache, any strides
  block_table  int32 [B, max_pages]: entries are page indices into dim 0 of k_cache / v_cache,
               0 <= block_table[b, p] < num_pages (entries past a sequence's last page are never read)
  seq_lens     int32 [B]: 1 <= seq_lens[b] <= max_pages * page_size
Returns a new contiguous [B, Hq, D] tensor of q.dtype.
Constraints: Hq % Hkv == 0; page_size >= 1 (any, padded to a power of two inside); D >= 1.

Bug (paged_decode_buggy): the kernel masks whole pages only: every slot of the sequence's last page is
attended, including the slots past seq_lens[b] (stale cache entries). The example's seq_lens are all
multiples of page_size = 16, so no page is partial and allclose passes; any seq_lens[b] % page_size != 0
(e.g. seq_lens = [100, 37, 5, 64]) mixes stale keys/values into that sequence's output.
"""
import math

import torch
import triton
import triton.language as tl


# what the example call cannot show gpuemu (dims as `--show-schema` names them: block_table.1 = max_pages,
# k_cache.1 = page_size): a sequence fits its pages, and pages hold at least 8 tokens (as paged caches do; a page
# of one token makes the kernel loop once per token, thousands of times a program on the CPU)
GPUEMU_SCHEMA = {"args": {"seq_lens": {"kind": "int", "range": [1, "block_table.1*k_cache.1"]}},
                 "dims": {"k_cache.1": {"min": 8}}}


def reference(q, k_cache, v_cache, block_table, seq_lens):
    B, Hq, D = q.shape
    page_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty_like(q)
    for b in range(B):
        n = int(seq_lens[b])
        pages = block_table[b, : (n + page_size - 1) // page_size].long()
        k = k_cache[pages].reshape(-1, Hkv, D)[:n].repeat_interleave(Hq // Hkv, dim=1)   # [n, Hq, D]
        v = v_cache[pages].reshape(-1, Hkv, D)[:n].repeat_interleave(Hq // Hkv, dim=1)
        scores = torch.einsum("hd,nhd->hn", q[b], k) / math.sqrt(D)
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v)
    return out


def get_inputs():
    g = torch.Generator().manual_seed(0)
    B, Hq, Hkv, D = 4, 8, 2, 64
    page_size, max_pages, num_pages = 16, 8, 40
    q = torch.randn(B, Hq, D, generator=g).to(torch.float16)
    k_cache = torch.randn(num_pages, page_size, Hkv, D, generator=g).to(torch.float16)
    v_cache = torch.randn(num_pages, page_size, Hkv, D, generator=g).to(torch.float16)
    block_table = torch.randperm(num_pages, generator=g)[: B * max_pages].reshape(B, max_pages).to(torch.int32)
    seq_lens = torch.tensor([128, 64, 96, 32], dtype=torch.int32)    # whole pages
    return [q, k_cache, v_cache, block_table, seq_lens]


# ---------------------------------------------------------------- correct
@triton.jit
def _paged_decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, sl_ptr, o_ptr, Hq, D, GROUP, PAGE_SIZE, sm_scale,
                         sqb, sqh, sqd, skp, skt, skh, skd, svp, svt, svh, svd, sbtb, sbtp, ssl,
                         sob, soh, sod,
                         BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // GROUP
    offs_d = tl.arange(0, BLOCK_D)
    offs_t = tl.arange(0, BLOCK_T)
    d_mask = offs_d < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_d * sqd, mask=d_mask, other=0.0).to(tl.float32)
    seq_len = tl.load(sl_ptr + b * ssl)
    num_pages = tl.cdiv(seq_len, PAGE_SIZE)
    m_i = tl.full((), float("-inf"), tl.float32)
    l_i = tl.full((), 0.0, tl.float32)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for p in range(0, num_pages):
        page = tl.load(bt_ptr + b * sbtb + p * sbtp).to(tl.int64)
        tok = p * PAGE_SIZE + offs_t
        t_mask = (offs_t < PAGE_SIZE) & (tok < seq_len)
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(k_ptr + page * skp + offs_t[:, None] * skt + kvh * skh + offs_d[None, :] * skd,
                    mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], 1) * sm_scale
        s = tl.where(t_mask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        alpha = tl.exp(m_i - m_new)
        pr = tl.exp(s - m_new)
        v = tl.load(v_ptr + page * svp + offs_t[:, None] * svt + kvh * svh + offs_d[None, :] * svd,
                    mask=kv_mask, other=0.0).to(tl.float32)
        l_i = l_i * alpha + tl.sum(pr, 0)
        acc = acc * alpha + tl.sum(pr[:, None] * v, 0)
        m_i = m_new
    tl.store(o_ptr + b * sob + h * soh + offs_d * sod, (acc / l_i).to(o_ptr.dtype.element_ty), mask=d_mask)


def _launch(kernel, q, k_cache, v_cache, block_table, seq_lens):
    B, Hq, D = q.shape
    _, page_size, Hkv, _ = k_cache.shape
    if Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    o = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    kernel[(B, Hq)](q, k_cache, v_cache, block_table, seq_lens, o, Hq, D, Hq // Hkv, page_size,
                    1.0 / math.sqrt(D), *q.stride(), *k_cache.stride(), *v_cache.stride(),
                    *block_table.stride(), seq_lens.stride(0), *o.stride(),
                    BLOCK_T=triton.next_power_of_2(page_size), BLOCK_D=triton.next_power_of_2(D))
    return o


def paged_decode(q, k_cache, v_cache, block_table, seq_lens):
    return _launch(_paged_decode_kernel, q, k_cache, v_cache, block_table, seq_lens)


# ---------------------------------------------------------------- buggy: the last page is attended whole
@triton.jit
def _paged_decode_buggy_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, sl_ptr, o_ptr, Hq, D, GROUP, PAGE_SIZE, sm_scale,
                               sqb, sqh, sqd, skp, skt, skh, skd, svp, svt, svh, svd, sbtb, sbtp, ssl,
                               sob, soh, sod,
                               BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // GROUP
    offs_d = tl.arange(0, BLOCK_D)
    offs_t = tl.arange(0, BLOCK_T)
    d_mask = offs_d < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_d * sqd, mask=d_mask, other=0.0).to(tl.float32)
    seq_len = tl.load(sl_ptr + b * ssl)
    num_pages = tl.cdiv(seq_len, PAGE_SIZE)
    m_i = tl.full((), float("-inf"), tl.float32)
    l_i = tl.full((), 0.0, tl.float32)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for p in range(0, num_pages):
        page = tl.load(bt_ptr + b * sbtb + p * sbtp).to(tl.int64)
        # BUG: slots are masked against the page size only, not against seq_len: the tail of the
        # last page (stale cache slots past seq_lens[b]) takes part in the softmax
        t_mask = offs_t < PAGE_SIZE
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(k_ptr + page * skp + offs_t[:, None] * skt + kvh * skh + offs_d[None, :] * skd,
                    mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], 1) * sm_scale
        s = tl.where(t_mask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        alpha = tl.exp(m_i - m_new)
        pr = tl.exp(s - m_new)
        v = tl.load(v_ptr + page * svp + offs_t[:, None] * svt + kvh * svh + offs_d[None, :] * svd,
                    mask=kv_mask, other=0.0).to(tl.float32)
        l_i = l_i * alpha + tl.sum(pr, 0)
        acc = acc * alpha + tl.sum(pr[:, None] * v, 0)
        m_i = m_new
    tl.store(o_ptr + b * sob + h * soh + offs_d * sod, (acc / l_i).to(o_ptr.dtype.element_ty), mask=d_mask)


def paged_decode_buggy(q, k_cache, v_cache, block_table, seq_lens):
    return _launch(_paged_decode_buggy_kernel, q, k_cache, v_cache, block_table, seq_lens)
