"""Device arithmetic profiles (issue 37): a framework that flushes subnormals to zero passes when that is its only
difference from fp64, naming the profile; on CUDA the scaled-exp2 ops draw their largest values inside the range
where a GPU's result is determined, with the FMA's allowance in the bound. (CPU unit tests of the rules; the GPU
measurements are bench/gpu_flush_h200.md (flushes) and bench/gpu_arith_h200.md (FMA, approximate math).)"""

from __future__ import annotations

import torch

import gpuemu
from gpuemu import cases
from gpuemu.device_arith import SCALED_EXP2_RANGE, fma_exponent_allowance, flushed_inputs
from gpuemu.engine.generate import within_value_cap
from gpuemu.tolerance import FLT_MIN


def _rmsnorm(x, weight, eps=1e-6):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def _flushing(fn, framework):
    """``fn`` computing as a DAZ/FTZ device does (subnormal inputs read as zero), tagged as a framework's."""
    def launcher(x, weight, eps=1e-6):
        x = torch.where(x.abs() < FLT_MIN, x * 0, x)
        return fn(x, weight, eps)

    launcher.__gpuemu_framework__ = framework
    return launcher


def test_a_flushing_framework_passes_under_its_profile_and_plain_torch_does_not():
    jax_like = gpuemu.fuzz(_flushing(_rmsnorm, "jax"), op="rmsnorm", iterations=60, seed=1, dtypes="fp32",
                           save=False)
    assert jax_like.ok, jax_like.report()
    untagged = _flushing(_rmsnorm, "torch")
    del untagged.__gpuemu_framework__
    plain = gpuemu.fuzz(untagged, op="rmsnorm", iterations=60, seed=1, dtypes="fp32", save=False)
    assert plain.failed and ("got -0" in plain.report() or "got 0" in plain.report()), plain.report()


def test_the_profile_does_not_hide_a_real_bug():
    def wrong(x, weight, eps=1e-6):
        return _rmsnorm(x, weight, eps) * 1.001

    r = gpuemu.fuzz(_flushing(wrong, "tf"), op="rmsnorm", iterations=20, seed=1, dtypes="fp32", save=False)
    assert r.failed


def test_flushed_inputs_zero_only_subnormals():
    x = torch.tensor([1e-39, -1e-40, 1e-37, 0.0, 2.0])
    f = flushed_inputs({"x": x, "n": 3})
    assert torch.equal(f["x"], torch.tensor([0.0, 0.0, 1e-37, 0.0, 2.0])) and torch.signbit(f["x"][1])
    assert flushed_inputs({"x": torch.ones(3)}) is None


def test_cuda_draws_near_max_logits_inside_the_determined_range_past_fp16():
    case = next(c for c in (cases.generate("softmax", s, dtype="bf16") for s in range(2000)) if c.values == "near_max")
    on_cuda = within_value_cap(case, "cuda")
    assert within_value_cap(case, "cpu") is case
    x = cases.materialize(on_cuda)[0]["x"].float().abs()
    assert 65504 < float(x.max()) < SCALED_EXP2_RANGE  # past fp16's range: a bf16 -> fp16 narrowing overflows
    allowance, why = fma_exponent_allowance("softmax", {"x": x}, "cuda")
    assert 0 < allowance < 1 and "FMA" in why
    assert fma_exponent_allowance("softmax", {"x": x}, "cpu") == (0.0, "")
