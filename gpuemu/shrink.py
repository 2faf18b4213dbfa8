"""Shrinking a failing case to the simplest one that fails the same way, in named passes with statistics.

The passes run in this order, each keeping a candidate only when it still fails the same way (the same verdict
kind, or a numeric kind for a numeric one):

- ``contiguous``: every argument contiguous;
- ``one_layout``: of several views, only those the failure needs stay views;
- ``simpler_view``: a view stays a view, but the simplest one (one broken stride, the one a hint can name);
- ``normal_values``: plain normal values instead of the drawn distribution;
- then, until no pass makes progress or the budget of evaluated candidates is spent: ``batch`` (no batch dims,
  or one of them 1) and ``dims`` (each dim, largest first, to a smaller size at and around the kernel's
  blocks: :func:`candidates`).

A candidate the op's constraints reject is not evaluated and costs nothing. ``ShrinkStats`` counts, per pass,
the candidates evaluated and accepted.

>>> candidates(100, 1, [32])
[1, 2, 3, 4, 31, 33, 50, 65, 68, 99]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .cases import Blocks, Case, contiguous_twin, dim_limits, simpler_views, strided_args, with_dims
from .compare import PASS, Verdict
from .explain import NUMERIC

PASSES = ("contiguous", "one_layout", "simpler_view", "normal_values", "batch", "dims")


@dataclass
class ShrinkStats:
    """Per pass: candidates evaluated (``tried``) and kept (``accepted``)."""

    tried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PASSES, 0))
    accepted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PASSES, 0))

    @property
    def spent(self) -> int:
        return sum(self.tried.values())

    def to_dict(self) -> dict:
        return {p: {"tried": self.tried[p], "accepted": self.accepted[p]} for p in PASSES}


def same_failure(a: Verdict, b: Verdict) -> bool:
    """``b`` fails the way ``a`` did: the same kind, or both numeric (mismatch, non-finite)."""
    if b.status == PASS:
        return False
    return a.kind == b.kind or (a.kind in NUMERIC and b.kind in NUMERIC)


def candidates(n: int, lo: int, blocks: list[int]) -> list[int]:
    """Smaller sizes to try for a dim of size ``n`` (at least ``lo``): the smallest ones, half, one less, and
    the sizes at and around each block the kernel launched with (a tail of one, one block and one more)."""
    c = {lo, 1, 2, 3, n // 2, n - 1}
    for b in blocks:
        c.update({b - 1, b + 1, n - b, n % b, 2 * b + 1})
    return sorted(x for x in c if lo <= x < n)


def shrink(run: Callable[[Case], Any], case: Case, verdict: Verdict, blocks: Blocks, budget: int,
           stats: ShrinkStats | None = None) -> tuple[Case, Any, int]:
    """Greedy shrink to the simplest case that fails the same way: contiguous, normal values, smallest shape.
    ``run(case)`` evaluates a case (an :class:`gpuemu.oracle.Evaluation`). Returns (the simplest failing case,
    its evaluation or None when it is ``case`` itself, candidates evaluated); ``stats`` is filled per pass."""
    spec = case.spec
    stats = stats if stats is not None else ShrinkStats()
    best, best_ev = case, None
    spent0 = stats.spent

    def spent() -> int:
        return stats.spent - spent0

    def try_case(cand: Case, name: str):
        nonlocal best, best_ev
        if spec.check_dims(cand.dims, cand.kwargs) is not None:
            return None
        stats.tried[name] += 1
        ev = run(cand)
        if not same_failure(verdict, ev.verdict):
            return None
        stats.accepted[name] += 1
        best, best_ev = cand, ev
        return ev

    # first the simplest inputs that still fail: contiguous layouts, then plain normal values
    if not best.is_contiguous():
        try_case(contiguous_twin(best), "contiguous")
        for name in strided_args(best):  # only the layouts the failure needs stay
            if len(strided_args(best)) > 1:
                try_case(contiguous_twin(best, [name]), "one_layout")
        for name in strided_args(best):  # a view stays a view, but the simplest one: one broken stride
            for layout in simpler_views(best, name):
                if try_case(best.replace(layouts=dict(best.layouts, **{name: layout})), "simpler_view"):
                    break
    if best.values != "normal":
        try_case(with_dims(best.replace(values="normal")), "normal_values")
    progress = True
    while progress and spent() < budget:
        progress = False
        if best.batch:
            for cand_batch in [()] + [best.batch[:i] + (1,) + best.batch[i + 1:] for i in range(len(best.batch))
                                      if best.batch[i] > 1]:
                if spent() >= budget:
                    break
                if try_case(with_dims(best, batch=cand_batch), "batch"):
                    progress = True
                    break
        for d in sorted(spec.dims, key=lambda k: -best.dims[k]):
            lo, _ = dim_limits(spec, d)
            for c in candidates(best.dims[d], lo, blocks.for_dim(d)):
                if spent() >= budget:
                    break
                if try_case(with_dims(best, {d: c}), "dims"):
                    progress = True
                    break
    return best, best_ev, spent()
