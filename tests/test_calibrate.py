"""gpuemu calibrate: the fit statistic, the rule pack it writes (provenance included), the CLI, and the
built-in pack being what the command produces."""

import math
from pathlib import Path

import pytest
import torch
import yaml

import gpuemu
from gpuemu import calibrate as cal
from gpuemu import config, ops
from gpuemu.cases import generate, materialize
from gpuemu.rng import derive_seed

ROOT = Path(__file__).resolve().parent.parent


def exact_add(x, y):
    return (x.double() + y.double()).to(x.dtype)


def sloppy_add(x, y):
    """Right to about 2^-18 relative: a 6-bit-short result (rounded through a coarser grid)."""
    s = x.double() + y.double()
    return (s * (1 + 2.0**-18)).to(x.dtype)


def test_fit_is_p95_over_controls_of_their_worst_ratio_times_headroom():
    fits = cal.calibrate("add", controls=[("exact", exact_add), ("sloppy", sloppy_add)], dtypes=["fp32"], samples=8)
    (fit,) = fits
    spec = ops.get("add")
    worst = []
    for fn in (exact_add, sloppy_add):
        ratios = []
        for i in range(8):
            inputs, kw = materialize(generate("add", derive_seed(0, i), dtype="fp32"))
            ratios.append(cal.error_ratio(spec, "fp32", inputs, kw, fn(inputs["x"], inputs["y"])))
        worst.append(max(r for r in ratios if math.isfinite(r)))
    # nearest-rank p95 of two controls is the larger one
    assert fit.rtol == float(f"{max(worst) * cal.HEADROOM:.3g}")
    assert fit.controls == ["exact", "sloppy"] and fit.samples == 16
    assert 2.0**-19 < fit.rtol < 2.0**-15  # the sloppy control's error, not the exact one's


def test_controls_that_raise_give_no_evidence():
    calls = {"n": 0}

    def flaky(x, y):
        calls["n"] += 1
        if calls["n"] % 2:
            raise RuntimeError("boom")
        return exact_add(x, y)

    def broken(x, y):
        raise RuntimeError("always")

    (fit,) = cal.calibrate("add", controls=[("flaky", flaky), ("broken", broken)], dtypes=["fp16"], samples=6)
    assert fit.controls == ["flaky"] and fit.samples == 3


def test_error_ratio_is_the_rtol_a_case_needs():
    spec = ops.get("sum")
    x = torch.tensor([[1.0e4, -1.0e4, 1.0]], dtype=torch.float32)
    out = torch.tensor([1.0 + 2.0**-10])
    # the error 2^-10, less the final rounding every bound allows (2^-24 |ref|), over the condition-aware
    # scale sum|x| = 20001, not over |ref| = 1
    assert cal.error_ratio(spec, "fp32", {"x": x}, {}, out) == pytest.approx((2.0**-10 - 2.0**-24) / 20001, rel=1e-9)


def test_exact_ops_fit_zero_and_rounded_ones_never_below_fp32_roundoff():
    (relu,) = cal.calibrate("relu", dtypes=["fp16"], samples=6)
    assert relu.rtol == 0.0  # no control ever differs: exact, and bounds give it no rounding allowance
    (add,) = cal.calibrate("add", controls=[("exact", exact_add)], dtypes=["fp16"], samples=6)
    assert add.max == 0.0  # every error was the final rounding, which the bound allows on its own
    assert add.rtol == cal.MIN_RTOL


def test_rule_pack_carries_provenance_and_loads(tmp_path):
    fits = cal.calibrate("add", controls=[("sloppy", sloppy_add)], dtypes=["fp32", "fp16"], samples=4, seed=7)
    text = cal.rulepack_yaml(fits, command="gpuemu calibrate --op add", seed=7, samples=4)
    path = tmp_path / "pack.yaml"
    path.write_text(text)
    doc = config.load_yaml(path)  # validated like any rule pack
    prov = doc["provenance"]
    assert prov["seed"] == 7 and prov["samples_per_control"] == 4 and prov["gpuemu"] == gpuemu.__version__
    assert prov["command"] == "gpuemu calibrate --op add" and "p95" in prov["statistic"]
    assert prov["stats"]["add"]["fp32"]["controls"] == ["sloppy"]
    assert doc["tolerances"]["add"]["fp32"]["rtol"] == fits[0].rtol
    # a fuzz run with the pack judges by it
    r = gpuemu.fuzz(sloppy_add, op="add", iterations=6, seed=1, dtypes="fp32", save=False, rulepack=[str(path)])
    assert r.ok, r.report()
    r = gpuemu.fuzz(sloppy_add, op="add", iterations=6, seed=1, dtypes="fp32", save=False)
    assert not r.ok  # the built-in fit for add (an exact control) does not accept the sloppy one


def test_cli_writes_a_pack(tmp_path, capsys, monkeypatch):
    from gpuemu.cli import main

    monkeypatch.chdir(ROOT)
    out = tmp_path / "mine.yaml"
    rc = main(["calibrate", "--op", "mul", "--dtype", "fp32,bf16", "--samples", "5", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    doc = config.load_yaml(out)
    assert set(doc["tolerances"]["mul"]) == {"fp32", "bf16"}
    stats = doc["provenance"]["stats"]["mul"]["bf16"]
    assert stats["controls"] == ["torch:mul"] and stats["evidence"]["torch-eager:mul"]["cases"] == 5
    assert "mul            fp32: rtol=" in err and f"wrote {out}" in err


@pytest.mark.parametrize("args, needle", [
    (["calibrate", "--op", "sofmax"], "did you mean 'softmax'"),
    (["calibrate", "--op", "add", "--samples", "0"], "--samples 0"),
    (["calibrate", "--op", "add", "--dtype", "fp8"], "dtype 'fp8' is not supported"),
    (["calibrate", "--op", "add", "--controls", "nowhere.py:f"], "does not exist"),
])
def test_cli_mistakes_are_one_line_exit_2(args, needle, capsys, monkeypatch):
    from gpuemu.cli import main

    monkeypatch.chdir(ROOT)
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert needle in err.strip().splitlines()[-1]


BUILTIN = ROOT / "rulepacks" / "calibrated.yaml"


def test_builtin_pack_covers_every_op_and_says_how_it_was_made():
    doc = yaml.safe_load(BUILTIN.read_text())
    prov = doc["provenance"]
    assert prov["command"].startswith("gpuemu calibrate --op all --corpus examples/kernels/manifest.yaml")
    for op in ops.names():
        assert set(doc["tolerances"][op]) == {"fp32", "fp16", "bf16"}, op
        assert prov["stats"][op]["fp32"]["controls"][0] == f"torch:{op}"


@pytest.mark.parametrize("op", ["mul", "softplus", "amax"])
def test_builtin_pack_is_what_the_command_produces(op):
    """Ops whose only control is the framework's own op: refit here and compare with the shipped numbers."""
    doc = yaml.safe_load(BUILTIN.read_text())
    prov = doc["provenance"]
    assert prov["stats"][op]["fp32"]["controls"] == [f"torch:{op}"]
    fits = cal.calibrate(op, dtypes=["fp32", "fp16", "bf16"], samples=prov["samples_per_control"], seed=prov["seed"])
    for f in fits:
        assert doc["tolerances"][op][f.dtype]["rtol"] == f.rtol, (op, f.dtype)


def test_fp16_and_bf16_fits_are_never_below_the_fp32_fit():
    # sloppy_add's 2^-18 error hides under fp16's rounding, but its fp32 arithmetic is the same in every dtype
    fits = {f.dtype: f for f in cal.calibrate("add", controls=[("sloppy", sloppy_add)], dtypes=["fp16", "fp32"],
                                              samples=6)}
    assert list(fits) == ["fp32", "fp16"]
    assert fits["fp16"].p95 < fits["fp32"].rtol / 4
    assert fits["fp16"].rtol == fits["fp32"].rtol
