"""fp8 on the runtime as sm_89+/sm_90 converts it (Triton's interpreter decodes NaN/Inf as numbers and rounds some
encodings wrong): decoding exact, encoding nearest-even and saturating (cvt.rn.satfinite), fp8 dots in fp32."""

import pytest
import torch
import triton
import triton.language as tl

FP8 = [(torch.float8_e4m3fn, tl.float8e4nv, 448.0), (torch.float8_e5m2, tl.float8e5, 57344.0)]


@triton.jit
def _encode(x_ptr, y_ptr, n, DT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m).to(DT), mask=m)


@triton.jit
def _decode(y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(y_ptr + offs, mask=m).to(tl.float32), mask=m)


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, b))


@pytest.mark.parametrize("tdt,ldt,top", FP8)
def test_fp8_encodes_and_decodes_as_the_gpu_does(rt, tdt, ldt, top):
    x = torch.tensor([500., 464., 1.96, 1.0625, -1000., float("nan"), float("inf"), -float("inf"), 60000., 70000.,
                      3e-3, -0.0, 2.0**-9, 2.0**-17, 0.1])
    y = torch.empty(x.numel(), dtype=tdt)
    _encode[(1,)](x, y, x.numel(), DT=ldt, BLOCK=16)
    want = torch.where(x.isnan(), x, x.clamp(-top, top)).to(tdt)  # satfinite: Inf and overflow -> largest finite
    assert torch.equal(y.view(torch.uint8), want.view(torch.uint8))
    every = torch.arange(256, dtype=torch.uint8).view(tdt)
    out = torch.empty(256)
    _decode[(1,)](every, out, 256, BLOCK=256)
    ref = every.float()
    assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out[~ref.isnan()], ref[~ref.isnan()])


@pytest.mark.parametrize("tdt", [FP8[0][0], FP8[1][0]])
def test_an_fp8_dot_is_exact_products_summed_in_fp32(rt, tdt):
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 16, generator=g) * 4).to(tdt), (torch.randn(16, 16, generator=g)).to(tdt)
    c = torch.empty(16, 16)
    _dot[(1,)](a, b, c, N=16)
    ref = a.double() @ b.double()
    assert (c.double() - ref).abs().max() <= 16 * 2.0**-24 * (a.double().abs() @ b.double().abs()).max()
