"""What a case's verdict counts as in the run.

- not a case at all (``SKIP_CASE``): outside the user's reference's domain; a long row the GPU refuses (no longer
  rows are drawn); bf16 where Triton's plain interpreter ran it (wrong there, not the kernel's fault);
- ``LIMIT``: a launch the target GPU refuses (gpuemu.envelope);
- ``PASS`` / ``REJECTED`` (a clear refusal of the input);
- ``PRECONDITION``: failing only outside an undeclared precondition (the contiguous twin passes);
- a failure (FAIL, ERROR).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..cases import Case, contiguous_twin, layout_note, strided_args
from ..oracle import ERROR, LIMIT, PASS, PRECONDITION, REJECTED, Evaluation, Verdict
from ..runners import bf16_unfaithful
from .run import Runner

SKIP_CASE = "skip"
BF16_INTERPRETER_REASON = ("Triton's interpreter mishandles bf16 (fp32->bf16 casts truncate, bf16 arithmetic raises "
                           "or is wrong); bf16 cases of Triton kernels run on a GPU")


@dataclass(frozen=True)
class Outcome:
    status: str  # SKIP_CASE, LIMIT, PASS, REJECTED, PRECONDITION, FAIL or ERROR
    verdict: Verdict
    why: str = ""  # SKIP_CASE: "reference", "long rows" or "bf16"


def classify(run: Runner, case: Case, ev: Evaluation) -> Outcome:
    v = ev.verdict
    if v.status == REJECTED and v.kind == "reference":  # outside the user's reference's domain: no case
        return Outcome(SKIP_CASE, v, "reference")
    if v.status == LIMIT:
        return Outcome(SKIP_CASE, v, "long rows") if case.shape_kind == "long_row" else Outcome(LIMIT, v)
    if v.status == REJECTED:  # refused on the host before any launch (gpuemu.oracle.error_verdict)
        if v.kind == "refusal" and not case.is_contiguous() and run(contiguous_twin(case)).verdict.status == PASS:
            v = dataclasses.replace(v, message=f"rejects non-contiguous input ({v.message})")
        return Outcome(REJECTED, v)
    if bf16_unfaithful(case.dtype, ev.launches):  # gpuemu's runtime runs bf16 as a GPU does; the interpreter not
        return Outcome(SKIP_CASE, v, "bf16")
    if v.status != PASS and not case.is_contiguous() and v.kind != "timeout":
        v = layout_precondition(run, case, v) or v
    return Outcome(v.status, v)


def layout_precondition(run: Runner, case: Case, verdict: Verdict, *, attribute: bool = False) -> Verdict | None:
    """A failing non-contiguous case whose contiguous twin passes: the launcher assumes contiguous inputs.
    (A refusal on the host is REJECTED before this.) Silently wrong output is PRECONDITION, naming the
    arguments (with ``attribute``, the fewest whose contiguity alone makes the case pass). None otherwise."""
    if run(contiguous_twin(case)).verdict.status != PASS:
        return None
    strided = strided_args(case)
    if verdict.status == ERROR:
        return None  # a crash on strided input is an error, not a declared-or-not contract
    names = strided
    if attribute and len(strided) > 1:
        alone = [n for n in strided if run(contiguous_twin(case, [n])).verdict.status == PASS]
        names = alone or strided
    layouts = ", ".join(layout_note(case, n) for n in names)
    subject = " and ".join(names)
    return dataclasses.replace(
        verdict, status=PRECONDITION,
        message=f"{subject} must be contiguous: silently wrong otherwise ({verdict.message} with {layouts}; "
                "the same case with contiguous inputs passes)",
        detail=(verdict.detail + "\n" if verdict.detail else "")
        + f"Fix: declare it (@gpuemu.requires(contiguous={names!r}), --requires contiguous={','.join(names)}, or "
          "requires: in gpuemu.yaml), or call .contiguous() in the launcher.")
