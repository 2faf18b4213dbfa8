"""layernorm(x, weight, bias, eps=1e-5): over the last dim; weight, bias: [N]. Correct and buggy launchers."""
import torch
import triton
import triton.language as tl


def _as_rows(x):
    N = x.shape[-1]
    return x.reshape(-1, N), N


# ---------------------------------------------------------------- correct: two-pass mean / variance in one block
@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_b, stride_ym,
                      BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs * stride_b, mask=mask, other=0.0).to(tl.float32)
    y = d * rstd * w + b
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm(x, weight, bias, eps=1e-5):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _layernorm_kernel[(x2.shape[0],)](x2, weight, bias, y, N, eps, x2.stride(0), x2.stride(1),
                                      weight.stride(0), bias.stride(0), y.stride(0),
                                      BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- correct: Welford/Chan merge over BLOCK_N=64 chunks
@triton.jit
def _layernorm_welford_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_b,
                              stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    mean = tl.full([], 0.0, tl.float32)
    m2 = tl.full([], 0.0, tl.float32)
    count = tl.full([], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        n_b = tl.sum(mask.to(tl.float32), axis=0)
        mean_b = tl.sum(x, axis=0) / n_b
        d_b = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(d_b * d_b, axis=0)
        # Chan et al. parallel merge of (count, mean, m2) with the block's (n_b, mean_b, m2_b)
        n_new = count + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / n_new)
        m2 = m2 + m2_b + delta * delta * (count * n_b / n_new)
        count = n_new
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs * stride_b, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm_welford(x, weight, bias, eps=1e-5):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _layernorm_welford_kernel[(x2.shape[0],)](x2, weight, bias, y, N, eps, x2.stride(0), x2.stride(1),
                                              weight.stride(0), bias.stride(0), y.stride(0), BLOCK_N=64)
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: one-pass variance E[x^2] - E[x]^2
@triton.jit
def _layernorm_naive_var_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_b,
                                stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    # BUG: var = E[x^2] - E[x]^2 in fp32 cancels catastrophically when |mean| >> std (can go negative -> nan)
    var = tl.sum(x * x, axis=0) / N - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs * stride_b, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm_naive_var(x, weight, bias, eps=1e-5):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _layernorm_naive_var_kernel[(x2.shape[0],)](x2, weight, bias, y, N, eps, x2.stride(0), x2.stride(1),
                                                weight.stride(0), bias.stride(0), y.stride(0),
                                                BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- buggy: padding lanes enter the variance
@triton.jit
def _layernorm_pad_leak_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_b,
                               stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    # BUG: x - mean is not re-masked: each padding lane adds mean^2 to the variance when N < BLOCK_N
    d = x - mean
    var = tl.sum(d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs * stride_b, mask=mask, other=0.0).to(tl.float32)
    y = d * rstd * w + b
    tl.store(y_ptr + row * stride_ym + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm_pad_leak(x, weight, bias, eps=1e-5):
    x2, N = _as_rows(x)
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _layernorm_pad_leak_kernel[(x2.shape[0],)](x2, weight, bias, y, N, eps, x2.stride(0), x2.stride(1),
                                               weight.stride(0), bias.stride(0), y.stride(0),
                                               BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)
