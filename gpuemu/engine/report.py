"""Reporting a run's failures: each stored in the failure store with its exact inputs (a record that replays on
any machine), and each given the replay line to paste; seeds found but not stored are noted with why."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from .. import __version__
from ..cases import materialize
from ..errors import StoreError
from ..origin import portable
from ..results import Failure, FuzzResult
from ..runners import interpreting
from ..store import Store, replay_command, seed_hex

MAX_STORED = 100


def record(result: FuzzResult, failure: Failure, device: str, tol: Any, extra: Mapping[str, Any]) -> dict:
    """The JSON record of a stored failure (gpuemu/schemas/record.schema.json)."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # pragma: no cover
        triton_version = None
    return {
        "gpuemu": __version__, "target": result.target, "op": result.op, "device": device,
        "interpreter": interpreting(), "torch": torch.__version__, "triton": triton_version,
        "case": failure.case.to_dict(), "verdict": failure.verdict.to_dict(), "hint": failure.hint,
        "line": failure.line(), "tolerance": tol.to_dict(), "run_seed": seed_hex(result.seed),
        "launches": [lch.to_dict() for lch in failure.launches],
        "original_case": failure.original.to_dict() if failure.original else None,
        "origin": portable(result.target), **extra,
    }


def store_failure(st: Store | None, result: FuzzResult, failure: Failure, device: str, tol: Any,
                  extra: Mapping[str, Any]) -> Failure:
    """``failure`` saved in ``st`` (its record's path set) while the run may store more; a store error is noted on
    the result and ends storing, never the run (the verdicts still stand)."""
    if st is None or result.stored >= MAX_STORED or result.store_error is not None:
        return failure
    if failure.case.shape_kind == "production":  # tens of GiB of inputs: the seed regenerates them page by page
        return dataclasses.replace(failure, not_stored="a production-size case is not snapshotted (its inputs are "
                                                       "regenerated from its seed: run again with the same --seed)")
    try:
        inputs, _ = materialize(failure.case, "cpu")
        path = st.save(record(result, failure, device, tol, extra), inputs)
        result.stored += 1
        return dataclasses.replace(failure, record=str(path))
    except StoreError as e:
        result.store_error = str(e)
        return failure


def replay_lines(result: FuzzResult, st: Store | None, settings: Any) -> None:
    """Each failure's replay command, to paste in any directory, and a note of the seeds found but not stored."""
    from pathlib import Path

    from ..store import _slug

    if st is None:
        result.failures = [dataclasses.replace(f, not_stored="this run did not use a store (save=False)")
                           for f in result.failures]
        return
    try:  # the store in full: the line pastes in any directory (the record finds its launcher: gpuemu.origin)
        store_arg = str(Path(settings.store).resolve())
    except OSError:
        store_arg = str(settings.store)
    others = st.targets() - {_slug(result.target)}
    target_arg = result.target if others else None
    unstored: dict[int, str] = {}
    out = []
    for f in result.failures:
        if f.record is None:
            why = f.not_stored or (f"the store failed: {result.store_error}" if result.store_error else
                                   f"only the first {MAX_STORED} failing cases of a run are stored")
            unstored[f.case.seed] = why
            out.append(dataclasses.replace(f, not_stored=why))
        else:
            out.append(dataclasses.replace(f, command=replay_command(f.case.seed, target=target_arg, store=store_arg)))
    result.failures = out
    st.note_run(result.target, result.seed, unstored)
