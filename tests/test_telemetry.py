"""OpenTelemetry from shadow checks, on injected SDK providers with in-memory readers and exporters."""

from pathlib import Path
import pytest
import torch

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs import export as log_export  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import gpuemu.hook as hook  # noqa: E402
from gpuemu import telemetry  # noqa: E402
from gpuemu.oracle import Oracle  # noqa: E402

from .test_hook import _rms_bug, _rms_ok, _x, rms  # noqa: E402

hook.uninstall()


@pytest.fixture
def otel(tmp_path):
    reader, spans = InMemoryMetricReader(), InMemorySpanExporter()
    logs = (getattr(log_export, "InMemoryLogRecordExporter", None) or log_export.InMemoryLogExporter)()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider()
    lp.add_log_record_processor(log_export.SimpleLogRecordProcessor(logs))
    rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0,
                      meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tp, logger_provider=lp)
    hook.bind("_rms_ok", "rmsnorm")
    hook.bind("_rms_bug", "rmsnorm")
    yield rt, reader, spans, logs
    hook.uninstall()
    hook._extra_bindings.clear()


def _points(reader):
    out = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend((m.unit, dict(p.attributes), p) for p in m.data.data_points)
    return out


def test_checks_divergences_histograms_spans_and_a_correlated_event(otel):
    rt, reader, spans, logs = otel
    x, w = _x()
    rms(_rms_ok, x, w)
    rms(_rms_bug, x, w)
    pts = _points(reader)
    checks = {(a["gpuemu.kernel"], a["gpuemu.outcome"]): p.value for unit, a, p in pts[telemetry.CHECKS]}
    assert checks == {("_rms_ok", "pass"): 1, ("_rms_bug", "divergence"): 1}
    assert {u for u, _, _ in pts[telemetry.CHECKS]} == {"{check}"}
    ((unit, attrs, p),) = pts[telemetry.DIVERGENCES]
    assert unit == "{divergence}" and p.value == 1
    assert attrs == {"gpuemu.source": "triton", "gpuemu.kernel": "_rms_bug", "gpuemu.op": "rmsnorm",
                     "gpuemu.dtype": "fp32", "gpuemu.shape_bucket": "4x64", "gpuemu.check": "op"}
    ratios = {a["gpuemu.kernel"]: p for _, a, p in pts[telemetry.ERROR_RATIO]}
    assert ratios["_rms_bug"].sum > 1.0 and ratios["_rms_bug"].count == 1
    (dur_unit, _, _), *_ = pts[telemetry.DURATION]
    assert dur_unit == "s" and all(p.sum > 0 for _, _, p in pts[telemetry.DURATION])
    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == [telemetry.SPAN_NAME] * 2
    bad_span = next(s for s in finished if s.attributes["gpuemu.kernel"] == "_rms_bug")
    (rec,) = logs.get_finished_logs()
    lr = getattr(rec, "log_record", rec)
    d = rt.divergences[0]
    assert lr.event_name == telemetry.DIVERGENCE_EVENT and lr.body == d.line
    assert lr.attributes["gpuemu.replay.seed"] == d.seed and lr.attributes["gpuemu.snapshot.path"] == d.snapshot
    assert lr.attributes["gpuemu.replay.command"] == d.replay == f"gpuemu reproduce {d.seed} --store {Path(d.record).parent.parent}"
    assert lr.trace_id == bad_span.context.trace_id and lr.span_id == bad_span.context.span_id


def test_internal_errors_are_counted(otel, monkeypatch):
    rt, reader, _, _ = otel
    import gpuemu.hook.triton as ht

    monkeypatch.setattr(Oracle, "compare_on_device", lambda *a, **k: 1 / 0)
    rms(_rms_ok, *_x())
    ((_, attrs, p),) = _points(reader)[telemetry.INTERNAL_ERRORS]
    assert p.value == 1 and attrs["error.type"] == "ZeroDivisionError"


def test_without_the_api_everything_is_a_no_op(monkeypatch):
    monkeypatch.setattr(telemetry, "available", lambda: False)
    t = telemetry.Telemetry()
    with t.check_span({"gpuemu.source": "triton"}) as span:
        assert span is None
    t.check_finished(None, {}, outcome="pass", ratio=0.1, seconds=0.1)
    t.divergence(None, {}, line="x", seed="0x1", replay="gpuemu reproduce 0x1", snapshot=None)
    t.internal_error("here", ValueError())
