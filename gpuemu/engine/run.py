"""Running a case: the oracle's evaluation of a launcher on it, under the case time limit, with the time accounts."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from ..cases import Case
from ..oracle import ERROR, Evaluation, Oracle, Verdict
from ..runners.limits import CaseTimeout, time_limit


class Runner:
    """Evaluates cases of one launcher and keeps the time accounts."""

    def __init__(self, fn: Callable, oracle: Oracle, device: str, determinism: bool,
                 case_timeout: float | None = None) -> None:
        self.fn, self.oracle, self.device, self.determinism = fn, oracle, device, determinism
        self.case_timeout = case_timeout
        self.timings: dict[str, float] = {"generate": 0.0, "kernel": 0.0, "reference": 0.0, "compare": 0.0}
        self.hang_aborts = False  # while shrinking or explaining: a hang ends that phase (see Hang)
        self.context_lost = ""  # on CUDA: why the process's CUDA context is gone (no case can run in it any more)

    def __call__(self, case: Case, inputs: Mapping[str, Any] | None = None) -> Evaluation:
        if self.context_lost:
            if self.hang_aborts:
                raise Hang()
            return Evaluation(Verdict(ERROR, "cuda_context_lost", self.context_lost), [])
        t0 = time.perf_counter()
        try:
            with time_limit(self.case_timeout):
                ev = self.oracle.evaluate(self.fn, case, device=self.device, check_determinism=self.determinism,
                                          inputs=inputs)
        except CaseTimeout as e:
            self.timings["kernel"] = self.timings.get("kernel", 0.0) + time.perf_counter() - t0
            if self.hang_aborts:
                raise Hang() from None
            return Evaluation(timeout_verdict(e), [])
        except Exception as e:  # noqa: BLE001 - only a lost CUDA context is handled here; the rest propagates
            why = cuda_context_lost(e)
            if not why:
                raise
            self.context_lost = why
            if self.hang_aborts:
                raise Hang() from None
            return Evaluation(Verdict(ERROR, "cuda_context_lost", why), [])
        for k, v in ev.verdict.seconds.items():
            self.timings[k] = self.timings.get(k, 0.0) + v
        if ev.verdict.status == ERROR and "CUDA error" in (ev.verdict.message or ""):  # the kernel's own fault
            self.context_lost = cuda_context_lost(ev.verdict.message)
        return ev


def cuda_context_lost(e: BaseException | str) -> str:
    """Why ``e`` (an exception, or its message) leaves the process without a usable CUDA context ("" when it does not): after an illegal memory
    access (or another sticky CUDA error) every later CUDA call fails, so the run can judge nothing more here."""
    text = str(e)
    sticky = ("illegal memory access", "illegal instruction", "misaligned address", "unspecified launch failure",
              "device-side assert")
    if "CUDA error" not in text or not any(s in text for s in sticky):
        return ""
    first = next((ln for ln in text.splitlines() if "CUDA error" in ln), text.splitlines()[0])
    return (f"the CUDA context was lost ({first.strip()}): a kernel of this launcher (this case's, or an earlier one's: "
            "CUDA reports a fault late) touched memory it does not own, and no later case can run in this process; "
            "the case that first failed is kept, and `gpuemu reproduce` re-runs it in a fresh one")


class Hang(Exception):
    """A case ran past its time limit while shrinking or explaining: stop that phase (one hang, not 48)."""


def timeout_verdict(e: CaseTimeout) -> Verdict:
    """ERROR of kind ``timeout``, naming where the case was when the limit struck (the launcher's own line
    when it was in the launcher's Python or its kernel, else the judging of its output)."""
    import traceback

    from ..runners import _user_frame

    frames = traceback.extract_tb(e.__traceback__)
    in_launcher = any(f.name == "run_launcher" for f in frames)
    fr = _user_frame([f for f in frames if not f.filename.startswith("<")]) if in_launcher else None  # not exec'd code
    where = f" (at {fr.filename}:{fr.lineno})" if fr is not None and fr.name != "run_launcher" else ""
    what = "the launcher or its kernel" if in_launcher else "judging its output"
    return Verdict(ERROR, "timeout", f"case {e} in {what}{where}; raise it with --case-timeout or "
                                     "fuzz.case_timeout if the case is only slow")
