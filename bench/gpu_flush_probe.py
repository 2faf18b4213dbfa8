"""Which of Triton's fp32 instructions flush subnormal results to zero on a GPU (gpuemu.device_arith).

Run on a GPU machine from the repository root::

    PYTHONPATH=. python3 bench/gpu_flush_probe.py --out bench/gpu_flush_h200.md

Each form is given 2^16 fp32 inputs whose exact results lie in the fp32 subnormal range (below 2^-126): exp2 and exp
of large negative arguments, a product and a quotient of two small normals, and exp written with an fp32 result
stored as bf16 (the corpus's exp_exp2 kernel); the table gives the share of results written as 0 and the share
correctly rounded, against the fp64 result rounded to fp32 on the CPU (which keeps subnormals).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _form(x_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if OP == 0:
        y = tl.exp2(x)
    elif OP == 1:
        y = tl.exp(x)
    elif OP == 2:
        y = tl.exp2(x * 1.4426950408889634)
    elif OP == 3:
        y = x * 1.0e-20  # a product of normals with a subnormal result
    elif OP == 4:
        y = x / 1.0e20
    else:
        y = tl.exp2(x)
    if OP == 5:
        tl.store(y_ptr + offs, y.to(tl.bfloat16), mask=mask)
    else:
        tl.store(y_ptr + offs, y, mask=mask)


FORMS = [  # name, OP, inputs on the CPU (fp32), exact result in fp64
    ("tl.exp2(x), x in [-149, -126)", 0, lambda n: -126.0 - 23.0 * torch.rand(n), lambda x: torch.exp2(x)),
    ("tl.exp(x), x in [-103, -87.4)", 1, lambda n: -87.4 - 15.6 * torch.rand(n), lambda x: torch.exp(x)),
    ("tl.exp2(x * log2e), x in [-103, -87.4)", 2, lambda n: -87.4 - 15.6 * torch.rand(n),
     lambda x: torch.exp2(x * torch.tensor(LOG2E, dtype=torch.float32).double())),
    ("x * 1e-20, x in [1e-28, 1e-18)", 3, lambda n: 1e-28 * 10 ** (10 * torch.rand(n)),
     lambda x: x * torch.tensor(1.0e-20, dtype=torch.float32).double()),
    ("x / 1e20, x in [1e-28, 1e-18)", 4, lambda n: 1e-28 * 10 ** (10 * torch.rand(n)), lambda x: x / 1e20),
    ("tl.exp2(x) stored as bf16, x in [-133, -126)", 5, lambda n: -126.0 - 7.0 * torch.rand(n), lambda x: torch.exp2(x)),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    p.add_argument("-n", type=int, default=1 << 16)
    a = p.parse_args(argv)
    torch.manual_seed(0)
    rows = []
    for name, op, draw, exact in FORMS:
        x = draw(a.n).float()
        want = exact(x.double())
        y_dtype = torch.bfloat16 if op == 5 else torch.float32
        y = torch.empty(a.n, dtype=y_dtype, device="cuda")
        _form[(triton.cdiv(a.n, 1024),)](x.cuda(), y, a.n, OP=op, BLOCK=1024)
        got = y.cpu().double()
        rounded = want.to(y_dtype).double()  # the correctly rounded result, subnormals kept
        sub = rounded != 0
        rows.append({"form": name, "cases": int(sub.sum()), "zero": float((got[sub] == 0).double().mean()),
                     "correctly_rounded": float((got[sub] == rounded[sub]).double().mean()),
                     "max_abs_err": float((got - want).abs().max())})
    gpu = torch.cuda.get_device_name()
    lines = [f"# Subnormal results on {gpu} (torch {torch.__version__}, triton {triton.__version__})", "",
             f"`PYTHONPATH=. python3 bench/gpu_flush_probe.py` ({a.n} inputs per form, results in the subnormal range):", "",
             "| form | results | written as 0 | correctly rounded | max abs err |", "|---|---|---|---|---|"]
    lines += [f"| {r['form']} | {r['cases']} | {r['zero']:.1%} | {r['correctly_rounded']:.1%} | {r['max_abs_err']:.3g} |"
              for r in rows]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        Path(a.out).write_text(text)
        Path(a.out).with_suffix(".json").write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
