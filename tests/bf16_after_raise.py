"""A kernel wrong only in bf16, whose first bf16 cases raise (an out-of-bounds read): bf16 must stay tested."""
import triton
import triton.language as tl
import torch


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, limit, bias, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < limit, other=0.0)  # limit > n reads past the inputs
    y = tl.load(y_ptr + offs, mask=offs < limit, other=0.0)
    tl.store(out_ptr + offs, x + y + bias, mask=offs < n)


def add_bf16_wrong(x, y):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    bf16 = x.dtype == torch.bfloat16
    limit = n + 4096 if bf16 and n >= 64 else n  # large bf16 inputs: an out-of-bounds read (raises)
    bias = 0.25 if bf16 else 0.0  # small bf16 inputs: silently wrong
    _add_kernel[(triton.cdiv(max(n, 1), 64),)](x, y, out, n, limit, bias, BLOCK=64)
    return out
