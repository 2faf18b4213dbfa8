"""Each interpreter gap: the scenario fails on plain TRITON_INTERPRET=1 and passes on gpuemu's runtime.

The baseline runs once, in a subprocess with TRITON_INTERPRET=1 and no runtime (tests/kernels_runtime/
scenarios.py); the runtime side runs in-process. A scenario missing from the baseline's output crashed it
(the out-of-bounds store corrupts the heap there), which counts as failing.
"""
import json
import os
import subprocess
import sys

import pytest

from tests.kernels_runtime import scenarios

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = sorted(scenarios.SCENARIOS)


@pytest.fixture(scope="module")
def baseline():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "tests.kernels_runtime.scenarios"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    rows = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["name"]] = row
    return rows


@pytest.fixture
def on_runtime():
    from gpuemu import runtime

    runtime.activate()
    try:
        yield runtime
    finally:
        runtime.deactivate()


@pytest.mark.parametrize("name", NAMES)
def test_gap_fails_on_plain_interpreter(baseline, name):
    row = baseline.get(name, {"ok": False, "detail": "crashed the interpreter process"})
    assert not row["ok"], f"{name} passed on the plain interpreter: {row['detail']}"


@pytest.mark.parametrize("name", NAMES)
def test_gap_passes_on_runtime(on_runtime, name):
    ok, detail = scenarios.SCENARIOS[name]()
    assert ok, detail


def test_every_gap_passes_on_runtime_in_a_process_without_triton_interpret():
    """Kernels decorated as JITFunctions (TRITON_INTERPRET unset): the runtime interprets them on demand."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run([sys.executable, "-m", "tests.kernels_runtime.scenarios", "--runtime"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(NAMES), proc.stderr[-2000:]
    failed = [(r["name"], r["detail"]) for r in rows if not r["ok"]]
    assert not failed, failed
