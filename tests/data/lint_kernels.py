"""Kernels for the lint tests: zero-argument example launchers, so no op schema is needed.

``scale_rows_example`` keeps a whole row of BLOCK fp32 values live across a reduction with one warp: at
BLOCK = 1024 that is 32 values per thread (no spills); the planted regression sets BLOCK = 8192 (256 per
thread, more than the 255 registers a thread can have: ptxas spills). Tests copy this file and edit BLOCK.
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _scale_rows_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0.0).to(tl.float32)
    y = x * tl.sum(x, axis=0)  # x stays live across the reduction
    tl.store(y_ptr + row * N + offs, y.to(y_ptr.dtype.element_ty), mask=offs < N)


def scale_rows_example():
    x = torch.randn(8, BLOCK, dtype=torch.float16)
    y = torch.empty_like(x)
    _scale_rows_kernel[(8,)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=1)
    return y


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add_example():
    x = torch.randn(4096, dtype=torch.float16)
    out = torch.empty_like(x)
    _add_kernel[(4,)](x, x, out, x.numel(), BLOCK=1024)
    return out


@triton.jit
def _fp64_sum_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < N, other=0.0).to(tl.float64)  # accidental promotion
    tl.store(out_ptr, tl.sum(x * x, axis=0).to(tl.float32))


def fp64_example():
    x = torch.randn(1024, dtype=torch.float16)
    out = torch.empty(1, dtype=torch.float32)
    _fp64_sum_kernel[(1,)](x, out, x.numel(), BLOCK=1024)
    return out


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b).to(tl.float16))


def dot_example():
    a = torch.randn(32, 32, dtype=torch.float16)
    c = torch.empty_like(a)
    _dot_kernel[(1,)](a, a, c, BLOCK=32)
    return c


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 512}, num_warps=4)],
                 key=["N"])
@triton.jit
def _tuned_copy_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N), mask=offs < N)


def tuned_copy_example():
    x = torch.randn(2048, dtype=torch.float32)
    y = torch.empty_like(x)
    _tuned_copy_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y


@triton.jit
def _fp8_upcast_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))


def fp8_example():
    """fp8 e4m3 has no conversion instructions before sm_89: Triton refuses to compile it for sm_80."""
    x = torch.zeros(128, dtype=torch.float8_e4m3fn)
    y = torch.empty(128, dtype=torch.float32)
    _fp8_upcast_kernel[(1,)](x, y, BLOCK=128)
    return y
