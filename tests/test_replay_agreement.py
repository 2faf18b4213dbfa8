"""The agreement line of a replay on another device: verdict classes, not bits (issue 37)."""

from __future__ import annotations

from gpuemu.fuzzer import Replay
from gpuemu.oracle import FAIL, PASS, REJECTED, Verdict


def _replay(here: Verdict, stored: Verdict) -> Replay:
    return Replay(record={"device": "cpu"}, case=None, verdict=here, stored=stored, failure=None)


def test_the_same_class_and_symptom_agree():
    agree, line = _replay(Verdict(FAIL, "mismatch"), Verdict(FAIL, "mismatch")).agreement("cuda")
    assert agree and line == "cpu: FAIL mismatch · cuda: FAIL mismatch · the devices agree"


def test_a_fail_by_another_symptom_agrees_on_the_class_and_names_both():
    # layernorm_naive_var on an H100: a mismatch on the CPU, NaN on the GPU
    agree, line = _replay(Verdict(FAIL, "nonfinite"), Verdict(FAIL, "mismatch")).agreement("cuda")
    assert agree and line.endswith("the devices agree on FAIL (the symptom differs: mismatch on cpu, nonfinite on cuda)")


def test_another_class_disagrees():
    for here in (Verdict(PASS), Verdict(REJECTED, "undetermined")):
        agree, line = _replay(here, Verdict(FAIL, "mismatch")).agreement("cuda")
        assert not agree and line.endswith("the devices DISAGREE")
    agree, line = _replay(Verdict(FAIL, "mismatch"), Verdict(FAIL, "mismatch")).agreement("cpu")
    assert agree and line.endswith("the runs agree")
