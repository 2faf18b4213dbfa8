"""A training loop with the hook, exporting gpuemu's metrics to Prometheus, with one planted divergence.

    python examples/otel/train_prometheus.py --port 9464 --steps 12 --diverge-at 8 --serve 60

The process serves the OpenTelemetry SDK's Prometheus exporter on 127.0.0.1:PORT (``service.name`` copied
onto every series as ``service_name``, as the collector's resource_to_telemetry_conversion does). A small
model's RMSNorm is a Triton launcher bound to the rmsnorm op with ``@gpuemu.hook.shadow``; every step is
checked (sample rate 1). Steps before ``--diverge-at`` use the correct kernel; for ``--diverge-steps`` steps
from there the launcher switches to a kernel that divides by the padded block size instead of N (right only
when N is a power of two): the hook reports a divergence, counted in ``gpuemu.shadow.divergences``. The
process then keeps serving its metrics for ``--serve`` seconds so Prometheus can scrape and alert.
Prints ``ready`` once the exporter listens and ``diverged`` after the planted steps.
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

import gpuemu.hook  # noqa: E402  (the one line a training script adds; main() installs it with its exporter)

D_IN, D_HID, N_CLASSES = 16, 48, 4  # 48: not a power of two, so the planted bug shows
PLANTED = {"on": False}


@triton.jit
def _rmsnorm(x_ptr, w_ptr, y_ptr, N, eps, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_planted(x_ptr, w_ptr, y_ptr, N, eps, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / BLOCK_N + eps)  # PLANTED BUG: the padded block, not N
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@gpuemu.hook.shadow(op="rmsnorm")
def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The Triton RMSNorm launcher, bound to the rmsnorm op's fp64 reference for the hook's shadow checks."""
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    y = torch.empty_like(x2)
    kernel = _rmsnorm_planted if PLANTED["on"] else _rmsnorm
    kernel[(x2.shape[0],)](x2, weight, y, x2.shape[1], eps, x2.stride(0), y.stride(0),
                           BLOCK_N=triton.next_power_of_2(x2.shape[1]))
    return y.reshape(x.shape)


def _install_hook(port: int, service: str, store: str):
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from prometheus_client import start_http_server

    start_http_server(port, addr="127.0.0.1")  # loopback only
    reader = PrometheusMetricReader(resource_attribute_filter=lambda key: key == "service.name")
    provider = MeterProvider(resource=Resource.create({"service.name": service}), metric_readers=[reader])
    gpuemu.hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=store, meter_provider=provider)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=9464)
    p.add_argument("--service", default="gpuemu-train-e2e")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--diverge-at", type=int, default=8)
    p.add_argument("--diverge-steps", type=int, default=1)
    p.add_argument("--step-seconds", type=float, default=0.5, help="pause between steps (lets Prometheus scrape)")
    p.add_argument("--serve", type=float, default=60.0, help="seconds to keep serving metrics after training")
    p.add_argument("--store", default=".gpuemu-e2e")
    p.add_argument("--wait-for", metavar="FILE", default=None,
                   help="before the planted step, wait until FILE exists (a test first sees the clean phase)")
    a = p.parse_args(argv)
    _install_hook(a.port, a.service, a.store)
    print("ready", flush=True)

    class Norm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return rmsnorm(x.detach(), w.detach())

        @staticmethod
        def backward(ctx, grad):  # plain torch: the kernel under test is the forward
            x, w = ctx.saved_tensors
            with torch.enable_grad():
                xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
                y = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr
                return torch.autograd.grad(y, (xr, wr), grad)

    torch.manual_seed(0)
    inp, out = torch.nn.Linear(D_IN, D_HID), torch.nn.Linear(D_HID, N_CLASSES)
    w = torch.nn.Parameter(torch.ones(D_HID))
    opt = torch.optim.SGD([*inp.parameters(), *out.parameters(), w], lr=0.1)
    gen = torch.Generator().manual_seed(1)
    for step in range(a.steps):
        PLANTED["on"] = a.diverge_at <= step < a.diverge_at + a.diverge_steps
        if step == a.diverge_at and a.wait_for:
            print("waiting", flush=True)
            deadline = time.monotonic() + 300
            while not os.path.exists(a.wait_for) and time.monotonic() < deadline:
                time.sleep(0.1)
        x = torch.randn(8, D_IN, generator=gen)
        target = torch.randint(0, N_CLASSES, (8,), generator=gen)
        loss = torch.nn.functional.cross_entropy(out(Norm.apply(inp(x), w)), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}{' (planted bug)' if PLANTED['on'] else ''}", flush=True)
        if step == a.diverge_at + a.diverge_steps - 1:
            print("diverged", flush=True)
        time.sleep(a.step_seconds)
    rt = gpuemu.hook.current()
    print(rt.summary() if rt else "hook off", flush=True)
    for d in (rt.divergences if rt else []):
        print(d.line, flush=True)
    time.sleep(a.serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
