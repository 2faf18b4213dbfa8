"""What a GPU's fp32 arithmetic costs in ulps: Triton's approximate instructions measured against fp64.

Run on a GPU machine from the repository root::

    PYTHONPATH=. python3 bench/gpu_arith_probe.py --out bench/gpu_arith_h200.md

For each elementwise form a Triton kernel computes (``tl.exp2`` -> ``ex2.approx``, ``tl.exp`` -> ``ex2.approx`` of
``x * log2e``, ``tl.log``/``tl.log2`` -> ``lg2.approx``, ``tl.sqrt``, ``tl.rsqrt``, fp32 ``/``, ``tl.sin``/``tl.cos``,
the exp2 softmax form ``exp2(x * log2e - m)`` that LLVM contracts into an FMA, and its ``enable_fp_fusion=False``
twin), 2^22 fp32 inputs over the form's domain are run on the GPU and on the CPU in float64 (the input's exact
value); the table gives the error in units of the fp32 ulp of the exact result: max, p99.9, and the share of
results not correctly rounded. These are the figures the CUDA error model of gpuemu (``gpuemu.tolerance``) cites.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
LOG2E = 1.4426950408889634


@triton.jit
def _unary(x_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    if OP == 0:
        y = tl.exp2(x)
    elif OP == 1:
        y = tl.exp(x)
    elif OP == 2:
        y = tl.log2(x)
    elif OP == 3:
        y = tl.log(x)
    elif OP == 4:
        y = tl.sqrt(x)
    elif OP == 5:
        y = tl.rsqrt(x)
    elif OP == 6:
        y = 1.0 / x
    elif OP == 7:
        y = tl.sin(x)
    elif OP == 8:
        y = tl.cos(x)
    else:
        y = tl.sigmoid(x)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def _exp2_shifted(x_ptr, m_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """exp2(x * log2e - m): the softmax numerator's form; LLVM may fuse the product into the subtraction."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    m = tl.load(m_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.exp2(x * 1.4426950408889634 - m), mask=mask)


UNARY = [  # (name, OP, instruction it lowers to, domain sampler, fp64 reference)
    ("exp2", 0, "ex2.approx.f32", lambda n: torch.empty(n, dtype=torch.float64).uniform_(-126, 127), torch.exp2),
    ("exp", 1, "ex2.approx.f32 of x*log2e", lambda n: torch.empty(n, dtype=torch.float64).uniform_(-87, 88), torch.exp),
    ("exp (|x| <= 1)", 1, "ex2.approx.f32 of x*log2e", lambda n: torch.empty(n, dtype=torch.float64).uniform_(-1, 1), torch.exp),
    ("log2", 2, "lg2.approx.f32", lambda n: torch.exp2(torch.empty(n, dtype=torch.float64).uniform_(-120, 120)), torch.log2),
    ("log", 3, "lg2.approx.f32 x ln2", lambda n: torch.exp2(torch.empty(n, dtype=torch.float64).uniform_(-120, 120)), torch.log),
    ("log (x near 1)", 3, "lg2.approx.f32 x ln2", lambda n: torch.empty(n, dtype=torch.float64).uniform_(0.5, 2), torch.log),
    ("sqrt", 4, "sqrt", lambda n: torch.exp2(torch.empty(n, dtype=torch.float64).uniform_(-120, 120)), torch.sqrt),
    ("rsqrt", 5, "rsqrt.approx", lambda n: torch.exp2(torch.empty(n, dtype=torch.float64).uniform_(-120, 120)), torch.rsqrt),
    ("1/x", 6, "div", lambda n: torch.exp2(torch.empty(n, dtype=torch.float64).uniform_(-120, 120)), lambda x: 1 / x),
    ("sin (|x| <= pi)", 7, "sin.approx", lambda n: torch.empty(n, dtype=torch.float64).uniform_(-math.pi, math.pi), torch.sin),
    ("sin (|x| <= 100)", 7, "sin.approx", lambda n: torch.empty(n, dtype=torch.float64).uniform_(-100, 100), torch.sin),
    ("cos (|x| <= pi)", 8, "cos.approx", lambda n: torch.empty(n, dtype=torch.float64).uniform_(-math.pi, math.pi), torch.cos),
    ("sigmoid", 9, "1/(1+exp(-x))", lambda n: torch.empty(n, dtype=torch.float64).uniform_(-80, 80), torch.sigmoid),
]


def _ulps(got32: torch.Tensor, exact64: torch.Tensor) -> torch.Tensor:
    """|got - exact| in units of the fp32 ulp at the exact result (nan where the exact result is not finite)."""
    e = exact64.abs()
    e32 = e.to(torch.float32)
    ulp = (torch.nextafter(e32, torch.full_like(e32, math.inf)) - e32).to(torch.float64)
    ulp = torch.where(ulp > 0, ulp, torch.full_like(ulp, 2.0 ** -149))
    return (got32.to(torch.float64) - exact64).abs() / ulp


def _row(name: str, inst: str, got: torch.Tensor, exact: torch.Tensor) -> dict:
    finite = torch.isfinite(exact) & (exact.abs() < 3.0e38) & (exact.abs() > 1.2e-38)  # normal fp32 results
    u = _ulps(got[finite], exact[finite])
    rounded = exact[finite].to(torch.float32)
    bad_nan = int((~torch.isfinite(got[finite])).sum())
    u = u[torch.isfinite(u)]
    if u.numel() == 0:
        u = torch.full((1,), math.nan, dtype=torch.float64)
    return {"form": name, "instruction": inst, "n": int(finite.sum()), "max_ulp": float(u.max()),
            "p999_ulp": float(torch.quantile(u[: 2 ** 24].float(), 0.999)),
            "not_correctly_rounded": float((got[finite] != rounded).float().mean()), "non_finite": bad_nan}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="bench/gpu_arith.md")
    p.add_argument("--n", type=int, default=1 << 22)
    p.add_argument("--device", default="cuda", help="cuda; cpu (TRITON_INTERPRET=1) only to try the script")
    args = p.parse_args()
    dev = args.device
    torch.manual_seed(0)
    t0 = time.perf_counter()
    rows = []
    n = args.n
    for name, op, inst, sample, ref in UNARY:
        x32 = sample(n).to(torch.float32)
        xd = x32.to(dev)
        y = torch.empty_like(xd)
        _unary[(triton.cdiv(n, 1024),)](xd, y, n, OP=op, BLOCK=1024)
        rows.append(_row(name, inst, y.cpu(), ref(x32.to(torch.float64))))
        print(rows[-1], flush=True)
    # the softmax numerator: x near its row max m = round(x*log2e), large |x| (where the product's rounding shows)
    for label, lo, hi in (("|x| <= 100", -100.0, 100.0), ("|x| ~ 1e4", 5e3, 2e4), ("|x| ~ 1e6", 5e5, 2e6)):
        x32 = torch.empty(n, dtype=torch.float64).uniform_(lo, hi).to(torch.float32)
        m32 = (x32.to(torch.float64) * LOG2E).to(torch.float32) - torch.empty(n).uniform_(0, 8).to(torch.float32)
        exact = torch.exp2(x32.to(torch.float64) * LOG2E - m32.to(torch.float64))
        for fusion in (True, False):
            xd, md = x32.to(dev), m32.to(dev)
            y = torch.empty_like(xd)
            opts = {"enable_fp_fusion": fusion} if dev == "cuda" else {}
            _exp2_shifted[(triton.cdiv(n, 1024),)](xd, md, y, n, BLOCK=1024, **opts)
            # what an exact-arithmetic CPU with the product rounded (no FMA) gives, for comparison
            rows.append(_row(f"exp2(x*log2e - m), {label}, fp fusion {'on' if fusion else 'off'}",
                             "fma + ex2.approx" if fusion else "mul, sub, ex2.approx", y.cpu(), exact))
            print(rows[-1], flush=True)
    cap = torch.cuda.get_device_capability() if dev == "cuda" else ("-", "-")
    gpu = torch.cuda.get_device_name() if dev == "cuda" else "the CPU interpreter"
    head = (f"# fp32 arithmetic of Triton kernels on {gpu} (sm_{cap[0]}{cap[1]}), torch "
            f"{torch.__version__}, triton {triton.__version__}\n\n`PYTHONPATH=. python3 bench/gpu_arith_probe.py` "
            f"({time.perf_counter() - t0:.0f} s; {n:,} inputs per form). Error in units of the fp32 ulp of the exact "
            "(float64) result, normal fp32 results only.\n\n")
    table = ["| form | lowers to | max ulp | p99.9 ulp | not correctly rounded | non-finite |", "|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['form']} | {r['instruction']} | {r['max_ulp']:.3g} | {r['p999_ulp']:.3g} | "
                     f"{100 * r['not_correctly_rounded']:.1f}% | {r['non_finite']} |")
    Path(args.out).write_text(head + "\n".join(table) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
