"""The first failure of each class, shrunk (gpuemu.shrink) and explained (gpuemu.explain). A candidate that hangs
ends shrinking and explaining there: one hang, never one per candidate."""

from __future__ import annotations

from ..cases import Blocks, Case, layout_note, strided_args
from ..explain import diagnose
from ..oracle import PRECONDITION, Evaluation, Verdict
from ..results import Failure
from ..shrink import ShrinkStats, shrink
from .classify import layout_precondition
from .run import Hang, Runner


def minimize(run: Runner, case: Case, ev: Evaluation, verdict: Verdict, blocks: Blocks, budget: int,
             stats: ShrinkStats | None = None) -> Failure:
    """The failure of ``case``, shrunk and with its hint. A PRECONDITION stays one when the shrunk case's contiguous
    twin still passes; otherwise the shrunk case is a failure with contiguous inputs too, and is reported as such
    (its own verdict, FAIL or ERROR), not as the unshrunk case's layout assumption."""
    if case.shape_kind == "production":  # each candidate costs seconds, and the size is what is under test
        return Failure(case=case, verdict=verdict, launches=tuple(ev.launches),
                       hint="at production size (sampled programs over sparse memory); not shrunk")
    run.hang_aborts = True
    try:
        return _minimize(run, case, ev, verdict, blocks, budget, stats)
    except Hang:
        return Failure(case=case, verdict=verdict, hint="not shrunk: a smaller case ran past the time limit",
                       launches=tuple(ev.launches))
    finally:
        run.hang_aborts = False


def _minimize(run: Runner, case: Case, ev: Evaluation, verdict: Verdict, blocks: Blocks, budget: int,
              stats: ShrinkStats | None) -> Failure:
    small, small_ev, _ = shrink(run, case, ev.verdict, blocks, budget, stats)
    final_ev = small_ev or ev
    final = final_ev.verdict
    if verdict.status == PRECONDITION:  # (shrinking keeps the failure, not its layout: the shrunk case is asked again)
        pre = layout_precondition(run, small, final, attribute=True)
        if pre is not None:
            odd = ", ".join(layout_note(small, k) for k in strided_args(small))
            return Failure(case=small, verdict=pre, hint=f"stride bug suspected: fails only for non-contiguous inputs "
                                                          f"({odd})", original=case if small != case else None,
                           launches=tuple(final_ev.launches))
        # the shrunk case fails with contiguous inputs too: the kernel's own failure there, judged as any other
    hint = diagnose(run, small, final, final_ev.launches, original=case if small != case else None)
    return Failure(case=small, verdict=final, hint=hint, original=case if small != case else None,
                   launches=tuple(final_ev.launches))
