"""embedding(ids[...] int64, table[V,D]) -> [...,D]: table[ids]. BLOCK_T=16 ids per program, BLOCK_D = next_pow2(D)."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct
@triton.jit
def _embedding_kernel(ids_ptr, table_ptr, out_ptr, T, D, stride_tv, stride_td, stride_ot,
                      BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, BLOCK_D)
    t_ok = offs_t < T
    ids = tl.load(ids_ptr + offs_t, mask=t_ok, other=0)
    mask = t_ok[:, None] & (offs_d[None, :] < D)
    rows = tl.load(table_ptr + ids[:, None] * stride_tv + offs_d[None, :] * stride_td, mask=mask, other=0.0)
    tl.store(out_ptr + offs_t[:, None] * stride_ot + offs_d[None, :], rows, mask=mask)


def embedding(ids, table):
    D = table.shape[1]
    flat = ids.reshape(-1).contiguous()
    T = flat.numel()
    out = torch.empty((T, D), dtype=table.dtype, device=table.device)
    BLOCK_T = 16
    _embedding_kernel[(triton.cdiv(T, BLOCK_T),)](flat, table, out, T, D, table.stride(0), table.stride(1),
                                                  out.stride(0), BLOCK_T=BLOCK_T, BLOCK_D=triton.next_power_of_2(D))
    return out.reshape(*ids.shape, D)


# ---------------------------------------------------------------- buggy: table assumed contiguous
@triton.jit
def _embedding_contig_kernel(ids_ptr, table_ptr, out_ptr, T, D, stride_ot, BLOCK_T: tl.constexpr,
                             BLOCK_D: tl.constexpr):
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, BLOCK_D)
    t_ok = offs_t < T
    ids = tl.load(ids_ptr + offs_t, mask=t_ok, other=0)
    mask = t_ok[:, None] & (offs_d[None, :] < D)
    # BUG: row address ids * D assumes a contiguous table; a column-sliced or transposed table is misread
    rows = tl.load(table_ptr + ids[:, None] * D + offs_d[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + offs_t[:, None] * stride_ot + offs_d[None, :], rows, mask=mask)


def embedding_stride(ids, table):
    D = table.shape[1]
    flat = ids.reshape(-1).contiguous()
    T = flat.numel()
    out = torch.empty((T, D), dtype=table.dtype, device=table.device)
    BLOCK_T = 16
    _embedding_contig_kernel[(triton.cdiv(T, BLOCK_T),)](flat, table, out, T, D, out.stride(0), BLOCK_T=BLOCK_T,
                                                         BLOCK_D=triton.next_power_of_2(D))
    return out.reshape(*ids.shape, D)
