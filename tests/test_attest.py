"""The signed Kernel Correctness Report: keygen, sign, verify offline; every tamper class is detected and
named (a changed byte of the payload, of its base64, of the signature or of the payload type, a truncated
file, a wrong key, a kernel file changed or missing after the check)."""

from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip("cryptography")

from gpuemu.check.run import CheckResult, KernelResult, sha256_file  # noqa: E402
from gpuemu.cli import main  # noqa: E402
from gpuemu.report.attest import PAYLOAD_TYPE, PREDICATE_TYPE, pae, sign_check, statement, verify  # noqa: E402


@pytest.fixture
def signed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernels").mkdir()
    good, bad = tmp_path / "kernels" / "a.py", tmp_path / "kernels" / "b.py"
    good.write_text("def a(x):\n    return x\n")
    bad.write_text("def b(x):\n    return -x\n")
    pack = tmp_path / "tol.yaml"
    pack.write_text("schema_version: 1\n")
    kernels = [KernelResult(target=f"{good}:a", op="add", seed=1, status="pass", iterations=5, passed=5,
                            statuses={"pass": 5}, dtypes=["fp32"], sha256=sha256_file(good)),
               KernelResult(target=f"{bad}:b", op="add", seed=2, status="fail", iterations=5, passed=1,
                            statuses={"pass": 1, "fail": 4}, dtypes=["fp32"], sha256=sha256_file(bad),
                            failures=[{"line": "FAIL seed=0x2 ...", "replay": "gpuemu reproduce 0x2", "hint": None}])]
    result = CheckResult(kernels=kernels, seed=0x2A, manifest=str(tmp_path / "pyproject.toml"), root=str(tmp_path),
                         device="cpu", rulepacks=[str(pack)], store=None, jobs=1, seconds=2.0,
                         versions={"gpuemu": "0.1.0", "torch": "2.13.0", "triton": "3.8.0", "python": "3.11"},
                         started="2026-12-01T00:00:00+00:00")
    assert main(["keygen", "signer"]) == 0 and main(["keygen", "other"]) == 0
    env = sign_check(result, key_path=tmp_path / "signer.key")
    report = tmp_path / "report.json"
    report.write_text(json.dumps(env, indent=2))
    capsys.readouterr()
    return tmp_path, report, env


def _verify_cli(report, key, sources=None):
    return main(["verify", str(report), "--key", str(key)] + (["--sources", str(sources)] if sources else []))


def test_statement_is_in_toto_with_subjects_and_predicate(signed):
    root, report, env = signed
    assert env["payloadType"] == PAYLOAD_TYPE and len(env["signatures"]) == 1
    stmt = json.loads(base64.b64decode(env["payload"]))
    assert stmt["_type"] == "https://in-toto.io/Statement/v1" and stmt["predicateType"] == PREDICATE_TYPE
    names = {s["name"]: s["digest"]["sha256"] for s in stmt["subject"]}
    assert names == {"kernels/a.py": sha256_file(root / "kernels" / "a.py"),
                     "kernels/b.py": sha256_file(root / "kernels" / "b.py"), "tol.yaml": sha256_file(root / "tol.yaml")}
    pred = stmt["predicate"]
    assert pred["environment"] == {"torch": "2.13.0", "triton": "3.8.0", "python": "3.11", "device": "cpu"}
    assert pred["run"]["seed"] == "0x2a" and pred["rulepacks"] == [{"name": "tol.yaml", "sha256": names["tol.yaml"]}]
    assert [(k["target"], k["verdict"], k["cases"], k["passed"], k["seed"]) for k in pred["kernels"]] == [
        ("kernels/a.py:a", "pass", 5, 5, "0x1"), ("kernels/b.py:b", "fail", 5, 1, "0x2")]
    assert pred["summary"] == {"kernels": 2, "passed": 1, "verdicts": {"pass": 1, "fail": 1}, "cases": 10, "ok": False}


def test_verify_ok_with_sources(signed, capsys):
    root, report, _ = signed
    assert _verify_cli(report, root / "signer.pub", root) == 0
    err = capsys.readouterr().err
    assert "VERIFIED" in err and "3 subject files match" in err and "1/2 kernels passed" in err


def test_signature_covers_the_dsse_pae(signed):
    root, report, env = signed
    from cryptography.hazmat.primitives import serialization

    pub = serialization.load_pem_public_key((root / "signer.pub").read_bytes())
    pub.verify(base64.b64decode(env["signatures"][0]["sig"]),
               pae(PAYLOAD_TYPE, base64.b64decode(env["payload"])))  # raises if not


def _tampered_payload(env):
    stmt = json.loads(base64.b64decode(env["payload"]))
    stmt["predicate"]["kernels"][1]["verdict"] = "pass"  # the forger's edit: the failing kernel now passes
    return dict(env, payload=base64.b64encode(json.dumps(stmt, sort_keys=True, separators=(",", ":")).encode()).decode())


def _flip_b64(text: str, at: int) -> str:
    c = text[at]
    return text[:at] + ("A" if c != "A" else "B") + text[at + 1:]


@pytest.mark.parametrize("tamper, needle", [
    (_tampered_payload, "signature does not verify"),
    (lambda e: dict(e, payload=_flip_b64(e["payload"], 40)), "signature does not verify"),
    (lambda e: dict(e, signatures=[dict(e["signatures"][0], sig=_flip_b64(e["signatures"][0]["sig"], 10))]),
     "signature does not verify"),
    (lambda e: dict(e, payloadType="application/json"), "signature does not verify"),
    (lambda e: dict(e, payload=e["payload"][:-3] + "!!="), "not valid base64"),
])
def test_every_changed_byte_is_detected(signed, capsys, tamper, needle):
    root, report, env = signed
    report.write_text(json.dumps(tamper(env)))
    assert _verify_cli(report, root / "signer.pub") == 1
    err = capsys.readouterr().err
    assert needle in err and "NOT VERIFIED" in err


def test_any_single_byte_flip_of_the_signed_fields_fails(signed):
    """Exhaustive over positions of payload and signature (a sample of 64 each): none verifies."""
    root, report, env = signed
    for field in ("payload", "sig"):
        text = env[field] if field == "payload" else env["signatures"][0]["sig"]
        step = max(1, len(text) // 64)
        for at in range(0, len(text) - 2, step):
            t = _flip_b64(text, at)
            e = dict(env, payload=t) if field == "payload" else dict(env, signatures=[dict(env["signatures"][0], sig=t)])
            assert not verify(json.dumps(e).encode(), public_key_path=root / "signer.pub").ok, (field, at)


def test_truncated_report(signed, capsys):
    root, report, _ = signed
    report.write_text(report.read_text()[:-20])
    assert _verify_cli(report, root / "signer.pub") == 1
    assert "not valid JSON" in capsys.readouterr().err


def test_wrong_key(signed, capsys):
    root, report, _ = signed
    assert _verify_cli(report, root / "other.pub") == 1
    assert "wrong key: the report is signed by key" in capsys.readouterr().err


def test_wrong_key_even_with_a_forged_keyid(signed):
    root, report, env = signed
    from gpuemu.report.attest import _load_public, _raw, key_id

    other = key_id(_raw(_load_public(root / "other.pub")))
    forged = dict(env, signatures=[dict(env["signatures"][0], keyid=other)])
    v = verify(json.dumps(forged).encode(), public_key_path=root / "other.pub")
    assert not v.ok and "signature does not verify" in v.problems[0]


def test_changed_and_missing_kernel_files(signed, capsys):
    root, report, _ = signed
    (root / "kernels" / "b.py").write_text("def b(x):\n    return x  # 'fixed' after the report\n")
    (root / "tol.yaml").unlink()
    assert _verify_cli(report, root / "signer.pub", root) == 1
    err = capsys.readouterr().err
    assert "kernels/b.py: sha256" in err and "does not match the report's" in err
    assert "tol.yaml: listed in the report but missing" in err
    assert "kernels/a.py" not in err  # the unchanged file is not blamed


def test_usage_errors_exit_2(signed, capsys):
    root, report, _ = signed
    assert _verify_cli(report, root / "nope.pub") == 2
    assert _verify_cli(root / "nope.json", root / "signer.pub") == 2
    assert _verify_cli(report, root / "signer.key") == 2  # a private key is not a public key
    assert main(["keygen", "signer"]) == 2  # no silent overwrite
    assert "exists; pass --force" in capsys.readouterr().err


def test_private_key_is_owner_only(signed):
    root, _, _ = signed
    assert (root / "signer.key").stat().st_mode & 0o077 == 0


def test_statement_round_trips_from_json(signed):
    root, report, env = signed
    stmt = json.loads(base64.b64decode(env["payload"]))
    result = CheckResult.from_dict(json.loads(json.dumps({
        "kernels": [], "seed": "0x1", "manifest": "m", "root": str(root), "device": "cpu", "rulepacks": [],
        "jobs": 1, "seconds": 0.0, "versions": {}, "started": "t"})))
    assert statement(result)["subject"] == [] and stmt["subject"]


# ------------------------------------------------------------------ evidence that names its commit, and a pass policy


def test_a_report_without_signatures_says_so(signed, capsys):
    root, report, env = signed
    report.write_text(json.dumps(dict(env, signatures=[])))
    assert _verify_cli(report, root / "signer.pub") == 1
    err = capsys.readouterr().err
    assert "the report carries no signature" in err and "signed by key none" not in err


def test_require_pass_fails_a_verified_report_whose_verdicts_fail(signed, capsys):
    root, report, _ = signed
    assert _verify_cli(report, root / "signer.pub") == 0  # authentic: verified
    capsys.readouterr()
    assert main(["verify", str(report), "--key", str(root / "signer.pub"), "--require-pass"]) == 1
    err = capsys.readouterr().err
    assert "VERIFIED" in err and "NOT PASSED: 1 of 2 launchers did not pass: kernels/b.py:b (fail)" in err


def test_require_pass_accepts_a_report_where_every_launcher_passed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("def a(x):\n    return x\n")
    result = CheckResult(kernels=[KernelResult(target=f"{tmp_path / 'a.py'}:a", op="add", seed=1, status="pass",
                                               iterations=3, passed=3, statuses={"pass": 3})],
                         seed=1, manifest=str(tmp_path / "pyproject.toml"), root=str(tmp_path), device="cpu",
                         rulepacks=[], store=None, jobs=1, seconds=1.0, versions={"gpuemu": "0.1.0"}, started="t")
    assert main(["keygen", "k"]) == 0
    (tmp_path / "r.json").write_text(json.dumps(sign_check(result, key_path=tmp_path / "k.key")))
    capsys.readouterr()
    assert main(["verify", "r.json", "--key", "k.pub", "--require-pass", "--json", "v.json"]) == 0
    assert "PASSED: every launcher of the report passed (1)" in capsys.readouterr().err
    assert json.loads((tmp_path / "v.json").read_text())["passed"] is True


def test_statement_names_the_commit_the_ci_run_and_the_manifest(tmp_path, monkeypatch, capsys):
    import subprocess

    from gpuemu.check.provenance import provenance

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("def a(x):\n    return x\n")
    (tmp_path / "pyproject.toml").write_text("[tool.gpuemu.check]\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    gh = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/kernels", "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2",
          "GITHUB_SHA": head, "GITHUB_SERVER_URL": "https://github.com"}
    prov = provenance(str(tmp_path), env=gh)
    assert prov["git"] == {"commit": head, "dirty": False, "ref": "main"}
    assert prov["ci"]["run_url"] == "https://github.com/acme/kernels/actions/runs/42" and prov["ci"]["sha"] == head
    (tmp_path / "a.py").write_text("def a(x):\n    return -x\n")  # an uncommitted edit: the verdicts are of no commit
    assert provenance(str(tmp_path), env={})["git"]["dirty"] is True and "ci" not in provenance(str(tmp_path), env={})
    assert provenance("/", env={}) == {}  # not a repository: nothing claimed
    result = CheckResult(kernels=[KernelResult(target=f"{tmp_path / 'a.py'}:a", op="add", seed=1, status="pass",
                                               iterations=1, passed=1, statuses={"pass": 1})],
                         seed=1, manifest=str(tmp_path / "pyproject.toml"), root=str(tmp_path), device="cpu",
                         rulepacks=[], store=None, jobs=1, seconds=1.0, versions={"gpuemu": "0.1.0"}, started="t",
                         provenance=prov)
    stmt = statement(result)
    assert {s["name"] for s in stmt["subject"]} == {"a.py", "pyproject.toml"}  # the manifest is a subject
    assert stmt["predicate"]["source"]["commit"] == head and stmt["predicate"]["ci"]["run_id"] == "42"
    assert main(["keygen", "k"]) == 0
    (tmp_path / "r.json").write_text(json.dumps(sign_check(result, key_path=tmp_path / "k.key")))
    capsys.readouterr()
    assert main(["verify", "r.json", "--key", "k.pub"]) == 0
    err = capsys.readouterr().err
    assert f"commit {head} on main" in err and "CI: https://github.com/acme/kernels/actions/runs/42 (attempt 2)" in err


def test_builtin_rule_pack_subjects_are_checked_against_this_gpuemu(tmp_path, monkeypatch, capsys):
    import shutil

    from gpuemu import config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("def a(x):\n    return x\n")
    packs = [str(p) for p in config.builtin_rulepacks()]
    result = CheckResult(kernels=[KernelResult(target=f"{tmp_path / 'a.py'}:a", op="add", seed=1, status="pass",
                                               iterations=1, passed=1, statuses={"pass": 1})],
                         seed=1, manifest=str(tmp_path / "m.toml"), root=str(tmp_path), device="cpu", rulepacks=packs,
                         store=None, jobs=1, seconds=1.0, versions={"gpuemu": "0.1.0"}, started="t")
    assert main(["keygen", "k"]) == 0
    (tmp_path / "r.json").write_text(json.dumps(sign_check(result, key_path=tmp_path / "k.key")))
    v = verify((tmp_path / "r.json").read_bytes(), public_key_path=tmp_path / "k.pub", sources=tmp_path)
    assert v.ok and "gpuemu/rulepacks/default.yaml" in v.checked and not v.unchecked
    # this gpuemu's default.yaml differs from the one that judged: named, not verified
    fake = tmp_path / "builtin"
    shutil.copytree(config.builtin_dir(), fake)
    (fake / "default.yaml").write_text((fake / "default.yaml").read_text() + "\n# loosened\n")
    monkeypatch.setattr(config, "builtin_dir", lambda: fake)
    v = verify((tmp_path / "r.json").read_bytes(), public_key_path=tmp_path / "k.pub", sources=tmp_path)
    assert not v.ok and any(p.startswith("gpuemu/rulepacks/default.yaml: sha256") for p in v.problems)
