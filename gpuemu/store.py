"""The failure store: exact input snapshots and JSON records, replayable by seed.

Layout under the store root (``.gpuemu/`` by default; ``--store`` or ``GPUEMU_STORE``)::

    snapshots/<sha256>.safetensors   the exact inputs: each argument's whole storage, bytes as they were
    failures/<seed>--<target>.json   the record: case, verdict, tolerance, launches, snapshot hash
    runs/<run seed>--<target>.json    what a fuzz run found but did not store (past its cap, or a full disk)

A failure is identified by (target, seed): two targets fuzzed with the same run seed get the same case
seeds, so a seed alone can name two records. ``find`` picks the record of the named target, says a seed
is ambiguous when it names several, and says a seed was found but not stored (from ``runs/``) instead of
replaying another target's record. Every record is validated against ``schemas/record.schema.json`` (and
the case against the op registry) before anything runs: a malformed record is one SnapshotError naming
the field.

A snapshot keeps each argument's full storage plus its size, stride and offset, so a strided view and
the poison in its gaps replay byte for byte; no pickle is involved (safetensors; bf16 is native). The
record names the snapshot by content hash, so a modified snapshot is detected on fetch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .errors import SnapshotError, StoreError

# The failure record's format. The rule: a record states the format it was written in (schema_version) and the
# gpuemu that wrote it (gpuemu). This gpuemu reads every format from 1 to SCHEMA_VERSION (an older record is
# migrated on read: each format only added fields and values to the one before); a record of a newer format is
# refused with one line naming both versions and the upgrade. Any change that an older reader would reject (a new
# field, a new verdict status or layout) bumps SCHEMA_VERSION. 2: kernels judged against a reference (bound), the
# record's origin, view layouts, the LIMIT and OVERFLOW statuses.
SCHEMA_VERSION = 2
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _slug(target: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", target).strip("_")
    return s[-80:] or "target"


def seed_hex(seed: int) -> str:
    return f"0x{seed:x}"


def encode_tensors(tensors: Mapping[str, Any]) -> bytes:
    """Snapshot bytes: every tensor's whole storage (1-D) with its view geometry in the metadata."""
    import torch
    from safetensors.torch import save

    data: dict[str, torch.Tensor] = {}
    meta: dict[str, str] = {}
    for name, t in tensors.items():
        if t is None:
            meta[f"{name}.none"] = "1"
            continue
        if not isinstance(t, torch.Tensor):  # a scalar argument: the case holds it (gpuemu.cases.scalar_args)
            continue
        t = t.detach().cpu()
        st = t.untyped_storage()
        flat = torch.empty(0, dtype=t.dtype).set_(st, 0, (st.nbytes() // t.element_size(),), (1,))
        data[name] = flat.clone()
        meta[f"{name}.view"] = json.dumps({"size": list(t.shape), "stride": list(t.stride()),
                                           "offset": t.storage_offset()})
    return _canonical_header(save(data, metadata=meta))


def _canonical_header(blob: bytes) -> bytes:
    """The same bytes for the same tensors in every process: safetensors writes its JSON header from a hash map
    whose order changes from process to process, so the content hash that names a snapshot would too (the same
    failure found by two workers became two snapshots). The header is rewritten with sorted keys, padded with
    spaces to its original length (the data offsets do not move)."""
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    if len(text) > n:  # pragma: no cover - compact JSON is never longer than what safetensors wrote
        return blob
    return blob[:8] + text + b" " * (n - len(text)) + blob[8 + n:]


def decode_tensors(blob: bytes) -> dict[str, Any]:
    import torch
    from safetensors import safe_open
    from safetensors.torch import load

    tensors = load(blob)
    with tempfile.NamedTemporaryFile(suffix=".safetensors") as f:  # metadata is only exposed through files
        f.write(blob)
        f.flush()
        with safe_open(f.name, framework="pt") as sf:
            meta = sf.metadata() or {}
    out: dict[str, Any] = {}
    for key, val in meta.items():
        name, _, what = key.rpartition(".")
        if what == "none":
            out[name] = None
        elif what == "view":
            geo = json.loads(val)
            out[name] = torch.as_strided(tensors[name], geo["size"], geo["stride"], geo["offset"])
    return out


RECORD_SCHEMA = "record.schema.json"


def record_schema() -> dict:
    """The JSON Schema of a failure record (shipped in the package as ``gpuemu/schemas/record.schema.json``)."""
    from importlib import resources

    return json.loads(resources.files("gpuemu").joinpath("schemas", RECORD_SCHEMA).read_text(encoding="utf-8"))


def result_schema() -> dict:
    """The JSON Schema of the ``gpuemu fuzz --json`` document (``$defs/fuzz_result`` of the record schema)."""
    doc = record_schema()
    return {"$schema": doc["$schema"], "$id": doc["$id"].replace("record-", "fuzz-result-"), "$defs": doc["$defs"],
            "$ref": "#/$defs/fuzz_result"}


def _field(path) -> str:
    return ".".join(str(p) for p in path) or "<top>"


def validate_record(rec: Any, where: str | os.PathLike = "record") -> dict:
    """``rec`` if it is a well-formed failure record; else SnapshotError naming the field and the file.

    >>> validate_record({"schema_version": 99}, "r.json")   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    gpuemu.errors.SnapshotError: failure record r.json: schema_version: 99 ...
    """
    import jsonschema

    def bad(field: str, why: str) -> SnapshotError:
        return SnapshotError(f"failure record {where}: {field}: {why}; it cannot be replayed (re-run gpuemu fuzz "
                             "to store it again)")

    version = rec.get("schema_version") if isinstance(rec, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        from . import __version__

        raise SnapshotError(f"failure record {where}: written by gpuemu {rec.get('gpuemu', '?')} in record format "
                            f"{version}; this gpuemu ({__version__}) reads formats 1 to {SCHEMA_VERSION}, so it cannot be replayed here: upgrade "
                            "gpuemu (pip install -U gpuemu) to replay it")
    if isinstance(version, int) and 1 <= version < SCHEMA_VERSION:
        rec = dict(rec, schema_version=SCHEMA_VERSION)  # migrated: the later formats only added to this one

    validator = jsonschema.Draft202012Validator(record_schema())
    errors = sorted(validator.iter_errors(rec), key=lambda e: (len(e.absolute_path), _field(e.absolute_path)))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        field = _field(e.absolute_path)
        if e.validator == "required":
            missing = next((m for m in re.findall(r"'([^']+)' is a required property", e.message)), "?")
            field = f"{field}.{missing}" if e.absolute_path else missing
            raise bad(field, "is missing")
        if e.validator == "const" and field == "schema_version":
            raise bad(field, f"is {e.instance!r}; this gpuemu reads records of schema_version {SCHEMA_VERSION}")
        raise bad(field, f"{e.instance!r} is invalid ({e.message})" if len(repr(e.instance)) < 80 else e.message[:160])
    if "hook" not in rec and rec.get("bound"):  # a kernel judged against its reference: the stored schema says
        _check_bound(rec, bad)                  # what a case of it is (the reference is imported on replay only)
    elif "hook" not in rec:
        _check_case(rec["case"], "case", bad)
        if rec.get("original_case") is not None:
            _check_case(rec["original_case"], "original_case", bad)
        if rec["op"] != rec["case"]["op"]:
            raise bad("op", f"{rec['op']!r} differs from case.op {rec['case']['op']!r}")
    return rec


def _check_bound(rec: dict, bad) -> None:
    from .errors import InvalidArgument
    from .schema.model import Schema

    bound = rec["bound"]
    if not isinstance(bound, dict) or not isinstance(bound.get("schema"), dict):
        raise bad("bound.schema", "is missing")
    try:
        sch = Schema.from_dict(bound["schema"])
    except InvalidArgument as e:
        raise bad("bound.schema", str(e)) from None
    for name in ("case", "original_case"):
        case = rec.get(name)
        if case is None:
            continue
        if case["op"] != rec["op"]:
            raise bad(f"{name}.op", f"{case['op']!r} differs from op {rec['op']!r}")
        if set(case["dims"]) != set(sch.dims):
            raise bad(f"{name}.dims", f"has {sorted(case['dims'])}, the schema has dims {sorted(sch.dims)}")
        for d, v in case["dims"].items():
            dim = sch.dims[d]
            if not 1 <= int(v) <= 1 << 31 or int(v) % dim.multiple_of:
                raise bad(f"{name}.dims.{d}", f"{v} is not a size of {d} (a multiple of {dim.multiple_of})")
        names = {a.name for a in sch.args}
        if set(case["layouts"]) - names:
            raise bad(f"{name}.layouts", f"names {sorted(set(case['layouts']) - names)}, not arguments of the call")


def _check_case(case: dict, name: str, bad) -> None:
    """The case against the op registry: known op, exactly the op's dims, a layout per argument."""
    from . import ops
    from .cases import dim_limits

    try:
        spec = ops.get(case["op"])
    except Exception:
        raise bad(f"{name}.op", f"{case['op']!r} is not a known op") from None
    if set(case["dims"]) != set(spec.dims):
        raise bad(f"{name}.dims", f"has {sorted(case['dims'])}, {spec.name} has dims {sorted(spec.dims)}")
    for d, v in case["dims"].items():
        lo, hi = dim_limits(spec, d)
        if not lo <= v <= 1 << 20:
            raise bad(f"{name}.dims.{d}", f"{v} is outside [{lo}, {1 << 20}]")
    names = {a.name for a in spec.args}
    if set(case["layouts"]) - names:
        raise bad(f"{name}.layouts", f"names {sorted(set(case['layouts']) - names)}, not arguments of {spec.name} "
                                     f"({', '.join(sorted(names))})")
    problem = spec.check_dims({k: int(v) for k, v in case["dims"].items()}, dict(case.get("kwargs", {})))
    if problem is not None:
        raise bad(f"{name}.dims", str(problem))


@dataclass(frozen=True)
class StoredFailure:
    record: dict
    path: Path

    @property
    def seed(self) -> int:
        return int(self.record["case"]["seed"])

    @property
    def target(self) -> str:
        return str(self.record.get("target", ""))


def replay_command(seed: int, *, target: str | None = None, store: str | os.PathLike | None = None) -> str:
    """The ``gpuemu reproduce`` command line for a stored failure, quoted for a POSIX shell."""
    import shlex

    cmd = f"gpuemu reproduce {seed_hex(seed)}"
    if store is not None:
        cmd += f" --store {shlex.quote(str(store))}"
    if target:
        cmd += f" --target {shlex.quote(target)}"
    return cmd


class Store:
    """A directory of failure records and snapshots: ``save`` / ``fetch`` / ``delete`` / ``list``."""

    def __init__(self, root: str | os.PathLike, *, max_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes

    def ensure_writable(self) -> None:
        """Fail early with one clear line if the store cannot be written."""
        try:
            (self.root / "failures").mkdir(parents=True, exist_ok=True)
            (self.root / "snapshots").mkdir(parents=True, exist_ok=True)
            # a probe of its own: launchers checked in parallel share a store (one shared name raced: one
            # process unlinked the probe another had just written, and that launcher ended in this error)
            fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=self.root)
            try:
                os.write(fd, b"ok")
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as e:
            raise StoreError(f"cannot write the failure store at {self.root}: {e.strerror or e}; "
                             "pass --store DIR or set GPUEMU_STORE to a writable directory") from None

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file()) if self.root.exists() else 0

    def save(self, record: Mapping[str, Any], tensors: Mapping[str, Any]) -> Path:
        """Write the snapshot (content-addressed) and the record; returns the record's path."""
        blob = encode_tensors(tensors)
        if len(blob) > MAX_SNAPSHOT_BYTES:
            raise StoreError(f"snapshot of {len(blob)} bytes exceeds the {MAX_SNAPSHOT_BYTES}-byte cap")
        if self.max_bytes is not None and self.size_bytes() + len(blob) > self.max_bytes:
            raise StoreError(f"the store at {self.root} is at its size cap ({self.max_bytes} bytes)")
        digest = hashlib.sha256(blob).hexdigest()
        snap = self.root / "snapshots" / f"{digest}.safetensors"
        try:
            if not snap.exists():
                _atomic_write(snap, blob)
            rec = dict(record, schema_version=SCHEMA_VERSION, snapshot={"sha256": digest, "path": str(snap)},
                       saved_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            seed = int(rec["case"]["seed"])
            path = self.root / "failures" / f"{seed_hex(seed)}--{_slug(str(rec.get('target', '')))}.json"
            _atomic_write(path, (json.dumps(rec, indent=2, sort_keys=True) + "\n").encode())
        except OSError as e:
            raise StoreError(f"cannot write the failure store at {self.root}: {e.strerror or e}") from None
        return path

    def list(self) -> list[StoredFailure]:
        """The readable records (see :meth:`scan` for the unreadable ones too)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[StoredFailure], list[tuple[Path, str]]]:
        """(valid records, [(path, why)] of records that are not JSON or do not match the schema)."""
        out, bad = [], []
        for p in sorted((self.root / "failures").glob("*.json")):
            try:
                out.append(StoredFailure(self._read(p), p))
            except SnapshotError as e:
                bad.append((p, str(e)))
        return out, bad

    def _read(self, p: Path) -> dict:
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise SnapshotError(f"failure record {p} cannot be read: {e.strerror or e}") from None
        except ValueError:
            raise SnapshotError(f"failure record {p} is corrupt (not JSON); delete it and re-run gpuemu fuzz") from None
        return validate_record(rec, p)

    def targets(self) -> set[str]:
        """Target slugs that have records or run notes here (cheap: file names only)."""
        out = set()
        for sub in ("failures", "runs"):
            d = self.root / sub
            if d.is_dir():
                out.update(p.stem.partition("--")[2] for p in d.glob("*--*.json"))
        return out

    def note_run(self, target: str, run_seed: int, unstored: Mapping[int, str]) -> None:
        """Remember the failing seeds of a run that were not stored (seed -> why), so that ``find`` can say
        so rather than match another target's record with the same seed."""
        path = self.root / "runs" / f"{seed_hex(run_seed)}--{_slug(target)}.json"
        if not unstored:  # this run stored all it found: an older note of the same run seed is stale
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
            return
        doc = {"schema_version": SCHEMA_VERSION, "target": target, "run_seed": seed_hex(run_seed),
               "unstored": {seed_hex(k): v for k, v in unstored.items()}}
        try:
            _atomic_write(path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
        except OSError:
            pass  # the store is full or read-only: the run already reported why seeds were not stored

    def _unstored(self, seed_text: str) -> list[tuple[str, str, str]]:
        """[(target, run seed, why)] of runs that found seed ``0x<seed_text>`` failing and did not store it."""
        out = []
        d = self.root / "runs"
        for p in sorted(d.glob("*--*.json")) if d.is_dir() else ():
            try:
                doc = json.loads(p.read_text(encoding="utf-8"))
                why = doc["unstored"].get(f"0x{seed_text}")
            except (OSError, ValueError, KeyError, AttributeError, TypeError):
                continue
            if why is not None:
                out.append((str(doc.get("target", "?")), str(doc.get("run_seed", "?")), str(why)))
        return out

    def find(self, seed: str, target: str | None = None) -> StoredFailure:
        """The record of ``target`` whose seed is ``seed`` (hex, with or without 0x, or a unique hex prefix).

        A failure is (target, seed): without ``target`` a seed that names records of several targets is
        ambiguous, and a seed that a run found but did not store is reported as such."""
        text = seed.strip().lower().removeprefix("0x")
        if not re.fullmatch(r"[0-9a-f]{1,16}", text):
            raise SnapshotError(f"seed {seed!r} is not a hex seed like 0x6f3a91 (as printed after 'replay:')")
        text = text.lstrip("0") or "0"
        recs_dir = self.root / "failures"
        if not recs_dir.is_dir():
            raise SnapshotError(f"no failure store at {self.root}; run 'gpuemu fuzz' first, or pass --store DIR")
        cands = [StoredFailure(self._read(p), p) for p in sorted(recs_dir.glob(f"0x{text}*--*.json"))]
        exact = [c for c in cands if seed_hex(c.seed) == f"0x{text}"]
        cands = exact or cands
        unstored = self._unstored(text)
        if target is not None:
            same = [c for c in cands if c.target == target]
            cands = same or [c for c in cands if target in c.target]
            unstored = [u for u in unstored if u[0] == target] or [u for u in unstored if target in u[0]]
        if not cands:
            if unstored:
                t, run, why = unstored[0]
                raise SnapshotError(f"seed 0x{text} of {t} failed in run {run} but was not stored ({why}); "
                                    f"nothing to replay: fix the stored failures and re-run gpuemu fuzz --seed {run}")
            raise SnapshotError(f"no stored failure with seed 0x{text}" + (f" for target {target!r}" if target else "")
                                + f" in {self.root}; 'gpuemu reproduce --list' shows the stored seeds")
        others = [u for u in unstored if u[0] not in {c.target for c in cands}]
        if len(cands) > 1 or (exact and others):
            names = [f"{seed_hex(c.seed)} ({c.target})" for c in cands[:5]]
            names += [f"0x{text} ({t}, not stored)" for t, _, _ in others[:3]]
            hint = "give more digits" if len({c.seed for c in cands}) > 1 else "pass --target TARGET"
            raise SnapshotError(f"seed 0x{text} is ambiguous in {self.root}: {', '.join(names)}; {hint}")
        return cands[0]

    def fetch(self, seed: str, target: str | None = None) -> tuple[dict, dict[str, Any]]:
        """(record, exact input tensors) of a stored failure; a missing or altered snapshot is an error."""
        found = self.find(seed, target)
        rec = found.record
        digest = rec["snapshot"]["sha256"]
        path = self.root / "snapshots" / f"{digest}.safetensors"
        try:
            blob = path.read_bytes()
        except OSError:
            raise SnapshotError(f"snapshot {path} for seed {seed_hex(found.seed)} is missing; "
                                "re-run gpuemu fuzz to store it again") from None
        if hashlib.sha256(blob).hexdigest() != digest:
            raise SnapshotError(f"snapshot {path} is corrupt or was modified (sha256 does not match the record); "
                                "it cannot be replayed: re-run gpuemu fuzz with the same --seed")
        try:
            tensors = decode_tensors(blob)
        except Exception as e:
            raise SnapshotError(f"snapshot {path} cannot be read ({type(e).__name__}: {e})") from None
        return rec, tensors

    def fetch_found(self, found: StoredFailure) -> tuple[dict, dict[str, Any]]:
        """``fetch`` for a record already picked by :meth:`find`."""
        return self.fetch(seed_hex(found.seed), found.target)

    def delete(self, seed: str, target: str | None = None) -> None:
        found = self.find(seed, target)
        found.path.unlink(missing_ok=True)
