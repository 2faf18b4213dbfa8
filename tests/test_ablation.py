"""The ablation behind the defaults: same seed, same tables; the regimes judge the same outputs; outputs written."""

import json

import torch

from gpuemu import ablation
from gpuemu.ablation import REGIMES, Subject


def good_exp(x):
    return torch.exp(x.float()).to(x.dtype)


def short_log2e_exp(x):  # right to ~5 digits: the class a fixed rtol on |ref| cannot see
    return torch.exp2(x.float() * 1.4427).to(x.dtype)


def tail_zero_sum(x):  # drops the last element once a row is longer than 16
    n = x.shape[-1]
    s = x.float()[..., : 16 * (n // 16) if n > 16 else n].sum(-1)
    return s.to(x.dtype)


def good_sum(x):
    return x.float().sum(-1).to(x.dtype)


SUBJECTS = [Subject("good_exp", "exp", True, good_exp), Subject("short_log2e", "exp", False, short_log2e_exp, "precision"),
            Subject("good_sum", "sum", True, good_sum), Subject("tail_zero", "sum", False, tail_zero_sum, "tail-mask leak")]


def test_same_seed_same_tables():
    a = ablation.strategy_ablation(SUBJECTS, iterations=4, seed=3)
    b = ablation.strategy_ablation(SUBJECTS, iterations=4, seed=3)
    assert a == b
    assert set(a) == set(ablation.STRATEGIES)
    ra = ablation.tolerance_ablation(SUBJECTS, iterations=9, seed=3)
    assert ra == ablation.tolerance_ablation(SUBJECTS, iterations=9, seed=3)


def test_regimes_on_the_same_outputs():
    res = ablation.tolerance_ablation(SUBJECTS, iterations=9, seed=3)
    rows = {r["subject"]: r for r in res["rows"]}
    assert rows["short_log2e"]["calibrated"] and not rows["short_log2e"][REGIMES[0]]
    assert not rows["good_exp"]["calibrated"] and not rows["good_sum"]["calibrated"]
    assert rows["tail_zero"]["calibrated"]
    cal = res["calibrated"]["summary"]
    assert (cal["caught"], cal["buggy"], cal["false_positives"], cal["controls"]) == (2, 2, 0, 2)


def test_run_writes_json_and_markdown(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation, "subjects", lambda manifest=None: SUBJECTS)
    result = ablation.run(iterations=3, seed=5, out=tmp_path)
    doc = json.loads((tmp_path / "ablation.json").read_text())
    assert doc["buggy"] == 2 and doc["controls"] == 2 and doc["seed"] == 5
    md = (tmp_path / "ablation.md").read_text()
    assert md == ablation.render(result)
    assert "(a) strategies" in md and "(b) tolerance regimes" in md and "| calibrated |" in md
    assert "disagree (FAIL: some case failed" in md and "| short_log2e | bug: precision |" in md
    first = (tmp_path / "ablation.json").read_bytes()
    ablation.run(iterations=3, seed=5, out=tmp_path)
    assert (tmp_path / "ablation.json").read_bytes() == first


def test_cli_needs_the_flag(capsys):
    from gpuemu.cli import main

    assert main(["bench"]) == 2
    assert "needs --ablation" in capsys.readouterr().err


def test_a_launch_the_gpu_refuses_is_no_false_positive_of_any_regime():
    # the corpus's refusal control: right wherever it launches, refused past N = 512 (a LIMIT, not a wrong number)
    from gpuemu.target import load

    refusing = Subject("softmax_warps_per_row", "softmax", True, load("examples/kernels/limits.py:softmax_warps_per_row"))
    res = ablation.tolerance_ablation([refusing], iterations=30, seed=3)
    assert not any(res["rows"][0][k] for k in REGIMES[3:]), res["rows"][0]
