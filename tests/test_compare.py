"""The comparison core (gpuemu.compare): pure functions of tensors, no OpSpec."""

import math

import pytest
import torch

from gpuemu.compare import FAIL, PASS, compare, compare_index, elementwise_error, judge
from gpuemu.tolerance import Tolerance


def _slow_error(out, ref, dtype):
    """The non-finite rules written out element by element (the specification the fast path must match)."""
    fmax = {"fp32": torch.finfo(torch.float32).max, "fp16": 65504.0, "bf16": torch.finfo(torch.bfloat16).max}[dtype]
    res = []
    for o, r in zip(out.tolist(), ref.tolist()):
        if math.isnan(o) and math.isnan(r):
            res.append(0.0)
        elif math.isinf(r) and o == r:
            res.append(0.0)
        elif math.isfinite(r) and abs(r) > fmax and ((math.isinf(o) and math.copysign(1, o) == math.copysign(1, r))
                                                     or abs(o) >= fmax):
            res.append(0.0)
        elif not (math.isfinite(o) and math.isfinite(r)):
            res.append(math.inf)
        else:
            res.append(abs(o - r))
    return torch.tensor(res, dtype=torch.float64)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_elementwise_error_matches_the_rules(dtype):
    specials = [0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 7e4, -7e4, 65504.0, 3.5e38, 1e300]
    out = torch.tensor([a for a in specials for _ in specials], dtype=torch.float64)
    ref = torch.tensor([b for _ in specials for b in specials], dtype=torch.float64)
    assert torch.equal(elementwise_error(out, ref, dtype), _slow_error(out, ref, dtype))
    finite = torch.randn(1000, dtype=torch.float64)
    assert torch.equal(elementwise_error(finite, finite * 1.001, dtype), _slow_error(finite, finite * 1.001, dtype))


def test_compare_pass_and_fail_report():
    ref = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    bound = torch.full_like(ref, 1e-3)
    assert compare(ref + 1e-4, ref, bound).status == PASS
    out = ref.clone()
    out[1, 0] += 0.5
    v = compare(out, ref, bound, bound_doc="Bound: test")
    assert v.status == FAIL and v.kind == "mismatch" and v.index == (1, 0) and v.mismatched == 1
    assert v.message == "max abs err 0.5 > tol 0.001"
    assert v.detail.splitlines()[0] == "Mismatched elements: 1 / 4 (25.0%)"
    assert "Bound: test" in v.detail


def test_compare_nonfinite_and_hooks():
    ref = torch.ones(3, dtype=torch.float64)
    out = torch.tensor([1.0, math.nan, 1.0], dtype=torch.float64)
    v = compare(out, ref, torch.full_like(ref, 1e-6))
    assert v.kind == "nonfinite" and v.index == (1,)
    assert "Non-finite output where the reference is finite: 1 elements" in v.detail
    cleared = compare(out, ref, torch.full_like(ref, 1e-6), recheck=lambda o, r, b, bad: (bad & False, "rechecked"))
    assert cleared.status == PASS and cleared.reference == "fp64+mpmath"
    rescued = compare(ref * 2, ref, torch.full_like(ref, 1e-6), rescue=lambda worst: f"worst {worst:g}")
    assert rescued.status == PASS and rescued.basis == "framework" and rescued.detail.startswith("worst")


def test_compare_index():
    ref = torch.tensor([0, 3, 1])
    assert compare_index(ref.clone(), ref).status == PASS
    v = compare_index(torch.tensor([0, 2, 1]), ref)
    assert v.status == FAIL and v.index == (1,) and v.message == "index mismatch: got 2, expected 3 at [1]"


def test_judge_without_an_opspec():
    ref = torch.linspace(-1, 1, 10, dtype=torch.float64)
    tol = Tolerance(1e-5, 1e-6)
    assert judge(ref.float(), ref, dtype="fp32", tol=tol).status == PASS
    v = judge(ref.float() + 1e-2, ref, dtype="fp32", tol=tol, scale_doc="|ref|", signature="graph")
    assert v.status == FAIL and "scale = |ref|" in v.detail
    assert judge(ref.half(), ref, dtype="fp32", tol=tol).kind == "dtype"
    assert "(graph)" in judge(ref[:3].float(), ref, dtype="fp32", tol=tol, signature="graph").message
