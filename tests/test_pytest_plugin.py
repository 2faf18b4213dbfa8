"""The pytest plugin, through pytester in a fresh process: the pytest11 entry point loads it, a marked
launcher and the gpuemu_fuzz fixture pass on a correct kernel and fail on a buggy one with the FAIL line,
mismatch report and replay command, in the terminal, in the JUnit XML, and under pytest-xdist."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ("pytester",)

KERNELS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_last_dropped(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=offs < n - 1, other=0.0).to(tl.float32)  # BUG: drops y's last element
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, x, y):
    xc, yc = x.contiguous(), y.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    kernel[(triton.cdiv(n, 256),)](xc, yc, out, n, BLOCK=256)
    return out


def add(x, y):
    return _launch(_add_kernel, x, y)


def add_buggy(x, y):
    return _launch(_add_last_dropped, x, y)
'''

TESTS = '''
import pytest
import kernels

add = pytest.mark.gpuemu(op="add", dtypes=["fp32"])(kernels.add)
add_buggy = pytest.mark.gpuemu(op="add", dtypes=["fp32"])(kernels.add_buggy)


def test_fixture_pass(gpuemu_fuzz):
    r = gpuemu_fuzz(kernels.add, op="add", dtypes=["fp32"])
    assert r.passed == r.iterations > 0


@pytest.mark.gpuemu(op="add", dtypes=["fp32"])
def test_fixture_fail_with_marker_defaults(gpuemu_fuzz):
    gpuemu_fuzz(kernels.add_buggy)
'''


@pytest.fixture
def project(pytester):
    pytester.makepyfile(kernels=KERNELS, test_gate=TESTS)
    return pytester


def _run(project, *args):
    env_store = str(project.path / "store")
    return project.runpytest_subprocess("-p", "no:cacheprovider", "--gpuemu-iterations", "3", "--gpuemu-store",
                                        env_store, *args, timeout=300)


def _check_failure_text(text: str) -> None:
    assert "FAIL seed=0x" in text and "dtype=fp32" in text
    assert "Mismatched elements:" in text and "Greatest absolute difference:" in text
    assert "replay: gpuemu reproduce 0x" in text and "--store" in text


def test_marker_and_fixture_pass_and_fail_with_report_and_junit(project):
    junit = project.path / "junit.xml"
    res = _run(project, "-v", f"--junitxml={junit}", "-o", "junit_family=xunit1")
    res.assert_outcomes(passed=2, failed=2)
    out = res.stdout.str()
    assert "gpuemu: Triton kernels run under the interpreter" in out  # the entry point loaded the plugin
    assert "test_gate.py::add PASSED" in out and "test_gate.py::add_buggy FAILED" in out
    assert "test_fixture_pass PASSED" in out and "test_fixture_fail_with_marker_defaults FAILED" in out
    _check_failure_text(out)
    root = ET.parse(junit).getroot()
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    fail = cases["add_buggy"].find("failure")
    assert fail is not None
    _check_failure_text(fail.text)
    props = {p.get("name"): p.get("value") for p in cases["add_buggy"].iter("property")}
    assert props["gpuemu_replay"].startswith("gpuemu reproduce 0x") and props["gpuemu_seed"].startswith("0x")
    assert cases["add"].find("failure") is None
    # the replay command the report printed reproduces the failure from the stored bytes
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(project.path), TRITON_INTERPRET="1")
    rep = subprocess.run([sys.executable, "-m", "gpuemu", *props["gpuemu_replay"].split()[1:]], cwd=project.path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 1, rep.stderr
    assert "reproduced: same verdict" in rep.stderr


def test_same_results_under_xdist(project):
    pytest.importorskip("xdist")
    res = _run(project, "-n", "2", "-v")
    res.assert_outcomes(passed=2, failed=2)
    out = res.stdout.str()
    assert "[gw0]" in out or "[gw1]" in out
    _check_failure_text(out)


def test_marker_with_an_unknown_keyword_is_a_usage_error(pytester):
    # a plain launcher: the usage error comes at collection, before anything imports torch or Triton
    pytester.makepyfile(test_bad='''
import pytest


def add(x, y):
    return x + y


add = pytest.mark.gpuemu(op="add", iterationz=3)(add)
''')
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert res.ret != 0
    assert "unknown keyword 'iterationz'" in res.stderr.str() + res.stdout.str()


@pytest.mark.slow  # two pytest sessions and a local Ray cluster, 25-35 s
@pytest.mark.ray
def test_ray_route_gives_the_local_outcomes_seeds_and_store(project):
    # --gpuemu-ray: the marked launchers run as tasks on a local Ray cluster; outcomes, seeds and the stored
    # failures are those of a local run, and the replay line works on the driver without Ray
    pytest.importorskip("ray")
    import subprocess
    import sys

    workers: dict = {}

    def outcomes(store, *args):
        junit = project.path / f"{store}.xml"
        res = project.runpytest_subprocess("-p", "no:cacheprovider", "--gpuemu-iterations", "6", "--gpuemu-store",
                                           str(project.path / store), f"--junitxml={junit}", "-v", *args, timeout=400)
        res.assert_outcomes(passed=2, failed=2)
        cases = {}
        for tc in ET.parse(junit).getroot().iter("testcase"):
            props = {p.get("name"): p.get("value") for p in tc.iter("property")}
            cases[tc.get("name")] = (tc.find("failure") is None, props.get("gpuemu_seed"), props.get("gpuemu_summary"))
            workers.setdefault(store, set()).add(props.get("gpuemu_ray_worker"))
        stored = sorted(p.name for p in (project.path / store / "failures").glob("*.json"))
        return cases, stored, res.stdout.str()

    local, local_stored, _ = outcomes("local")
    ray, ray_stored, out = outcomes("ray", "--gpuemu-ray")
    assert ray == local and ray_stored == local_stored and ray_stored
    # the marked launchers ran in Ray workers (the fixture's tests in pytest's own process)
    assert workers["local"] == {None} and len(workers["ray"] - {None}) >= 1 and None in workers["ray"]
    _check_failure_text(out)
    replay = next(ln for ln in out.splitlines() if ln.startswith("replay: gpuemu reproduce"))
    assert f"--store {project.path / 'ray'}" in replay
    env = dict(os.environ, PYTHONPATH=str(project.path), TRITON_INTERPRET="1")
    rep = subprocess.run([sys.executable, "-m", "gpuemu", *replay.split()[2:]], cwd=project.path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 1 and "reproduced: same verdict" in rep.stderr, rep.stderr


def test_ray_route_without_ray_is_one_usage_line(project):
    # a usage error, not a traceback: the first marked item says how to get Ray
    project.makeconftest('''
import sys
sys.modules["ray"] = None  # import ray -> ImportError
''')
    res = project.runpytest_subprocess("-p", "no:cacheprovider", "--gpuemu-ray", "-k", "add_buggy", timeout=120)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --gpuemu-ray needs Ray: pip install 'gpuemu[ray]'" in out and "Traceback" not in out


# ------------------------------------------------------------------ usage errors, one report, requires and the policy

FLAT = '''
import torch
import triton
from kernels import _add_kernel


def add_flat(x, y):  # right on contiguous inputs, silently wrong on strided ones: a PRECONDITION
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    return out


# the same launcher under other names (a marker marks the function object: one object per marker)
def add_flat_declared(x, y):
    return add_flat(x, y)


def add_flat_marked(x, y):
    return add_flat(x, y)


def add_flat_warned(x, y):
    return add_flat(x, y)
'''


MORE = '''
import kernels


def test_bad_op(gpuemu_fuzz):
    gpuemu_fuzz(kernels.add, op="softmaxx")


def test_bad_dtype(gpuemu_fuzz):
    gpuemu_fuzz(kernels.add, op="add", dtypes=["fp8"])


def test_wrong_signature(gpuemu_fuzz):
    gpuemu_fuzz(kernels.add, op="softmax")


def test_buggy_once(gpuemu_fuzz):
    gpuemu_fuzz(kernels.add_buggy, op="add", dtypes=["fp32"])
'''

FLAT_TESTS = '''
import pytest
import flat

undeclared = pytest.mark.gpuemu(op="add", dtypes=["fp32"])(flat.add_flat)
declared = pytest.mark.gpuemu(op="add", dtypes=["fp32"])(flat.add_flat_declared)
marked = pytest.mark.gpuemu(op="add", dtypes=["fp32"], requires={"contiguous": True})(flat.add_flat_marked)
warned = pytest.mark.gpuemu(op="add", dtypes=["fp32"], preconditions="warn")(flat.add_flat_warned)
'''


def test_usage_errors_one_report_requires_and_the_precondition_policy(project):
    # one session (each costs seconds): the fixture's usage errors are one line, a failure is reported once, and
    # requires (the marker's, and gpuemu.yaml's glob on the launcher's file) and preconditions='warn' hold
    project.makepyfile(flat=FLAT, test_more=MORE, test_flat=FLAT_TESTS)
    (project.path / "gpuemu.yaml").write_text("requires:\n  'fla*.py:*_declared': {contiguous: true}\n")
    junit = project.path / "more.xml"
    res = project.runpytest_subprocess("-p", "no:cacheprovider", "--gpuemu-iterations", "12", "--gpuemu-store",
                                       str(project.path / "store"), "test_more.py", "test_flat.py", "-v", "-W",
                                       "default", f"--junitxml={junit}", timeout=300)
    out = res.stdout.str()
    res.assert_outcomes(passed=3, failed=5)
    assert "gpuemu usage error: gpuemu_fuzz: op='softmaxx': op='softmaxx' is not a known op; did you mean 'softmax'?" in out
    assert "gpuemu usage error: gpuemu_fuzz: dtypes=['fp8']: 'fp8' is not a dtype gpuemu fuzzes" in out
    assert "cannot be called as softmax's launcher" in out
    assert "Traceback" not in out and "During handling" not in out and "pytest_plugin.py" not in out
    # the warning names the launcher's def line, not the plugin's
    line = (project.path / "flat.py").read_text().split("\n").index("def add_flat_warned(x, y):") + 1
    assert f"flat.py:{line}: GpuemuPreconditionWarning" in out
    # the buggy fixture test's report once, undeclared's once (counted above the short summary, which pytest prints
    # in full, report included, when CI is set)
    assert out.split("short test summary info")[0].count("Greatest absolute difference:") == 2
    cases = {tc.get("name"): tc for tc in ET.parse(junit).getroot().iter("testcase")}
    text = cases["test_buggy_once"].find("failure").text
    assert text.count("Greatest absolute difference:") == 1 and "During handling" not in text
    assert cases["test_bad_op"].find("failure").get("message").startswith("Failed: gpuemu usage error")
    assert "test_flat.py::undeclared FAILED" in out and "PRECONDITION seed=0x" in out
    assert "test_flat.py::declared PASSED" in out and "test_flat.py::marked PASSED" in out
    assert "test_flat.py::warned PASSED" in out
    assert "GpuemuPreconditionWarning" in out and "passed under preconditions='warn'" in out


BAD_MARKERS = [
    ('op="softmaxx"', "op='softmaxx': op='softmaxx' is not a known op; did you mean 'softmax'?"),
    ('op="add", dtypes=["fp8"]', "dtypes=['fp8']: 'fp8' is not a dtype gpuemu fuzzes"),
    ('op="add", requires={"contiguous": ["q"]}', "requires: precondition contiguous='q': add has no argument 'q'"),
]


def test_a_bad_marker_is_a_collection_error_without_a_traceback(pytester):
    # one session: each module's collection error is reported, one line each
    for i, (marker, _) in enumerate(BAD_MARKERS):
        pytester.makepyfile(**{f"test_bad{i}": f'''
import pytest


def add(x, y):
    return x + y


add = pytest.mark.gpuemu({marker})(add)
'''})
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.INTERRUPTED
    for i, (_, message) in enumerate(BAD_MARKERS):
        assert f"ERROR collecting test_bad{i}.py" in out
        assert f"gpuemu usage error: test_bad{i}.py::add: @pytest.mark.gpuemu: {message}" in out
    assert "Traceback" not in out and "pytest_plugin.py" not in out


def test_a_bad_marker_on_a_test_function_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad='''
import pytest


@pytest.mark.gpuemu(op="add", iterations=0)
def test_it(gpuemu_fuzz):
    pass
''')
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "gpuemu: test_bad.py::test_it: @pytest.mark.gpuemu: iterations=0: expected a positive integer" in out
    assert "Traceback" not in out
