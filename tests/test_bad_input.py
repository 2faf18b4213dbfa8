"""Bad input never reaches a traceback (issue 13): each class below asserts the exit code, exactly one
line on stderr (``gpuemu: error: ...`` naming the value or field), no traceback, and that nothing stored
was lost or half-written. Kernel failures are verdicts (exit 1), not usage errors."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpuemu.cli import main

ROOT = Path(__file__).resolve().parent.parent

LAUNCHERS = '''
import torch

def softmax_bad(x):  # wrong on every case
    return (torch.softmax(x.float(), dim=-1) + 0.01).to(x.dtype)

def softmax_ok(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)

def wrong_signature(a, b, c):
    return a

def always_raises(x):
    raise RuntimeError("boom in my launcher")

def strided_index(x):
    out = torch.empty_like(x)
    out.stride(-5)  # an IndexError in the launcher's own line
    return out

def spins(x):
    while True:
        pass

def slow_then_fine(x):
    import time
    time.sleep(0.2)
    return torch.softmax(x.float(), dim=-1).to(x.dtype)

NOT_CALLABLE = 3
'''


@pytest.fixture
def k(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(LAUNCHERS)
    (tmp_path / "broken_import.py").write_text("raise ImportError('this module is broken')\n")
    return tmp_path


def run(capsys, *args):
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:  # argparse's own usage errors exit from inside parse_args
        rc = e.code
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and "Traceback" not in cap.out
    return rc, cap.err


def one_line_error(capsys, *args, match, code=2):
    rc, err = run(capsys, *args)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == code, err
    assert len(lines) == 1 and lines[0].startswith("gpuemu: error: "), err
    for m in [match] if isinstance(match, str) else match:
        assert m in lines[0], lines[0]
    return lines[0]


def files(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()} if d.exists() else {}


FUZZ = ("fuzz", "k.py:softmax_ok", "--op", "softmax", "-n", "1", "--dtype", "fp32")


# ------------------------------------------------------------------------------------------ flags and targets
@pytest.mark.parametrize("args, match", [
    (("fuzz", "k.py:softmax_ok", "--op", "sofmax"), "did you mean 'softmax'"),                      # unknown op
    (("fuzz", "nope.py:f", "--op", "softmax"), "does not exist"),                                  # missing file
    (("fuzz", "k.py:nope", "--op", "softmax"), "has no attribute 'nope'"),                         # missing function
    (("fuzz", "k.py:NOT_CALLABLE", "--op", "softmax"), "is an int, not a callable"),                 # not callable
    (("fuzz", "broken_import.py:f", "--op", "softmax"), "failed to import"),                       # import raises
    (("fuzz", "k.py", "--op", "softmax"), "must be 'path/to/file.py:function'"),                   # no :function
    (("fuzz", "k.py:wrong_signature", "--op", "softmax"), ["cannot be called as softmax", "f(x)"]),  # signature
    (FUZZ + ("--seed", "-1"), "outside [0, 0xffffffffffffffff]"),                                  # negative seed
    (FUZZ + ("--seed", "0x1ffffffffffffffff"), "outside [0, 0xffffffffffffffff]"),                 # 65-bit seed
    (FUZZ[:-2] + ("--seed", "abc"), "not an integer"),                                             # non-integer seed
    (FUZZ[:-2] + ("--dtype", ""), "--dtype ''"),                                                   # empty dtype
    (FUZZ[:-2] + ("--dtype", "fp8"), "'fp8' is not one of fp32, fp16, bf16"),                      # unknown dtype
    (FUZZ[:-2] + ("--dtype", "fp32,,fp16"), "comma-separated"),                                    # empty list item
    (("fuzz", "k.py:softmax_ok", "--op", "softmax", "-n", "0"), "--iterations 0"),                 # zero iterations
    (FUZZ + ("--case-timeout", "0"), "--case-timeout '0'"),                                        # zero time limit
    (FUZZ + ("--case-timeout", "nan"), "--case-timeout 'nan'"),                                    # NaN time limit
    (FUZZ + ("--device", "tpu"), "--device 'tpu'"),                                                # unknown device
    (FUZZ + ("--requires", "contiguous=nosucharg"), "nosucharg"),                                  # bad precondition
    (FUZZ + ("--strategy", "nope"), "strategy 'nope' is not known"),                               # unknown strategy
    (FUZZ + ("--json", "/dev/null/x.json"), ["cannot write --json /dev/null/x.json", "not a directory"]),  # bad path
])
def test_flag_and_target_mistakes_are_one_line(k, capsys, args, match):
    one_line_error(capsys, *args, "--store", k / "s", match=match)
    assert not list((k / "s" / "failures").glob("*")) if (k / "s" / "failures").exists() else True


def test_json_path_is_checked_before_any_case_runs(k, capsys):
    (k / "adir").mkdir()
    one_line_error(capsys, "fuzz", "k.py:softmax_bad", "--op", "softmax", "-n", "2", "--store", k / "s",
                   "--json", k / "adir", match="is a directory")
    assert files(k / "s").keys() <= {".write-probe"} and not list((k / "s").rglob("*.json"))  # nothing ran


def test_unwritable_store_is_one_line(k, capsys):
    (k / "afile").write_text("x")
    one_line_error(capsys, *FUZZ, "--store", k / "afile" / "store", match="cannot write the failure store")


def test_python_api_seed_strings_and_ranges(k):
    import gpuemu
    from gpuemu.errors import InvalidArgument

    r = gpuemu.fuzz(lambda x: x.softmax(-1), op="softmax", iterations=1, seed="0x10", save=False)
    assert r.seed == 0x10
    for bad in ("zz", -1, 2**64, 1.5, True):
        with pytest.raises(InvalidArgument, match="seed"):
            gpuemu.fuzz(lambda x: x.softmax(-1), op="softmax", iterations=1, seed=bad, save=False)


# ------------------------------------------------------------------------------------------ rule packs
@pytest.mark.parametrize("text, match", [
    ("fuzz:\n  dtypes: [fp8]\n", ["bad.yaml: fuzz.dtypes[0]: 'fp8'"]),
    ("fuzz:\n  iterations: -3\n", ["bad.yaml: fuzz.iterations: must be >= 1"]),
    ("fuzz:\n  case_timeout: -1\n", ["bad.yaml: fuzz.case_timeout"]),
    ("fuzz:\n  strategy: nope\n", ["bad.yaml: fuzz.strategy"]),
    ("tolerances:\n  softmax:\n    fp32: {rtol: abc, atol: 0}\n", ["bad.yaml: tolerances.softmax.fp32.rtol"]),
    ("fuzz: [1, 2\n", ["bad.yaml: line", "not valid YAML"]),
    ("fuzz:\n  iteration: 3\n", ["bad.yaml: fuzz.iteration: unknown key"]),
])
def test_rule_pack_mistakes_name_file_and_key(k, capsys, text, match):
    (k / "bad.yaml").write_text(text)
    one_line_error(capsys, *FUZZ, "--rulepack", k / "bad.yaml", "--store", k / "s", match=match)


def test_missing_rule_pack_is_one_line(k, capsys):
    one_line_error(capsys, *FUZZ, "--rulepack", k / "none.yaml", "--store", k / "s", match="cannot read rule pack")


def test_rule_pack_yaml11_exponent_strings_are_numbers(k, capsys):
    """`rtol: 1e-5` is a string to YAML 1.1; it is what everyone writes, so it is accepted as a number."""
    from gpuemu import config

    (k / "tol.yaml").write_text("tolerances:\n  softmax:\n    fp32: {rtol: 1e-5, atol: 1E-7}\n"
                                "fuzz:\n  case_timeout: 2e1\n")
    s = config.resolve(rulepacks=[str(k / "tol.yaml")], cwd=k)
    assert s.tolerances["softmax"]["fp32"] == {"rtol": 1e-5, "atol": 1e-7} and s.fuzz["case_timeout"] == 20.0
    rc, err = run(capsys, *FUZZ, "--rulepack", k / "tol.yaml", "--store", k / "s")
    assert rc == 0, err


# ------------------------------------------------------------------------------------------ reproduce
@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A store with one real record (a pure-torch launcher, one case) and the --json of its run."""
    d = tmp_path_factory.mktemp("stored")
    (d / "k.py").write_text(LAUNCHERS)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        assert main(["fuzz", "k.py:softmax_bad", "--op", "softmax", "-n", "1", "--seed", "3", "--dtype", "fp32",
                     "--no-shrink", "--store", "s", "--json", "r.json"]) == 1
    finally:
        os.chdir(cwd)
    return d


@pytest.fixture
def copy(stored, tmp_path, monkeypatch):
    shutil.copytree(stored, tmp_path / "c")
    monkeypatch.chdir(tmp_path / "c")
    rec = next((tmp_path / "c" / "s" / "failures").glob("*.json"))
    return tmp_path / "c", rec, hex(json.loads(rec.read_text())["case"]["seed"])


def _edit(path, change):
    rec = json.loads(path.read_text())
    new = change(rec)
    path.write_text(json.dumps(new if isinstance(new, list) else rec))


# each tampered-record class of the item 3, and the ones found beside them: exit 2 naming the field
TAMPER = {
    "case deleted": (lambda r: r.pop("case"), ": case: is missing"),
    "case.seed abc": (lambda r: r["case"].__setitem__("seed", "abc"), ": case.seed: 'abc' is invalid"),
    "tolerance x": (lambda r: r.__setitem__("tolerance", "x"), ": tolerance: 'x' is invalid"),
    "verdict {}": (lambda r: r.__setitem__("verdict", {}), ": verdict.status: is missing"),
    "schema_version 99": (lambda r: r.__setitem__("schema_version", 99), "in record format 99; this gpuemu"),
    "schema_version 0": (lambda r: r.__setitem__("schema_version", 0), ": schema_version: is 0"),
    "dims N -5": (lambda r: r["case"]["dims"].__setitem__("N", -5), ": case.dims.N: -5 is invalid"),
    "bogus layout": (lambda r: r["case"]["layouts"].__setitem__("x", "diagonal"), ": case.layouts.x: 'diagonal'"),
    "layout of no argument": (lambda r: r["case"]["layouts"].__setitem__("y", "contiguous"), ": case.layouts: names ['y']"),
    "unknown op": (lambda r: (r.__setitem__("op", "sofmax"), r["case"].__setitem__("op", "sofmax")), ": case.op: 'sofmax'"),
    "dims of another op": (lambda r: r["case"].__setitem__("dims", {"M": 3}), ": case.dims: has ['M']"),
    "tolerance.rtol negative": (lambda r: r["tolerance"].__setitem__("rtol", -1), ": tolerance.rtol: -1 is invalid"),
    "verdict.status bogus": (lambda r: r["verdict"].__setitem__("status", "maybe"), ": verdict.status: 'maybe'"),
    "snapshot hash not hex": (lambda r: r["snapshot"].__setitem__("sha256", "../../etc"), ": snapshot.sha256:"),
    "target empty": (lambda r: r.__setitem__("target", ""), ": target: '' is invalid"),
    "record is a list": (lambda r: [r], ": <top>: [{"),
}


@pytest.mark.parametrize("name", list(TAMPER))
def test_tampered_record_is_exit_2_naming_the_field(copy, capsys, name):
    d, rec, seed = copy
    change, field = TAMPER[name]
    _edit(rec, change)
    before = files(d / "s")
    line = one_line_error(capsys, "reproduce", seed, "--store", d / "s", match=[field, rec.name])
    assert "cannot be replayed" in line
    assert files(d / "s") == before  # replay deletes and rewrites nothing


@pytest.mark.parametrize("how, match", [
    ("truncated JSON", "is corrupt (not JSON)"),
    ("flipped snapshot byte", "corrupt or was modified"),
    ("missing snapshot", "is missing"),
])
def test_damaged_files_are_exit_2(copy, capsys, how, match):
    d, rec, seed = copy
    snap = next((d / "s" / "snapshots").glob("*.safetensors"))
    if how == "truncated JSON":
        rec.write_text(rec.read_text()[:40])
    elif how == "flipped snapshot byte":
        data = bytearray(snap.read_bytes())
        data[len(data) // 2] ^= 1
        snap.write_bytes(bytes(data))
    else:
        snap.unlink()
    one_line_error(capsys, "reproduce", seed, "--store", d / "s", match=match)


@pytest.mark.parametrize("args, match", [
    ((), "needs a SEED"),
    (("zz",), "'zz' is not a hex seed"),
    (("0x12345678123456781",), "is not a hex seed"),
    (("0xdeadbeef",), "no stored failure with seed 0xdeadbeef"),
    (("--recompile",), "--recompile applies to hook graph records"),
    (("--json", "/dev/null/x.json"), "cannot write --json"),
])
def test_reproduce_mistakes_are_one_line(copy, capsys, args, match):
    d, rec, seed = copy
    if args[:1] == ("--recompile",) or args[:1] == ("--json",):
        args = (seed,) + args
    one_line_error(capsys, "reproduce", *args, "--store", d / "s", match=match)


def test_reproduce_without_a_store_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, "reproduce", "0x1", "--store", tmp_path / "nothing", match="no failure store at")


def test_list_shows_corrupt_records_instead_of_skipping_them(copy, capsys):
    d, rec, seed = copy
    shutil.copy(rec, rec.with_name("0x99--k.py_other.json"))
    (rec.with_name("0x99--k.py_other.json")).write_text("{")
    rc, err = run(capsys, "reproduce", "--list", "--store", d / "s")
    assert rc == 2
    lines = err.strip().splitlines()
    assert "1 stored failure in" in lines[-3] and lines[-2].startswith("corrupt: failure record")
    assert lines[-1] == f"gpuemu: error: 1 record in {d / 's' / 'failures'} cannot be replayed (listed above as corrupt)"
    assert rec.exists()  # nothing deleted


# ------------------------------------------------------------------------------------------ kernel failures are verdicts
def test_a_launcher_that_always_raises_fails_the_run_not_a_usage_error(k, capsys):
    # raised on the host before any launch: each case is a refusal (the one refusal rule), and a launcher that
    # refuses every case fails, saying why, with its line
    rc, err = run(capsys, "fuzz", "k.py:always_raises", "--op", "softmax", "-n", "2", "--dtype", "fp32",
                  "--store", k / "s")
    assert rc == 1
    assert "Refused: 2/2" in err and "RuntimeError: boom in my launcher" in err and f"{k / 'k.py'}:14)" in err
    assert "no kernel ran" in err and "gpuemu: error" not in err


def test_an_error_points_at_the_launchers_line(k, capsys):
    rc, err = run(capsys, "fuzz", "k.py:strided_index", "--op", "softmax", "-n", "1", "--dtype", "fp32",
                  "--store", k / "s", "--no-shrink")
    assert rc == 1 and "IndexError" in err and f"{k / 'k.py'}:18)" in err and "gpuemu/" not in err.split("IndexError")[1].split("\n")[0]


def test_a_hang_is_an_error_verdict_with_its_seed_and_is_not_shrunk(k, capsys):
    rc, err = run(capsys, "fuzz", "k.py:spins", "--op", "softmax", "-n", "10", "--dtype", "fp32", "--store", k / "s",
                  "--case-timeout", "0.3", "--json", k / "r.json")
    assert rc == 1
    r = json.loads((k / "r.json").read_text())
    assert r["timed_out"] == 3 and r["iterations"] == 3 and "stopped" in err  # 3 hangs, then the run stops
    first = r["failures"][0]
    assert first["verdict"]["kind"] == "timeout" and first["original_case"] is None  # never shrunk
    assert "per-case time limit of 0.3 s in the launcher or its kernel (at " in first["line"]
    assert any(f"{k / 'k.py'}:{n})" in first["line"] for n in (22, 23))  # the spinning loop's own line
    assert r["seconds"] < 5


def test_rule_pack_case_timeout_applies(k, capsys):
    (k / "t.yaml").write_text("fuzz:\n  case_timeout: 0.1\n")
    rc, err = run(capsys, "fuzz", "k.py:slow_then_fine", "--op", "softmax", "-n", "1", "--dtype", "fp32",
                  "--store", k / "s", "--rulepack", k / "t.yaml", "--no-shrink")
    assert rc == 1 and "per-case time limit of 0.1 s" in err


def test_ctrl_c_writes_partial_json_and_summary(tmp_path):
    (tmp_path / "k.py").write_text(LAUNCHERS)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    # 100 cases of >= 0.4 s: the run cannot finish before the signal, however loaded the machine is
    p = subprocess.Popen([sys.executable, "-m", "gpuemu", "fuzz", "k.py:slow_then_fine", "--op", "softmax",
                          "-n", "100", "--dtype", "fp32", "--store", "s", "--json", "r.json"],
                         cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
                         # a test runner started in the background (nohup, `&`) ignores SIGINT, and a child
                         # inherits that: Python then never turns Ctrl-C into KeyboardInterrupt
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in p.stderr:  # wait for the first progress line: cases are running
        seen.append(line)
        if line.startswith("  ["):
            break
    assert p.poll() is None, "".join(seen)  # still running when interrupted
    p.send_signal(signal.SIGINT)
    err = p.stderr.read()
    assert p.wait(timeout=60) == 130
    assert "Traceback" not in err and "stopped: interrupted (Ctrl-C)" in err and "Passed: " in err
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["interrupted"] is True and 3 <= r["iterations"] < 100 and r["passed"] == r["iterations"]
    assert f"Passed: {r['passed']}/{r['iterations']}" in err


def test_a_record_naming_a_file_outside_the_directory_needs_trust(copy, capsys, tmp_path):
    """Stores are copied between machines: a record's target path is not imported unless asked to."""
    d, rec, seed = copy
    evil = tmp_path / "elsewhere" / "evil.py"
    evil.parent.mkdir()
    evil.write_text("import pathlib\npathlib.Path(__file__).with_name('ran').write_text('x')\n"
                    "import torch\ndef softmax_bad(x):\n    return (torch.softmax(x.float(), -1) + 0.01).to(x.dtype)\n")
    _edit(rec, lambda r: r.__setitem__("target", f"{evil}:softmax_bad"))
    one_line_error(capsys, "reproduce", seed, "--store", d / "s", match=["outside this directory", "--trust"])
    assert not (evil.parent / "ran").exists()
    rc, err = run(capsys, "reproduce", seed, "--store", d / "s", "--trust")
    assert rc == 1 and (evil.parent / "ran").exists() and "reproduced: same verdict" in err


def test_a_rule_pack_edited_between_runs_is_read_again(tmp_path):
    # parsed packs are cached per (path, size, mtime): an edit must not be served from the cache
    import os

    from gpuemu.config import resolve

    pack = tmp_path / "pack.yaml"
    pack.write_text("fuzz:\n  iterations: 7\n")
    assert resolve(rulepacks=[str(pack)]).fuzz["iterations"] == 7
    pack.write_text("fuzz:\n  iterations: 9\n")
    st = pack.stat()
    os.utime(pack, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a coarse clock could give the same mtime
    assert resolve(rulepacks=[str(pack)]).fuzz["iterations"] == 9
    resolve(rulepacks=[str(pack)]).fuzz["iterations"] = 0  # a caller's change does not leak into the cache
    assert resolve(rulepacks=[str(pack)]).fuzz["iterations"] == 9
