"""Correct code as the field writes it: PyTorch eager in the input dtype, Hugging Face's reference layers, and
the patterns popular Triton kernel libraries use (intermediates stored in the input dtype, fp32 losses,
kernels that assume contiguous rows). Every launcher here is correct for its callers; gpuemu must not call
any of them wrong. Written for gpuemu's corpus, after reading how those libraries compute (no code copied).
"""
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import gpuemu


# ---------------------------------------------------------------- PyTorch eager, in the input dtype
def eager_swiglu(a, b):
    return F.silu(a) * b


def eager_geglu(a, b):
    return F.gelu(a) * b


def hf_llama_rmsnorm(x, weight, eps=1e-6):
    """Hugging Face LlamaRMSNorm.forward: fp32 statistics, the normalised value cast back before * weight."""
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(input_dtype)


def mixed_precision_layernorm(x, weight, bias, eps=1e-5):
    """Statistics in fp32, the normalised value stored in the input dtype, then the affine in that dtype."""
    h = x.float()
    mean = h.mean(-1, keepdim=True)
    var = (h - mean).pow(2).mean(-1, keepdim=True)
    return weight * ((h - mean) * torch.rsqrt(var + eps)).to(x.dtype) + bias


def eager_rope(x, cos, sin):
    """Hugging Face apply_rotary_pos_emb (rotate_half, cos/sin repeated over both halves), in the input dtype."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    c = torch.cat((cos, cos), dim=-1)[:, None, :]
    s = torch.cat((sin, sin), dim=-1)[:, None, :]
    return x * c + rotated * s


def eager_attention(q, k, v, causal=False):
    """Hugging Face eager attention: scores in the input dtype, softmax in fp32 cast back, then P @ V."""
    scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        nq, nk = q.shape[-2], k.shape[-2]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(diagonal=nk - nq)
        scores = scores.masked_fill(~keep, float("-inf"))
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, v)


def eager_cross_entropy_fp32(logits, target):
    """The common loss form: logits upcast, per-row loss returned in fp32 whatever the logits' dtype."""
    return F.cross_entropy(logits.float(), target, reduction="none")


# ---------------------------------------------------------------- Triton: rmsnorm, normalised value cast back
@triton.jit
def _rmsnorm_cast_kernel(x_ptr, w_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_ym,
                         BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    xhat = (x * rstd).to(y_ptr.dtype.element_ty)  # the Llama casting mode: normalise in fp32, store, then scale
    w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_ym + offs, (xhat * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_llama_cast(x, weight, eps=1e-6):
    x2 = x.reshape(-1, x.shape[-1])
    N = x2.shape[-1]
    y = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    _rmsnorm_cast_kernel[(x2.shape[0],)](x2, weight, y, N, eps, x2.stride(0), x2.stride(1), weight.stride(0),
                                         y.stride(0), BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


# ---------------------------------------------------------------- Triton: swiglu with the gate stored in the dtype
@triton.jit
def _swiglu_stored_gate_kernel(a_ptr, b_ptr, y_ptr, N, stride_am, stride_an, stride_bm, stride_bn, stride_ym,
                               BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        a = tl.load(a_ptr + row * stride_am + offs * stride_an, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + row * stride_bm + offs * stride_bn, mask=mask, other=0.0)
        gate = (a * tl.sigmoid(a)).to(b.dtype)  # silu(a) in fp32, stored in the input dtype, times b
        tl.store(y_ptr + row * stride_ym + offs, (gate * b).to(y_ptr.dtype.element_ty), mask=mask)


def swiglu_stored_gate(a, b):
    N = a.shape[-1]
    a2, b2 = a.reshape(-1, N), b.reshape(-1, N)
    y = torch.empty((a2.shape[0], N), dtype=a.dtype, device=a.device)
    _swiglu_stored_gate_kernel[(a2.shape[0],)](a2, b2, y, N, a2.stride(0), a2.stride(1), b2.stride(0), b2.stride(1),
                                               y.stride(0), BLOCK_N=min(1024, triton.next_power_of_2(N)))
    return y.reshape(a.shape)


# ---------------------------------------------------------------- Triton: cross entropy with an fp32 loss
@triton.jit
def _xent_fp32_kernel(x_ptr, t_ptr, loss_ptr, C, stride_xn, stride_xc, stride_t, BLOCK_C: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xn
    m = -float("inf")
    s = 0.0
    for start in range(0, C, BLOCK_C):  # online logsumexp over chunks, in fp32
        offs = start + tl.arange(0, BLOCK_C)
        x = tl.load(x_row + offs * stride_xc, mask=offs < C, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    t = tl.load(t_ptr + row * stride_t)
    x_t = tl.load(x_row + t * stride_xc).to(tl.float32)
    tl.store(loss_ptr + row, m + tl.log(s) - x_t)


def cross_entropy_fp32_loss(logits, target):
    N, C = logits.shape
    loss = torch.empty(N, dtype=torch.float32, device=logits.device)  # fp32 loss, whatever the logits' dtype
    _xent_fp32_kernel[(N,)](logits, target, loss, C, logits.stride(0), logits.stride(1), target.stride(0),
                            BLOCK_C=min(1024, triton.next_power_of_2(C)))
    return loss


# ---------------------------------------------------------------- Triton: a row kernel that assumes contiguous rows
@triton.jit
def _softmax_rows_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=-float("inf")).to(tl.float32)  # row stride N, unit stride
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * N + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def _softmax_rows(x):
    N = x.shape[-1]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _softmax_rows_kernel[(max(1, x.numel() // max(N, 1)),)](x, y, N, BLOCK_N=triton.next_power_of_2(N))
    return y


def softmax_rows(x):
    """Assumes contiguous input and says so nowhere: right on every contiguous case, silently wrong otherwise."""
    return _softmax_rows(x)


@gpuemu.requires(contiguous=["x"])
def softmax_rows_declared(x):
    """The same kernel, with its callers' guarantee declared (they call .contiguous() one level up)."""
    return _softmax_rows(x)


def softmax_rows_refuses(x):
    """The same kernel, refusing what it cannot handle with a clear exception."""
    if not x.is_contiguous():
        raise ValueError("softmax_rows: x must be contiguous")
    return _softmax_rows(x)
