"""The command line as a user meets it: one clear line and exit 2 for mistakes, never a traceback."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUGGY = "examples/kernels/softmax.py:softmax_tail_leak"
GOOD = "examples/kernels/softmax.py:softmax"


def gpuemu_inprocess(*args, capsys, monkeypatch):
    """Run the CLI in this process (fast); the same main() the console script calls."""
    from gpuemu.cli import main

    monkeypatch.chdir(ROOT)
    rc = main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def gpuemu(*args, cwd=ROOT, env=None):
    """Run the CLI in a new process."""
    e = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "gpuemu", *args], cwd=cwd, env=e, capture_output=True, text=True,
                       timeout=300)
    return p.returncode, p.stdout, p.stderr


def one_clear_line(stderr):
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert "Traceback" not in stderr
    return lines[-1]


def test_fuzz_then_reproduce_in_a_new_process(tmp_path):
    store = tmp_path / "store"
    rc, out, err = gpuemu("fuzz", BUGGY, "--op", "softmax", "-n", "12", "--seed", "3", "--store", str(store),
                          "--json", str(tmp_path / "r.json"))
    assert rc == 1, err
    assert "FAIL seed=0x" in err and "replay: gpuemu reproduce 0x" in err and "Passed: " in err
    result = json.loads((tmp_path / "r.json").read_text())
    first = result["failures"][0]
    seed = first["replay"].split()[2]  # gpuemu reproduce SEED [--store DIR] [--target T]
    rc2, _, err2 = gpuemu("reproduce", seed, "--store", str(store), "--json", str(tmp_path / "rep.json"))
    assert rc2 == 1, err2
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["same"] is True
    assert rep["verdict"]["max_abs_err"] == first["verdict"]["max_abs_err"]  # bit for bit, other process
    assert f"max abs err {first['verdict']['max_abs_err']!r} bit for bit" in err2
    rc3, _, err3 = gpuemu("reproduce", "--list", "--store", str(store))
    assert rc3 == 0 and seed in err3


def test_correct_kernel_exits_zero(tmp_path, capsys, monkeypatch):
    rc, out, err = gpuemu_inprocess("fuzz", GOOD, "--op", "softmax", "-n", "8", "--seed", "1", "--store", str(tmp_path / "s"), capsys=capsys, monkeypatch=monkeypatch)
    assert rc == 0, err
    assert "Passed: 8/8" in err


@pytest.mark.parametrize("args,needle", [
    (["fuzz", GOOD, "--op", "sofmax"], "did you mean 'softmax'"),
    (["fuzz", "examples/kernels/nope.py:f", "--op", "softmax"], "does not exist"),
    (["fuzz", "examples/kernels/softmax.py:nope", "--op", "softmax"], "has no attribute 'nope'"),
    (["fuzz", "examples/kernels/softmax.py", "--op", "softmax"], "must be 'path/to/file.py:function'"),
    (["fuzz", "no_such_module_xyz:f", "--op", "softmax"], "failed to import"),
    (["fuzz", "examples/kernels/softmax.py:BLOCK_SIZE_NOT_CALLABLE", "--op", "softmax"], "has no attribute"),
    (["fuzz", GOOD, "--op", "softmax", "--dtype", "fp8"], "fp8"),
    (["fuzz", GOOD, "--op", "softmax", "-n", "0"], "must be >= 1"),
    (["fuzz", GOOD, "--op", "softmax", "--seed", "xyz"], "not an integer"),
    (["reproduce", "0xdeadbeef", "--store", "/nonexistent/store"], "no failure store"),
    (["reproduce"], "needs a SEED"),
    (["nonsense"], "invalid choice"),
])
def test_usage_errors_are_one_line_exit_2(args, needle, capsys, monkeypatch):
    try:
        rc, out, err = gpuemu_inprocess(*args, capsys=capsys, monkeypatch=monkeypatch)
    except SystemExit as e:  # argparse exits itself
        rc, err = e.code, capsys.readouterr().err
    assert rc == 2, err
    assert needle in one_clear_line(err)


def test_malformed_rulepack_names_file_key_reason(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "pack.yaml"
    bad.write_text("schema_version: 1\ntolerances:\n  softmax:\n    fp16: {rtol: -1, atol: 0}\n")
    rc, _, err = gpuemu_inprocess("fuzz", GOOD, "--op", "softmax", "--rulepack", str(bad), capsys=capsys, monkeypatch=monkeypatch)
    assert rc == 2
    line = one_clear_line(err)
    assert str(bad) in line and "tolerances.softmax.fp16.rtol" in line and ">= 0" in line
    bad.write_text("tolerances: [oops\n")
    rc, _, err = gpuemu_inprocess("fuzz", GOOD, "--op", "softmax", "--rulepack", str(bad), capsys=capsys, monkeypatch=monkeypatch)
    assert rc == 2 and "not valid YAML" in one_clear_line(err)


def test_unwritable_store_is_exit_2(tmp_path, capsys, monkeypatch):
    f = tmp_path / "a_file"
    f.write_text("x")
    rc, _, err = gpuemu_inprocess("fuzz", GOOD, "--op", "softmax", "-n", "2", "--store", str(f), capsys=capsys, monkeypatch=monkeypatch)
    assert rc == 2 and "cannot write the failure store" in one_clear_line(err)


def test_launcher_that_always_raises_is_exit_2(tmp_path, capsys, monkeypatch):
    (tmp_path / "k.py").write_text("def launcher(x, y):\n    return x\n")
    rc, _, err = gpuemu_inprocess("fuzz", str(tmp_path / "k.py") + ":launcher", "--op", "softmax", "-n", "3",
                        "--store", str(tmp_path / "s"), capsys=capsys, monkeypatch=monkeypatch)
    assert rc == 2
    line = one_clear_line(err)
    # found before any case runs: the launcher cannot take the op's arguments
    assert "cannot be called as softmax's launcher" in line and "f(x)" in line


def test_tampered_snapshot_replay_is_exit_2(tmp_path):
    store = tmp_path / "s"
    rc, _, err = gpuemu("fuzz", BUGGY, "--op", "softmax", "-n", "4", "--seed", "3", "--store", str(store),
                        "--no-shrink")
    assert rc == 1
    seed = [ln for ln in err.splitlines() if ln.startswith("replay:")][0].split()[3]
    for snap in (store / "snapshots").glob("*.safetensors"):
        snap.write_bytes(snap.read_bytes()[:-3] + b"xyz")
    rc, _, err = gpuemu("reproduce", seed, "--store", str(store))
    assert rc == 2 and "corrupt or was modified" in one_clear_line(err)


def test_env_store_and_json_stdout(tmp_path):
    rc, out, err = gpuemu("fuzz", GOOD, "--op", "softmax", "-n", "3", "--json", "-",
                          env={"GPUEMU_STORE": str(tmp_path / "envstore")})
    assert rc == 0
    data = json.loads(out)
    assert data["store"] == str(tmp_path / "envstore") and data["ok"] is True
