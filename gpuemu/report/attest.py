"""The signed Kernel Correctness Report: an in-toto Statement in a DSSE envelope, signed with ed25519.

What is signed, exactly: DSSE's pre-authentication encoding of the payload type and the payload bytes
(``DSSEv1 <len> <type> <len> <payload>``), so verification needs nothing but the envelope and the public key.
The Statement's subjects are the kernel source files, the manifest and the rule packs by sha256 (names relative
to the project root, where the check ran; gpuemu's built-in rule packs as ``gpuemu/rulepacks/NAME``); its
predicate is what the run found, under which versions, of which git commit and, in CI, by which run.

>>> priv, pub = keygen("key")                           # doctest: +SKIP
>>> envelope = sign_check(result, key_path=priv)        # doctest: +SKIP
>>> verify(envelope_bytes, public_key_path=pub).ok      # doctest: +SKIP
True
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:gpuemu:kernel-correctness-report:v1"


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ModuleNotFoundError:
        raise InvalidArgument("signing needs the 'cryptography' package: pip install 'gpuemu[sign]'") from None
    return serialization, ed25519


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what the signature covers."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def key_id(public_raw: bytes) -> str:
    """sha256 of the raw 32-byte public key, hex: names the key in the envelope."""
    return hashlib.sha256(public_raw).hexdigest()


def keygen(prefix: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
    """Write ``PREFIX.key`` (PKCS#8 PEM, mode 0600) and ``PREFIX.pub`` (SubjectPublicKeyInfo PEM)."""
    serialization, ed25519 = _crypto()
    priv_path, pub_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    for p in (priv_path, pub_path):
        if p.exists() and not force:
            raise InvalidArgument(f"{p} exists; pass --force to overwrite it or choose another name")
    key = ed25519.Ed25519PrivateKey.generate()
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    if priv_path.parent != Path(""):
        priv_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(priv)
    pub_path.write_bytes(pub)
    return priv_path, pub_path


def _load_private(path: str | os.PathLike):
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except FileNotFoundError:
        raise InvalidArgument(f"--attest {path}: no such key file; create a key pair with 'gpuemu keygen'") from None
    except OSError as e:
        raise InvalidArgument(f"--attest {path}: cannot read the key: {e.strerror or e}") from None
    except (ValueError, TypeError) as e:
        raise InvalidArgument(f"--attest {path}: not an unencrypted PEM private key ({e})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise InvalidArgument(f"--attest {path}: a {type(key).__name__}, not an ed25519 key; use 'gpuemu keygen'")
    return key


def _load_public(path: str | os.PathLike):
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except OSError as e:
        raise InvalidArgument(f"--key {path}: cannot read the key: {e.strerror or e}") from None
    except ValueError as e:
        raise InvalidArgument(f"--key {path}: not a PEM public key ({e})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise InvalidArgument(f"--key {path}: a {type(key).__name__}, not an ed25519 public key")
    return key


def _raw(pub) -> bytes:
    serialization, _ = _crypto()
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def _name(path: str, root: str) -> str:
    """Repo-relative name for files under the root; built-in rule packs as gpuemu/rulepacks/NAME."""
    p = Path(path).resolve()
    try:
        return p.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        from ..config import builtin_dir

        try:
            return "gpuemu/rulepacks/" + p.relative_to(builtin_dir().resolve()).as_posix()
        except ValueError:
            return p.as_posix()


def statement(result) -> dict:
    """The in-toto Statement of a CheckResult: subjects by sha256, the predicate with every verdict."""
    subjects: dict[str, dict] = {}
    for k in result.kernels:
        files = [k.file] + [x["path"] for x in k.kernels if x.get("path")]
        for f in files:
            if os.path.isfile(f):
                subjects.setdefault(_name(f, result.root), {"sha256": _sha256(f)})
    if os.path.isfile(result.manifest):  # which launchers, ops and settings were asked for
        subjects.setdefault(_name(result.manifest, result.root), {"sha256": _sha256(result.manifest)})
    packs = []
    for rp in result.rulepacks:
        if os.path.isfile(rp):
            name, digest = _name(rp, result.root), _sha256(rp)
            subjects.setdefault(name, {"sha256": digest})
            packs.append({"name": name, "sha256": digest})
    kernels = []
    for k in result.kernels:
        kernels.append({
            "target": f"{_name(k.file, result.root)}:{k.function}", "op": k.op, "verdict": k.status, "ok": k.ok,
            "policy": getattr(k, "policy", "fail"),
            "seed": f"0x{k.seed:x}", "cases": k.iterations, "passed": k.passed, "statuses": dict(k.statuses),
            "dtypes": list(k.dtypes), "skipped": dict(k.skipped), "source_sha256": k.sha256,
            "limits": getattr(k, "limits", 0), "envelope": getattr(k, "envelope", None),
            "refused": getattr(k, "refused", 0),
            "kernels": [{"name": x["name"], "file": _name(x["path"], result.root) if x.get("path") else None,
                         "line": x.get("start_line")} for x in k.kernels],
            "failures": [{"line": f["line"], "replay": f["replay"], "hint": f.get("hint")} for f in k.failures[:5]],
            "error": k.error,
        })
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": n, "digest": d} for n, d in sorted(subjects.items())],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "tool": {"name": "gpuemu", "version": result.versions.get("gpuemu")},
            "environment": {"torch": result.versions.get("torch"), "triton": result.versions.get("triton"),
                            "python": result.versions.get("python"), "device": result.device},
            "run": {"seed": f"0x{result.seed:x}", "started": result.started, "seconds": round(result.seconds, 3),
                    "manifest": _name(result.manifest, result.root)},
            # the commit the verdicts are of (dirty: tracked files differed from it) and the CI run that made them
            "source": (getattr(result, "provenance", None) or {}).get("git") or None,
            "ci": (getattr(result, "provenance", None) or {}).get("ci") or None,
            "rulepacks": packs,
            "summary": {"kernels": len(result.kernels), "passed": sum(k.ok for k in result.kernels),
                        "verdicts": result.counts(), "cases": sum(k.iterations for k in result.kernels),
                        "ok": result.ok},
            "kernels": kernels,
        },
    }


def sign_statement(stmt: dict, *, key_path: str | os.PathLike) -> dict:
    """A DSSE envelope over the Statement's canonical JSON bytes."""
    key = _load_private(key_path)
    payload = json.dumps(stmt, sort_keys=True, separators=(",", ":")).encode()
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    return {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode(),
            "signatures": [{"keyid": key_id(_raw(key.public_key())), "sig": base64.b64encode(sig).decode()}]}


def sign_check(result, *, key_path: str | os.PathLike) -> dict:
    return sign_statement(statement(result), key_path=key_path)


def _b64(text: object) -> bytes | None:
    """Strict base64: only the canonical encoding is accepted, so a changed character can never decode to
    the same bytes (the last character's unused bits would otherwise let two texts carry one signature)."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    return raw if base64.b64encode(raw).decode() == text else None


@dataclass
class Verification:
    """What ``verify`` found: ``ok`` only when the signature holds and every checked subject matches."""

    ok: bool = False
    problems: list[str] = field(default_factory=list)
    key_id: str | None = None
    statement: dict | None = None
    checked: list[str] = field(default_factory=list)  # subjects whose file matched
    unchecked: list[str] = field(default_factory=list)  # subjects outside --sources

    def to_dict(self) -> dict:
        summary = (self.statement or {}).get("predicate", {}).get("summary")
        return {"ok": self.ok, "problems": list(self.problems), "key_id": self.key_id, "summary": summary,
                "checked": list(self.checked), "unchecked": list(self.unchecked)}


def verify(envelope: bytes, *, public_key_path: str | os.PathLike, sources: str | os.PathLike | None = None) -> Verification:
    """Verify a report offline: the envelope's form, the ed25519 signature, then (with ``sources``) each
    subject file's sha256. Every problem is named; nothing raises for a bad report."""
    pub = _load_public(public_key_path)  # first: says how to install cryptography when it is missing
    from cryptography.exceptions import InvalidSignature
    v = Verification(key_id=key_id(_raw(pub)))
    try:
        env = json.loads(envelope)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        v.problems.append(f"the report is not valid JSON ({e}): it was truncated or modified")
        return v
    if not isinstance(env, dict) or not {"payloadType", "payload", "signatures"} <= set(env):
        v.problems.append("the report is not a DSSE envelope (payloadType, payload, signatures)")
        return v
    payload = _b64(env["payload"])
    if payload is None:
        v.problems.append("the envelope's payload is not valid base64: it was modified")
        return v
    sigs = env["signatures"] if isinstance(env["signatures"], list) else []
    ours = [s for s in sigs if isinstance(s, dict) and s.get("keyid") == v.key_id]
    if not sigs:
        v.problems.append("the report carries no signature: it was stripped, or never signed ('gpuemu check "
                          "--attest KEY' signs it)")
        return v
    if not ours:
        others = ", ".join(str(s.get("keyid", "?"))[:16] for s in sigs if isinstance(s, dict)) or "none"
        v.problems.append(f"wrong key: the report is signed by key {others}…, not by the given key "
                          f"{v.key_id[:16]}…")
        return v
    valid = False
    for s in ours:
        sig = _b64(s.get("sig"))
        try:
            if sig is not None:
                pub.verify(sig, pae(str(env["payloadType"]), payload))
                valid = True
                break
        except InvalidSignature:
            continue
    if not valid:
        v.problems.append("signature does not verify: a byte of the payload, its type or the signature was changed "
                          "after signing")
        return v
    if env["payloadType"] != PAYLOAD_TYPE:
        v.problems.append(f"payloadType {env['payloadType']!r} is not {PAYLOAD_TYPE!r}")
        return v
    try:
        stmt = json.loads(payload)
    except json.JSONDecodeError:
        v.problems.append("the signed payload is not JSON")
        return v
    if stmt.get("_type") != STATEMENT_TYPE or stmt.get("predicateType") != PREDICATE_TYPE:
        v.problems.append(f"the payload is not a gpuemu Kernel Correctness Report ({stmt.get('predicateType')!r})")
        return v
    v.statement = stmt
    if sources is not None:
        base = Path(sources)
        if not base.is_dir():
            raise InvalidArgument(f"--sources {sources}: not a directory")
        from .. import __version__
        from ..config import builtin_dir

        signed_version = (stmt.get("predicate", {}).get("tool") or {}).get("version")
        for subj in stmt.get("subject", []):
            name, want = subj.get("name", ""), subj.get("digest", {}).get("sha256")
            if name.startswith("gpuemu/rulepacks/"):
                # gpuemu's own rule packs: the installed gpuemu's copy, when it is the version that signed
                if signed_version != __version__:
                    v.unchecked.append(f"{name} (signed by gpuemu {signed_version}, this is {__version__})")
                    continue
                f = builtin_dir() / name[len("gpuemu/rulepacks/"):]
                if not f.is_file():
                    v.problems.append(f"{name}: listed in the report but this gpuemu {__version__} has no such "
                                      "built-in rule pack")
                elif _sha256(str(f)) != want:
                    v.problems.append(f"{name}: sha256 {_sha256(str(f))[:16]}… of this gpuemu's built-in copy does "
                                      f"not match the report's {str(want)[:16]}…: the tolerances differ")
                else:
                    v.checked.append(name)
                continue
            if name.startswith("/"):
                v.unchecked.append(name)  # outside the project tree, named in full: not under --sources
                continue
            f = base / name
            if not f.is_file():
                v.problems.append(f"{name}: listed in the report but missing under {sources}")
            elif _sha256(str(f)) != want:
                v.problems.append(f"{name}: sha256 {_sha256(str(f))[:16]}… does not match the report's "
                                  f"{str(want)[:16]}…: the file changed since the check")
            else:
                v.checked.append(name)
    v.ok = not v.problems
    return v


def unpassed(stmt: dict) -> list[str]:
    """The launchers a verified statement says did not pass: ``target (verdict)``; empty when all passed."""
    return [f"{k.get('target')} ({k.get('verdict')})" for k in stmt.get("predicate", {}).get("kernels", [])
            if not k.get("ok")]
