"""`gpuemu check --ray`: the same verdicts and stored failures as a local run, a lost worker retried and counted
once, one store on the driver whose replay lines work without Ray, and one clear line without Ray installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from gpuemu.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PYPROJECT = """
[tool.gpuemu.check]
iterations = 4
seed = 11
dtypes = ["fp32", "fp16"]

[[tool.gpuemu.check.kernels]]
target = "kernels/add.py:add*"
op = "add"

[[tool.gpuemu.check.kernels]]
target = "kernels/softmax.py:softmax_tail_leak"
op = "softmax"

[[tool.gpuemu.check.kernels]]
target = "kernels/dies_once.py:add_dies_once"
op = "add"
"""

# the first call in any process of this project kills that process (a worker lost mid-task), later calls add
DIES_ONCE = '''
import os


def add_dies_once(a, b):
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "died")
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return a + b
'''


def _project(tmp_path):
    (tmp_path / "kernels").mkdir()
    for name in ("add.py", "softmax.py"):
        shutil.copy(os.path.join(ROOT, "examples", "kernels", name), tmp_path / "kernels" / name)
    (tmp_path / "kernels" / "dies_once.py").write_text(DIES_ONCE)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


def _verdicts(path):
    """What must not depend on where the launchers ran: statuses, matrix, worst cases, failures (less timings
    and the store's own paths)."""
    out = {}
    for k in json.loads(path.read_text())["kernels"]:
        fails = []
        for f in k["failures"]:
            v = {key: val for key, val in f["verdict"].items() if key != "seconds"}
            fails.append((f["case"], v, f.get("hint"), f.get("original_case")))
        out[k["target"]] = (k["status"], k["statuses"], k["matrix"], k["worst"], fails, k["iterations"], k["error"])
    return json.loads(json.dumps(out, sort_keys=True), parse_constant=str)  # NaN compares equal as text


def _stored(store):
    return sorted(p.name for p in (store / "failures").glob("*.json")), sorted(p.name for p in (store / "snapshots").glob("*"))


@pytest.mark.slow  # a local Ray cluster, 20-40 s; the driver side of the task interface stays in the default run (test_check.py)
@pytest.mark.ray
def test_ray_gives_the_local_verdicts_and_store_and_retries_a_lost_worker(tmp_path, monkeypatch, capsys):
    pytest.importorskip("ray")
    proj = _project(tmp_path)
    monkeypatch.chdir(proj)
    (proj / "kernels" / "died").write_text("")  # locally the launcher does not die: the reference run
    assert main(["check", "--jobs", "2", "--store", str(proj / "local"), "--json", str(proj / "local.json")]) == 1
    (proj / "kernels" / "died").unlink()  # on Ray its first call kills the worker, and Ray retries the task
    assert main(["check", "--ray", "--jobs", "2", "--store", str(proj / "ray"), "--json", str(proj / "ray.json")]) == 1
    out = capsys.readouterr().err
    assert "a local Ray cluster" in out
    local, ray = _verdicts(proj / "local.json"), _verdicts(proj / "ray.json")
    assert local == ray
    assert (proj / "kernels" / "died").exists()  # the kill did happen
    dies = [t for t in ray if t.endswith(":add_dies_once")]
    assert len(dies) == 1 and ray[dies[0]][0] == "pass" and ray[dies[0]][5] == 4  # counted once, nothing lost
    assert _stored(proj / "local") == _stored(proj / "ray") and _stored(proj / "ray")[0]
    # every replay line names the driver's store and runs without Ray
    doc = json.loads((proj / "ray.json").read_text())
    replays = [f["replay"] for k in doc["kernels"] for f in k["failures"]]
    # (relative to the working directory, as a local run's lines; each names its launcher)
    assert replays and all(" --store ray --target kernels/" in r for r in replays)
    local_replays = [f["replay"] for k in json.loads((proj / "local.json").read_text())["kernels"] for f in k["failures"]]
    assert [r.replace("--store ray", "--store local") for r in replays] == local_replays
    got = subprocess.run([sys.executable, "-m", "gpuemu", *replays[0].split()[1:]],  # pasted as printed
                         capture_output=True, text=True, cwd=proj, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert got.returncode == 1 and "reproduced" in (got.stdout + got.stderr).lower(), got.stdout + got.stderr


def test_without_ray_the_flag_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    proj = _project(tmp_path)
    monkeypatch.chdir(proj)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    assert main(["check", "--ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gpuemu: error:") and "pip install 'gpuemu[ray]'" in err[-1]
