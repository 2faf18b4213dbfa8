"""swiglu(a, b): silu(a) * b. Rows of the last dim (BLOCK_N = min(1024, next_pow2(N)), loop), strided 2-D view."""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------- correct
@triton.jit
def _swiglu_kernel(a_ptr, b_ptr, out_ptr, N, stride_am, stride_an, stride_bm, stride_bn, stride_om,
                   BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        a = tl.load(a_ptr + row * stride_am + offs * stride_an, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + row * stride_bm + offs * stride_bn, mask=mask, other=0.0).to(tl.float32)
        y = a / (1.0 + tl.exp(-a)) * b
        tl.store(out_ptr + row * stride_om + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def swiglu(a, b):
    N = a.shape[-1]
    a2, b2 = a.reshape(-1, N), b.reshape(-1, N)
    out = torch.empty((a2.shape[0], N), dtype=a.dtype, device=a.device)
    _swiglu_kernel[(a2.shape[0],)](a2, b2, out, N, a2.stride(0), a2.stride(1), b2.stride(0), b2.stride(1),
                                   out.stride(0), BLOCK_N=min(1024, triton.next_power_of_2(N)))
    return out.reshape(a.shape)


# ---------------------------------------------------------------- buggy: b assumed contiguous
@triton.jit
def _swiglu_b_contig_kernel(a_ptr, b_ptr, out_ptr, N, stride_am, stride_an, stride_om, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        a = tl.load(a_ptr + row * stride_am + offs * stride_an, mask=mask, other=0.0).to(tl.float32)
        # BUG: the gate input b is addressed as contiguous (row * N + col); a strided / transposed b is misread
        b = tl.load(b_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        y = a / (1.0 + tl.exp(-a)) * b
        tl.store(out_ptr + row * stride_om + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def swiglu_b_stride(a, b):
    N = a.shape[-1]
    a2, b2 = a.reshape(-1, N), b.reshape(-1, N)
    out = torch.empty((a2.shape[0], N), dtype=a.dtype, device=a.device)
    _swiglu_b_contig_kernel[(a2.shape[0],)](a2, b2, out, N, a2.stride(0), a2.stride(1), out.stride(0),
                                            BLOCK_N=min(1024, triton.next_power_of_2(N)))
    return out.reshape(a.shape)
