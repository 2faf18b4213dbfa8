"""Replay you can trust (issue 13): a failure is (target, seed); the printed replay line works when pasted
(custom store, two targets in one store); a seed that was not stored says so instead of replaying another
target's record; hook replay imports user code only with --trust."""

import json
import shlex

import pytest

from gpuemu import fuzzer
from gpuemu.cli import main

LAUNCHERS = '''
import torch

def softmax_bad(x):  # wrong on every case: an offset of 0.01
    return (torch.softmax(x.float(), dim=-1) + 0.01).to(x.dtype)

def layernorm_bad(x, weight, bias, eps=1e-5):
    w = weight.float() if weight is not None else None
    b = bias.float() if bias is not None else None
    return (torch.nn.functional.layer_norm(x.float(), x.shape[-1:], w, b, eps) + 0.01).to(x.dtype)
'''


@pytest.fixture
def kfile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(LAUNCHERS)
    return tmp_path


def cli(capsys, *args):
    rc = main(list(args))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return rc, cap.out, cap.err


def replay_lines(err):
    return [ln.removeprefix("replay: ") for ln in err.splitlines() if ln.startswith("replay: ")]


def test_two_targets_one_seed_pasted_lines_replay_the_right_failure(kfile, capsys):
    store = "my store"  # a custom store, with a space: the printed line must quote it
    rc, _, err1 = cli(capsys, "fuzz", "k.py:softmax_bad", "--op", "softmax", "--seed", "5", "-n", "6",
                      "--store", store, "--no-shrink", "--dtype", "fp32", "--json", "a.json")
    assert rc == 1
    rc, _, err2 = cli(capsys, "fuzz", "k.py:layernorm_bad", "--op", "layernorm", "--seed", "5", "-n", "6",
                      "--store", store, "--no-shrink", "--dtype", "fp32", "--json", "b.json")
    assert rc == 1
    a, b = json.loads((kfile / "a.json").read_text()), json.loads((kfile / "b.json").read_text())
    shared = {f["case"]["seed"] for f in a["failures"]} & {f["case"]["seed"] for f in b["failures"]}
    assert shared, "same run seed, same case seeds: the collision this test is about"
    # the first run was alone in the store: --store only (in full: the line pastes in any directory); the second
    # needs --target too
    full = shlex.quote(str((kfile / store).resolve()))
    assert replay_lines(err1)[0] == f"gpuemu reproduce {a['failures'][0]['case']['seed']:#x} --store {full}"
    line = replay_lines(err2)[0]
    assert line.endswith(f"--store {full} --target k.py:layernorm_bad")
    seed = f"{sorted(shared)[0]:#x}"
    rc, _, err = cli(capsys, "reproduce", seed, "--store", store)
    assert rc == 2 and "ambiguous" in err and "--target" in err and len(err.strip().splitlines()) == 1
    # the line printed once two targets share the store works when pasted (the JSON carries the same command)
    argv = shlex.split(b["failures"][0]["replay"])
    assert argv[:2] == ["gpuemu", "reproduce"] and shlex.join(argv) == shlex.join(shlex.split(line))
    # a line printed while the store held one target, pasted after a second joined: a clear no, never a guess
    rc, _, err = cli(capsys, *shlex.split(replay_lines(err1)[0])[1:])
    assert rc == 2 and "ambiguous" in err and "pass --target" in err
    for f, target in ((b["failures"][0], "layernorm_bad"), (a["failures"][0], "softmax_bad")):
        argv = shlex.split(f["replay"])
        if "--target" not in argv:
            argv += ["--target", f"k.py:{target}"]
        rc, _, err = cli(capsys, *argv[1:])
        assert rc == 1, err
        assert f"replayed k.py:{target} seed" in err and "reproduced: same verdict" in err
        assert f"max abs err {f['verdict']['max_abs_err']!r} bit for bit" in err


def test_more_failures_than_stored_says_not_stored(kfile, capsys, monkeypatch):
    """The issue's >100-failures scenario with the cap lowered to 2 (the same code path, in seconds)."""
    from gpuemu.engine import report

    monkeypatch.setattr(report, "MAX_STORED", 2)
    store = str(kfile / "s")
    rc, _, err = cli(capsys, "fuzz", "k.py:softmax_bad", "--op", "softmax", "--seed", "9", "-n", "5",
                     "--store", store, "--no-shrink", "--dtype", "fp32", "--json", "a.json")
    a = json.loads((kfile / "a.json").read_text())
    assert rc == 1 and a["stored"] == 2 and a["failed"] == 5
    # the summary counts what is on disk (the issue saw "102 failing seeds stored" with 100 records)
    assert "Passed: 0/5 · 5 failing seeds, 2 stored (3 not: only the first 2 failing cases of a run are stored)" in err
    assert len(list((kfile / "s" / "failures").glob("*.json"))) == 2
    unstored = [f for f in a["failures"] if not f["stored"]]
    assert len(unstored) == 3 and all(f["record"] is None and "first 2" in f["not_stored"] for f in unstored)
    # a seed that failed but was not stored, while another target stored the same seed: never the wrong record
    monkeypatch.setattr(report, "MAX_STORED", 100)
    rc, _, _ = cli(capsys, "fuzz", "k.py:layernorm_bad", "--op", "layernorm", "--seed", "9", "-n", "5",
                   "--store", store, "--no-shrink", "--dtype", "fp32", "--json", "b.json")
    b = json.loads((kfile / "b.json").read_text())
    both = {f["case"]["seed"] for f in unstored} & {f["case"]["seed"] for f in b["failures"]}
    assert both
    seed = f"{sorted(both)[0]:#x}"
    rc, _, err = cli(capsys, "reproduce", seed, "--store", store)
    assert rc == 2 and "ambiguous" in err and "k.py:softmax_bad, not stored" in err
    rc, _, err = cli(capsys, "reproduce", seed, "--store", store, "--target", "k.py:softmax_bad")
    assert rc == 2 and "was not stored" in err and "only the first 2" in err
    assert len(err.strip().splitlines()) == 1
    rc, _, err = cli(capsys, "reproduce", seed, "--store", store, "--target", "k.py:layernorm_bad")
    assert rc == 1 and "replayed k.py:layernorm_bad" in err and "reproduced: same verdict" in err


SHADOW_MODULE = '''
import pathlib
import torch
from gpuemu import hook

pathlib.Path(__file__).with_name("imported.txt").open("a").write("imported\\n")  # a training script's side effect


@hook.shadow(op="rmsnorm")
def rms_bad(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight * 1.01
'''


def test_hook_replay_runs_user_code_only_with_trust(tmp_path, capsys, monkeypatch):
    import sys

    import torch

    from gpuemu import hook
    from gpuemu.target import load

    (tmp_path / "train.py").write_text(SHADOW_MODULE)
    fn = load(f"{tmp_path / 'train.py'}:rms_bad")
    marker = tmp_path / "imported.txt"
    rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0)
    try:
        fn(torch.randn(4, 48), torch.randn(48))
    finally:
        hook.uninstall()
    assert rt.divergences, "the planted 1% scale bug must diverge"
    seed = rt.divergences[0].seed
    for name in [m for m in sys.modules if m.startswith("gpuemu_target_") and "train" in m]:
        monkeypatch.delitem(sys.modules, name)  # a fresh process would have to import it again
    marker.unlink()
    rc, _, err = cli(capsys, "reproduce", seed, "--store", str(tmp_path / "store"))
    assert rc == 1 and not marker.exists()  # nothing imported, nothing ran
    assert "not re-run: launcher" in err and "it is re-run only with --trust" in err
    assert "the recorded output re-judged; nothing was re-run" in err
    rc, _, err = cli(capsys, "reproduce", seed, "--store", str(tmp_path / "store"), "--trust")
    assert rc == 1 and marker.exists()
    assert "re-run (launcher" in err and "reproduced: same verdict" in err and "nothing was re-run" not in err


def test_records_and_fuzz_json_match_the_shipped_schema(kfile, capsys, monkeypatch):
    """The schema shipped in the package describes what is written: every record and the --json document."""
    import jsonschema

    from gpuemu.store import Store, record_schema, result_schema

    from gpuemu.engine import report

    monkeypatch.setattr(report, "MAX_STORED", 1)  # stored and not-stored failures both appear
    rc, _, _ = cli(capsys, "fuzz", "k.py:softmax_bad", "--op", "softmax", "--seed", "2", "-n", "3",
                   "--store", "s", "--dtype", "fp32", "--json", "r.json")
    assert rc == 1
    doc = json.loads((kfile / "r.json").read_text())
    jsonschema.Draft202012Validator(result_schema()).validate(doc)
    assert [f["stored"] for f in doc["failures"]] == [True, False, False]
    rows, bad = Store(kfile / "s").scan()
    assert len(rows) == 1 and not bad
    jsonschema.Draft202012Validator(record_schema()).validate(rows[0].record)
    with pytest.raises(jsonschema.ValidationError):  # the schema is not vacuous
        jsonschema.Draft202012Validator(result_schema()).validate(dict(doc, failures=[{"stored": False}]))


DEVICE_LAUNCHER = '''
import os
import torch

def softmax_device(x):  # wrong by 0.01, except where the replay pretends to be another device's arithmetic
    off = 0.0 if os.environ.get("GPUEMU_TEST_OTHER_DEVICE") else 0.01
    return (torch.softmax(x.float(), dim=-1) + off).to(x.dtype)
'''


def test_a_replay_on_another_device_says_so_and_when_the_verdict_differs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.py").write_text(DEVICE_LAUNCHER)
    rc, _, err = cli(capsys, "fuzz", "d.py:softmax_device", "--op", "softmax", "--seed", "3", "-n", "2",
                     "--store", "st", "--no-shrink", "--dtype", "fp32")
    assert rc == 1
    line = replay_lines(err)[0]
    record = next((tmp_path / "st" / "failures").glob("*.json"))
    doc = json.loads(record.read_text())
    assert doc["device"] == "cpu"
    doc["device"] = "cuda:0"  # as a record made by `gpuemu fuzz --device cuda` reads
    record.write_text(json.dumps(doc))
    rc, _, err = cli(capsys, *shlex.split(line)[1:])
    assert rc == 1 and "on cpu; the record was made on cuda)" in err and "reproduced: same verdict" in err
    monkeypatch.setenv("GPUEMU_TEST_OTHER_DEVICE", "1")
    rc, _, err = cli(capsys, *shlex.split(line)[1:])
    assert rc == 0 and "NOT reproduced" in err
    assert "the verdict differs between devices: recorded on cuda, replayed on cpu" in err


# ---------------------------------------------------------------- where people paste replay lines (gpuemu.origin)
def test_the_printed_line_replays_from_another_directory_and_a_foreign_record_needs_trust(kfile, capsys,
                                                                                          monkeypatch):
    rc, _, err = cli(capsys, "fuzz", "k.py:softmax_bad", "--op", "softmax", "--seed", "3", "-n", "2",
                     "--no-shrink", "--dtype", "fp32")
    assert rc == 1
    line = replay_lines(err)[0]
    elsewhere = kfile / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the line as printed, in another directory: this user's own record
    rc, _, err = cli(capsys, *shlex.split(line)[1:])
    assert rc == 1 and "replayed k.py:softmax_bad" in err and "reproduced: same verdict" in err
    # the same record written by someone else (a copied store): the file is not this user's own code here
    seed = shlex.split(line)[2]
    (rec_path,) = (kfile / ".gpuemu" / "failures").glob(f"{seed}--*.json")
    rec = json.loads(rec_path.read_text())
    rec["origin"]["writer"] = "0123456789abcdef"
    rec_path.write_text(json.dumps(rec))
    rc, _, err = cli(capsys, *shlex.split(line)[1:])
    assert rc == 2 and "pass --trust" in err and len(err.strip().splitlines()) == 1
    rc, _, err = cli(capsys, *shlex.split(line)[1:], "--trust")
    assert rc == 1 and "reproduced: same verdict" in err


def test_the_printed_line_replays_from_outside_the_project_with_the_store_elsewhere(kfile, capsys, monkeypatch):
    # the project in one folder, the store in another, the line pasted in a third: the record's own file is found
    store = kfile.parent / f"{kfile.name}-stores" / "s"
    rc, _, err = cli(capsys, "fuzz", "k.py:softmax_bad", "--op", "softmax", "--seed", "4", "-n", "2",
                     "--no-shrink", "--dtype", "fp32", "--store", str(store))
    assert rc == 1
    line = replay_lines(err)[0]
    outside = kfile.parent / f"{kfile.name}-outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    rc, _, err = cli(capsys, *shlex.split(line)[1:])
    assert rc == 1 and "reproduced: same verdict" in err, err


def test_a_store_zip_replays_and_a_module_target_imports_from_the_project_root(kfile, capsys, monkeypatch):
    import zipfile

    pkg = kfile / "kernels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "soft.py").write_text(LAUNCHERS)
    monkeypatch.syspath_prepend(str(kfile))
    rc, _, err = cli(capsys, "fuzz", "kernels.soft:softmax_bad", "--op", "softmax", "--seed", "4", "-n", "1",
                     "--no-shrink", "--dtype", "fp32", "--store", "st")
    assert rc == 1
    seed = shlex.split(replay_lines(err)[0])[2]
    with zipfile.ZipFile(kfile / "gpuemu-store.zip", "w") as z:  # as GitHub serves an artifact
        for p in (kfile / "st").rglob("*"):
            z.write(p, p.relative_to(kfile / "st"))
    import sys

    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in (str(kfile), "")])
    for name in [m for m in sys.modules if m.startswith("kernels")]:
        monkeypatch.delitem(sys.modules, name)
    rc, _, err = cli(capsys, "reproduce", seed, "--store", "gpuemu-store.zip")  # (no PYTHONPATH=.)
    assert rc == 1 and "reproduced: same verdict" in err, err


SCRIPT = '''
import gpuemu, torch

def softmax_bad(x):
    return (torch.softmax(x.float(), dim=-1) + 0.01).to(x.dtype)

RESULT = gpuemu.fuzz(softmax_bad, op="softmax", iterations=2, seed=6, dtypes="fp32", shrink_failures=False)
open("ran.txt", "a").write("x")
'''


def test_a_script_that_calls_fuzz_is_replayed_without_fuzzing_again(kfile, capsys):
    """The launcher lives beside the gpuemu.fuzz call: the replay imports that script, whose fuzz does not run
    again (nor rewrite the store); the API's printed line replays as printed."""
    import runpy

    (kfile / "my_softmax.py").write_text(SCRIPT)
    mod = runpy.run_path(str(kfile / "my_softmax.py"), run_name="__main__")
    line = mod["RESULT"].failures[0].command
    before = sorted(p.name for p in (kfile / ".gpuemu" / "failures").glob("*.json"))
    rc, _, err = cli(capsys, *shlex.split(line)[1:])
    assert rc == 1 and "reproduced: same verdict" in err, err
    assert sorted(p.name for p in (kfile / ".gpuemu" / "failures").glob("*.json")) == before
