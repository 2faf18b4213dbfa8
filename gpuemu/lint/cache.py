"""The lint's artifact cache: compiled kernels and their metrics, keyed by what determines them.

Key = sha256 of (kind, source hash, kernel name, specialisation, target, tool versions, metrics version);
for Triton the source hash is ``JITFunction.cache_key``, which covers the kernel and every ``@triton.jit``
function it calls. One directory per key holds ``metrics.json`` (read on a hit) beside the artifacts
(``kernel.ptx``, ``kernel.cubin``, ``kernel.ttir``, ``metadata.json``, ``ptxas.log``) for inspection and
for re-reading SASS later. Entries are written to a temporary directory and renamed into place, so a
reader never sees half an entry and two writers of the same key cannot corrupt it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

from ..errors import StoreError


def cache_key(parts: Mapping[str, Any]) -> str:
    """sha256 of the JSON of ``parts`` (sorted keys)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class ArtifactCache:
    """A directory of entries ``<root>/<key[:2]>/<key>/``; ``root=None`` disables caching."""

    def __init__(self, root: str | os.PathLike | None) -> None:
        self.root = Path(root) if root is not None else None

    def _dir(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / key

    def get(self, key: str) -> dict | None:
        """The cached metrics dict for ``key``, or None (also for an unreadable or partial entry)."""
        if self.root is None:
            return None
        try:
            return json.loads((self._dir(key) / "metrics.json").read_text())
        except (OSError, ValueError):
            return None

    def artifact(self, key: str, name: str) -> Path | None:
        if self.root is None:
            return None
        p = self._dir(key) / name
        return p if p.is_file() else None

    def put(self, key: str, metrics: Mapping[str, Any], files: Mapping[str, bytes | str] | None = None) -> None:
        """Store ``metrics`` (and artifact files) under ``key``, replacing any older entry atomically."""
        if self.root is None:
            return
        final = self._dir(key)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=final.parent))
            for name, data in (files or {}).items():
                (tmp / name).write_bytes(data if isinstance(data, bytes) else data.encode())
            (tmp / "metrics.json").write_text(json.dumps(metrics, sort_keys=True, indent=1))
            if final.exists():  # a partial or stale entry: move it aside, then drop it
                old = final.with_name(final.name + f".old-{os.getpid()}")
                os.replace(final, old)
                shutil.rmtree(old, ignore_errors=True)
            try:
                os.replace(tmp, final)
            except OSError as e:
                if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process stored the same key first
        except OSError as e:
            raise StoreError(f"cannot write the lint cache under {self.root}: {e.strerror or e} "
                             f"(use --cache DIR or --no-cache)") from None

    def update_metrics(self, key: str, metrics: Mapping[str, Any]) -> None:
        """Rewrite only ``metrics.json`` of an existing entry (e.g. after adding SASS)."""
        if self.root is None:
            return
        d = self._dir(key)
        tmp = d / f".metrics-{os.getpid()}.json"
        try:
            tmp.write_text(json.dumps(metrics, sort_keys=True, indent=1))
            os.replace(tmp, d / "metrics.json")
        except OSError as e:
            raise StoreError(f"cannot write the lint cache under {self.root}: {e.strerror or e}") from None
