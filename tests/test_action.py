"""The composite GitHub Action, run locally: each `run:` step of action.yml executes in bash with the
environment GitHub sets (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_ACTION_PATH, GITHUB_WORKSPACE) and the
`env:` the step declares, its `${{ inputs.* }}` expressions evaluated from the step's `with:` values."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACTION = yaml.safe_load(open(os.path.join(ROOT, "action.yml")))


def test_action_is_composite_with_shell_on_every_run_step_and_no_expressions_in_scripts():
    assert ACTION["runs"]["using"] == "composite"
    steps = ACTION["runs"]["steps"]
    for step in steps:
        if "run" in step:
            assert step.get("shell") == "bash", step["name"]
            assert "${{" not in step["run"], f"{step['name']}: inputs must reach scripts through env:"
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == ["actions/cache", "github/codeql-action/upload-sarif", "actions/upload-artifact",
                    "actions/upload-artifact"]  # the HTML report and the failure store
    # an upload that cannot run (a fork's pull request, no code scanning) warns; the verdict step still decides
    for step in steps:
        if "upload" in step.get("uses", ""):
            assert step.get("continue-on-error") is True, step["name"]
    assert _step("Fail on a FAIL")["if"] == "always()"
    # a runner without a GPU gets PyTorch's CPU build (PyPI's default torch pulls several GB of CUDA libraries)
    install = _step("Install gpuemu")
    assert ACTION["inputs"]["torch"]["default"] == "cpu" and install["env"]["INPUT_TORCH"] == "${{ inputs.torch }}"
    assert "--index-url https://download.pytorch.org/whl/cpu" in install["run"]
    for out in ("exit-code", "sarif", "html", "json", "junit", "attestation"):
        assert ACTION["outputs"][out]["value"] == f"${{{{ steps.check.outputs.{out} }}}}"
    for ref in re.findall(r"inputs\.([\w-]+)", json.dumps(ACTION["runs"])):
        assert ref in ACTION["inputs"], ref


def _step(name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s["name"] == name)


def _env_of(step: dict, with_: dict, outputs: dict) -> dict:
    def expr(v: str) -> str:
        def one(m):
            e = m.group(1).strip()
            if e.startswith("inputs."):
                k = e[len("inputs."):]
                return str(with_.get(k, ACTION["inputs"][k].get("default", "")))
            if e.startswith("steps.check.outputs."):
                return outputs.get(e.rsplit(".", 1)[1], "")
            if e == "github.action_path":
                return ROOT
            raise AssertionError(f"unhandled expression {e}")

        return re.sub(r"\$\{\{(.*?)\}\}", one, str(v))

    return {k: expr(v) for k, v in (step.get("env") or {}).items()}


def _run_step(name, cwd, gh_env, with_, outputs=None):
    step = _step(name)
    env = dict(os.environ, **gh_env, **_env_of(step, with_, outputs or {}))
    return subprocess.run(["bash", "-c", step["run"]], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _outputs(path) -> dict:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "kernels").mkdir()
    shutil.copy(os.path.join(ROOT, "examples", "kernels", "add.py"), tmp_path / "kernels" / "add.py")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gpuemu.check]\niterations = 4\nseed = 7\ndtypes = ["fp32"]\njobs = 1\n'
        '[[tool.gpuemu.check.kernels]]\ntarget = "kernels/add.py:add*"\nop = "add"\n')
    gh = {"GITHUB_OUTPUT": str(tmp_path / "gh_output"), "GITHUB_STEP_SUMMARY": str(tmp_path / "gh_summary.md"),
          "GITHUB_ACTION_PATH": ROOT, "GITHUB_WORKSPACE": str(tmp_path), "GITHUB_ACTIONS": "true",
          "GPUEMU_PYTHON": sys.executable, "TRITON_INTERPRET": "1", "GPUEMU_STORE": str(tmp_path / "store")}
    (tmp_path / "gh_summary.md").write_text("earlier step's summary\n")
    return tmp_path, gh


def test_check_step_writes_summary_outputs_sarif_html_and_the_verdict_step_fails_the_job(project):
    proj, gh = project
    res = _run_step("gpuemu check", proj, gh, {"args": "--store store"})
    assert res.returncode == 0, res.stderr  # the upload steps must still run after a FAIL
    assert "::group::gpuemu check" in res.stdout
    out = _outputs(proj / "gh_output")
    assert out["exit-code"] == "1" and out["sarif"] == "gpuemu-check.sarif" and out["html"] == "gpuemu-report.html"
    assert out["json"] == "gpuemu-check.json" and out["junit"] == "gpuemu-check.junit.xml"
    summary = (proj / "gh_summary.md").read_text()
    assert summary.startswith("earlier step's summary\n")  # appended, not overwritten
    assert "## gpuemu check" in summary and "| :x: " in summary and "`kernels/add.py:add_stride`" in summary
    assert "| :white_check_mark: PASS | `kernels/add.py:add`" in summary and "gpuemu reproduce 0x" in summary
    log = json.loads((proj / out["sarif"]).read_text())
    assert log["version"] == "2.1.0" and log["runs"][0]["results"]
    assert (proj / out["html"]).read_text().startswith("<!DOCTYPE html>")
    assert (proj / "gpuemu-check.junit.xml").is_file() and (proj / "gpuemu-check.json").is_file()

    verdict = _run_step("Fail on a FAIL", proj, gh, {}, outputs=out)
    assert verdict.returncode == 1 and "::error::gpuemu check failed (exit 1)" in verdict.stdout


def test_green_when_every_launcher_passes(project):
    proj, gh = project
    res = _run_step("gpuemu check", proj, gh, {"args": "-k add --store store"})
    assert res.returncode == 0, res.stderr
    out = _outputs(proj / "gh_output")
    assert out["exit-code"] == "0"
    assert _run_step("Fail on a FAIL", proj, gh, {}, outputs=out).returncode == 0


def test_configuration_error_stops_at_the_check_step_and_names_no_stale_file(project):
    proj, gh = project
    for name in ("gpuemu-check.sarif", "gpuemu-report.html", "gpuemu-check.json", "gpuemu-check.junit.xml"):
        (proj / name).write_text("from an earlier run\n")  # stale files an upload step must not pick up
    res = _run_step("gpuemu check", proj, gh, {"manifest": "missing.toml"})
    assert res.returncode == 2 and "no such file" in res.stderr
    assert _outputs(proj / "gh_output") == {"exit-code": "2"}
    verdict = _run_step("Fail on a FAIL", proj, gh, {}, outputs={"exit-code": "2"})
    assert verdict.returncode == 2 and "::error::gpuemu check could not run (exit 2)" in verdict.stdout


def test_args_are_split_as_a_shell_splits_words_and_never_evaluated(project):
    proj, gh = project
    (proj / "pwned").unlink(missing_ok=True)
    res = _run_step("gpuemu check", proj, gh, {"args": "-k 'add_str*' --store \"my store\" $(touch pwned)"})
    # the quotes group (the glob and the folder name with a space reach gpuemu whole), $(...) stays text: gpuemu
    # is given the words "$(touch" and "pwned)" and says it does not know them (exit 2), and nothing ran
    assert res.returncode == 2 and "unrecognized arguments: $(touch pwned)" in res.stderr, res.stderr
    assert not (proj / "pwned").exists()
    res = _run_step("gpuemu check", proj, gh, {"args": "-k 'add_str*' --store \"my store\""})
    assert res.returncode == 0, res.stderr
    assert _outputs(proj / "gh_output")["exit-code"] == "1"
    data = json.loads((proj / "gpuemu-check.json").read_text())
    assert [k["target"].rsplit(":", 1)[1] for k in data["kernels"]] == ["add_stride"]
    assert (proj / "my store" / "failures").is_dir()


def test_unbalanced_quotes_in_args_are_one_line_exit_2(project):
    proj, gh = project
    res = _run_step("gpuemu check", proj, gh, {"args": "-k 'add"})
    assert res.returncode == 2 and "gpuemu: error: args \"-k 'add\": No closing quotation" in res.stderr
    assert _outputs(proj / "gh_output") == {"exit-code": "2"}
