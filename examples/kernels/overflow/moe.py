"""MoE token gather in the embedding contract: out[i] = x[src[i]] (``embedding(ids=src, table=x)``).

Before the expert GEMMs a MoE layer permutes token rows into expert order; ``src[i]`` is the row of the routed
buffer (tokens x top_k rows, sorted by expert: a late expert's rows start at a large offset) that slot ``i``
reads. BLOCK_T slots per program, the whole hidden row at once in BLOCK_D chunks.
``moe_gather_i32`` narrows the loaded row ids to int32 (ids fit in int32: a common register saving) and so
computes ``src * stride`` in int32: once the buffer holds more than 2^31 elements, every row past 2^31 / hidden
wraps to another row. ``moe_gather_i64`` keeps the ids int64. Both are exact where the products fit.
"""
import torch
import triton
import triton.language as tl

BLOCK_T, BLOCK_D = 16, 1024


@triton.jit
def _gather(ids_ptr, x_ptr, out_ptr, T, D, stride_xv, stride_ot, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
            WIDE: tl.constexpr):
    slots = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    ok = slots < T
    src = tl.load(ids_ptr + slots, mask=ok, other=0)
    if not WIDE:
        src = src.to(tl.int32)
    src_off = src * stride_xv  # int32 unless WIDE: the expert's rows start past 2^31 / hidden
    dst_off = slots.to(tl.int64) * stride_ot
    for d in range(0, D, BLOCK_D):
        cols = d + tl.arange(0, BLOCK_D)
        m = ok[:, None] & (cols[None, :] < D)
        v = tl.load(x_ptr + src_off[:, None] + cols[None, :], mask=m, other=0.0)
        tl.store(out_ptr + dst_off[:, None] + cols[None, :], v, mask=m)


def _moe_gather(ids, table, wide):
    D = table.shape[1]
    flat = ids.reshape(-1).contiguous()
    T = flat.numel()
    if table.stride(1) != 1:
        table = table.contiguous()
    out = torch.empty((T, D), dtype=table.dtype, device=table.device)
    _gather[(triton.cdiv(T, BLOCK_T),)](flat, table, out, T, D, table.stride(0), out.stride(0), BLOCK_T=BLOCK_T,
                                        BLOCK_D=BLOCK_D, WIDE=wide)
    return out.reshape(*ids.shape, D)


def moe_gather_i32(ids, table):
    return _moe_gather(ids, table, False)


def moe_gather_i64(ids, table):
    return _moe_gather(ids, table, True)
