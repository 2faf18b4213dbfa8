"""A small model trained a few steps with torch.compile(backend="gpuemu") and a Triton RMSNorm with a planted bug.

    python examples/train.py                 # with the hook: losses, the divergence line, telemetry, replay
    python examples/train.py --no-hook       # the same script as it was before gpuemu: same losses, bit for bit
    GPUEMU_RULEPACK=examples/hook_bindings.yaml python examples/train.py
                                             # judge the kernel against the rmsnorm fp64 reference instead

The only differences between the two modes are the ones a user makes: ``import gpuemu.hook`` and
``backend="gpuemu"``. Everything else (sampling, the store, the binding) comes from the environment.

The planted bug: the RMSNorm kernel divides the sum of squares by the padded block size BLOCK_N instead
of N (right only when N is a power of two). Its grid is a function of the meta-parameters, so the hook
re-launches it with BLOCK_N doubled and sees the result change (a metamorphic check); with the binding
rule pack it is judged against the op's fp64 reference instead. Both catch it on the first step.

On CPU the Triton kernel runs under Triton's interpreter and the inner compile backend is ``aot_eager``:
Inductor's CPU code generation takes 10+ s per graph on two cores, far more than this demo's budget. On a
GPU the inner backend is Inductor, the default of the ``gpuemu`` backend.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read when a kernel is decorated: set it first

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

D_IN, D_HID, N_CLASSES = 32, 48, 10  # 48: not a power of two, so the planted bug shows


@triton.jit
def _rmsnorm_fwd(x_ptr, w_ptr, y_ptr, N, eps, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / BLOCK_N  # PLANTED BUG: divides by the padded block, not by N
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_launcher(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The Triton RMSNorm over the last dim (the kernel above, planted bug included)."""
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    y = torch.empty_like(x2)
    n_rows, n = x2.shape
    _rmsnorm_fwd[lambda meta: (n_rows,)](x2, weight, y, n, eps, x2.stride(0), y.stride(0),
                                         BLOCK_N=triton.next_power_of_2(n))
    return y.reshape(x.shape)


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        return rmsnorm_launcher(x.detach(), weight.detach(), eps)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        with torch.enable_grad():  # the backward is plain torch: the bug is only in the forward kernel
            xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
            y = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + ctx.eps) * wr
            gx, gw = torch.autograd.grad(y, (xr, wr), grad)
        return gx, gw, None


@torch._dynamo.disable  # a Triton launch from Python: Dynamo breaks the graph around it
def triton_rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _RMSNorm.apply(x, weight, 1e-6)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(D_IN, D_HID)
        self.norm_weight = torch.nn.Parameter(torch.ones(D_HID))
        self.out = torch.nn.Linear(D_HID, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.inp(x))
        h = triton_rmsnorm(h, self.norm_weight)
        return self.out(h)


def train(*, backend: str, options: dict | None, steps: int, device: str) -> list[float]:
    torch.manual_seed(0)
    model = Model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model, backend=backend, options=options)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for step in range(steps):
        x = torch.randn(16, D_IN, generator=gen).to(device)
        target = torch.randint(0, N_CLASSES, (16,), generator=gen).to(device)
        loss = torch.nn.functional.cross_entropy(compiled(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"step {step} loss {losses[-1]:.6f} ({losses[-1].hex()})", flush=True)
    return losses


def _telemetry():
    """An in-process OpenTelemetry SDK (when installed) so the demo can print what an exporter would send."""
    try:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs import export as log_export
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    in_memory_logs = getattr(log_export, "InMemoryLogRecordExporter", None) or log_export.InMemoryLogExporter
    reader, spans, logs = InMemoryMetricReader(), InMemorySpanExporter(), in_memory_logs()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider()
    lp.add_log_record_processor(log_export.SimpleLogRecordProcessor(logs))
    return {"meter_provider": MeterProvider(metric_readers=[reader]), "tracer_provider": tp,
            "logger_provider": lp}, (reader, spans, logs)


def _print_telemetry(reader, spans, logs) -> None:
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    attrs = {k.replace("gpuemu.", ""): v for k, v in p.attributes.items()
                             if k in ("gpuemu.source", "gpuemu.kernel", "gpuemu.outcome", "gpuemu.check")}
                    value = getattr(p, "value", None)
                    if value is None:
                        value = f"count={p.count} sum={p.sum:.4g}"
                    print(f"  metric {m.name} {value} {attrs}")
    print(f"  spans: {len(spans.get_finished_spans())} x gpuemu.shadow.check")
    for rec in logs.get_finished_logs():
        lr = getattr(rec, "log_record", rec)
        a = dict(lr.attributes or {})
        print(f"  event {getattr(lr, 'event_name', None) or a.get('event.name')} seed={a.get('gpuemu.replay.seed')} "
              f"snapshot={a.get('gpuemu.snapshot.path')} trace_id={lr.trace_id:032x}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--no-hook", action="store_true", help="train without gpuemu (the baseline losses)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--inner", default=None, help="inner compile backend (default: inductor on GPU, aot_eager on CPU)")
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    inner = a.inner or ("inductor" if device == "cuda" else "aot_eager")
    t0 = time.perf_counter()
    if a.no_hook:
        train(backend=inner, options=None, steps=a.steps, device=device)
        print(f"done in {time.perf_counter() - t0:.1f} s (no hook, backend={inner})")
        return 0

    import gpuemu.hook  # the one line a training script adds (it installs from env + gpuemu.yaml)

    tel = _telemetry()
    if tel is not None:  # give the hook in-process exporters so the demo can print them
        gpuemu.hook.install(**tel[0])
    train(backend="gpuemu", options={"backend": inner}, steps=a.steps, device=device)
    rt = gpuemu.hook.current()
    print(f"done in {time.perf_counter() - t0:.1f} s (backend=gpuemu, inner {inner})")
    if rt is None:
        print("gpuemu.hook is off (GPUEMU_MODE=off)")
        return 0
    print(rt.summary())
    for d in rt.divergences:
        print(d.line)
        print(f"replay: {d.replay}" if d.record else f"  (not stored: {d.store_error or 'one snapshot per key'})")
    if tel is not None:
        print("telemetry (what an OpenTelemetry exporter receives):")
        _print_telemetry(*tel[1])
    stored = [d for d in rt.divergences if d.record]
    if stored:
        from gpuemu.store import Store

        d = stored[0]
        record, tensors = Store(rt.settings.store).fetch(d.seed)
        print(f"replaying {d.seed} from {d.snapshot}:")
        print(gpuemu.hook.replay_record(record, tensors).report())
    return 1 if rt.divergences else 0


if __name__ == "__main__":
    sys.exit(main())
