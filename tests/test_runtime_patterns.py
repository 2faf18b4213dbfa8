"""The pattern corpus (tests/kernels_runtime/patterns.py) on gpuemu's runtime: every output bit for bit what
Triton's own interpreter gives, one program at a time, batched, and replayed from a recorded trace, with no
launch handed back to Triton's interpreter (``LaunchReport.fallback``): the runtime runs each construct
itself.

The reference runs with the runtime deactivated: the kernels were decorated under TRITON_INTERPRET=1
(tests/conftest.py), so a launch then runs on Triton's interpreter. The patterns use fp32 (fp32 dots with
``input_precision="ieee"``), fp16, int32 and int64 only, where that interpreter computes what a GPU does.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpuemu import runtime
from gpuemu.runtime import trace
from gpuemu.runtime.report import observe
from tests.kernels_runtime.patterns import PATTERNS

MODES = ("sequential", "batched", "replay")
REPLAY_LAUNCHES = 5  # noted, noted, recorded (trace.RECORD_AFTER = 2), replayed, replayed


def same_bits(a, b) -> bool:
    """Equal dtype, shape and bytes (so NaN equals NaN of the same payload, and -0.0 differs from 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().contiguous().reshape(-1), b.detach().contiguous().reshape(-1)
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def first_difference(got, want) -> str:
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {tuple(got.shape)} {got.dtype}, want {tuple(want.shape)} {want.dtype}"
    g = got.detach().contiguous().reshape(-1)
    w = want.detach().contiguous().reshape(-1)
    size = g.element_size()
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    differ = (g.view(bits) != w.view(bits)).nonzero().reshape(-1)
    i = int(differ[0])
    idx = tuple(int(v) for v in np.unravel_index(i, tuple(got.shape))) if got.dim() else ()
    return (f"{len(differ)} of {g.numel()} elements differ; first at {idx}: got {g[i].item()!r}, "
            f"want {w[i].item()!r}")


_STOCK: dict[str, tuple] = {}


def stock(name: str) -> tuple:
    """The pattern's outputs on Triton's own interpreter (the runtime deactivated), computed once."""
    if name not in _STOCK:
        was = runtime.active()
        runtime.deactivate()
        try:
            p = PATTERNS[name]
            with observe() as reports, np.errstate(all="ignore"):
                outs = p.run(p.make())
            assert not reports, f"the runtime took a launch while deactivated: {reports}"
        finally:
            if was:
                runtime.activate()
        _STOCK[name] = tuple(o.clone() for o in outs)
    return _STOCK[name]


@pytest.fixture
def clean(rt):
    trace.clear()
    before = trace.ENABLED
    yield rt
    trace.ENABLED = before
    trace.clear()


def _compare(outs, want, label: str) -> list[str]:
    problems = []
    if len(outs) != len(want):
        return [f"{label}: {len(outs)} outputs, want {len(want)}"]
    for k, (g, w) in enumerate(zip(outs, want)):
        if not same_bits(g, w):
            problems.append(f"{label}: output {k}: {first_difference(g, w)}")
    return problems


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(PATTERNS))
def test_pattern_bits_equal_the_interpreter_and_nothing_falls_back(clean, name, mode):
    want = stock(name)
    p = PATTERNS[name]
    inputs = p.make()
    problems: list[str] = []
    reports = []
    if mode in ("sequential", "batched"):
        runtime.configure(grid=mode)
        trace.ENABLED = False  # the ordinary path, with nothing recorded or replayed
        with observe() as reports, np.errstate(all="ignore"):
            outs = p.run(inputs)
        problems += _compare(outs, want, mode)
    else:
        runtime.configure(grid="batched")
        trace.ENABLED = True
        for n in range(1, REPLAY_LAUNCHES + 1):
            before = dict(trace.stats)
            with observe() as reps, np.errstate(all="ignore"):
                outs = p.run(inputs)
            reports += reps
            problems += _compare(outs, want, f"launch {n} of {REPLAY_LAUNCHES}")
            delta = {k: trace.stats[k] - before[k] for k in trace.stats}
            if n > 3 and p.replays:  # from the fourth launch with the same arguments every launch replays its trace
                if delta["replayed"] != len(reps) or delta["diverged"]:
                    problems.append(f"launch {n} of {REPLAY_LAUNCHES}: {len(reps)} launch(es), trace counters "
                                    f"moved by {delta} (want replayed={len(reps)}, diverged=0)")
            if n == 3 and not delta["recorded"]:  # (a pattern that does not replay still records, then diverges)
                problems.append(f"launch 3 of {REPLAY_LAUNCHES}: nothing recorded ({delta})")
    if not reports:
        problems.append("no launch reached the runtime")
    for r in reports:
        if r.fallback is not None:
            problems.append(f"{r.kernel} fell back to Triton's interpreter: {r.fallback}")
    assert not problems, f"{name} [{mode}] ({p.construct}):\n  " + "\n  ".join(dict.fromkeys(problems))
