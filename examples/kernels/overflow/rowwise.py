"""softmax(x) over [tokens, vocab]: an LM head's logits, past 2^31 elements at production size.

One program per row, three passes over the row in BLOCK_N chunks (max, sum of exp, write), fp32 math.
``softmax_i32`` computes the row's offset as ``row * stride`` in int32 (``tl.program_id`` is int32, and so is a
stride that fits): past 2^31 elements it wraps, and the program reads and writes another row, or unmapped
memory. ``softmax_i64`` widens the row index first. Both are exact at every size where the product fits.
"""
import torch
import triton
import triton.language as tl

BLOCK_N = 4096


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0)
    if WIDE:
        row = row.to(tl.int64)
    x_row = x_ptr + row * stride_xm  # int32 product unless WIDE
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    for start in range(0, N, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    mx = tl.max(m, axis=0)
    s = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - mx)
    total = tl.sum(s, axis=0)
    for start in range(0, N, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
        tl.store(y_row + start + cols, (tl.exp(x - mx) / total).to(y_ptr.dtype.element_ty), mask=start + cols < N)


def _softmax(x, wide):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    if x2.stride(1) != 1:
        x2 = x2.contiguous()
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_rows[(x2.shape[0],)](x2, y, N, x2.stride(0), y.stride(0), BLOCK_N=BLOCK_N, WIDE=wide)
    return y.reshape(x.shape)


def softmax_i32(x):
    return _softmax(x, False)


def softmax_i64(x):
    return _softmax(x, True)
