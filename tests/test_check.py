"""`gpuemu check` over a project manifest: exit codes, the summary table, JSON, JUnit, SARIF (schema-valid,
located at the @triton.jit line), Markdown, HTML and a signed report, on a small project with a correct and
two buggy launchers from the example corpus; manifest errors are one line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET

import pytest

from gpuemu.check.outputs import junit_xml, sarif_log, summary_markdown, summary_text
from gpuemu.check.run import CheckResult, KernelResult, kernel_status
from gpuemu.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")

PYPROJECT = """
[project]
name = "demo"

[tool.gpuemu.check]
iterations = 4
seed = 7
dtypes = ["fp32"]
jobs = 2

[[tool.gpuemu.check.kernels]]
target = "kernels/add.py:add*"
op = "add"

[[tool.gpuemu.check.kernels]]
target = "kernels/softmax.py:softmax_tail_leak"
op = "softmax"
"""


def sarif_validator():
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(DATA, "sarif-schema-2.1.0.json")) as f:
        return jsonschema.Draft4Validator(json.load(f), format_checker=jsonschema.FormatChecker())


def make_project(tmp_path):
    (tmp_path / "kernels").mkdir()
    for name in ("add.py", "softmax.py"):
        shutil.copy(os.path.join(ROOT, "examples", "kernels", name), tmp_path / "kernels" / name)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One real `gpuemu check` run (2 workers) with every output, shared by the tests below."""
    proj = make_project(tmp_path_factory.mktemp("proj"))
    out = proj / "out"
    cwd = os.getcwd()
    os.chdir(proj)
    try:
        assert main(["keygen", str(out / "signer")]) == 0
        rc = main(["check", "--store", str(proj / "store"), "--json", str(out / "r.json"), "--junit",
                   str(out / "r.xml"), "--sarif", str(out / "r.sarif"), "--html", str(out / "r.html"),
                   "--markdown", str(out / "summary.md"), "--attest", str(out / "signer.key"),
                   "--attest-out", str(out / "report.dsse.json")])
    finally:
        os.chdir(cwd)
    return proj, out, rc


def test_exit_1_and_every_output(checked, capsys):
    proj, out, rc = checked
    assert rc == 1
    data = json.loads((out / "r.json").read_text())
    by = {k["target"].rsplit(":", 1)[1]: k for k in data["kernels"]}
    assert set(by) == {"add", "add_stride", "softmax_tail_leak"}  # the glob found both add launchers
    assert data["ok"] is False and data["jobs"] == 2 and data["seed"] == "0x7"
    assert by["add"]["status"] == "pass" and by["add"]["passed"] == by["add"]["iterations"] == 4
    assert by["softmax_tail_leak"]["status"] == "fail"
    assert by["add_stride"]["status"] not in ("pass", "rejected")
    leak = by["softmax_tail_leak"]
    assert leak["failures"][0]["line"].startswith("FAIL seed=0x") and "--store" in leak["failures"][0]["replay"]
    # every replay line names its launcher (a store shared by a manifest's launchers holds many)
    assert all(f["replay"].endswith(f"--target kernels/{k['target'].rsplit('/', 1)[1]}")
               for k in data["kernels"] for f in k["failures"] if f["stored"])
    assert leak["worst"]["fp32"]["worst_ratio"] > 1
    # the matrix counts every case once per facet group
    cells = leak["matrix"]["fp32"]
    assert sum(sum(c.values()) for f, c in cells.items() if f.startswith("shape:")) == 4

    suites = ET.parse(out / "r.xml").getroot()
    assert suites.get("tests") == "3" and int(suites.get("failures")) + int(suites.get("errors")) == 2
    tcs = {tc.get("name"): tc for tc in suites.iter("testcase")}
    assert tcs["add[add]"].find("failure") is None
    fail = tcs["softmax_tail_leak[softmax]"].find("failure")
    assert fail.get("message").startswith("FAIL seed=0x") and "replay: gpuemu reproduce" in fail.text
    assert tcs["softmax_tail_leak[softmax]"].get("file") == "kernels/softmax.py"

    md = (out / "summary.md").read_text()
    assert "| :x: FAIL | `kernels/softmax.py:softmax_tail_leak`" in md and "gpuemu reproduce" in md
    html = (out / "r.html").read_text()
    assert 'class="row-fail"' in html and "softmax_tail_leak" in html and "<script" not in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html


def test_sarif_is_schema_valid_and_points_at_the_triton_jit_line(checked):
    proj, out, _ = checked
    log = json.loads((out / "r.sarif").read_text())
    assert sorted(sarif_validator().iter_errors(log), key=str) == []
    run = log["runs"][0]
    assert len(run["results"]) == 2
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for res in run["results"]:
        assert ids[res["ruleIndex"]] == res["ruleId"]
        phys = res["locations"][0]["physicalLocation"]
        assert phys["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        lines = (proj / phys["artifactLocation"]["uri"]).read_text().splitlines()
        start = phys["region"]["startLine"]
        assert lines[start - 1].strip() == "@triton.jit", (phys, lines[start - 1])
        assert lines[start].lstrip().startswith("def " + res["locations"][0]["logicalLocations"][0]["name"])
        text = res["message"]["text"]
        assert text.startswith(("FAIL seed=", "PRECONDITION seed=", "ERROR seed=")) and "replay: gpuemu reproduce" in text
        assert "case: " in text and res["partialFingerprints"]["gpuemuCheck/v1"]


def test_signed_report_from_check_verifies_against_the_sources(checked, capsys):
    proj, out, _ = checked
    capsys.readouterr()
    assert main(["verify", str(out / "report.dsse.json"), "--key", str(out / "signer.pub"), "--sources", str(proj)]) == 0
    err = capsys.readouterr().err
    assert "VERIFIED" in err and "1/3 kernels passed" in err
    (proj / "kernels" / "add.py").write_text((proj / "kernels" / "add.py").read_text() + "\n# edited\n")
    assert main(["verify", str(out / "report.dsse.json"), "--key", str(out / "signer.pub"), "--sources", str(proj)]) == 1
    assert "kernels/add.py: sha256" in capsys.readouterr().err


def test_correct_subset_exits_0(tmp_path, monkeypatch, capsys):
    proj = make_project(tmp_path)
    monkeypatch.chdir(proj)
    assert main(["check", "-k", "add", "-j", "1", "--store", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert "1/1 kernels passed" in err and "PASS" in err


def test_select_on_a_corpus_list_manifest(tmp_path, monkeypatch, capsys):
    make_project(tmp_path)
    (tmp_path / "corpus.yaml").write_text(
        "- {target: kernels/add.py:add, op: add, correct: true}\n"
        "- {target: kernels/add.py:add_stride, op: add, correct: false}\n"
        "- {target: kernels/softmax.py:softmax_stride, op: softmax, correct: true, expect: precondition}\n")
    monkeypatch.chdir(tmp_path)
    rc = main(["check", "--manifest", "corpus.yaml", "--select", "correct=true", "--select", "expect!=precondition",
               "-n", "2", "-j", "1",
               "--store", str(tmp_path / "s"), "--json", "-"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert [k["target"].rsplit(":", 1)[1] for k in data["kernels"]] == ["add"]


_ENTRY = '[[tool.gpuemu.check.kernels]]\ntarget = "kernels/softmax.py:softmax"\nop = "softmax"\n'
_BAD_MANIFESTS = [  # (pyproject.toml, extra files, the one line's file: key, the words that explain it)
    ('[tool.gpuemu.check]\nkernelz = []\n', {}, "tool.gpuemu.check.kernelz", "unknown key; did you mean 'kernels'?"),
    ('[tool.gpuemu.check]\n[[tool.gpuemu.check.kernels]]\ntarget = "kernels/add.py:add"\nop = "addd"\n', {},
     "kernels[0] (kernels/add.py:add).op", "'addd' is not a known op; did you mean 'add'?"),
    ('[tool.gpuemu.check]\n[[tool.gpuemu.check.kernels]]\ntarget = "nowhere/*.py:f"\nop = "add"\n', {},
     "kernels[0] (nowhere/*.py:f).target", "no Python file matches"),
    ('[tool.gpuemu.check]\niterations = 0\n' + _ENTRY, {}, "tool.gpuemu.check.iterations",
     "expected a positive integer, got 0"),
    # a function the file does not define: exit 2, not an ERROR row
    ('[tool.gpuemu.check]\n[[tool.gpuemu.check.kernels]]\ntarget = "kernels/softmax.py:no_such_func"\nop = "softmax"\n',
     {}, "kernels[0] (kernels/softmax.py:no_such_func).target", "kernels/softmax.py defines no 'no_such_func'"),
    ('[tool.gpuemu.check]\n[[tool.gpuemu.check.kernels]]\ntarget = "kernels/softmax.py:softmx"\nop = "softmax"\n',
     {}, "(kernels/softmax.py:softmx).target", "did you mean 'softmax'?"),
    ('[tool.gpuemu.check]\n[[tool.gpuemu.check.kernels]]\ntarget = "kernels/*.py:zzz*"\nop = "softmax"\n',
     {}, "(kernels/*.py:zzz*).target", "no function matches 'zzz*'"),
    ('[tool.gpuemu.check]\n[[tool.gpuemu.check.kernels]]\ntarget = "kernels/broken.py:f"\nop = "add"\n',
     {"kernels/broken.py": "def f(x, y:\n    return x\n"}, "(kernels/broken.py:f).target", "line 1"),
    # dtypes gpuemu does not know: exit 2, not an ERROR row (top level and per entry)
    ('[tool.gpuemu.check]\ndtypes = ["fp32", "fp8"]\n' + _ENTRY, {}, "tool.gpuemu.check.dtypes",
     "'fp8' is not a dtype gpuemu fuzzes"),
    ('[tool.gpuemu.check]\n' + _ENTRY + 'dtypes = ["int8"]\n', {}, "(kernels/softmax.py:softmax).dtypes",
     "'int8' is not a dtype"),
    # a mistyped entry key used to be ignored (and all three dtypes ran)
    ('[tool.gpuemu.check]\n' + _ENTRY + 'dtype = ["fp32"]\n', {}, "(kernels/softmax.py:softmax).dtype",
     "unknown key; did you mean 'dtypes'? allowed: dtypes, framework, inputs, iterations, labels, limits, op, preconditions, reference, refusals, requires"),
    ('[tool.gpuemu.check]\n' + _ENTRY + 'store = "s"\n', {}, "(kernels/softmax.py:softmax).store",
     "belongs at the top level"),
    ('[tool.gpuemu.check]\nrequires = {contiguous = true}\n' + _ENTRY, {}, "tool.gpuemu.check.requires",
     "belongs on each [[kernels]] entry"),
    ('[tool.gpuemu.check]\n' + _ENTRY + 'requires = {contiguous = ["q"]}\n', {},
     "(kernels/softmax.py:softmax).requires", "softmax has no argument 'q'"),
    ('[tool.gpuemu.check]\n' + _ENTRY + 'requires = {contiguos = true}\n', {},
     "(kernels/softmax.py:softmax).requires", "unknown key 'contiguos'"),
    ('[tool.gpuemu.check]\npreconditions = "maybe"\n' + _ENTRY, {}, "tool.gpuemu.check.preconditions",
     "use one of fail, warn, ignore"),
    ('[tool.gpuemu.check]\nseed = "abc"\n' + _ENTRY, {}, "tool.gpuemu.check.seed", "is not an integer"),
    ('[tool.gpuemu.check]\nstrategy = "fast"\n' + _ENTRY, {}, "tool.gpuemu.check.strategy", "is not a strategy"),
    ('[tool.gpuemu.check]\nrulepacks = ["ci/tol.yaml"]\n' + _ENTRY, {}, "tool.gpuemu.check.rulepacks",
     "rule pack 'ci/tol.yaml' does not exist"),
    ('[tool.gpuemu.check]\ndevice = "tpu"\n' + _ENTRY, {}, "tool.gpuemu.check.device", "use auto, cpu or cuda"),
    ('[tool.gpuemu.check]\nframework = "mxnet"\n' + _ENTRY, {}, "tool.gpuemu.check.framework",
     "framework 'mxnet' is not known"),
    ('[tool.gpuemu.check\n', {}, "pyproject.toml: <toml>", "not valid TOML"),
    # gpuemu.yaml's requires (globs) are checked against the op before anything runs too
    ('[tool.gpuemu.check]\n' + _ENTRY, {"gpuemu.yaml": "requires:\n  'kernels/*.py:soft*': {contiguous: [q]}\n"},
     "kernels[0] (kernels/softmax.py:softmax)", "softmax has no argument 'q' (arguments: x) (from requires: in "
                                                "gpuemu.yaml)"),
]


@pytest.mark.parametrize("table, files, where, why", _BAD_MANIFESTS,
                         ids=[f"{i}-{w.rsplit('.', 1)[-1][:20]}" for i, (_, _, w, _) in enumerate(_BAD_MANIFESTS)])
def test_bad_manifest_is_one_line_exit_2_before_any_fuzz(tmp_path, monkeypatch, capsys, table, files, where, why):
    make_project(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pyproject.toml").write_text(table)
    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr("gpuemu.check.run.fuzz_one", lambda *a, **k: ran.append(a) or {})
    assert main(["check", "-j", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("gpuemu: error: "), err
    assert where in err and why in err, err
    if "toml" not in where:
        assert "pyproject.toml: " in err  # names the file
    assert ran == []  # found before any launcher ran


def test_yaml_syntax_error_is_one_line(tmp_path, monkeypatch, capsys):
    make_project(tmp_path)
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "gpuemu.yaml").write_text("check:\n  kernels:\n    - {target: kernels/add.py:add, op: add\n"
                                          "  iterations: [\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuemu: error: gpuemu.yaml: line 4, column") and "not valid YAML" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("flags, why", [
    (["--json", "/proc/nope/out.json"], "cannot write --json /proc/nope/out.json: the folder /proc/nope does not exist"),
    (["--junit", "."], "cannot write --junit .: it is a directory"),
    (["--sarif", "nonexistent/dir/x.sarif"], "the folder nonexistent/dir does not exist; create it first"),
    (["--html", "kernels/add.py/r.html"], "cannot write --html kernels/add.py/r.html: the folder kernels/add.py is not"),
    (["--attest", "missing.key"], "--attest missing.key: no such key file; create a key pair with 'gpuemu keygen'"),
    (["--attest", "bad.key"], "--attest bad.key: not an unencrypted PEM private key"),
    (["--json", "r.json", "--sarif", "r.json"], "--sarif r.json: --json writes the same file"),
])
def test_bad_output_or_key_is_one_line_exit_2_before_any_fuzz(tmp_path, monkeypatch, capsys, flags, why):
    pytest.importorskip("cryptography")
    make_project(tmp_path)
    (tmp_path / "bad.key").write_text("not a key\n")
    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr("gpuemu.check.run.fuzz_one", lambda *a, **k: ran.append(a) or {})
    assert main(["check", "-j", "1", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and why in err, err
    assert ran == [] and not (tmp_path / "nonexistent").exists()  # nothing ran, no folder was created


def test_corpus_list_keeps_its_own_keys_as_labels_but_not_a_typo(tmp_path, monkeypatch):
    from gpuemu.check.manifest import load

    make_project(tmp_path)
    (tmp_path / "corpus.yaml").write_text("- {target: kernels/add.py:add, op: add, correct: true, note: fine}\n")
    assert load(tmp_path / "corpus.yaml").kernels[0].extra == {"correct": True, "note": "fine"}
    (tmp_path / "corpus.yaml").write_text("- {target: kernels/add.py:add, op: add, iteration: 3}\n")
    with pytest.raises(Exception, match=r"kernels\[0\] \(kernels/add.py:add\).iteration: unknown key; did you mean "
                                        r"'iterations'"):
        load(tmp_path / "corpus.yaml")
    # the bundled corpus loads: none of its own keys is taken for a typo
    assert len(load(os.path.join(ROOT, "examples", "kernels", "manifest.yaml")).kernels) >= 70


def test_allowed_keys_are_one_table():
    from gpuemu.check import manifest

    assert manifest.allowed("entry") == sorted(k for k, v in manifest.KEYS.items() if v.where in ("entry", "both"))
    assert "kernels" in manifest.allowed("top") and "target" not in manifest.allowed("top")
    assert {"requires", "labels"} <= set(manifest.allowed("entry"))


def test_no_manifest_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 2
    assert "no manifest" in capsys.readouterr().err


def test_gpuemu_yaml_check_key(tmp_path, monkeypatch):
    from gpuemu import config
    from gpuemu.check.manifest import load

    make_project(tmp_path)
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "gpuemu.yaml").write_text("check:\n  iterations: 3\n  kernels:\n    - {target: 'kernels/*.py:add', op: add}\n")
    monkeypatch.chdir(tmp_path)
    m = load()
    assert [k.function for k in m.kernels] == ["add"] and m.iterations == 3
    config.resolve()  # the rule-pack reader accepts the check key of the same file


# ------------------------------------------------------------------ statuses the oracle may add later


def _synthetic(tmp_path) -> CheckResult:
    src = tmp_path / "k.py"
    src.write_text("import triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n\n\ndef launch(x):\n    return x\n")
    fail = {"line": "WEIRD seed=0x1 dtype=fp32 shape=[3] something new", "replay": "gpuemu reproduce 0x1",
            "case": {"op": "add"}, "case_text": "add fp32 x=[3]", "verdict": {"status": "weird", "kind": "novel",
                                                                                "detail": "why"},
            "hint": None, "launches": [{"kernel": "_k"}]}
    kernels = [
        KernelResult(target=f"{src}:launch", op="add", seed=1, status=kernel_status({"pass": 2, "rejected": 1}),
                     iterations=3, passed=2, statuses={"pass": 2, "rejected": 1}, dtypes=["fp32"],
                     matrix={"fp32": {"layout:strided": {"rejected": 1}, "layout:contiguous": {"pass": 2}}}),
        KernelResult(target=f"{src}:launch", op="softmax", seed=2, status=kernel_status({"pass": 1, "weird": 2}),
                     iterations=3, passed=1, statuses={"pass": 1, "weird": 2}, dtypes=["fp32"], failures=[fail],
                     matrix={"fp32": {"values:normal": {"pass": 1, "weird": 2}}},
                     worst={"fp32": {"worst_ratio": None, "seed": "0x1", "message": "new"}},
                     kernels=[{"name": "_k", "path": str(src), "start_line": 4, "end_line": 6}]),
    ]
    return CheckResult(kernels=kernels, seed=1, manifest=str(tmp_path / "pyproject.toml"), root=str(tmp_path),
                       device="cpu", rulepacks=[], store=None, jobs=1, seconds=1.0,
                       versions={"gpuemu": "0.1.0", "torch": "x", "triton": "y"}, started="2026-01-01T00:00:00+00:00")


def test_unknown_and_rejected_statuses_are_handled_generically(tmp_path):
    assert kernel_status({"pass": 3, "rejected": 2}) == "pass"
    assert kernel_status({"pass": 3, "precondition": 1}) == "precondition"
    assert kernel_status({"pass": 1, "fail": 1, "error": 1}) == "fail"
    assert kernel_status({"pass": 1, "weird": 1}) == "weird"
    r = _synthetic(tmp_path)
    assert [k.ok for k in r.kernels] == [True, False] and not r.ok
    assert "WEIRD" in summary_text(r) and "1/2 kernels passed (1 weird)" in summary_text(r)
    assert "WEIRD seed=0x1" in summary_markdown(r)
    tcs = {tc.get("name"): tc for tc in ET.fromstring(junit_xml(r).split("\n", 1)[1]).iter("testcase")}
    assert tcs["launch[softmax]"].find("failure").get("type") == "weird.novel"
    log = sarif_log(r)
    assert sorted(sarif_validator().iter_errors(log), key=str) == []
    (res,) = log["runs"][0]["results"]
    # an unknown status counts against the kernel (exit 1), so it is an error in SARIF too: one level everywhere
    assert res["ruleId"] == "weird.novel" and res["level"] == "error"
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert CheckResult.from_dict(json.loads(json.dumps(r.to_dict()))).to_dict() == r.to_dict()
    from gpuemu.report.html import render

    assert 'data-status="weird"' in render(r)


def test_a_broken_rule_pack_is_exit_2_before_any_fuzzing(tmp_path, monkeypatch, capsys):
    make_project(tmp_path)
    (tmp_path / "bad.yaml").write_text("schema_version: 1\nfuzz: {iterationz: 3}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--rulepack", "bad.yaml", "-j", "1"]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml: fuzz.iterationz" in err and "PASS" not in err


# ------------------------------------------------------------------ requires: the same everywhere; one PRECONDITION policy


def _stride_project(tmp_path):
    (tmp_path / "kernels").mkdir()
    shutil.copy(os.path.join(ROOT, "examples", "kernels", "add.py"), tmp_path / "kernels" / "add.py")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gpuemu.check]\niterations = 4\nseed = 7\ndtypes = ["fp32"]\njobs = 1\n'
        '[[tool.gpuemu.check.kernels]]\ntarget = "kernels/add.py:add_stride"\nop = "add"\n')
    return tmp_path


def test_requires_globs_of_gpuemu_yaml_hold_in_fuzz_and_check_alike(tmp_path, monkeypatch, capsys):
    # add_stride is silently wrong on strided input: PRECONDITION (exit 1) until its callers' guarantee is declared
    proj = _stride_project(tmp_path)
    monkeypatch.chdir(proj)
    assert main(["check", "--store", "s"]) == 1
    assert "PRECONDITION" in capsys.readouterr().err
    (proj / "gpuemu.yaml").write_text("requires:\n  'kernels/*.py:add_str*': {contiguous: true}\n")  # a glob key
    assert main(["fuzz", "kernels/add.py:add_stride", "--op", "add", "-n", "4", "--seed", "7", "--dtype", "fp32",
                 "--store", "s"]) == 0
    assert main(["check", "--store", "s", "--json", "r.json"]) == 0
    k = json.loads((proj / "r.json").read_text())["kernels"][0]
    assert k["status"] == "pass" and k["statuses"] == {"pass": 4}


def test_requires_of_a_manifest_entry_and_the_same_to_ray_tasks(tmp_path, monkeypatch, capsys):
    proj = _stride_project(tmp_path)
    with open(proj / "pyproject.toml", "a") as f:
        f.write("requires = {contiguous = [\"x\", \"y\"]}\n")
    monkeypatch.chdir(proj)
    assert main(["check", "--store", "s"]) == 0
    assert "1/1 kernels passed" in capsys.readouterr().err
    # a Ray task gets exactly what a local worker gets (resolved on the driver): captured, not started
    from gpuemu.check import on_ray, run as run_mod

    local, remote = [], []
    real = run_mod.fuzz_one
    monkeypatch.setattr(run_mod, "fuzz_one", lambda e, **kw: local.append(kw) or real(e, **kw))
    assert main(["check", "--store", "s"]) == 0

    def execute(tasks, *, address, root, store, device, num_cpus, done):
        for i, (e, kw) in enumerate(tasks):
            remote.append(kw)
            done(i, real(e, **kw))
        return 1

    monkeypatch.setattr(on_ray, "require_ray", lambda: None)
    monkeypatch.setattr(on_ray, "execute", execute)
    assert main(["check", "--store", "s", "--ray"]) == 0
    drop = ("compile_workers",)  # local 1-worker runs compile in the loop; tasks run side by side
    assert [{k: v for k, v in kw.items() if k not in drop} for kw in remote] == \
        [{k: v for k, v in kw.items() if k not in drop} for kw in local]
    assert local[0]["requires"]["contiguous"] == ["x", "y"] and local[0]["preconditions"] == "fail"


def _precondition_result(tmp_path, policy: str) -> CheckResult:
    r = _synthetic(tmp_path)
    k = r.kernels[1]
    k.status, k.statuses, k.policy = "precondition", {"pass": 1, "precondition": 2}, policy
    k.failures[0] = dict(k.failures[0], line="PRECONDITION seed=0x1 dtype=fp32 shape=[3] x must be contiguous: ...",
                         verdict={"status": "precondition", "kind": "mismatch", "detail": "why"})
    return r


@pytest.mark.parametrize("policy, level", [("fail", "fail"), ("warn", "warn"), ("ignore", "pass")])
def test_one_precondition_policy_rendered_the_same_in_every_format(tmp_path, policy, level):
    from gpuemu.report.html import render

    r = _precondition_result(tmp_path, policy)
    k = r.kernels[1]
    assert k.level == level and k.ok == (level != "fail") and r.ok == (level != "fail")
    word = {"fail": "PRECONDITION", "warn": "PRECONDITION (warn)", "pass": "PRECONDITION (ignored)"}[level]
    text = summary_text(r)
    assert f"\n{word}" in text
    assert ("2/2 kernels passed (1 precondition " + {"warn": "warned)", "pass": "ignored)"}[level]
            if level != "fail" else "1/2 kernels passed (1 precondition)") in text
    md = summary_markdown(r)
    icon = {"fail": ":x:", "warn": ":warning:", "pass": ":white_check_mark:"}[level]
    assert f"| {icon} {word} | `k.py:launch`" in md
    tcs = {tc.get("name"): tc for tc in ET.fromstring(junit_xml(r).split("\n", 1)[1]).iter("testcase")}
    tc = tcs["launch[softmax]"]
    assert (tc.find("failure") is not None) == (level == "fail")
    assert ("warning (PRECONDITION (warn)" in tc.find("system-out").text) == (level == "warn")
    results = sarif_log(r)["runs"][0]["results"]
    assert [x["level"] for x in results] == {"fail": ["error"], "warn": ["warning"], "pass": []}[level]
    html = render(r)
    assert f'class="row-{level}" id="row-1"' in html
    assert ('<span class="verdict ok"' in html) == (level != "fail")


def test_preconditions_flag_of_check_warns_and_passes_the_gate(tmp_path, monkeypatch, capsys):
    proj = _stride_project(tmp_path)
    monkeypatch.chdir(proj)
    assert main(["check", "--preconditions", "warn", "--markdown", "s.md", "--json", "r.json"]) == 0
    err = capsys.readouterr().err
    assert "PRECONDITION (warn)" in err and "1/1 kernels passed (1 precondition warned)" in err
    assert "· 1 launcher · 1 worker ·" in err  # not "1 launchers"
    # not on a terminal: the first-failure column whole, not cut with "…"
    assert "the same case with contiguous inputs passes)" in err and "…" not in err
    # the store the records went to, named even when it is the default
    assert json.loads((proj / "r.json").read_text())["store"] == str(proj / ".gpuemu")
    assert ":warning: PRECONDITION (warn)" in (proj / "s.md").read_text()
    (proj / "gpuemu.yaml").write_text("oracle: {preconditions: ignore}\n")  # the project file, below the flag
    assert main(["check", "--store", "s"]) == 0
    assert main(["check", "--store", "s", "--preconditions", "fail"]) == 1


def test_a_max_over_nans_leaves_no_stray_warning(monkeypatch):
    # Triton's interpreter reduces tl.max with np.nanmax, which warned "All-NaN slice encountered" onto the user's
    # stderr for a kernel whose block is all NaN; the verdict judges the NaN, the warning was noise
    import warnings

    import torch
    import triton
    import triton.language as tl

    from gpuemu.runners import run_launcher

    monkeypatch.setenv("TRITON_INTERPRET", "1")

    @triton.jit
    def _max_kernel(x_ptr, y_ptr, N: tl.constexpr):
        tl.store(y_ptr, tl.max(tl.load(x_ptr + tl.arange(0, N)), axis=0))

    def launch(x):
        y = torch.empty(1)
        _max_kernel[(1,)](x, y, N=4)
        return y

    for runtime in (False, True):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = run_launcher(launch, [torch.full((4,), float("nan"))], {}, device="cpu", runtime=runtime)
        assert out.error is None and torch.isnan(out.output).all()
        assert [str(w.message) for w in seen if "NaN" in str(w.message)] == []


def test_warming_compiles_each_specialisation_once_for_the_whole_check(tmp_path, monkeypatch):
    """gpuemu.check.warm on the CPU (on CUDA it runs before the check): discovery walks each launcher's cases with
    every launch dropped and notes Triton's binding of it; the compile phase compiles each distinct one once (here
    the launch-limit compile for sm_90, into a fresh Triton cache), a second launcher of the same kernel sharing
    them; a launcher that cannot take its cases warms nothing and fails nothing."""
    from gpuemu.check.manifest import KernelEntry
    from gpuemu.check.warm import warm

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))  # (the pool's processes inherit it)
    good = KernelEntry(target=f"{ROOT}/examples/kernels/softmax.py:softmax", op="softmax")
    bad = KernelEntry(target=f"{ROOT}/examples/kernels/softmax.py:softmax", op="matmul")  # cannot take matmul's args
    kw = dict(seed=1, iterations=6, dtypes=("fp32",), strategy=None, rulepacks=(), requires=None, preconditions=None)
    out = warm([(good, kw), (good, kw), (bad, kw)], device="cpu", workers=2)
    compiled = sorted((tmp_path / "cache").rglob("*.gpuemu-limits.json"))
    assert out["failed"] == 0 and out["specialisations"] >= 2  # the softmax's block sizes differ across its cases
    assert len(compiled) == out["specialisations"]  # each once: none repeated, none missed
    assert out["shared"] == out["specialisations"]  # the twin launcher compiled nothing of its own
    assert out["jobs"] > 3  # three discoveries, then the compiles cut into more than one job


def test_warming_a_reference_judged_fuzz_compiles_its_cases_beside_the_loop_and_stops_cleanly(tmp_path, monkeypatch):
    """A lone CUDA fuzz of a kernel judged against its reference warms Triton's cache with the check's two phases,
    in a thread beside its loop (gpuemu.check.warm.Warming): here on the CPU (the launch-limit compiles for sm_90),
    every specialisation of the fuzz's cases once; stopped at once, it ends without leaving a process behind."""
    import multiprocessing

    from gpuemu.check.warm import Warming, _running

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    fam = "examples/families/masked_softmax.py"
    kw = dict(seed=3, iterations=8, dtypes=("fp32",), strategy=None, rulepacks=(), requires=None, preconditions=None)
    warming = Warming(f"{fam}:masked_softmax", reference=f"{fam}:reference", inputs=f"{fam}:get_inputs",
                      schema=None, kw=kw, device="cpu", workers=2)
    out = warming.join(timeout=600)
    compiled = lambda: len(sorted((tmp_path / "cache").rglob("*.gpuemu-limits.json")))  # noqa: E731
    assert out is not None and out["failed"] == 0 and out["specialisations"] >= 2
    assert compiled() == out["specialisations"]
    import gpuemu
    from gpuemu.resources import predicting
    from gpuemu.target import load

    with predicting(("sm_90",)):  # the fuzz those cases are the cases of: its loop finds every compile warm
        r = gpuemu.fuzz(load(f"{fam}:masked_softmax"), reference=f"{fam}:reference", inputs=f"{fam}:get_inputs",
                        target=f"{fam}:masked_softmax", device="cpu", save=False, compile_workers=0,
                        **{k: kw[k] for k in ("seed", "iterations", "dtypes")})
    assert r.ok and r.iterations == 8 and compiled() == out["specialisations"]
    before = set(multiprocessing.active_children())  # (an earlier test's pool may still be exiting: not ours)
    stopped = Warming(f"{fam}:masked_softmax", reference=f"{fam}:reference", inputs=f"{fam}:get_inputs",
                      schema=None, kw=kw, device="cpu", workers=2)
    stopped.stop()
    # (still running, not is_alive(): a child another waiter reaped first stays "alive" to its Process object)
    assert not stopped._thread.is_alive() and not stopped.leftover()
    assert not [p for p in set(multiprocessing.active_children()) - before if _running(p)]


def test_a_cuda_fuzz_against_a_reference_warms_only_what_another_process_can_bind_again(monkeypatch):
    """fuzzer._compile_ahead: a reference-judged kernel on CUDA gets the warming pool when its launcher, reference and
    inputs are named targets (workers rebuild the binding from them), nothing when any of them is an object or the
    init inputs were given in Python; on the CPU the loop compiles as before."""
    import types

    import gpuemu.check.warm as warm_mod
    from gpuemu import fuzzer
    from gpuemu.target import load

    started = []
    monkeypatch.setattr(warm_mod, "Warming", lambda target, **kw: started.append((target, kw)) or "warming")
    fam = f"{ROOT}/examples/families/masked_softmax.py"
    fn = load(f"{fam}:masked_softmax")
    plan = types.SimpleNamespace(framework="torch", compile_workers=4, bound=object(), device="cuda",
                                 target=f"{fam}:masked_softmax", seed=7, iterations=20, dtypes=["fp16"],
                                 strategy="default", requires=None, policy="fail")
    given = dict(fn=fn, reference=f"{fam}:reference", inputs=f"{fam}:get_inputs", schema=None, init_inputs=None,
                 rulepacks=())
    assert fuzzer._compile_ahead(plan, given) == ("warming", None)
    target, kw = started[0]
    assert target == plan.target and kw["reference"] == given["reference"] and kw["workers"] == 4
    assert kw["kw"]["seed"] == 7 and kw["kw"]["dtypes"] == ("fp16",) and kw["kw"]["iterations"] == 20
    assert fuzzer._compile_ahead(plan, dict(given, reference=load(f"{fam}:reference"))) == (None, None)
    assert fuzzer._compile_ahead(plan, dict(given, init_inputs=[1])) == (None, None)
    assert fuzzer._compile_ahead(types.SimpleNamespace(**dict(vars(plan), device="cpu")), given) == (None, None)
    assert len(started) == 1


def test_a_launcher_that_met_a_cuda_context_lost_to_another_is_fuzzed_again_in_a_fresh_process(tmp_path, monkeypatch,
                                                                                                capsys):
    # on CUDA a kernel's illegal memory access leaves its process without a context: the next launcher fuzzed in that
    # process would be blamed for it. Such a launcher answers RERUN, and the driver fuzzes it in a process of its own.
    # Here the first in-process launcher "meets" a lost context; the re-run (a spawned process) is a real fuzz.
    import gpuemu.check.run as run

    real_probe = run._cuda_context_lost
    met = []

    def lost_once(device):
        met.append(device)
        return len(met) == 1

    monkeypatch.setattr(run, "_cuda_context_lost", lost_once)
    proj = make_project(tmp_path)
    monkeypatch.chdir(proj)
    assert main(["check", "-k", "add", "-k", "softmax_tail_leak", "-j", "1", "--store", str(tmp_path / "s"),
                 "--json", str(tmp_path / "r.json")]) == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    by = {k["target"].rsplit(":", 1)[-1]: k for k in doc["kernels"]}
    assert by["add"]["status"] == "pass" and by["add"]["iterations"] == 4  # fuzzed again, in full
    assert by["softmax_tail_leak"]["status"] == "fail"
    assert not any(k.get("error") for k in doc["kernels"])
    assert len(met) == 2  # in this process: add (which met the lost context) and softmax_tail_leak; add again elsewhere
    assert real_probe("cpu") is False  # (the real probe: only a CUDA device can lose its context)
