"""A kernel's illegal memory access on CUDA leaves the process without a CUDA context: every later CUDA call fails.
The run then stops with that case as an ERROR and the reason, instead of raising out of gpuemu.fuzz (seen on an H100:
a KernelBench buggy twin's fault surfaced while the explain phase materialised its next case)."""

from __future__ import annotations

import gpuemu
from gpuemu.engine.run import cuda_context_lost
from gpuemu.oracle import Oracle

FAULT = ("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported "
         "at some other API call, so the stacktrace below might be incorrect.")


def test_only_sticky_cuda_errors_count_as_a_lost_context():
    assert "illegal memory access" in cuda_context_lost(RuntimeError(FAULT))
    assert cuda_context_lost(RuntimeError("CUDA error: out of memory")) == ""
    assert cuda_context_lost(ValueError("illegal memory access")) == ""


def test_a_lost_context_stops_the_run_with_an_error_not_a_traceback(monkeypatch):
    real = Oracle.evaluate
    calls = []

    def evaluate(self, fn, case, **kw):
        calls.append(case)
        if len(calls) >= 4:  # from the fourth case on, as if an earlier kernel had faulted
            raise RuntimeError(FAULT)
        return real(self, fn, case, **kw)

    monkeypatch.setattr(Oracle, "evaluate", evaluate)
    r = gpuemu.fuzz(lambda x: x.softmax(-1), op="softmax", iterations=50, seed=1, save=False)
    assert not r.ok and r.iterations == 4 and len(calls) == 4  # nothing runs after the context is gone
    assert r.failures[0].verdict.kind == "cuda_context_lost" and "no later case can run" in r.stopped
    assert "illegal memory access" in r.summary()
