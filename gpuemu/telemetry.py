"""OpenTelemetry for shadow checks: two counters, two histograms, a span per check, a log event per divergence.

gpuemu depends on ``opentelemetry-api`` only; the application brings the SDK and its exporters. Without
the API installed every call here is a no-op. Providers are injectable (tests, or an application that
keeps its own); otherwise the global ones are used, bound lazily, so an SDK configured after
``import gpuemu.hook`` still receives everything.

Instruments (UCUM units, no ``_total``; a Prometheus exporter adds it)::

    gpuemu.shadow.checks           counter    {check}       every finished check, with gpuemu.outcome
    gpuemu.shadow.divergences      counter    {divergence}  checks that found a divergence
    gpuemu.shadow.error_ratio      histogram  1             worst error / allowed bound of each check
    gpuemu.shadow.duration         histogram  s             wall time of each check's shadow work
    gpuemu.shadow.internal_errors  counter    {error}       failures of gpuemu itself (never raised)

Attributes: ``gpuemu.source`` (torch.compile | triton | inductor | shadow), ``gpuemu.kernel`` (kernel,
graph or launcher name), ``gpuemu.op``, ``gpuemu.dtype``, ``gpuemu.shape_bucket``; checks also carry
``gpuemu.check`` (op | metamorphic | rerun | graph) and ``gpuemu.outcome`` (pass | divergence | skipped | error).

A divergence is a log record (event name ``gpuemu.shadow.divergence``) emitted in the context of the
check's span, so it carries the span's trace and span ids; OpenTelemetry now prefers such log-based
events to span events. It carries the replay seed, the replay command and the snapshot path.

>>> t = Telemetry()            # global providers (no-ops until an SDK is configured)
>>> with t.check_span({"gpuemu.source": "triton"}) as span:
...     t.check_finished(span, {"gpuemu.source": "triton"}, outcome="pass", ratio=0.1, seconds=0.002)
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator, Mapping

CHECKS = "gpuemu.shadow.checks"
DIVERGENCES = "gpuemu.shadow.divergences"
ERROR_RATIO = "gpuemu.shadow.error_ratio"
DURATION = "gpuemu.shadow.duration"
INTERNAL_ERRORS = "gpuemu.shadow.internal_errors"
LINT_FINDINGS = "gpuemu.lint.findings"
SPAN_NAME = "gpuemu.shadow.check"
DIVERGENCE_EVENT = "gpuemu.shadow.divergence"

ATTR_SOURCE = "gpuemu.source"
ATTR_KERNEL = "gpuemu.kernel"
ATTR_OP = "gpuemu.op"
ATTR_DTYPE = "gpuemu.dtype"
ATTR_SHAPE = "gpuemu.shape_bucket"
ATTR_CHECK = "gpuemu.check"
ATTR_OUTCOME = "gpuemu.outcome"
ATTR_SEED = "gpuemu.replay.seed"
ATTR_REPLAY = "gpuemu.replay.command"
ATTR_SNAPSHOT = "gpuemu.snapshot.path"

_RATIO_CAP = 1e9  # a non-finite output has an infinite ratio; histograms want a number
_RATIO_BUCKETS = [0.01, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0, 10.0, 100.0, 1e4, 1e6]
_DURATION_BUCKETS = [1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0]


def available() -> bool:
    """True when opentelemetry-api can be imported."""
    try:
        import opentelemetry.metrics  # noqa: F401
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        return False
    return True


class Telemetry:
    """Instruments, tracer and event logger of the shadow checks, on injected or global providers."""

    def __init__(self, *, meter_provider: Any = None, tracer_provider: Any = None,
                 logger_provider: Any = None) -> None:
        self.enabled = available()
        if not self.enabled:
            return
        from opentelemetry import metrics, trace

        from . import __version__

        meter = metrics.get_meter("gpuemu", __version__, meter_provider=meter_provider)
        self._tracer = trace.get_tracer("gpuemu", __version__, tracer_provider=tracer_provider)
        self._logger = _event_logger(logger_provider, __version__)
        self._checks = meter.create_counter(CHECKS, unit="{check}", description="shadow checks finished")
        self._divergences = meter.create_counter(DIVERGENCES, unit="{divergence}",
                                                 description="shadow checks that found a divergence")
        self._internal = meter.create_counter(INTERNAL_ERRORS, unit="{error}",
                                              description="internal errors of gpuemu's shadow work (never raised)")
        self._lint = meter.create_counter(LINT_FINDINGS, unit="{finding}",
                                          description="lint findings on kernels this process compiled")
        self._ratio = _histogram(meter, ERROR_RATIO, "1", "worst error / allowed bound per check", _RATIO_BUCKETS)
        self._duration = _histogram(meter, DURATION, "s", "wall time of a check's shadow work", _DURATION_BUCKETS)

    def start_check(self, attributes: Mapping[str, Any]) -> Any:
        """Start the span of one check (ended by :meth:`check_finished`); None without the API."""
        if not self.enabled:
            return None
        return self._tracer.start_span(SPAN_NAME, attributes=dict(attributes))

    @contextlib.contextmanager
    def check_span(self, attributes: Mapping[str, Any]) -> Iterator[Any]:
        """A span around one check, current inside the block; end it with :meth:`check_finished`."""
        span = self.start_check(attributes)
        if span is None:
            yield None
            return
        from opentelemetry import trace

        with trace.use_span(span, end_on_exit=False):
            yield span

    def check_finished(self, span: Any, attributes: Mapping[str, Any], *, outcome: str, ratio: float | None,
                       seconds: float) -> None:
        """Count the check, record its error ratio and duration, and end its span."""
        if not self.enabled:
            return
        attrs = dict(attributes)
        self._checks.add(1, dict(attrs, **{ATTR_OUTCOME: outcome}))
        if ratio is not None and ratio == ratio:
            self._ratio.record(min(float(ratio), _RATIO_CAP), attrs)
        self._duration.record(max(float(seconds), 0.0), attrs)
        if span is not None:
            span.set_attribute(ATTR_OUTCOME, outcome)
            if ratio is not None and math.isfinite(ratio):
                span.set_attribute("gpuemu.error_ratio", float(ratio))
            span.end()

    def divergence(self, span: Any, attributes: Mapping[str, Any], *, line: str, seed: str, replay: str,
                   snapshot: str | None) -> None:
        """Count a divergence and emit it as a log-based event correlated with ``span``."""
        if not self.enabled:
            return
        from opentelemetry import trace

        attrs = dict(attributes)
        self._divergences.add(1, attrs)
        extra = {ATTR_SEED: seed, ATTR_REPLAY: replay, ATTR_SNAPSHOT: snapshot or ""}
        if span is not None:
            span.set_attributes(extra)
            span.set_status(trace.Status(trace.StatusCode.ERROR, line[:200]))
        ctx = trace.set_span_in_context(span) if span is not None else None
        _emit(self._logger, ctx, line, dict(attrs, **extra))

    def lint_finding(self, attributes: Mapping[str, Any]) -> None:
        """Count one lint finding on a kernel compiled in this process (lint on compile)."""
        if self.enabled:
            self._lint.add(1, dict(attributes))

    def internal_error(self, where: str, exc: BaseException) -> None:
        """Count an internal error of gpuemu (the host program never sees it)."""
        if self.enabled:
            self._internal.add(1, {"gpuemu.where": where, "error.type": type(exc).__name__})


def _histogram(meter: Any, name: str, unit: str, description: str, buckets: list[float]) -> Any:
    try:  # the bucket advice is newer than opentelemetry-api 1.20
        return meter.create_histogram(name, unit=unit, description=description,
                                      explicit_bucket_boundaries_advisory=buckets)
    except TypeError:
        return meter.create_histogram(name, unit=unit, description=description)


def _event_logger(provider: Any, version: str) -> Any:
    try:
        from opentelemetry import _logs
    except ImportError:  # an API without the logs signal: divergences still count and mark the span
        return None
    try:
        return _logs.get_logger("gpuemu", version, logger_provider=provider)
    except Exception:  # pragma: no cover - unexpected API shape
        return None


def _emit(logger: Any, ctx: Any, body: str, attributes: dict) -> None:
    if logger is None:
        return
    from opentelemetry import _logs

    sev = getattr(_logs, "SeverityNumber", None)
    common = dict(body=body, attributes=attributes, severity_text="WARN",
                  severity_number=sev.WARN if sev is not None else None)
    try:
        logger.emit(_logs.LogRecord(context=ctx, event_name=DIVERGENCE_EVENT, **common))
    except TypeError:  # older API: no context/event_name keywords; ids from the span instead
        from opentelemetry import trace

        sc = trace.get_current_span(ctx).get_span_context() if ctx is not None else None
        attributes = dict(attributes, **{"event.name": DIVERGENCE_EVENT})
        logger.emit(_logs.LogRecord(trace_id=getattr(sc, "trace_id", None), span_id=getattr(sc, "span_id", None),
                                    trace_flags=getattr(sc, "trace_flags", None), **dict(common, attributes=attributes)))


__all__ = ["Telemetry", "available", "CHECKS", "DIVERGENCES", "ERROR_RATIO", "DURATION", "INTERNAL_ERRORS",
           "SPAN_NAME", "DIVERGENCE_EVENT"]
