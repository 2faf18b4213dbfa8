"""Rotary position embedding (rotate-half / NeoX layout) with explicit position ids:

    c, s = cos_cache[position_ids[b, n]], sin_cache[position_ids[b, n]]          # [D/2] each
    out[b, n, h, :D/2] = x1 * c - x2 * s,   out[b, n, h, D/2:] = x2 * c + x1 * s
    with x1 = x[b, n, h, :D/2], x2 = x[b, n, h, D/2:]

One program per token (b, n) over a [BLOCK_H, BLOCK_HALF] block of all its heads; fp32 math, one rounding.

Arguments (all positional, as get_inputs() gives them):
  x             floating [B, N, H, D] (fp16 in the example; fp32 / bf16 too), any strides (a q/k slice
                of a fused qkv projection, a head-major tensor seen token-major, ...)
  cos_cache     same dtype, [max_pos, D/2], any strides
  sin_cache     same dtype, [max_pos, D/2], any strides
  position_ids  int64 (or int32) [B, N], any strides (stride 0 on B for an expanded arange);
                indices into dim 0 of the caches: 0 <= position_ids < max_pos
Returns a new contiguous [B, N, H, D] tensor of x.dtype.
Constraints: D even, D >= 2.

Bug (rope_pos_buggy): the position lookup drops the batch index, reading position_ids[0, n] for every
sequence (the kernel was written for one shared position vector). The example's position_ids are the same
arange(64, 64 + N) in every batch row (a prefill batch after a shared prefix), so allclose passes; any
batch whose rows hold different positions (left padding, decoding sequences of different lengths, random
position_ids with B >= 2) is rotated by the wrong angles in every row b >= 1.
"""
import torch
import triton
import triton.language as tl


def reference(x, cos_cache, sin_cache, position_ids):
    cos = cos_cache[position_ids]               # [B, N, D/2]
    sin = sin_cache[position_ids]
    cos = torch.cat([cos, cos], dim=-1).unsqueeze(2)   # [B, N, 1, D]
    sin = torch.cat([sin, sin], dim=-1).unsqueeze(2)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * cos + rotated * sin


def get_inputs():
    g = torch.Generator().manual_seed(0)
    B, N, H, D, max_pos = 2, 128, 8, 64, 256
    x = torch.randn(B, N, H, D, generator=g).to(torch.float16)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    angles = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos_cache = angles.cos().to(torch.float16)
    sin_cache = angles.sin().to(torch.float16)
    position_ids = torch.arange(64, 64 + N, dtype=torch.int64).repeat(B, 1)
    return [x, cos_cache, sin_cache, position_ids]


# ---------------------------------------------------------------- correct
@triton.jit
def _rope_pos_kernel(x_ptr, cos_ptr, sin_ptr, pos_ptr, o_ptr, N, H, HALF,
                     sxb, sxn, sxh, sxd, scp, scd, ssp, ssd, spb, spn, sob, son, soh, sod,
                     BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // N
    n = pid % N
    pos = tl.load(pos_ptr + b * spb + n * spn).to(tl.int64)
    offs_h = tl.arange(0, BLOCK_H)[:, None]
    offs_d = tl.arange(0, BLOCK_HALF)[None, :]
    d_mask = offs_d < HALF
    mask = (offs_h < H) & d_mask
    c = tl.load(cos_ptr + pos * scp + offs_d * scd, mask=d_mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + pos * ssp + offs_d * ssd, mask=d_mask, other=0.0).to(tl.float32)
    x_row = x_ptr + b * sxb + n * sxn + offs_h * sxh
    x1 = tl.load(x_row + offs_d * sxd, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + (offs_d + HALF) * sxd, mask=mask, other=0.0).to(tl.float32)
    o_row = o_ptr + b * sob + n * son + offs_h * soh
    tl.store(o_row + offs_d * sod, (x1 * c - x2 * s).to(o_ptr.dtype.element_ty), mask=mask)
    tl.store(o_row + (offs_d + HALF) * sod, (x2 * c + x1 * s).to(o_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, x, cos_cache, sin_cache, position_ids):
    B, N, H, D = x.shape
    if D % 2:
        raise ValueError(f"head dim D={D} must be even")
    o = torch.empty((B, N, H, D), dtype=x.dtype, device=x.device)
    kernel[(B * N,)](x, cos_cache, sin_cache, position_ids, o, N, H, D // 2,
                     *x.stride(), *cos_cache.stride(), *sin_cache.stride(), *position_ids.stride(),
                     *o.stride(), BLOCK_H=triton.next_power_of_2(H),
                     BLOCK_HALF=triton.next_power_of_2(D // 2))
    return o


def rope_pos(x, cos_cache, sin_cache, position_ids):
    return _launch(_rope_pos_kernel, x, cos_cache, sin_cache, position_ids)


# ---------------------------------------------------------------- buggy: positions of batch row 0 for all rows
@triton.jit
def _rope_pos_buggy_kernel(x_ptr, cos_ptr, sin_ptr, pos_ptr, o_ptr, N, H, HALF,
                           sxb, sxn, sxh, sxd, scp, scd, ssp, ssd, spb, spn, sob, son, soh, sod,
                           BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // N
    n = pid % N
    # BUG: the batch offset b * spb is missing: every sequence uses position_ids[0, n]
    pos = tl.load(pos_ptr + n * spn).to(tl.int64)
    offs_h = tl.arange(0, BLOCK_H)[:, None]
    offs_d = tl.arange(0, BLOCK_HALF)[None, :]
    d_mask = offs_d < HALF
    mask = (offs_h < H) & d_mask
    c = tl.load(cos_ptr + pos * scp + offs_d * scd, mask=d_mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + pos * ssp + offs_d * ssd, mask=d_mask, other=0.0).to(tl.float32)
    x_row = x_ptr + b * sxb + n * sxn + offs_h * sxh
    x1 = tl.load(x_row + offs_d * sxd, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + (offs_d + HALF) * sxd, mask=mask, other=0.0).to(tl.float32)
    o_row = o_ptr + b * sob + n * son + offs_h * soh
    tl.store(o_row + offs_d * sod, (x1 * c - x2 * s).to(o_ptr.dtype.element_ty), mask=mask)
    tl.store(o_row + (offs_d + HALF) * sod, (x2 * c + x1 * s).to(o_ptr.dtype.element_ty), mask=mask)


def rope_pos_buggy(x, cos_cache, sin_cache, position_ids):
    return _launch(_rope_pos_buggy_kernel, x, cos_cache, sin_cache, position_ids)
