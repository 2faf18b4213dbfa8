"""One scenario per gap: run a kernel from gaps.py and say whether the result is what a GPU gives.

Used twice: in-process on the gpuemu runtime (tests/test_runtime_gaps.py) and, as the baseline, in a
subprocess under plain TRITON_INTERPRET=1 (``python -m tests.kernels_runtime.scenarios``), where every
scenario is expected to fail. A scenario returns (ok, detail); it never raises.
"""
from __future__ import annotations

import json
import math
import sys
from typing import Callable

import numpy as np
import torch
import triton

from gpuemu.errors import KernelFinding
from tests.kernels_runtime import gaps as G

SCENARIOS: dict[str, Callable[[], tuple[bool, str]]] = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _finding(run, kind: str, *needles: str) -> tuple[bool, str]:
    try:
        run()
    except KernelFinding as e:
        ok = e.kind == kind and all(n in e.message for n in needles)
        return ok, f"{e.kind}: {e.message}"
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"
    return False, "no finding"


def _close(got, want, atol=0.0, rtol=0.0) -> tuple[bool, str]:
    got, want = got.double(), want.double()
    err = float((got - want).abs().max()) if got.numel() else 0.0
    ok = bool(torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True))
    return ok, f"max abs err {err:.3g}"


def _guard(fn):
    def run():
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - a scenario reports, never raises
            return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]

    run.__name__ = fn.__name__
    return run


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


@scenario
@_guard
def bf16_cast():
    x = torch.randn(1000, generator=_gen())
    y = torch.empty(1000, dtype=torch.bfloat16)
    G.bf16_cast_kernel[(8,)](x, y, 1000, BLOCK=128)
    want = x.to(torch.bfloat16)  # round to nearest even, as cvt.rn.bf16.f32
    same = torch.equal(y.view(torch.int16), want.view(torch.int16))
    return same, f"{int((y.view(torch.int16) != want.view(torch.int16)).sum())} of 1000 differ from RNE"


@scenario
@_guard
def bf16_arith():
    x = torch.randn(300, generator=_gen(1)).bfloat16()
    y = torch.randn(300, generator=_gen(2)).bfloat16()
    z = torch.empty_like(x)
    G.bf16_arith_kernel[(3,)](x, y, z, 300, BLOCK=128)
    t = x * y + x * 2.0  # torch rounds every bf16 op to nearest even, like the GPU
    want = torch.where(t > -x, t, -t)
    return _close(z, want, atol=0, rtol=2 ** -7)


@scenario
@_guard
def bf16_dot():
    a = torch.randn(16, 32, generator=_gen(3)).bfloat16()
    b = torch.randn(32, 16, generator=_gen(4)).bfloat16()
    c = torch.empty(16, 16)
    G.bf16_dot_kernel[(1,)](a, b, c, M=16, N=16, K=32)
    return _close(c, a.double() @ b.double(), atol=1e-4, rtol=1e-5)


@scenario
@_guard
def tail_load_oob():
    n = 129  # one element past a block boundary
    x, y = torch.randn(n, generator=_gen()), torch.empty(n)
    return _finding(lambda: G.buggy_tail_load_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64), "oob",
                    "out-of-bounds read", "'x_ptr'", "element offset 129", "gaps.py:", "lane [1]")


@scenario
@_guard
def tail_store_oob():
    n = 65
    x, y = torch.randn(n, generator=_gen()), torch.empty(n)
    return _finding(lambda: G.buggy_tail_store_kernel[(2,)](x, y, n, BLOCK=64), "oob", "out-of-bounds write",
                    "'y_ptr'", "element offset 65")


@scenario
@_guard
def libdevice():
    x = torch.randn(100, generator=_gen(5))
    y, z = torch.empty(100), torch.empty(100)
    G.libdevice_kernel[(1,)](x, y, z, 100, BLOCK=128)
    ok1, d1 = _close(y, torch.tanh(x.double()) + torch.erf(x.double()), atol=1e-6, rtol=1e-6)
    ok2, d2 = _close(z, torch.log1p(x.double().abs()) + torch.rsqrt(x.double() ** 2 + 1), atol=1e-6, rtol=1e-6)
    return ok1 and ok2, f"{d1}; {d2}"


@scenario
@_guard
def device_assert():
    x = torch.rand(50, generator=_gen()) + 0.5
    x[37] = -1.0
    y = torch.empty(50)
    return _finding(lambda: G.assert_kernel[(1,)](x, y, 50, BLOCK=64), "assert", "log of a non-positive value",
                    "lane [37]")


@scenario
@_guard
def nested_helper_on_demand():
    """A kernel decorated without the interpreter, with a nested helper, interpreted on demand."""
    from triton.runtime.interpreter import InterpretedFunction

    x = torch.randn(40, generator=_gen())
    y = torch.empty(40)
    from gpuemu import runtime

    if runtime.active():
        G.nested_kernel[(1,)](x, y, 40, BLOCK=64)
    else:  # the plain way to interpret a JITFunction on demand
        InterpretedFunction(G.nested_kernel.fn)[(1,)](x, y, 40, BLOCK=64)
    return _close(y, 3 * x, atol=1e-6)


@scenario
@_guard
def autotune_every_config():
    n, rows = 40, 3
    x = torch.randn(rows, n, generator=_gen())
    y = torch.empty(rows)
    return _finding(lambda: G.buggy_autotuned_rowsum_kernel[(rows,)](x, y, n), "config", "BLOCK=16", "BLOCK=64",
                    "disagree")


@scenario
@_guard
def autotune_benchmark_accumulates():
    x = torch.randn(50, generator=_gen())
    y = torch.zeros(50)
    return _finding(lambda: G.buggy_accumulating_kernel[lambda m: (triton.cdiv(50, m["BLOCK"]),)](x, y, 50),
                    "config", "reset_to_zero")


@scenario
@_guard
def tf32_dot():
    """fp32 tl.dot defaults to TF32 on the GPU: the result equals TF32-rounded inputs multiplied exactly."""
    from gpuemu.runtime.numerics import tf32

    a = torch.randn(32, 32, generator=_gen(6))
    b = torch.randn(32, 32, generator=_gen(7))
    c = torch.empty(32, 32)
    G.dot_kernel[(1,)](a, b, c, N=32, IEEE=False)
    at, bt = (torch.from_numpy(tf32(t.numpy())).double() for t in (a, b))
    ok, d = _close(c, at @ bt, atol=2e-5, rtol=1e-5)
    full_err = float((c.double() - a.double() @ b.double()).abs().max())
    return ok and full_err > 1e-3, f"{d} vs TF32 model; {full_err:.3g} vs fp64 (GPU-like TF32 error)"


@scenario
@_guard
def boolean_operators():
    x = torch.randn(10, generator=_gen())
    y, z = torch.empty(10), torch.empty(10, dtype=torch.int32)
    G.boolop_kernel[(1,)](x, y, z, 10, 3, BLOCK=16)
    want_y = torch.where(torch.arange(10) >= 3, x, torch.zeros(10))
    want_z = (torch.arange(10) >= 3).int()
    return torch.equal(y, want_y) and torch.equal(z, want_z), f"y={y.tolist()[:4]} z={z.tolist()[:4]}"


@scenario
@_guard
def float_scalar_argument():
    x = torch.randn(20, generator=_gen())
    y = torch.empty(20)
    eps = 1e-3
    G.float_arg_kernel[(1,)](x, y, 20, eps, BLOCK=32)
    want = (x.half() * torch.tensor(eps, dtype=torch.float32).half() + torch.tensor(eps).half()).float()
    return _close(y, want, atol=1e-3, rtol=1e-3)


@scenario
@_guard
def string_constexpr_annotation():
    x = torch.randn(100, generator=_gen())
    y = torch.empty(100)
    G.string_constexpr_kernel[(2,)](x, y, 100, BLOCK=64)
    return _close(y, x + 1, atol=1e-6)


@scenario
@_guard
def list_grid():
    x = torch.randn(100, generator=_gen())
    y = torch.empty(100)
    G.copy_kernel[[4]](x, y, 100, BLOCK=32)
    return torch.equal(x, y), "copied" if torch.equal(x, y) else "not copied"


@scenario
@_guard
def aliased_builtins():
    x = torch.randn(30, generator=_gen())
    y = torch.empty(30)
    G.alias_kernel[(1,)](x, y, 30, BLOCK=32)
    return _close(y, x.half().clamp_min(0).float(), atol=0)


@scenario
@_guard
def dtype_to_nested_helper():
    import triton.language as tl

    x = torch.randn(30, generator=_gen())
    y = torch.empty(30)
    G.dtype_helper_kernel[(1,)](x, y, 30, BLOCK=32, DT=tl.float16)
    return _close(y, x.half().float(), atol=0)


class Buffer:
    """A tensor-like buffer that is not a torch.Tensor (data_ptr, dtype, shape, numel, element_size)."""

    def __init__(self, t: torch.Tensor) -> None:
        self._t = t
        self.dtype, self.shape = t.dtype, tuple(t.shape)

    def data_ptr(self) -> int:
        return self._t.data_ptr()

    def numel(self) -> int:
        return self._t.numel()

    def element_size(self) -> int:
        return self._t.element_size()


@scenario
@_guard
def tensor_like_buffer():
    x = torch.randn(100, generator=_gen())
    y = torch.zeros(100)
    G.copy_kernel[(4,)](Buffer(x), Buffer(y), 100, BLOCK=32)
    return torch.equal(x, y), "copied" if torch.equal(x, y) else "not copied"


@scenario
@_guard
def program_waits_on_another():
    flag, out = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    return _finding(lambda: G.wait_for_next_program_kernel[(2,)](flag, out), "unsupported", "waits on another program",
                    "atomic_cas")


def main() -> int:
    """Baseline: run every scenario under plain TRITON_INTERPRET=1; one JSON object per line.
    With ``--runtime``: on gpuemu's runtime instead (used in a process without TRITON_INTERPRET).

    The wait-on-another-program scenario hangs there: it is bounded by SIGALRM. A scenario missing from the
    output crashed the process (heap corruption): it failed too."""
    import signal

    class Hang(Exception):
        pass

    def alarm(*_):
        raise Hang()

    signal.signal(signal.SIGALRM, alarm)
    if "--runtime" in sys.argv:
        from gpuemu import runtime

        runtime.activate()
    # the out-of-bounds store corrupts the heap under the plain interpreter (a later malloc aborts): run it last
    order = sorted(SCENARIOS, key=lambda n: n == "tail_store_oob")
    for name in order:
        fn = SCENARIOS[name]
        signal.alarm(3 if name == "program_waits_on_another" else 60)
        try:
            ok, detail = fn()
        except Hang:
            ok, detail = False, "hung (stopped after 3 s)"
        signal.alarm(0)
        print(json.dumps({"name": name, "ok": ok, "detail": detail}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
