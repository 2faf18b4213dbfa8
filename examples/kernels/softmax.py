"""softmax(x): softmax over the last dim. Correct and buggy Triton launchers."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


def _as_rows(x):
    N = x.shape[-1]
    return x.reshape(-1, N), N  # a view (strides kept) when possible, else a contiguous copy


# ---------------------------------------------------------------- correct: two-pass, one row per program
@triton.jit
def _softmax_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x - m), 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0),
                                    BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- correct: exp2 form (x*log2e - m*log2e)
@triton.jit
def _softmax_exp2_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
    # scale first, subtract after: error grows like |x| * eps (legitimate, not a bug)
    xs = x * 1.4426950408889634
    m = tl.max(xs, axis=0)
    e = tl.where(mask, tl.exp2(xs - m), 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_exp2(x):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_exp2_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0),
                                         BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- correct: online softmax, loop over BLOCK_N=64 chunks
@triton.jit
def _softmax_online_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + offs * stride_xn, mask=offs < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m_i = m_new
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - m_i) / l_i
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_online(x):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_online_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0), BLOCK_N=64)
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: tail-mask leak
@triton.jit
def _softmax_tail_leak_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    # BUG: padding lanes load 0.0 instead of -inf, so exp(0 - max) enters the denominator when N < BLOCK_N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_tail_leak(x):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_tail_leak_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0),
                                              BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: no max subtraction
@triton.jit
def _softmax_no_max_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
    # BUG: no max subtraction; exp overflows to inf (-> nan) once logits exceed ~88
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_no_max(x):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_no_max_kernel[(x2.shape[0],)](x2, y, N, x2.stride(0), x2.stride(1), y.stride(0),
                                           BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: assumes contiguous rows
@triton.jit
def _softmax_stride_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    # BUG: addresses x as if it were contiguous (row * N + col); wrong for transposed / sliced inputs
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x - m), 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * N + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_stride(x):
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _softmax_stride_kernel[(x2.shape[0],)](x2, y, N, BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)
