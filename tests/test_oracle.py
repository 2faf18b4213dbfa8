"""The comparison core and the hygiene checks, each with a launcher that has exactly that defect."""

import math

import pytest
import torch

from gpuemu import ops
from gpuemu.cases import Case
from gpuemu.oracle import ERROR, FAIL, PASS, Oracle, Verdict
from gpuemu.tolerance import Tolerance

ORACLE = Oracle.default()
SOFTMAX = Case(op="softmax", dtype="fp32", dims={"N": 33}, seed=5, batch=(4,))
SOFTMAX16 = SOFTMAX.replace(dtype="fp16")


def good_softmax(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def test_correct_launcher_passes():
    v = ORACLE.evaluate(good_softmax, SOFTMAX).verdict
    assert v.status == PASS, v.message
    assert ORACLE.evaluate(good_softmax, SOFTMAX16).verdict.status == PASS


def test_mismatch_report_reads_like_assert_close():
    def off_by_a_bit(x):
        y = good_softmax(x)
        y[1, 7] += 0.01
        return y

    v = ORACLE.evaluate(off_by_a_bit, SOFTMAX).verdict
    assert v.status == FAIL and v.kind == "mismatch"
    assert v.index == (1, 7) and v.mismatched == 1 and v.numel == 4 * 33
    assert v.message.startswith("max abs err 0.01 > tol")
    assert "Mismatched elements: 1 / 132" in v.detail and "at index [1,7]" in v.detail
    assert math.isclose(v.max_abs_err, 0.01, rel_tol=1e-3)


def test_unwritten_output_is_poisoned_not_a_lucky_zero():
    def skips_last_column(x):
        y = torch.empty_like(x)
        y[..., :-1] = good_softmax(x)[..., :-1]
        return y  # the last column is whatever empty() gave: NaN under gpuemu

    case = SOFTMAX.replace(values="zeros")  # softmax of zeros is not zero, but zeros would be the lucky value
    v = ORACLE.evaluate(skips_last_column, case).verdict
    assert v.status == FAIL and v.kind == "nonfinite"


def test_input_mutation_is_a_failure():
    def in_place(x):
        x.mul_(1.0001)
        return good_softmax(x)

    v = ORACLE.evaluate(in_place, SOFTMAX).verdict
    assert v.kind == "mutation" and "'x'" in v.message


def test_write_into_the_gap_of_a_strided_input_is_mutation():
    def writes_gap(x):
        x.untyped_storage()  # noqa: B018
        base = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
        base[-1] = 0.0  # the guard after the view
        return good_softmax(x)

    v = ORACLE.evaluate(writes_gap, SOFTMAX.replace(layouts={"x": "strided"})).verdict
    assert v.kind == "mutation"


def test_nondeterminism_is_reported():
    calls = []

    def noisy(x):
        calls.append(1)
        y = good_softmax(x)
        return y + (len(calls) % 2) * 1e-3

    v = ORACLE.evaluate(noisy, SOFTMAX).verdict
    assert v.kind == "nondeterministic"


def test_output_aliasing_an_input():
    v = ORACLE.evaluate(lambda x: x.softmax(-1, out=None) if False else x, SOFTMAX).verdict
    assert v.kind == "alias" and "'x'" in v.message


def test_cached_output_buffer():
    cache = {}

    def cached(x):
        buf = cache.setdefault("y", torch.empty_like(x))
        buf.copy_(good_softmax(x))
        return buf

    v = ORACLE.evaluate(cached, SOFTMAX).verdict
    assert v.kind == "alias" and "same buffer" in v.message


def test_launcher_that_raises_before_any_launch_refuses_the_input():
    def boom(x):
        raise RuntimeError("kernel exploded")

    v = ORACLE.evaluate(boom, SOFTMAX).verdict
    assert (v.status, v.kind) == ("rejected", "refusal") and "RuntimeError: kernel exploded" in v.message


@pytest.mark.parametrize("bad,kind", [
    (lambda x: good_softmax(x)[..., :-1], "shape"),
    (lambda x: good_softmax(x).double(), "dtype"),
    (lambda x: good_softmax(x).tolist(), "type"),
])
def test_wrong_output_shape_dtype_type(bad, kind):
    v = ORACLE.evaluate(bad, SOFTMAX).verdict
    assert v.status == FAIL and v.kind == kind
    assert "expected" in v.message


def test_nonfinite_where_reference_is_finite():
    def nan_out(x):
        y = good_softmax(x)
        y[0, 0] = float("inf")
        return y

    v = ORACLE.evaluate(nan_out, SOFTMAX).verdict
    assert v.kind == "nonfinite" and "inf" in v.message


def test_overflow_to_inf_is_accepted_where_the_exact_result_exceeds_the_dtype():
    spec = ops.get("add")
    big = torch.full((4,), 60000.0, dtype=torch.float16)
    out = big.float().add(big.float()).half()  # inf: 120000 does not fit fp16
    v = ORACLE.compare(spec, "fp16", {"x": big, "y": big}, {}, out)
    assert v.status == PASS


def test_all_near_zero_output_never_passes_on_atol_alone():
    spec = ops.get("mul")
    x = torch.full((8,), 1e-20)
    y = torch.full((8,), 1e-20)  # product 1e-40: an fp32 subnormal, so zeros are wrong
    tol = Tolerance(rtol=1e-5, atol=1e-30)
    assert ORACLE.compare(spec, "fp32", {"x": x, "y": y}, {}, torch.zeros(8), tol=tol).status == FAIL
    assert ORACLE.compare(spec, "fp32", {"x": x, "y": y}, {}, x * y, tol=tol).status == PASS
    x = torch.full((8,), 1e-30)  # product 1e-60 is below fp32's range: 0 is the correctly rounded result
    assert ORACLE.compare(spec, "fp32", {"x": x, "y": x}, {}, torch.zeros(8), tol=tol).status == PASS
    x = torch.full((8,), 1e-3)
    y = torch.full((8,), 1e-3)
    v = ORACLE.compare(spec, "fp32", {"x": x, "y": y}, {}, torch.zeros(8), tol=Tolerance(rtol=1e-5, atol=1e-5))
    assert v.status == FAIL  # every |ref| (1e-6) is below atol: atol is dropped


def test_index_outputs_must_match_exactly():
    spec = ops.get("argmax")
    x = torch.tensor([[0.0, 2.0, 2.0], [1.0, 0.0, 0.0]])
    assert ORACLE.compare(spec, "fp32", {"x": x}, {}, torch.tensor([1, 0])).status == PASS
    v = ORACLE.compare(spec, "fp32", {"x": x}, {}, torch.tensor([2, 0]))
    assert v.status == FAIL and "got 2, expected 1" in v.message


def test_mpmath_guard_overrules_a_wrong_fp64_reference():
    spec = ops.get("sum")
    a = float(torch.tensor(1e16, dtype=torch.float32))
    x = torch.tensor([[a, 1.0, -a]], dtype=torch.float32)  # fp64 summation loses the 1
    tol = Tolerance(rtol=0.0, atol=1e-3)
    v = ORACLE.compare(spec, "fp32", {"x": x}, {}, torch.tensor([1.0]), tol=tol)
    assert v.status == PASS and v.reference == "fp64+mpmath"
    strict = Oracle(ORACLE.tolerances, framework_factor=0)  # without the framework rule: see the next test
    v = strict.compare(spec, "fp32", {"x": x}, {}, torch.tensor([0.0]), tol=tol)
    assert v.status == FAIL  # agrees with fp64 but not with the exact value


def test_no_further_from_fp64_than_pytorch_eager_passes():
    # x.sum(-1) in fp32 loses the 1 as fp64 does: a kernel exactly as wrong as eager passes, on that basis
    spec = ops.get("sum")
    a = float(torch.tensor(1e16, dtype=torch.float32))
    x = torch.tensor([[a, 1.0, -a]], dtype=torch.float32)
    tol = Tolerance(rtol=0.0, atol=1e-3)
    v = ORACLE.compare(spec, "fp32", {"x": x}, {}, torch.tensor([0.0]), tol=tol)
    assert v.status == PASS and v.basis == "framework" and "PyTorch eager" in v.detail
    # twice eager's error is the limit (torch's accuracy-minifier rule): 2.5x further is a FAIL
    v = ORACLE.compare(spec, "fp32", {"x": x}, {}, torch.tensor([-1.5]), tol=tol)
    assert v.status == FAIL and v.basis == "bound"


def test_verdict_round_trips():
    v = ORACLE.evaluate(lambda x: good_softmax(x) * 1.01, SOFTMAX).verdict
    assert Verdict.from_dict(v.to_dict()) == v


def test_verdict_of_a_0d_output_round_trips():
    # argmax of one row: the failing element sits at index () -- stored as [], it must come back as (), not None
    # (reproduce compared () with None and said "NOT reproduced" for a bit-for-bit replay)
    v = Verdict(FAIL, "mismatch", "index mismatch: got 3, expected 0 at []", index=())
    assert Verdict.from_dict(v.to_dict()).index == ()


# ---------------------------------------------------------------- the mpmath guard's cost is bounded


def _counting(spec, calls):
    import dataclasses

    def element(inputs, kwargs, index):
        calls.append(tuple(index))
        return spec.mp_element(inputs, kwargs, index)

    return dataclasses.replace(spec, mp_element=element)


def test_mpmath_guard_skips_mismatches_fp64_cannot_explain():
    # a log_softmax off by 0.5 everywhere on long rows, and one with inf in every row: fp64's error there is
    # ~1e-12, so no 50-digit row (N mpmath exps each) is computed, and the verdict is FAIL
    calls: list = []
    spec = _counting(ops.get("log_softmax"), calls)
    x = torch.randn(4, 8192, generator=torch.Generator().manual_seed(0))
    good = torch.log_softmax(x.double(), -1).float()
    for wrong in (good + 0.5, torch.where(torch.arange(8192) % 7 == 0, math.inf, good)):
        v = ORACLE.compare(spec, "fp32", {"x": x}, {}, wrong)
        assert v.status == FAIL
        assert v.seconds["mpmath"] >= 0.0
    assert calls == []


def test_mpmath_guard_checks_at_most_a_few_elements_and_hides_no_bug():
    # every row's fp64 sum loses the 1 (out = 1 is exact), except row 5, where the kernel is plainly wrong
    from gpuemu.oracle import MP_CHECKS

    calls: list = []
    spec = _counting(ops.get("sum"), calls)
    a = float(torch.tensor(1e16, dtype=torch.float32))
    x = torch.tensor([[a, 1.0, -a]] * 8, dtype=torch.float32)
    x[5] = torch.tensor([1.0, 2.0, 3.0])
    out = torch.ones(8)
    out[5] = 100.0
    strict = Oracle(ORACLE.tolerances, framework_factor=0)
    tol = Tolerance(rtol=0.0, atol=1e-3)
    v = strict.compare(spec, "fp32", {"x": x}, {}, out, tol=tol)
    # the reference's shakiest elements are recomputed first (MP_CHECKS of them); of the mismatches, row 5 is
    # the worst against its bound and its error (94) is far past what fp64 could be off by there: FAIL, no more
    assert len(calls) == MP_CHECKS and (5,) not in calls
    assert v.status == FAIL and v.index == (5,) and v.mismatched == 8 - MP_CHECKS
    calls.clear()
    out[5] = 6.0  # row 5 right: the guard clears the worst rows with mpmath, at most MP_CHECKS of them
    v = strict.compare(spec, "fp32", {"x": x}, {}, out, tol=tol)
    assert len(calls) == 2 * MP_CHECKS and v.reference == "fp64+mpmath"
    assert v.status == FAIL and v.mismatched == 7 - 2 * MP_CHECKS  # a bound: 7 rows need it, 6 were checked
    x = x[:6]  # rows 0-4 need mpmath, row 5 is right: 2 * MP_CHECKS >= 5 checks clear every mismatch
    assert strict.compare(spec, "fp32", {"x": x}, {}, out[:6], tol=tol).status == PASS


def test_row_wise_mpmath_checks_compute_each_row_once(monkeypatch):
    import mpmath

    from gpuemu.ops import _defs

    exps = []
    real_exp = mpmath.exp
    monkeypatch.setattr(_defs.mpmath, "exp", lambda v: exps.append(1) or real_exp(v))
    x = torch.randn(2, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).numpy()
    for name, args in (("log_softmax", {"x": x}), ("softmax", {"x": x}), ("logsumexp", {"x": x})):
        exps.clear()
        spec = ops.get(name)
        with mpmath.workdps(50):
            for j in range(64 if name != "logsumexp" else 1):
                spec.mp_element(args, {}, (1, j) if name != "logsumexp" else (1,))
        assert len(exps) <= 64, (name, len(exps))  # one row's exps, not one row per element


def test_the_guards_time_is_reported_apart_from_the_comparison():
    import gpuemu

    v = ORACLE.compare(ops.get("log_softmax"), "fp32", {"x": torch.randn(3, 40)}, {}, torch.zeros(3, 40))
    assert v.status == FAIL and {"reference", "compare", "mpmath"} <= set(v.seconds)
    assert min(v.seconds.values()) >= 0.0
    r = gpuemu.fuzz(lambda x: torch.log_softmax(x.float(), -1).to(x.dtype), op="log_softmax", iterations=3, seed=1,
                    save=False)
    assert "mpmath" in r.timings and "mpmath" in r.to_dict()["timings"]
