"""rope(x[B,N,H,D], cos[N,D/2], sin[N,D/2]): rotate-half (NeoX) rotary embedding.
x1, x2 = x[..., :D/2], x[..., D/2:];  out = cat(x1*cos - x2*sin, x2*cos + x1*sin).
One program per (b, n) handling all heads: block [BLOCK_H, BLOCK_HALF], BLOCK_H = next_pow2(H),
BLOCK_HALF = next_pow2(D/2)."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct
@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, N, H, HALF,
                 sxb, sxn, sxh, sxd, scn, scd, ssn, ssd, sob, son, soh, sod,
                 BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // N
    n = pid % N
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_HALF)
    mask = (offs_h[:, None] < H) & (offs_d[None, :] < HALF)
    x_base = x_ptr + b * sxb + n * sxn + offs_h[:, None] * sxh
    x1 = tl.load(x_base + offs_d[None, :] * sxd, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_base + (HALF + offs_d[None, :]) * sxd, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + n * scn + offs_d * scd, mask=offs_d < HALF, other=0.0).to(tl.float32)[None, :]
    s = tl.load(sin_ptr + n * ssn + offs_d * ssd, mask=offs_d < HALF, other=0.0).to(tl.float32)[None, :]
    o_base = out_ptr + b * sob + n * son + offs_h[:, None] * soh
    tl.store(o_base + offs_d[None, :] * sod, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o_base + (HALF + offs_d[None, :]) * sod, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


def rope(x, cos, sin):
    B, N, H, D = x.shape
    HALF = D // 2
    out = torch.empty((B, N, H, D), dtype=x.dtype, device=x.device)
    _rope_kernel[(B * N,)](x, cos, sin, out, N, H, HALF, *x.stride(), *cos.stride(), *sin.stride(), *out.stride(),
                           BLOCK_H=triton.next_power_of_2(H), BLOCK_HALF=triton.next_power_of_2(HALF))
    return out


# ---------------------------------------------------------------- buggy: second half read at the padded offset
@triton.jit
def _rope_half_offset_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, N, H, HALF,
                             sxb, sxn, sxh, sxd, scn, scd, ssn, ssd, sob, son, soh, sod,
                             BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // N
    n = pid % N
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_HALF)
    mask = (offs_h[:, None] < H) & (offs_d[None, :] < HALF)
    x_base = x_ptr + b * sxb + n * sxn + offs_h[:, None] * sxh
    x1 = tl.load(x_base + offs_d[None, :] * sxd, mask=mask, other=0.0).to(tl.float32)
    # BUG: x2 read at BLOCK_HALF + d (the padded half) instead of HALF + d: wrong when D/2 is not a power of two
    x2 = tl.load(x_base + (BLOCK_HALF + offs_d[None, :]) * sxd,
                 mask=(offs_h[:, None] < H) & (BLOCK_HALF + offs_d[None, :] < 2 * HALF), other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + n * scn + offs_d * scd, mask=offs_d < HALF, other=0.0).to(tl.float32)[None, :]
    s = tl.load(sin_ptr + n * ssn + offs_d * ssd, mask=offs_d < HALF, other=0.0).to(tl.float32)[None, :]
    o_base = out_ptr + b * sob + n * son + offs_h[:, None] * soh
    tl.store(o_base + offs_d[None, :] * sod, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o_base + (HALF + offs_d[None, :]) * sod, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


def rope_half_offset(x, cos, sin):
    B, N, H, D = x.shape
    HALF = D // 2
    out = torch.empty((B, N, H, D), dtype=x.dtype, device=x.device)
    _rope_half_offset_kernel[(B * N,)](x, cos, sin, out, N, H, HALF, *x.stride(), *cos.stride(), *sin.stride(),
                                       *out.stride(), BLOCK_H=triton.next_power_of_2(H),
                                       BLOCK_HALF=triton.next_power_of_2(HALF))
    return out
