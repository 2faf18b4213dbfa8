"""Softmax over the last dim with a temperature and a mask (attention-probability style):

    s = x / temperature
    s = s.masked_fill(~mask, -inf)   if mask is bool (True = keep)
    s = s + mask                     otherwise (additive float mask, e.g. 0 / -inf / -1e4 / ALiBi bias)
    out = softmax(s, dim=-1)

One program per row of x (rows are indexed (b, h, i) over x's first three dims), the whole row in one
BLOCK = next_power_of_2(L) block; padding lanes and masked keys are -inf, the row max is subtracted
before exp, fp32 math, one rounding.

Arguments (all positional, as get_inputs() gives them):
  x            floating [B, H, Lq, L] (fp16 in the example; fp32 / bf16 too), any strides
  mask         bool, or floating of any float dtype, broadcastable to x's shape (e.g. [B, 1, 1, L] key
               padding, [1, 1, Lq, L] causal, or the full shape); any strides
  temperature  python float > 0 (0.7 in the example)
Returns a new contiguous tensor of x's shape and dtype.
Constraints: every row must keep at least one key (a fully masked row is NaN in the reference too);
1 <= L <= 65536.

Bug (masked_softmax_buggy): no max subtraction: exp(s) / sum(exp(s)) computed directly. In fp32 that is
exact math as long as exp(s) stays finite, so the example (randn logits / 0.7, |s| < 7) passes; logits /
temperature above ~88.7 overflow exp to inf and the row turns to NaN (e.g. x = 30 * randn with
temperature 0.7, or temperature 0.05 on randn logits), and rows whose logits are all below ~-87 underflow
to 0 / 0.
"""
import torch
import triton
import triton.language as tl


def reference(x, mask, temperature):
    s = x / temperature
    if mask.dtype == torch.bool:
        s = s.masked_fill(~mask, float("-inf"))
    else:
        s = s + mask
    return torch.softmax(s, dim=-1)


def get_inputs():
    g = torch.Generator().manual_seed(0)
    B, H, Lq, L = 2, 4, 64, 128
    x = torch.randn(B, H, Lq, L, generator=g).to(torch.float16)
    lengths = torch.tensor([128, 100])
    mask = (torch.arange(L)[None, :] < lengths[:, None])[:, None, None, :]     # [B, 1, 1, L] key padding
    return [x, mask, 0.7]


# ---------------------------------------------------------------- correct
@triton.jit
def _masked_softmax_kernel(x_ptr, m_ptr, o_ptr, H, Lq, L, inv_temp,
                           sxb, sxh, sxq, sxl, smb, smh, smq, sml, sob, soh, soq, sol,
                           IS_BOOL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = row % Lq
    bh = row // Lq
    h = bh % H
    b = bh // H
    offs = tl.arange(0, BLOCK)
    inb = offs < L
    x = tl.load(x_ptr + b * sxb + h * sxh + i * sxq + offs * sxl, mask=inb, other=0.0).to(tl.float32)
    s = x * inv_temp
    if IS_BOOL:
        keep = tl.load(m_ptr + b * smb + h * smh + i * smq + offs * sml, mask=inb, other=0) != 0
        s = tl.where(keep & inb, s, float("-inf"))
    else:
        add = tl.load(m_ptr + b * smb + h * smh + i * smq + offs * sml, mask=inb, other=0.0).to(tl.float32)
        s = tl.where(inb, s + add, float("-inf"))
    s = s - tl.max(s, 0)
    e = tl.exp(s)
    out = e / tl.sum(e, 0)
    tl.store(o_ptr + b * sob + h * soh + i * soq + offs * sol, out.to(o_ptr.dtype.element_ty), mask=inb)


def _launch(kernel, x, mask, temperature):
    B, H, Lq, L = x.shape
    m = mask.expand(B, H, Lq, L)           # broadcast dims get stride 0, no copy
    o = torch.empty((B, H, Lq, L), dtype=x.dtype, device=x.device)
    kernel[(B * H * Lq,)](x, m, o, H, Lq, L, 1.0 / temperature, *x.stride(), *m.stride(), *o.stride(),
                          IS_BOOL=mask.dtype == torch.bool, BLOCK=triton.next_power_of_2(L))
    return o


def masked_softmax(x, mask, temperature):
    return _launch(_masked_softmax_kernel, x, mask, temperature)


# ---------------------------------------------------------------- buggy: no max subtraction
@triton.jit
def _masked_softmax_buggy_kernel(x_ptr, m_ptr, o_ptr, H, Lq, L, inv_temp,
                                 sxb, sxh, sxq, sxl, smb, smh, smq, sml, sob, soh, soq, sol,
                                 IS_BOOL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = row % Lq
    bh = row // Lq
    h = bh % H
    b = bh // H
    offs = tl.arange(0, BLOCK)
    inb = offs < L
    x = tl.load(x_ptr + b * sxb + h * sxh + i * sxq + offs * sxl, mask=inb, other=0.0).to(tl.float32)
    s = x * inv_temp
    if IS_BOOL:
        keep = tl.load(m_ptr + b * smb + h * smh + i * smq + offs * sml, mask=inb, other=0) != 0
        s = tl.where(keep & inb, s, float("-inf"))
    else:
        add = tl.load(m_ptr + b * smb + h * smh + i * smq + offs * sml, mask=inb, other=0.0).to(tl.float32)
        s = tl.where(inb, s + add, float("-inf"))
    # BUG: exp of the raw logits, no max subtraction: overflows to inf (then inf / inf = NaN) once
    # x / temperature exceeds ~88.7
    e = tl.exp(s)
    out = e / tl.sum(e, 0)
    tl.store(o_ptr + b * sob + h * soh + i * soq + offs * sol, out.to(o_ptr.dtype.element_ty), mask=inb)


def masked_softmax_buggy(x, mask, temperature):
    return _launch(_masked_softmax_buggy_kernel, x, mask, temperature)
