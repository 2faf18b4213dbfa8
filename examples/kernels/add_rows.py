"""add(x, y) as a row kernel: x and y viewed as [M, N] rows (a view when the strides allow, e.g. a row-padded
``big[:, :N]``), one program per (row, BLOCK_N columns), each input addressed with its own row stride."""
import torch
import triton
import triton.language as tl


def _rows(t):
    N = t.shape[-1]
    r = t.reshape(-1, N)  # a view (row stride kept) when possible, else a contiguous copy
    return r if r.stride(-1) == 1 else r.contiguous()


@triton.jit
def _add_rows_kernel(x_ptr, y_ptr, out_ptr, N, stride_xm, stride_ym, stride_om, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + row * stride_ym + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + offs, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def _launch(x, y, swap):
    x2, y2 = _rows(x), _rows(y)
    M, N = x2.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    sx, sy = (y2.stride(0), x2.stride(0)) if swap else (x2.stride(0), y2.stride(0))
    BLOCK_N = 256
    _add_rows_kernel[(M, triton.cdiv(N, BLOCK_N))](x2, y2, out, N, sx, sy, out.stride(0), BLOCK_N=BLOCK_N)
    return out.reshape(x.shape)


# ---------------------------------------------------------------- correct
def add_rows(x, y):
    return _launch(x, y, swap=False)


# ---------------------------------------------------------------- buggy: x's and y's row strides swapped
def add_rows_stride_swap(x, y):
    # BUG: passes y's row stride for x and x's for y. Equal whenever both are contiguous or copied (the strided
    # and transposed inputs are), so only a row-padded view (row stride > N, inner stride 1) tells them apart.
    return _launch(x, y, swap=True)
