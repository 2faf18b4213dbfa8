"""An in-place kernel judged against an in-place reference: fused add + RMSNorm as vLLM calls it.

``fused_add_rms_norm(x, residual, weight, eps)`` returns nothing. It writes ``residual <- x + residual`` and
``x <- rmsnorm(x + residual) * weight`` into its arguments. ``reference`` does the same in PyTorch, so gpuemu
sees (by the tensors' version counters, on copies of the example call) that it writes ``x`` and ``residual``: those
are the outputs judged, the kernel's written into copies of the case's tensors.

``fused_add_rms_norm_stale_residual`` carries an LLM-style bug: it normalises correctly but never stores the sum
back into ``residual``. A check of ``x`` after the call (the tensor a test would compare) passes; the next layer
then reads a stale residual.

    gpuemu fuzz examples/inplace/fused_add_rms_norm.py:fused_add_rms_norm_stale_residual \
        --reference examples/inplace/fused_add_rms_norm.py:reference
"""

import torch
import triton
import triton.language as tl

import gpuemu


def reference(x, residual, weight, eps):
    h = x.float() + residual.float()
    residual.copy_(h.to(residual.dtype))
    x.copy_((h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype))


def get_inputs():
    g = torch.Generator().manual_seed(2)
    return [torch.randn(16, 256, generator=g), torch.randn(16, 256, generator=g), torch.randn(256, generator=g), 1e-6]


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, sx, sr, sw, n, eps, BLOCK: tl.constexpr,
                               WRITE_RESIDUAL: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    h = tl.load(x_ptr + row * sx + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * sr + cols, mask=m, other=0.0).to(tl.float32)
    if WRITE_RESIDUAL:
        tl.store(r_ptr + row * sr + cols, h, mask=m)
    w = tl.load(w_ptr + cols * sw, mask=m, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * sx + cols, h * tl.rsqrt(tl.sum(h * h, 0) / n + eps) * w, mask=m)


def _launch(x, residual, weight, eps, write_residual):
    n = x.shape[-1]
    _fused_add_rms_norm_kernel[(x.shape[0],)](x, residual, weight, x.stride(0), residual.stride(0), weight.stride(0),
                                              n, eps, BLOCK=triton.next_power_of_2(n), WRITE_RESIDUAL=write_residual)


@gpuemu.requires(contiguous=["x", "residual"])  # rows are read at x.stride(0) with unit column stride
def fused_add_rms_norm(x, residual, weight, eps):
    _launch(x, residual, weight, eps, True)


@gpuemu.requires(contiguous=["x", "residual"])
def fused_add_rms_norm_stale_residual(x, residual, weight, eps):
    _launch(x, residual, weight, eps, False)
