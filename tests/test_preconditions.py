"""Correct as the field means it: preconditions (declared or found), refusals, wider outputs, eager forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import gpuemu
from gpuemu import ops
from gpuemu.calibrate import eager_control
from gpuemu.oracle import FAIL, PASS, PRECONDITION, Oracle
from gpuemu.preconditions import Requires, parse_cli
from gpuemu.target import load

ROOT = Path(__file__).resolve().parent.parent
FIELD = ROOT / "examples" / "kernels" / "field.py"


def field(name):
    return load(f"{FIELD}:{name}")


def test_declared_contiguity_draws_no_strided_case_and_passes():
    seen = []
    r = gpuemu.fuzz(field("softmax_rows_declared"), op="softmax", iterations=40, seed=5, save=False,
                    on_case=lambda i, case, v: seen.append(case.layouts["x"]))
    assert r.ok and r.passed == 40, r.report()
    assert set(seen) == {"contiguous"}
    assert r.requires["contiguous"] == ["x"]


def test_undeclared_contiguity_is_a_precondition_verdict_not_a_fail(tmp_path):
    r = gpuemu.fuzz(field("softmax_rows"), op="softmax", iterations=40, seed=5, store=tmp_path)
    assert not r.failed, r.report()  # no numerical FAIL: the kernel is right on every contiguous case
    assert r.preconditions and r.precondition_cases == len(r.failures)
    first = r.preconditions[0]
    assert first.verdict.status == PRECONDITION
    assert first.line().startswith("PRECONDITION seed=")
    assert "x must be contiguous: silently wrong otherwise" in first.verdict.message
    assert "@gpuemu.requires(contiguous=['x'])" in first.verdict.detail and ".contiguous()" in first.verdict.detail
    assert first.record is not None  # stored, so it replays like any failure
    assert not r.ok  # the default policy: an undeclared precondition fails the run
    assert "PRECONDITION" in r.summary()
    warned = gpuemu.fuzz(field("softmax_rows"), op="softmax", iterations=40, seed=5, save=False, preconditions="warn")
    assert warned.ok and warned.preconditions


def _softmax_strided_and_single(x):
    """Wrong for non-contiguous inputs, and for rows of one element whatever the layout."""
    y = torch.softmax(x.double(), -1).to(x.dtype)
    if not x.is_contiguous():
        y = y * 1.5
    if x.shape[-1] == 1:
        y = y * 1.5
    return y


def test_a_precondition_whose_shrunk_case_fails_contiguous_too_is_a_fail():
    """Shrinking keeps the failure, not its layout: seed 7's first failure is a padded row of 59 whose contiguous twin
    passes (PRECONDITION); it shrinks to one element, where the contiguous twin fails too. That shrunk case is the
    kernel's own FAIL, counted as one, not the unshrunk case's layout assumption with a stride hint."""
    r = gpuemu.fuzz(_softmax_strided_and_single, op="softmax", iterations=40, seed=7, dtypes=("fp32",), save=False)
    first = r.failures[0]
    assert first.original is not None and first.original.layouts["x"] != "contiguous"  # classified on that case
    assert first.case.dims["N"] == 1 and first.verdict.status == FAIL, first.line()
    assert "stride bug suspected" not in (first.hint or "") and "must be contiguous" not in first.verdict.message
    assert r.precondition_cases == sum(1 for f in r.failures if f.verdict.status == PRECONDITION)
    assert not r.ok and first in r.failed


def test_a_clear_refusal_is_rejected_input_not_an_error():
    r = gpuemu.fuzz(field("softmax_rows_refuses"), op="softmax", iterations=40, seed=5, save=False)
    assert r.ok and not r.failures, r.report()
    assert r.rejected > 0 and r.passed == 40
    assert "rejects non-contiguous input" in r.summary() and "x must be contiguous" in r.summary()


def test_any_exception_on_the_host_before_a_launch_is_a_refusal():
    """The one refusal rule: whatever its type (an IndexError here, not a ValueError), raised before any kernel ran,
    the launcher refused the input: loud, no wrong answer ships from it."""
    def crashes_on_strides(x):
        if not x.is_contiguous():
            return x.view(-1)[10**9]
        return torch.softmax(x, -1)

    r = gpuemu.fuzz(crashes_on_strides, op="softmax", iterations=30, seed=5, save=False)
    assert r.ok and not r.failed and r.rejected == r.refused > 0, r.report()
    assert "IndexError" in r.rejected_reason and "rejects non-contiguous input" in r.rejected_reason


def test_a_real_stride_bug_with_wrong_contiguous_results_stays_a_fail():
    def wrong_everywhere(x):
        out = torch.softmax(x.contiguous(), -1)
        return out * 1.01

    r = gpuemu.fuzz(wrong_everywhere, op="softmax", iterations=20, seed=5, save=False)
    assert r.failed and not r.preconditions


def test_launcher_errors_point_at_the_launchers_line():
    def needs_2d(x):
        out = torch.empty_like(x)
        _ = out.stride(-2)  # IndexError on a 1-D input, raised through gpuemu's poisoning mode
        return torch.softmax(x, -1)

    r = gpuemu.fuzz(needs_2d, op="softmax", iterations=30, seed=3, save=False)
    assert r.refused, r.report()  # raised on the host before any launch: a refusal, located at the launcher's line
    assert f"{Path(__file__).name}:" in r.rejected_reason and "poison.py" not in r.rejected_reason


def test_divisible_max_and_dtypes_preconditions_shape_the_cases():
    seen = []

    @gpuemu.requires(divisible={"N": 16}, max_dims={"N": 64}, dtypes=["fp16"])
    def softmax(x):
        return torch.softmax(x.float(), -1).to(x.dtype)

    r = gpuemu.fuzz(softmax, op="softmax", iterations=30, seed=1, save=False,
                    on_case=lambda i, case, v: seen.append((case.dims["N"], case.dtype)))
    assert r.ok, r.report()
    assert all(n % 16 == 0 and n <= 64 and dt == "fp16" for n, dt in seen), seen


def test_cli_requires_and_policy(tmp_path, capsys, monkeypatch):
    from gpuemu.cli import main

    monkeypatch.chdir(tmp_path)
    target = f"{FIELD}:softmax_rows"
    base = ["fuzz", target, "--op", "softmax", "-n", "30", "--seed", "5", "--store", str(tmp_path / "s")]
    assert main(base + ["--json", str(tmp_path / "r.json")]) == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["precondition"] > 0 and doc["failed"] == 0
    assert doc["failures"][0]["line"].startswith("PRECONDITION")
    assert main(base + ["--preconditions", "warn"]) == 0
    assert main(base + ["--requires", "contiguous=x"]) == 0
    capsys.readouterr()
    assert main(base + ["--requires", "contiguous=nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no argument 'nope'" in err[0]
    assert main(base + ["--requires", "divisible=N"]) == 2


def test_project_file_declares_preconditions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuemu.yaml").write_text(f'requires:\n  "*field.py:softmax_rows": {{contiguous: [x]}}\n')
    r = gpuemu.fuzz(field("softmax_rows"), op="softmax", iterations=30, seed=5, save=False,
                    target=f"{FIELD}:softmax_rows")
    assert r.ok and not r.preconditions, r.report()
    (tmp_path / "gpuemu.yaml").write_text('requires:\n  "x.py:f": {contiguous: [x], bogus: 1}\n')
    with pytest.raises(gpuemu.GpuemuError, match="requires.x.py:f: unknown key 'bogus'"):
        gpuemu.fuzz(field("softmax_rows"), op="softmax", iterations=1, save=False)


def test_parse_cli():
    assert parse_cli(["contiguous"]).contiguous == ("*",)
    req = parse_cli(["contiguous=x,weight", "divisible=N:8", "max=N:4096", "dtypes=fp16,bf16"])
    assert req == Requires(contiguous=("x", "weight"), dtypes=("fp16", "bf16"), divisible={"N": 8},
                           max_dims={"N": 4096})


def test_wider_outputs_per_op():
    oracle = Oracle.default()
    logits = torch.randn(4, 33).half()
    target = torch.randint(0, 33, (4,))
    xent = ops.get("cross_entropy")
    fp32_loss = F.cross_entropy(logits.float(), target, reduction="none")
    assert oracle.compare(xent, "fp16", {"logits": logits, "target": target}, {}, fp32_loss).status == PASS
    # a less precise output is a failure, and so is a wider one where the op does not allow it
    x = torch.randn(4, 33)
    v = oracle.compare(ops.get("sum"), "fp32", {"x": x}, {}, x.sum(-1).half())
    assert v.status == FAIL and v.kind == "dtype"
    xh = x.half()
    v = oracle.compare(ops.get("softmax"), "fp16", {"x": xh}, {}, torch.softmax(xh.float(), -1))
    assert v.status == FAIL and v.kind == "dtype"
    # a wider output is still judged: an fp32 loss off by more than fp16 eager code could be fails
    coarse = fp32_loss + 0.05
    assert oracle.compare(xent, "fp16", {"logits": logits, "target": target}, {}, coarse).status == FAIL


STRICT_PACK = ROOT / "bench" / "soak_strict.yaml"  # the 2x-eager rule off: eager would pass it trivially


@pytest.mark.parametrize("op", ops.names())
def test_pytorch_eager_form_of_every_op_passes_on_the_bound_alone(op):
    r = gpuemu.fuzz(eager_control(op), op=op, iterations=24, seed=11, save=False, target=f"torch-eager:{op}",
                    rulepack=[str(STRICT_PACK)])
    assert r.ok, r.report()
    assert r.framework_passes == 0


def test_eager_roundings_fail_without_their_allowance():
    """The allowance is what makes eager pass (not a blanket loosening): without it these cases fail."""
    import dataclasses

    from gpuemu.cases import generate, materialize
    from gpuemu.rng import derive_seed

    strict = Oracle(Oracle.default().tolerances, framework_factor=0)
    for op in ("swiglu", "rmsnorm", "rope"):
        spec = ops.get(op)
        bare = dataclasses.replace(spec, rounded=None)
        failed = 0
        for i in range(12):
            inputs, kw = materialize(generate(op, derive_seed(3, i), dtype="fp16"))
            out = spec.eager(*[inputs[a.name] for a in spec.args], **kw)
            assert strict.compare(spec, "fp16", inputs, kw, out).status == PASS
            failed += strict.compare(bare, "fp16", inputs, kw, out).status == FAIL
        assert failed >= 3, (op, failed)


def test_sizes_are_drawn_under_declared_caps_so_the_ops_constraints_hold():
    """attention.py declares Nk <= 128: a causal case drawn with Nq = 150, Nk = 180 and clamped afterwards had
    Nq > Nk (the soak's 1000 cases hit it). Sizes are drawn under the caps, long rows and real sizes included."""
    from gpuemu.cases import generate
    from gpuemu.preconditions import Requires

    req = Requires(max_dims={"Nk": 128, "D": 128})
    drawn = [req.apply(generate("attention", s, dtype="fp16", caps=req.max_dims)) for s in range(3000)]
    assert all(c.spec.check_dims(c.dims, c.kwargs) is None for c in drawn)
    assert all(c.dims["Nk"] <= 128 and c.dims["D"] <= 128 for c in drawn)
    assert any(c.kwargs["causal"] and c.dims["Nq"] > 100 for c in drawn)
    assert any(c.shape_kind == "real_size" for c in drawn)
    unclamped = [req.apply(generate("attention", s, dtype="fp16")) for s in range(3000)]
    assert any(c.spec.check_dims(c.dims, c.kwargs) is not None for c in unclamped)  # what the caps prevent


def test_the_summary_names_every_argument_the_precondition_cases_name():
    from gpuemu.cases import generate
    from gpuemu.compare import PRECONDITION, Verdict
    from gpuemu.results import Failure, FuzzResult

    case = generate("add", 1, dtype="fp32")
    msgs = ["y must be contiguous: silently wrong otherwise (...)", "x must be contiguous: silently wrong otherwise",
            "x and out must be contiguous: silently wrong otherwise"]
    r = FuzzResult(target="t.py:f", op="add", seed=1, iterations=5, passed=2, failed_cases=3, precondition_cases=3,
                   failures=[Failure(case=case, verdict=Verdict(PRECONDITION, "mismatch", m)) for m in msgs])
    assert "3 PRECONDITION (y, x, out must be contiguous; declare it or make the launcher accept it)" in r.summary()
    r.precondition_policy = "warn"
    assert r.ok and "; warned only)" in r.summary()
