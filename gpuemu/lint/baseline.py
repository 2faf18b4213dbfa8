"""Baselines: the metrics and accepted findings of a known-good run, to gate later runs on regressions.

File format (JSON, ``schema_version`` 1)::

    {"schema_version": 1, "kind": "gpuemu-lint-baseline", "gpuemu_version": "0.1.0",
     "kernels": {"<kernel id>": {"<target>": {"registers": 56, "spill_bytes": 0, "occupancy": 0.5625, ...}}},
     "accepted": [{"fingerprint": "...", "rule": "register-pressure", "kernel": "...", "target": "sm_90"}]}

A finding whose fingerprint is accepted is reported as ``unchanged`` and does not fail the run; the
regression rules compare each kernel with its entry here. Kernel ids name the launcher and the kernel, not
the block sizes, so a changed ``BLOCK`` is compared with the kernel's old numbers rather than treated as new.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import GpuemuError
from .metrics import KernelMetrics

SCHEMA_VERSION = 1
KIND = "gpuemu-lint-baseline"


class BaselineError(GpuemuError, ValueError):
    """A baseline file that is missing, unreadable or not a gpuemu lint baseline."""


def entry_of(m: KernelMetrics) -> dict[str, Any]:
    """What a baseline keeps of one kernel on one target."""
    return {"registers": m.registers, "spill_bytes": m.spill_bytes, "stack_bytes": m.stack_bytes,
            "shared_bytes": m.shared_bytes, "occupancy": round(m.occupancy.occupancy, 4),
            "ptx_instructions": m.ptx.total, "sass_instructions": m.sass.total if m.sass is not None else None,
            "fp64": m.ptx.fp64, "tensor_core": m.ptx.tensor_core, "num_warps": m.num_warps}


@dataclass(frozen=True)
class Baseline:
    """A loaded baseline."""

    path: str
    kernels: dict[str, dict[str, dict]] = field(default_factory=dict)
    accepted: frozenset[str] = frozenset()

    def entry(self, kernel_id: str, target: str) -> dict | None:
        return self.kernels.get(kernel_id, {}).get(target)


def read_document(path: str | os.PathLike) -> dict:
    """The raw baseline document (validated as :func:`load` does)."""
    load(path)
    return json.loads(Path(path).read_text())


def load(path: str | os.PathLike) -> Baseline:
    """Read a baseline; a clear :class:`BaselineError` when it is missing or malformed."""
    p = Path(path)
    if not p.is_file():
        raise BaselineError(f"baseline {str(path)!r} does not exist; create it with "
                            f"'gpuemu lint ... --baseline {path} --update-baseline'")
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise BaselineError(f"baseline {str(path)!r} is not readable JSON ({e}); regenerate it with "
                            f"--update-baseline") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise BaselineError(f"{path}: not a gpuemu lint baseline (kind should be {KIND!r}); regenerate it with "
                            f"--update-baseline")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise BaselineError(f"{path}: schema_version {doc.get('schema_version')!r}, this gpuemu reads "
                            f"{SCHEMA_VERSION}; regenerate it with --update-baseline")
    kernels = doc.get("kernels")
    if not isinstance(kernels, dict) or not all(isinstance(v, dict) for v in kernels.values()):
        raise BaselineError(f"{path}: 'kernels' must map kernel id -> target -> metrics")
    accepted = frozenset(a["fingerprint"] for a in doc.get("accepted", []) if isinstance(a, dict) and "fingerprint" in a)
    return Baseline(path=str(p), kernels=kernels, accepted=accepted)


def build(reports: Iterable[Any], findings: Iterable[Any], *, previous: dict | None = None) -> dict:
    """The baseline document for a run: every measured kernel and every finding as accepted.

    With ``previous`` (an older document), kernels and accepted findings of kernels not in ``reports`` are kept.
    """
    from .. import __version__

    reports = list(reports)
    linted = {r.kernel_id for r in reports}
    kernels: dict[str, dict[str, dict]] = {}
    accepted_list: list[dict] = []
    if previous:
        kernels = {k: dict(v) for k, v in previous.get("kernels", {}).items() if k not in linted}
        accepted_list = [a for a in previous.get("accepted", []) if a.get("kernel") not in linted]
    for r in reports:
        if r.metrics is not None:
            kernels.setdefault(r.kernel_id, {})[r.target.name] = entry_of(r.metrics)
    accepted_list += [{"fingerprint": f.fingerprint, "rule": f.rule, "kernel": f.kernel, "target": f.target}
                      for f in findings]
    accepted = sorted(accepted_list, key=lambda a: (a["kernel"], a["target"], a["rule"]))
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "gpuemu_version": __version__,
            "kernels": {k: dict(sorted(v.items())) for k, v in sorted(kernels.items())}, "accepted": accepted}


def write(path: str | os.PathLike, doc: dict) -> None:
    """Write a baseline atomically (temp file + rename)."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, p)
    except OSError as e:
        raise BaselineError(f"cannot write baseline {str(path)!r}: {e.strerror or e}") from None


@dataclass(frozen=True)
class DiffRow:
    """One kernel on one target compared with its baseline entry."""

    kernel: str
    target: str
    status: str  # "changed" | "unchanged" | "new" | "missing"
    before: dict | None
    after: dict | None

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "target": self.target, "status": self.status, "before": self.before,
                "after": self.after}


_COMPARED = ("registers", "spill_bytes", "stack_bytes", "shared_bytes", "occupancy", "ptx_instructions",
             "sass_instructions")


def diff(base: Baseline, reports: Iterable[Any], *, targets: set[str] | None = None,
         prefixes: set[str] | None = None) -> list[DiffRow]:
    """Per kernel and target: changed, unchanged, new (not in the baseline) or missing.

    A baseline kernel counts as missing only when this run linted its target and its file or launcher
    (``prefixes``: the labels linted), so linting one file against a whole-project baseline stays quiet.
    """
    rows: list[DiffRow] = []
    seen: set[tuple[str, str]] = set()
    for r in reports:
        if r.metrics is None:
            continue
        key = (r.kernel_id, r.target.name)
        seen.add(key)
        after = entry_of(r.metrics)
        before = base.entry(*key)
        if before is None:
            rows.append(DiffRow(r.kernel_id, r.target.name, "new", None, after))
            continue
        changed = any(before.get(k) != after.get(k) for k in _COMPARED
                      if not (k == "sass_instructions" and (before.get(k) is None or after.get(k) is None)))
        rows.append(DiffRow(r.kernel_id, r.target.name, "changed" if changed else "unchanged", before, after))
    for kid, per_target in base.kernels.items():
        for tgt, before in per_target.items():
            in_scope = (targets is None or tgt in targets) and (
                prefixes is None or any(kid == x or kid.startswith(x + ">") or kid.startswith(x + ":")
                                        for x in prefixes))
            if (kid, tgt) not in seen and in_scope:
                rows.append(DiffRow(kid, tgt, "missing", before, None))
    return rows
