"""rmsnorm(x, weight, eps=1e-6): x / sqrt(mean(x^2) + eps) * weight over the last dim. Correct and buggy launchers."""
import torch
import triton
import triton.language as tl


def _as_rows(x):
    N = x.shape[-1]
    return x.reshape(-1, N), N


# ---------------------------------------------------------------- correct: one block per row
@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / N
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_ym + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x, weight, eps=1e-6):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, y, N, eps, x2.stride(0), x2.stride(1), weight.stride(0), y.stride(0),
                                    BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- correct: loop over BLOCK_N=128 chunks (two passes)
@triton.jit
def _rmsnorm_looped_kernel(x_ptr, w_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_ym,
                           BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_ym + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_looped(x, weight, eps=1e-6):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _rmsnorm_looped_kernel[(x2.shape[0],)](x2, weight, y, N, eps, x2.stride(0), x2.stride(1), weight.stride(0),
                                           y.stride(0), BLOCK_N=128)
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: mean over BLOCK_N instead of N
@triton.jit
def _rmsnorm_block_div_kernel(x_ptr, w_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_ym,
                              BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    # BUG: divides by the padded BLOCK_N instead of N (only right when N is a power of two)
    ms = tl.sum(x * x, axis=0) / BLOCK_N
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_ym + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_block_div(x, weight, eps=1e-6):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _rmsnorm_block_div_kernel[(x2.shape[0],)](x2, weight, y, N, eps, x2.stride(0), x2.stride(1), weight.stride(0),
                                              y.stride(0), BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: eps added outside the sqrt
@triton.jit
def _rmsnorm_eps_outside_kernel(x_ptr, w_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_ym,
                                BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / N
    # BUG: eps added outside the sqrt, 1/(sqrt(ms) + eps): wrong when mean(x^2) is comparable to eps (small x)
    rstd = 1.0 / (tl.sqrt(ms) + eps)
    w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_ym + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_eps_outside(x, weight, eps=1e-6):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _rmsnorm_eps_outside_kernel[(x2.shape[0],)](x2, weight, y, N, eps, x2.stride(0), x2.stride(1), weight.stride(0),
                                                y.stride(0), BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)
