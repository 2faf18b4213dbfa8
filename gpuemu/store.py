"""The failure store: exact input snapshots and JSON records, replayable by seed.

Layout under the store root (``.gpuemu/`` by default; ``--store`` or ``GPUEMU_STORE``)::

    snapshots/<sha256>.safetensors   the exact inputs: each argument's whole storage, bytes as they were
    failures/<seed>--<target>.json   the record: case, verdict, tolerance, launches, snapshot hash

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

SCHEMA_VERSION = 1
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
        t = t.detach().cpu()
        st = t.untyped_storage()
        flat = torch.empty(0, dtype=t.dtype).set_(st, 0, (st.nbytes() // t.element_size(),), (1,))
        data[name] = flat.clone()
        meta[f"{name}.view"] = json.dumps({"size": list(t.shape), "stride": list(t.stride()),
                                           "offset": t.storage_offset()})
    return save(data, metadata=meta)


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


@dataclass(frozen=True)
class StoredFailure:
    record: dict
    path: Path

    @property
    def seed(self) -> int:
        return int(self.record["case"]["seed"])


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
            probe = self.root / ".write-probe"
            probe.write_bytes(b"ok")
            probe.unlink()
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
        out = []
        for p in sorted((self.root / "failures").glob("*.json")):
            try:
                out.append(StoredFailure(json.loads(p.read_text()), p))
            except (OSError, ValueError):
                continue
        return out

    def find(self, seed: str, target: str | None = None) -> StoredFailure:
        """The record whose seed is ``seed`` (hex, with or without 0x, or a unique hex prefix)."""
        text = seed.lower().removeprefix("0x")
        if not re.fullmatch(r"[0-9a-f]+", text):
            raise SnapshotError(f"seed {seed!r} is not a hex seed like 0x6f3a91 (as printed after 'replay:')")
        recs_dir = self.root / "failures"
        if not recs_dir.is_dir():
            raise SnapshotError(f"no failure store at {self.root}; run 'gpuemu fuzz' first, or pass --store DIR")
        cands = []
        for p in recs_dir.glob(f"0x{text}*--*.json"):
            try:
                rec = json.loads(p.read_text())
            except (OSError, ValueError):
                raise SnapshotError(f"failure record {p} is corrupt (not JSON); delete it and re-run gpuemu fuzz") from None
            if target is None or target in str(rec.get("target", "")):
                cands.append(StoredFailure(rec, p))
        exact = [c for c in cands if seed_hex(c.seed) == f"0x{text}"]
        cands = exact or cands
        if not cands:
            raise SnapshotError(f"no stored failure with seed 0x{text} in {self.root}; "
                                "'gpuemu reproduce --list' shows the stored seeds")
        if len({c.seed for c in cands}) > 1 or len(cands) > 1:
            names = ", ".join(f"{seed_hex(c.seed)} ({c.record.get('target')})" for c in cands[:5])
            raise SnapshotError(f"seed 0x{text} is ambiguous in {self.root}: {names}; give more digits or --target")
        return cands[0]

    def fetch(self, seed: str, target: str | None = None) -> tuple[dict, dict[str, Any]]:
        """(record, exact input tensors) of a stored failure; a missing or altered snapshot is an error."""
        found = self.find(seed, target)
        rec = found.record
        snap = rec.get("snapshot") or {}
        digest = snap.get("sha256", "")
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

    def delete(self, seed: str, target: str | None = None) -> None:
        found = self.find(seed, target)
        found.path.unlink(missing_ok=True)
