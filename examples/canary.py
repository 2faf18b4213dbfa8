"""An inference canary: a request loop in shadow mode at a low sample rate, telemetry to the console.

    python examples/canary.py                  # correct kernels: checks pass, counters and spans printed
    python examples/canary.py --bug            # a Triton kernel with a tail-mask bug: a divergence event
    python examples/canary.py --requests 200 --sample-rate 0.02

The hook is configured the way a deployment would: ``GPUEMU_MODE=shadow`` and ``GPUEMU_SAMPLE_RATE`` in
the environment (set below only as defaults), an OpenTelemetry SDK with console exporters standing in for
an OTLP exporter to a collector (examples/otel/ has the collector config and the alert rule). Requests
have varying batch sizes, so the first request of each new shape bucket is checked, then about
``sample_rate`` of the rest, within the overhead budget.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < N, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, 0), mask=offs < N)


@triton.jit
def _softmax_rows_bug(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0)  # BUG: padding 0 joins the sum
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, 0), mask=offs < N)


def softmax(x: torch.Tensor, kernel) -> torch.Tensor:
    y = torch.empty_like(x)
    kernel[lambda meta: (x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def _console_telemetry() -> dict:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs import export as log_export
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    res = Resource.create({"service.name": "canary"})
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=60_000)
    tp = TracerProvider(resource=res)
    tp.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=lambda s: s.to_json(indent=None) + "\n")))
    lp = LoggerProvider(resource=res)
    console = getattr(log_export, "ConsoleLogRecordExporter", None) or log_export.ConsoleLogExporter
    lp.add_log_record_processor(log_export.SimpleLogRecordProcessor(console()))
    return {"meter_provider": MeterProvider(resource=res, metric_readers=[reader]), "tracer_provider": tp,
            "logger_provider": lp}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=60)
    p.add_argument("--sample-rate", default="0.02")
    p.add_argument("--bug", action="store_true", help="serve with the buggy softmax kernel")
    a = p.parse_args(argv)
    os.environ.setdefault("GPUEMU_MODE", "shadow")
    os.environ.setdefault("GPUEMU_SAMPLE_RATE", a.sample_rate)
    import gpuemu.hook

    try:
        providers = _console_telemetry()
    except ImportError:
        providers = {}
        print("opentelemetry-sdk not installed: telemetry goes to OpenTelemetry's no-op providers", file=sys.stderr)
    rt = gpuemu.hook.install(**providers)  # same env settings, plus the console exporters
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 40)).to(device).eval()
    inner = "inductor" if device == "cuda" else "aot_eager"
    served = torch.compile(model, backend="gpuemu", options={"backend": inner})
    kernel = _softmax_rows_bug if a.bug else _softmax_rows
    gen = torch.Generator().manual_seed(2)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(a.requests):
            batch = (1, 4, 8, 16)[i % 4]
            x = torch.randn(batch, 64, generator=gen).to(device)
            probs = softmax(served(x), kernel)
            assert probs.shape == (batch, 40)
    wall = time.perf_counter() - t0
    providers.get("meter_provider") and providers["meter_provider"].force_flush()
    print(f"served {a.requests} requests in {wall:.2f} s", file=sys.stderr)
    if rt is not None:
        print(rt.summary(), file=sys.stderr)
        for d in rt.divergences:
            print(f"{d.line}\nreplay: {d.replay}", file=sys.stderr)
    return 1 if rt is not None and rt.divergences else 0


if __name__ == "__main__":
    sys.exit(main())
