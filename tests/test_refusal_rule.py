"""One refusal rule and launch limits as verdicts (issue 37): an exception on the host before any kernel launch is
a refusal whatever its type; one after a launch is the kernel's ERROR; gpuemu's own failure is an internal error
(exit 101), never the launcher's; a launch the GPU refuses is a LIMIT line, fatal only inside declared sizes, and
every gate format shows it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import gpuemu
from gpuemu.resources import predicting


@triton.jit
def _rows_kernel(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.where(mask, tl.exp(x - tl.max(x, axis=0)), 0.0)
    tl.store(y_ptr + row * stride_y + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, num_warps=4):
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    y = torch.empty_like(x2)
    _rows_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), y.stride(0),
                                 BLOCK_N=triton.next_power_of_2(x2.shape[1]), num_warps=num_warps)
    return y.reshape(x.shape)


def flash_style_assert(x):
    assert x.shape[-1] % 2 == 0  # a bare assert, empty message: flash-attention's way to refuse
    return _launch(x)


def liger_style_view(x):
    x.view(-1)  # a RuntimeError on a strided input: Liger's X.view(-1, dim) way
    return _launch(x)


def raises_after_launch(x):
    y = _launch(x)
    if x.shape[-1] % 2:
        raise RuntimeError("post-processing failed")  # after a kernel ran: the kernel's ERROR
    return y


def refuses_everything(x):
    raise ValueError("not implemented for this input")


def wide_rows_use_too_many_threads(x):
    return _launch(x, num_warps=64 if x.shape[-1] > 512 else 4)  # 2,048 threads: the GPU refuses the launch


@pytest.mark.parametrize("launcher", [flash_style_assert, liger_style_view])
def test_a_host_side_exception_before_any_launch_is_a_refusal_whatever_its_type(launcher):
    r = gpuemu.fuzz(launcher, op="softmax", iterations=40, seed=3, save=False)
    assert r.ok and not r.failed and r.refused > 0 and r.passed == 40, r.report()
    assert "refuses the input before any launch" in r.rejected_reason
    assert Path(__file__).name in r.rejected_reason  # the launcher's own line
    strict = gpuemu.fuzz(launcher, op="softmax", iterations=40, seed=3, save=False, refusals="fail")
    assert not strict.ok and "refusals fail this run" in strict.summary()


def test_an_exception_after_a_launch_is_the_kernels_error():
    r = gpuemu.fuzz(raises_after_launch, op="softmax", iterations=40, seed=3, save=False)
    assert r.failed and r.failed[0].verdict.status == "error" and r.failed[0].verdict.kind == "exception"
    assert not r.refused


def test_a_launcher_refusing_every_case_fails():
    r = gpuemu.fuzz(refuses_everything, op="softmax", iterations=10, seed=3, save=False)
    assert r.refused == 10 and r.refused_every_case and not r.ok
    assert r.summary().startswith("Refused: 10/10") and "no kernel ran" in r.summary()


def test_gpuemus_own_failure_is_an_internal_error_not_the_kernels(monkeypatch, tmp_path):
    """A failure inside gpuemu's code during the call (here: describing a launch) names gpuemu, and the CLI exits
    101, not 1."""
    from gpuemu import envelope
    from gpuemu.runners import launches

    monkeypatch.setattr(launches, "_describe", lambda *a, **k: envelope._pow2(None))  # raises in gpuemu's file
    r = gpuemu.fuzz(_launch, op="softmax", iterations=3, seed=3, save=False)
    v = r.failed[0].verdict
    assert (v.status, v.kind) == ("error", "internal") and "a bug in gpuemu, not in the launcher" in v.message
    from gpuemu.cli import main

    mod = tmp_path / "k.py"
    mod.write_text(Path(__file__).read_text())
    assert main(["fuzz", f"{mod}:_launch", "--op", "softmax", "-n", "2", "--store", str(tmp_path / "s")]) == 101


def test_an_error_under_a_harness_torch_function_mode_is_located_at_the_launchers_line():
    from torch.overrides import TorchFunctionMode

    class Harness(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def launcher(x):
        with Harness():
            return x.view(-1, 7, 3)  # the line to show

    r = gpuemu.fuzz(launcher, op="softmax", iterations=5, seed=3, save=False)
    line = launcher.__code__.co_firstlineno + 2
    assert f"{Path(__file__).name}:{line}" in r.rejected_reason, r.rejected_reason


def test_a_launch_the_gpu_refuses_is_a_limit_line_fatal_only_inside_the_declared_sizes():
    with predicting("sm_90"):
        r = gpuemu.fuzz(wide_rows_use_too_many_threads, op="softmax", iterations=60, seed=3, save=False)
        assert r.ok and r.limits > 0 and not r.failed, r.report()
        assert "LIMIT: launches on sm_90 for N <=" in r.summary() and "2,048 threads per block" in r.summary()
        assert r.to_dict()["envelope"]["caps"]["N"] <= 512
        every = gpuemu.fuzz(wide_rows_use_too_many_threads, op="softmax", iterations=60, seed=3, save=False,
                            supports="all")
        assert not every.ok and every.fatal_limits > 0
        small = gpuemu.fuzz(wide_rows_use_too_many_threads, op="softmax", iterations=60, seed=3, save=False,
                            supports={"N": 256})
        assert small.ok and small.limits > 0


def test_the_gate_shows_limits_in_every_format_and_fails_them_inside_supports(tmp_path, monkeypatch):
    from gpuemu.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(Path(__file__).read_text())
    (tmp_path / "gpuemu.yaml").write_text(textwrap.dedent("""\
        fuzz:
          targets: [sm_90]
        check:
          iterations: 60
          seed: 3
          kernels:
            - {target: "k.py:wide_rows_use_too_many_threads", op: softmax}
        """))
    out = ["--json", "r.json", "--junit", "r.xml", "--sarif", "r.sarif", "--html", "r.html"]
    assert main(["check", *out]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    k = doc["kernels"][0]
    assert k["status"] == "pass" and k["limits"] > 0 and "sm_90" in k["envelope"]
    assert "LIMIT: launches on sm_90" in (tmp_path / "r.xml").read_text()
    assert "LIMIT: launches on sm_90" in (tmp_path / "r.html").read_text()
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    res = sarif["runs"][0]["results"]
    assert [x["level"] for x in res] == ["note"] and res[0]["ruleId"] == "limit.out_of_resources"
    text = (tmp_path / "gpuemu.yaml").read_text().replace("op: softmax}", "op: softmax, supports: all}")
    (tmp_path / "gpuemu.yaml").write_text(text)
    assert main(["check", *out]) == 1
    k = json.loads((tmp_path / "r.json").read_text())["kernels"][0]
    assert k["status"] == "limit" and not k["ok"]
