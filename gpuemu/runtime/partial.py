"""Partial launches: run only chosen programs of a launch too large to run whole on a CPU.

Inside ``with partial(seed=...)``, a launch of more than ``min_programs`` programs runs only: every corner of
the grid (the first and last program along each axis, combined), the programs next to them along each axis
(the first block past a boundary, the last full block before a tail), and ``random`` programs drawn from
``seed`` (the same programs for the same grid and seed). The last program along an axis is the one whose
block straddles a tail (``cdiv`` grids) and, where offsets grow with the program id, the one whose offsets are
largest: the first to wrap an int32 index. The programs run one at a time in grid order, with nothing
recorded or replayed (:mod:`gpuemu.runtime.trace` keys would mix sampled and whole launches); their report
says how many ran (``LaunchReport.programs_run``). Over sparse memory (:mod:`gpuemu.runtime.sparse`) such a
launch costs what its programs touch.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from ..rng import Rng, derive_seed


@dataclass(frozen=True)
class Plan:
    seed: int = 0
    random: int = 4  # programs drawn at random besides the corners and their neighbours
    min_programs: int = 64  # launches of at most this many programs run whole
    neighbours: bool = True  # the second and second-to-last program along each axis too


_plan: Plan | None = None


@contextmanager
def partial(*, seed: int = 0, random: int = 4, min_programs: int = 64, neighbours: bool = True) -> Iterator[Plan]:
    """Run launches of more than ``min_programs`` programs partially while inside (see the module docstring).

    >>> with partial(seed=1) as plan:
    ...     len(programs((1000, 8, 1), plan))
    12
    """
    global _plan
    before, _plan = _plan, Plan(seed, random, min_programs, neighbours)
    try:
        yield _plan
    finally:
        _plan = before


def current() -> Plan | None:
    return _plan


def programs(grid3: tuple[int, int, int], plan: Plan | None = None) -> list[tuple[int, int, int]] | None:
    """The programs a partial launch of ``grid3`` runs, in grid order (x outermost, as the sequential loop);
    None for a launch that runs whole (no plan, or few programs)."""
    plan = plan or _plan
    total = grid3[0] * grid3[1] * grid3[2]
    if plan is None or total <= plan.min_programs:
        return None
    axes = []
    for n in grid3:
        vals = {0, n - 1}
        if plan.neighbours and n > 2:
            vals |= {1, n - 2}
        axes.append(sorted(vals))
    corners = {(x, y, z) for x, y, z in itertools.product(*[[a[0], a[-1]] for a in axes])}
    chosen = set(corners)
    for axis in range(3):  # each axis's neighbours, the other axes at their first program
        for v in axes[axis]:
            p = [0, 0, 0]
            p[axis] = v
            chosen.add(tuple(p))
    rng = Rng(derive_seed(plan.seed, (grid3[0] * 1_000_003 + grid3[1]) * 1_009 + grid3[2]))
    for _ in range(plan.random):
        chosen.add(tuple(rng.below(n) if n > 1 else 0 for n in grid3))
    return sorted(chosen)


__all__ = ["Plan", "partial", "programs", "current"]
