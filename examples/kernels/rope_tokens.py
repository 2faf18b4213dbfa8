"""rope(x[B,N,H,D], cos[N,D/2], sin[N,D/2]): rotate-half (NeoX) rotary embedding, one program per token (b, n)
over a [BLOCK_H, BLOCK_HALF] block of all its heads; x's strides passed per dim (x may be a KV-cache slice
cache[:, :n] of a longer buffer, a head slice of a fused qkv projection, or a head-major tensor seen token-major)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_tokens_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, N, H, HALF,
                      sxb, sxn, sxh, sxd, scn, scd, ssn, ssd, sob, son, soh, sod,
                      BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr, BUG: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // N
    n = pid % N
    h = tl.arange(0, BLOCK_H)[:, None]
    if BUG:
        # BUG: the batch offset derived from the token stride, right only when stride(B) == N * stride(N):
        # contiguous x, but not a KV-cache slice cache[:, :n] of a longer buffer nor a head-major tensor
        x_row = x_ptr + b * N * sxn + n * sxn + h * sxh
    else:
        x_row = x_ptr + b * sxb + n * sxn + h * sxh
    offs = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (h < H) & (offs < HALF)
    x1 = tl.load(x_row + offs * sxd, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + (HALF + offs) * sxd, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + n * scn + offs * scd, mask=offs < HALF, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + n * ssn + offs * ssd, mask=offs < HALF, other=0.0).to(tl.float32)
    o_row = out_ptr + b * sob + n * son + h * soh
    tl.store(o_row + offs * sod, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o_row + (HALF + offs) * sod, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


def _launch(x, cos, sin, bug):
    B, N, H, D = x.shape
    HALF = D // 2
    out = torch.empty((B, N, H, D), dtype=x.dtype, device=x.device)
    _rope_tokens_kernel[(B * N,)](x, cos, sin, out, N, H, HALF, *x.stride(), *cos.stride(), *sin.stride(),
                                *out.stride(), BLOCK_H=triton.next_power_of_2(H),
                                BLOCK_HALF=triton.next_power_of_2(HALF), BUG=bug)
    return out


# ---------------------------------------------------------------- correct
def rope_tokens(x, cos, sin):
    return _launch(x, cos, sin, bug=False)


# ---------------------------------------------------------------- buggy: assumes the batch stride of [B, N, H, D]
def rope_tokens_batch_stride(x, cos, sin):
    return _launch(x, cos, sin, bug=True)
