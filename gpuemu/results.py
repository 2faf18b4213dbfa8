"""What a fuzz run found: :class:`Failure` (one failing case, shrunk, with its hint and record) and
:class:`FuzzResult` (the run: counts, failures, timings, ``to_dict()`` for JSON). The text of both is
:mod:`gpuemu.reporting`; the loop that fills them is :mod:`gpuemu.fuzzer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import __version__
from .cases import Case
from .compare import ERROR, OVERFLOW, PRECONDITION, Verdict
from .runners import Launch
from .shrink import ShrinkStats
from .store import seed_hex


@dataclass(frozen=True)
class Failure:
    """One failing case, after shrinking, with the evidence-backed hint and where it is stored."""

    case: Case
    verdict: Verdict
    hint: str | None = None
    original: Case | None = None
    record: str | None = None
    launches: tuple[Launch, ...] = ()
    command: str | None = None  # the full replay command (with --store/--target where needed), once stored
    not_stored: str | None = None  # why this failing seed has no record (then there is nothing to replay)

    def line(self) -> str:
        """The failure line of DESIGN.md."""
        word = {ERROR: "ERROR", PRECONDITION: "PRECONDITION", OVERFLOW: "OVERFLOW"}.get(self.verdict.status, "FAIL")
        hint = f" ({self.hint})" if self.hint else ""
        return (f"{word} seed={seed_hex(self.case.seed)} dtype={self.case.dtype} shape={self.case.shape_label()} "
                f"{self.verdict.message}{hint}")

    @property
    def replay(self) -> str:
        """The bare replay command (the seed); :meth:`replay_line` is the one to print."""
        return f"gpuemu reproduce {seed_hex(self.case.seed)}"

    def replay_line(self) -> str:
        """What follows ``replay:``: a command that works when pasted (store and target included where
        needed), or why there is nothing to replay."""
        if self.not_stored:
            return f"not stored ({self.not_stored})"
        return self.command or self.replay

    def to_dict(self) -> dict:
        return {"line": self.line(), "replay": self.command or self.replay, "case": self.case.to_dict(),
                "verdict": self.verdict.to_dict(), "hint": self.hint,
                "original_case": self.original.to_dict() if self.original else None, "record": self.record,
                "stored": self.record is not None, "not_stored": self.not_stored,
                "launches": [lch.to_dict() for lch in self.launches]}


@dataclass
class FuzzResult:
    """What a fuzz run found. ``raise_for_failures()`` turns it into a readable AssertionError."""

    target: str
    op: str
    seed: int
    iterations: int = 0
    passed: int = 0
    failures: list[Failure] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # dtype (or "long rows") -> reason
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    first_failure_iteration: int | None = None
    first_failure_seconds: float | None = None
    blocks: dict = field(default_factory=dict)
    stored: int = 0
    store: str | None = None
    store_error: str | None = None
    rejected: int = 0  # REJECTED cases: refused by the launcher, or undetermined (the reference overflows)
    rejected_reason: str = ""
    refused: int = 0  # of them, refused by the launcher on the host before any launch (the one refusal rule)
    refusal_policy: str = "allow"  # allow: a refusal passes its case; fail: it fails the run
    framework_passes: int = 0  # cases outside the fp64 bound that PyTorch eager is as far from (see Oracle)
    requires: dict = field(default_factory=dict)
    precondition_policy: str = "fail"  # fail: an undeclared precondition fails the run; warn/ignore: it does not
    interrupted: bool = False  # Ctrl-C: the result holds the cases that ran before it
    timed_out: int = 0  # cases that ran past the per-case time limit (ERROR verdicts of kind "timeout")
    case_timeout: float | None = None
    stopped: str = ""  # why the run ended before its iterations, if it did
    shrink_stats: ShrinkStats = field(default_factory=ShrinkStats)  # per shrink pass (not in to_dict)
    limits: int = 0  # cases whose launch the target GPU refuses (LIMIT verdicts): not failures unless limit_policy
    envelope: dict = field(default_factory=dict)  # gpuemu.envelope.Envelope.to_dict() of the run
    limit_policy: str = "allow"  # allow: a LIMIT is shown, not failed; fail: the shape is declared supported

    @property
    def failed(self) -> list[Failure]:
        """Numerical and other real failures (FAIL, ERROR): not the PRECONDITION ones."""
        return [f for f in self.failures if f.verdict.status != PRECONDITION]

    @property
    def preconditions(self) -> list[Failure]:
        """Cases that fail only outside an undeclared precondition (e.g. non-contiguous inputs)."""
        return [f for f in self.failures if f.verdict.status == PRECONDITION]

    @property
    def ok(self) -> bool:
        return not self.failed and (self.precondition_policy != "fail" or not self.preconditions) \
            and not (self.refused and (self.refusal_policy == "fail" or self.refused_every_case))

    @property
    def refused_every_case(self) -> bool:
        """The launcher refused every case on the host: no kernel ran, nothing was judged (a broken launcher)."""
        return self.iterations > 0 and self.refused == self.iterations

    @property
    def fatal_limits(self) -> int:
        """LIMIT verdicts inside the sizes declared supported (failures of the run)."""
        return sum(1 for f in self.failures if f.verdict.status == "limit")

    @property
    def all_errored(self) -> bool:
        return self.iterations > 0 and self.passed == 0 and all(f.verdict.status == ERROR for f in self.failures) \
            and self.failed_cases == self.iterations

    failed_cases: int = 0

    def summary(self) -> str:
        if self.refused_every_case:
            return (f"Refused: {self.refused}/{self.iterations}, each on the host before any launch ("
                    f"{self.rejected_reason}): no kernel ran, nothing was judged; the launcher is broken or is not "
                    f"this op's")
        s = f"Passed: {self.passed}/{self.iterations}"
        real = self.failed_cases - self.precondition_cases
        if real:
            kept = sum(1 for f in self.failed if f.record is not None)
            plural = "s" if real != 1 else ""
            if self.store is None or kept == 0:
                s += f" · {real} failing seed{plural}" + (" (none stored)" if self.store is not None else "")
            elif kept == real:
                s += f" · {real} failing seed{plural} stored"
            else:
                s += f" · {real} failing seed{plural}, {kept} stored ({real - kept} not: {self._not_stored_reason()})"
        if self.precondition_cases:
            s += f" · {self.precondition_cases} PRECONDITION ({self._precondition_subject()}; declare it or make the " \
                 "launcher accept it" + {"warn": "; warned only", "ignore": "; ignored"}.get(self.precondition_policy, "") + ")"
        if self.limits:
            s += f" · {self.limits} LIMIT: {self.envelope.get('text') or 'launches refused by the GPU'}" \
                 + (f" ({self.fatal_limits} inside the sizes declared supported: failed)" if self.fatal_limits else "")
        if self.rejected:
            s += f" · {self.rejected} rejected: {self.rejected_reason}"
            if self.refused and self.refusal_policy == "fail":
                s += " (refusals fail this run)"
        if self.framework_passes:
            s += f" · {self.framework_passes} passed as no further from fp64 than PyTorch eager"
        for dt, why in self.skipped.items():
            s += f" · {dt} skipped: {why}"
        if self.timed_out:
            s += f" · {self.timed_out} timed out (limit {self.case_timeout:g} s per case)"
        if self.stopped:
            s += f" · stopped: {self.stopped}"
        return s

    def _precondition_subject(self) -> str:
        """What the PRECONDITION cases need, over all of them: 'x, y must be contiguous' when one case needs x and
        another y (each case's line names its own)."""
        names: list[str] = []
        other = ""
        for f in self.preconditions:
            head, sep, _ = f.verdict.message.partition(" must be contiguous")
            if not sep:
                other = other or f.verdict.message.split(":")[0]
                continue
            for n in head.split(" and "):
                if n not in names:
                    names.append(n)
        if names:
            return f"{', '.join(names)} must be contiguous"
        return other

    def _not_stored_reason(self) -> str:
        return next((f.not_stored for f in self.failed if f.not_stored), "") or "not stored"

    precondition_cases: int = 0

    def own_share(self) -> float:
        """Fraction of the run's wall time spent outside the kernel (generation, reference, compare, shrink)."""
        kernel = self.timings.get("kernel", 0.0)
        return max(0.0, 1.0 - kernel / self.seconds) if self.seconds > 0 else 0.0

    def ordered_failures(self) -> list[Failure]:
        """Real failures first (the reported one is the first of these), then PRECONDITION ones."""
        return self.failed + self.preconditions

    def report(self) -> str:
        """The failures and the summary as text (:mod:`gpuemu.reporting`, the same lines as ``gpuemu fuzz``)."""
        from .reporting import report

        return report(self)

    def raise_for_failures(self) -> None:
        """Raise AssertionError with the failure report when any case failed (for pytest); undeclared
        preconditions count as failures unless the policy is ``warn``."""
        if not self.ok:
            raise AssertionError(f"gpuemu: {self.target} is not a correct {self.op}\n{self.report()}")

    def to_dict(self) -> dict:
        return {"schema_version": 1, "gpuemu": __version__, "target": self.target, "op": self.op,
                "seed": seed_hex(self.seed), "iterations": self.iterations, "passed": self.passed,
                "failed": self.failed_cases - self.precondition_cases, "precondition": self.precondition_cases,
                "rejected": self.rejected, "rejected_reason": self.rejected_reason, "refused": self.refused,
                "refusal_policy": self.refusal_policy,
                "framework_passes": self.framework_passes, "requires": dict(self.requires),
                "precondition_policy": self.precondition_policy,
                "failures": [f.to_dict() for f in self.ordered_failures()],
                "skipped": dict(self.skipped), "seconds": self.seconds, "timings": dict(self.timings),
                "own_share": self.own_share(), "first_failure_iteration": self.first_failure_iteration,
                "first_failure_seconds": self.first_failure_seconds, "blocks": self.blocks,
                "store": self.store, "store_error": self.store_error, "ok": self.ok,
                "stored": self.stored, "interrupted": self.interrupted, "timed_out": self.timed_out,
                "case_timeout": self.case_timeout, "stopped": self.stopped or None, "limits": self.limits,
                "limit_policy": self.limit_policy, "envelope": dict(self.envelope) or None}


class FuzzInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`fuzz`; ``result`` holds what ran before it (the CLI writes it and its summary)."""

    def __init__(self, result: FuzzResult) -> None:
        super().__init__("interrupted")
        self.result = result
