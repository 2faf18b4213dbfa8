"""The shadow runtime: one per install. It owns the settings, sampling and budget, the store, telemetry,
and the rules every check follows.

The rules: a check never raises into the host (strict mode raises :class:`ShadowDivergence` after the
real result is computed, and nothing else), never changes a result (it runs on copies, restores the
RNG state it touched, and returns what the real call returned), never mutates a user tensor, never
shadows the calls its own work makes, and bounds its time (budget), memory (capture cap) and disk
(snapshot and store caps). gpuemu's own failures are counted and logged once per place and kind.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import __version__
from ..errors import GpuemuError, StoreError
from ..oracle import FAIL, PASS, SKIP, Verdict
from ..store import Store, seed_hex
from ..telemetry import (ATTR_CHECK, ATTR_DTYPE, ATTR_KERNEL, ATTR_OP, ATTR_SHAPE, ATTR_SOURCE, Telemetry)
from .arming import Arming
from .capture import storage_bytes
from .pipeline import label
from .sampling import Budget, Sampler, Site, _tls
from .settings import HookSettings

log = logging.getLogger("gpuemu.hook")
KEEP_DIVERGENCES = 100
KEEP_HISTORY = 10_000
KEEP_ERRORS = 20
SOURCES = ("torch.compile", "triton", "inductor", "shadow")


class ShadowDivergence(GpuemuError, AssertionError):
    """Strict mode: a shadow check found a divergence (raised after the real call returned)."""

    def __init__(self, divergence: "Divergence") -> None:
        super().__init__(f"{divergence.line}\nreplay: {divergence.replay}")
        self.divergence = divergence


class ShadowError(GpuemuError, RuntimeError):
    """Strict mode: gpuemu's own shadow work failed (in shadow mode this is only counted and logged)."""


@dataclass(frozen=True)
class Divergence:
    """One divergence, as logged, counted and stored."""

    line: str
    seed: str
    source: str
    name: str
    op: str | None
    dtype: str
    shape_bucket: str
    verdict: Verdict
    record: str | None = None
    snapshot: str | None = None
    store_error: str | None = None

    @property
    def replay(self) -> str:
        """The command that replays it, pasted anywhere: with the store it was written to (the record's
        store root, ``<store>/failures/<record>.json``)."""
        if not self.record:
            return f"gpuemu reproduce {self.seed}"
        from ..store import replay_command

        return replay_command(int(self.seed, 16), store=Path(self.record).parent.parent)

    def to_dict(self) -> dict:
        return {"line": self.line, "seed": self.seed, "replay": self.replay, "source": self.source,
                "name": self.name, "op": self.op, "dtype": self.dtype, "shape_bucket": self.shape_bucket,
                "verdict": self.verdict.to_dict(), "record": self.record, "snapshot": self.snapshot,
                "store_error": self.store_error}


@dataclass
class Stats:
    checks: int = 0
    passed: int = 0
    divergences: int = 0
    skipped: int = 0
    internal_errors: int = 0
    store_errors: int = 0
    snapshots: int = 0
    shadow_seconds: float = 0.0
    skip_reasons: dict = field(default_factory=dict)
    # checks and divergences by source: graph forward, graph backward, inductor kernel, triton kernel, @shadow
    checks_by_source: dict = field(default_factory=dict)
    divergences_by_source: dict = field(default_factory=dict)
    arms: dict = field(default_factory=dict)  # windows opened, by reason (install, compile, schedule)
    # outputs a check left uncompared, by reason (a sampled-rows check of a graph: a mean loss over every row)
    outputs_unchecked: dict = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        """A call that should have been checked and was not (or a check that could not judge)."""
        self.skipped += 1
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1

    def to_dict(self) -> dict:
        return dict(self.__dict__, skip_reasons=dict(self.skip_reasons), checks_by_source=dict(self.checks_by_source),
                    divergences_by_source=dict(self.divergences_by_source), arms=dict(self.arms),
                    outputs_unchecked=dict(self.outputs_unchecked))


class Check:
    """One shadow check in progress: its span, its clock (paused while the real call runs) and outcome."""

    def __init__(self, rt: "Runtime", source: str, name: str, kind: str, op: str | None, dtype: str,
                 bucket: str) -> None:
        self.rt = rt
        self.source, self.name, self.kind, self.op, self.dtype, self.bucket = source, name, kind, op, dtype, bucket
        self.attrs = {ATTR_SOURCE: source, ATTR_KERNEL: name, ATTR_OP: op or "", ATTR_DTYPE: dtype,
                      ATTR_SHAPE: bucket, ATTR_CHECK: kind}
        self.span = rt.telemetry.start_check(self.attrs)
        self.verdict: Verdict | None = None
        self.divergence: Divergence | None = None
        self.error: BaseException | None = None
        self.skip_reason: str | None = None
        self.seconds = 0.0
        self._t = time.perf_counter()
        self._rng: Any = None
        self._busy = True
        self.nested = False  # True: calls made by the real call may be checked themselves (graphs' kernels)
        _tls.busy = getattr(_tls, "busy", 0) + 1

    # the real call runs between pause() and resume(): its time is the host's, not the shadow's, and the
    # calls it makes are the host's too (a graph's kernels can be checked inside a checked graph call)
    def pause(self) -> None:
        self.seconds += time.perf_counter() - self._t
        if self._busy and self.nested:
            self._busy = False
            _tls.busy -= 1

    def resume(self) -> None:
        if not self._busy:
            self._busy = True
            _tls.busy = getattr(_tls, "busy", 0) + 1
        self._t = time.perf_counter()
        self._rng = _rng_state()

    def fail(self, where: str, exc: BaseException) -> None:
        """gpuemu's own failure inside this check: counted, logged once, never raised (except strict)."""
        self.error = exc
        self.rt.internal_error(f"{self.source}/{self.kind}/{where}", exc)

    def skip(self, reason: str) -> None:
        self.skip_reason = reason

    def end(self) -> None:
        """Finish: restore RNG, charge the budget, record telemetry; strict mode raises here."""
        if self._busy:
            self._busy = False
            _tls.busy -= 1
        if self._rng is not None:
            try:
                _set_rng_state(self._rng)
            except Exception as e:  # pragma: no cover - the state we just read can always be set back
                self.rt.internal_error("rng", e)
        self.seconds += time.perf_counter() - self._t
        rt = self.rt
        lab = label(self.source, self.kind)
        rt.budget.charge(self.seconds, lab)
        st = rt.stats
        st.shadow_seconds += self.seconds
        v = self.verdict
        if self.error is not None:
            outcome = "error"
        elif self.divergence is not None:
            outcome = "divergence"
        elif v is None or v.status == SKIP or self.skip_reason:
            outcome = "skipped"
            st.skip(self.skip_reason or (v.message if v is not None else "no verdict"))
        else:
            outcome = "pass"
            st.passed += 1
        st.checks += 1
        rt.history.append((lab, self.name, outcome, round(self.seconds, 6)))
        st.checks_by_source[lab] = st.checks_by_source.get(lab, 0) + 1
        if self.divergence is not None:
            st.divergences_by_source[lab] = st.divergences_by_source.get(lab, 0) + 1
        ratio = v.worst_ratio if v is not None and v.worst_ratio is not None else None
        if v is not None and v.status == PASS and ratio is None:
            ratio = 0.0
        try:
            rt.telemetry.check_finished(self.span, self.attrs, outcome=outcome, ratio=ratio, seconds=self.seconds)
        except Exception as e:
            rt.internal_error("telemetry", e)
        if rt.settings.mode == "strict":
            if self.divergence is not None:
                raise ShadowDivergence(self.divergence)
            if self.error is not None:
                raise ShadowError(f"gpuemu shadow check of {self.name} failed: {type(self.error).__name__}: "
                                  f"{self.error}") from self.error


class Runtime:
    """The installed hook's state. One exists while the hook is installed (see :func:`gpuemu.hook.install`)."""

    def __init__(self, settings: HookSettings, telemetry: Telemetry | None = None) -> None:
        self.settings = settings
        self.telemetry = telemetry or Telemetry()
        self.lint_findings: list = []  # lint on compile (gpuemu.hook.lint_on_compile)
        self.budget = Budget(settings.budget)
        self.sampler = Sampler(settings.sample_rate, self.budget, seed=settings.seed)
        self.store = Store(settings.store, max_bytes=settings.max_store_bytes)
        self.tolerances = settings.tolerances
        self.bindings: dict = dict(settings.bindings)
        self.stats = Stats()
        self.divergences: collections.deque[Divergence] = collections.deque(maxlen=KEEP_DIVERGENCES)
        # the last checks as (source label, kernel/graph/launcher name, outcome, shadow seconds), oldest first
        self.history: collections.deque[tuple[str, str, str, float]] = collections.deque(maxlen=KEEP_HISTORY)
        self.errors: list[str] = []  # the first internal errors, as one line each (for reports and bug reports)
        self._stored_per_key: collections.Counter = collections.Counter()
        self._logged: set = set()
        self._reported: set = set()
        self._lock = threading.Lock()
        self.sites: dict[Any, Site] = {}
        self.arming = Arming(rate=settings.sample_rate, budget=self.budget, stats=self.stats)

    # ------------------------------------------------------------------ sites and sampling

    def site(self, key: Any, name: str, source: str = "") -> Site:
        """The site of ``key``; ``source`` is the label its checks count under (see :data:`pipeline.LABELS`)."""
        s = self.sites.get(key)
        if s is None:
            with self._lock:
                s = self.sites.setdefault(key, Site(name, source))
        return s

    def decide(self, site: Site, sig: Any) -> tuple[bool, tuple]:
        """For an armed call: (check it?, its key). Counts a due check the budget refused; may disarm."""
        forced = self.arming.take_sample()
        sample, key, reason = self.sampler.decide(site, sig, force=forced)
        if reason is not None:
            self.stats.skip(reason)
        # only a new key keeps the window open (a random sample inside it does not)
        self.arming.note(novel=sample and self.sampler.last_new)
        return sample, key

    def begin(self, *, source: str, name: str, kind: str, op: str | None, dtype: str, bucket: str) -> Check:
        return Check(self, source, name, kind, op, dtype, bucket)

    # ------------------------------------------------------------------ outcomes

    def internal_error(self, where: str, exc: BaseException) -> None:
        self.stats.internal_errors += 1
        if len(self.errors) < KEEP_ERRORS:
            self.errors.append(f"{where}: {type(exc).__name__}: {str(exc)[:300]}")
        try:
            self.telemetry.internal_error(where, exc)
        except Exception:  # telemetry failing is itself only worth the log line below
            pass
        key = (where, type(exc).__name__)
        if key not in self._logged:
            self._logged.add(key)
            log.warning("gpuemu.hook: internal error in %s (%s: %s); the host program is unaffected, further "
                        "errors of this kind are only counted", where, type(exc).__name__, exc,
                        exc_info=log.isEnabledFor(logging.DEBUG))

    def diverged(self, chk: Check, verdict: Verdict, *, what: str, shape: list[int], record: Mapping[str, Any],
                 tensors: Mapping[str, Any]) -> Divergence:
        """Record a divergence: line, snapshot (within the caps), telemetry event, log."""
        seed = seed_hex(int.from_bytes(os.urandom(6), "big"))
        shape_txt = "[" + ",".join(str(int(d)) for d in shape) + "]"
        line = f"FAIL seed={seed} dtype={chk.dtype} shape={shape_txt} {verdict.message} (shadow check of {what})"
        rec_path = snap_path = store_error = None
        key = (chk.source, chk.name, chk.dtype, chk.bucket)
        if self._stored_per_key[key] < self.settings.snapshots_per_key:
            full = self.base_record(chk, seed=seed, line=line, verdict=verdict, shape=shape, what=what)
            full["hook"] = dict(record.get("hook", {}), source=chk.source, check=chk.kind)
            full.update({k: v for k, v in record.items() if k != "hook"})
            nbytes = storage_bytes(tensors.values())
            if nbytes > self.settings.max_snapshot_bytes:
                full["snapshot_omitted"] = (f"{nbytes} bytes of tensors exceed max_snapshot_bytes="
                                            f"{self.settings.max_snapshot_bytes}")
                import torch

                tensors = {"snapshot_omitted": torch.zeros(0)}  # Store cannot read back a snapshot of nothing
            try:
                rec_path = str(self.store.save(full, tensors))
                snap_path = _snapshot_path(rec_path)
                self._stored_per_key[key] += 1
                self.stats.snapshots += 1
            except (StoreError, OSError) as e:  # a full disk must never reach the host
                store_error = str(e)
                self.stats.store_errors += 1
                if ("store", type(e).__name__) not in self._logged:
                    self._logged.add(("store", type(e).__name__))
                    log.warning("gpuemu.hook: divergence not stored: %s (further store errors are only counted)", e)
        div = Divergence(line=line, seed=seed, source=chk.source, name=chk.name, op=chk.op, dtype=chk.dtype,
                         shape_bucket=chk.bucket, verdict=verdict, record=rec_path, snapshot=snap_path,
                         store_error=store_error)
        chk.divergence = div
        self.stats.divergences += 1
        self.divergences.append(div)
        try:
            self.telemetry.divergence(chk.span, chk.attrs, line=line, seed=seed, replay=div.replay, snapshot=snap_path)
        except Exception as e:
            self.internal_error("telemetry", e)
        first = key not in self._reported
        self._reported.add(key)
        if rec_path:
            log.warning("%s\nreplay: %s\nsnapshot: %s", line, div.replay, snap_path)
        else:  # repeats of a key are counted and sent as events; the log says it once
            why = store_error or "snapshot limit for this key reached"
            log.log(logging.WARNING if first else logging.DEBUG, "%s\nnot stored: %s", line, why)
        return div

    def base_record(self, chk: Check, *, seed: str, line: str, verdict: Verdict, shape: list[int], what: str) -> dict:
        import torch

        try:
            import triton

            triton_version = triton.__version__
        except Exception:
            triton_version = None
        tol = self.tolerances.get(chk.op if chk.op else "default", chk.dtype) if chk.dtype in ("fp32", "fp16", "bf16") \
            else None
        return {
            "gpuemu": __version__, "source": chk.source, "target": chk.name, "op": chk.op, "line": line,
            "what": what, "torch": torch.__version__, "triton": triton_version,
            "case": {"seed": int(seed, 16), "dtype": chk.dtype, "shape": list(shape), "shape_bucket": chk.bucket},
            "verdict": verdict.to_dict(), "tolerance": tol.to_dict() if tol is not None else None,
            "time": time.time(),
        }

    def summary(self) -> str:
        s = self.stats
        return (f"gpuemu.hook: {_n(s.checks, 'check')}, {_n(s.divergences, 'divergence')}, {s.skipped} skipped, "
                f"{_n(s.internal_errors, 'internal error')}; shadow time {s.shadow_seconds:.3f} s "
                f"({100 * self.budget.share():.2f}% of wall time, budget {100 * self.settings.budget:g}%)")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _snapshot_path(record_path: str) -> str | None:
    import json

    try:
        return json.loads(Path(record_path).read_text()).get("snapshot", {}).get("path")
    except (OSError, ValueError):
        return None


def _rng_state() -> Any:
    import torch

    cuda = None
    try:
        if torch.cuda.is_initialized():
            cuda = torch.cuda.get_rng_state_all()
    except Exception:
        cuda = None
    return torch.random.get_rng_state(), cuda


def _set_rng_state(state: Any) -> None:
    import torch

    cpu, cuda = state
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


_current: Runtime | None = None


def current() -> Runtime | None:
    """The installed runtime, or None when the hook is not installed (or mode is off)."""
    return _current


def _set_current(rt: Runtime | None) -> None:
    global _current
    _current = rt


__all__ = ["Runtime", "Check", "Divergence", "Stats", "ShadowDivergence", "ShadowError", "current"]
