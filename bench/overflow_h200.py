"""The overflow pairs of examples/kernels/overflow at their real production size on a GPU: one command, one table.

    python bench/overflow_h200.py --out bench/overflow_h200.md --json bench/overflow_h200.json

For each family (row-wise softmax over [tokens, vocab], GEMM with M x K past 2^31, MoE gather over a buffer past
2^32 elements, head-major attention with B x H x T x D past 2^32) and each version (int32, int64), one process
(an illegal memory access poisons the CUDA context) builds the same shapes the CPU acceptance judges
(gpuemu/sizes.py, preset llama3-8b, seed 1, fp16; softmax fp32), with random inputs made on the GPU, runs the
launcher, synchronises, and compares sampled output rows (the first, the last, the first row whose offset
passes 2^31 where the family has one, and 5 drawn) with the op's fp64 reference restricted to those rows
(gpuemu.production.subproblems, judged by gpuemu's Oracle). A row the kernel never wrote holds NaN (the output is
NaN-filled first). Each cell: right (every sampled row within the bound), WRONG (rows off, with the worst error),
or CRASH (the CUDA error), and the kernel's time. Expected on an H200: int32 WRONG or CRASH, int64 right.

``--device cpu --small`` runs the same script on a CPU (TRITON_INTERPRET=1, gpuemu's runtime) at small sizes
where nothing wraps: every cell right; it checks the script, not the GPU.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAMILIES = {  # family -> (op, dtype, int32 launcher, int64 launcher)
    "row-wise softmax [tokens, vocab]": ("softmax", "fp32", "rowwise.py:softmax_i32", "rowwise.py:softmax_i64"),
    "GEMM, M x K past 2^31": ("matmul", "fp16", "gemm.py:matmul_i32", "gemm.py:matmul_i64"),
    "MoE gather, large expert offset": ("embedding", "fp16", "moe.py:moe_gather_i32", "moe.py:moe_gather_i64"),
    "head-major attention [B, H, T, D]": ("attention", "fp16", "attention.py:attention_i32",
                                          "attention.py:attention_i64"),
}
SMALL = {"softmax": {"N": 1000}, "matmul": {"M": 300, "K": 96, "N": 70}, "embedding": {"S": 40, "V": 300, "D": 200},
         "attention": {"B": 2, "H": 3, "Nq": 130, "Nk": 130, "D": 64}}
SMALL_BATCH = {"softmax": (37,), "embedding": (2,)}


def _case(op: str, dtype: str, small: bool):
    from gpuemu.sizes import production_case

    case = production_case(op, 1, dtype=dtype, preset="llama3-8b")
    if small:
        case = case.replace(dims=dict(case.dims, **SMALL[op]), batch=SMALL_BATCH.get(op, ()))
    return case


def _inputs(case, device: str) -> dict:
    import torch

    from gpuemu.cases import torch_dtype

    g = torch.Generator(device=device).manual_seed(1)
    out = {}
    for a in case.spec.args:
        if not a.is_tensor:
            continue
        shape = a.resolve(case.dims, case.batch)
        if a.kind == "index":
            out[a.name] = torch.randint(0, case.dims[a.index_of], shape, generator=g, device=device)
        else:
            out[a.name] = torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(torch_dtype(case.dtype))
    return out


def _rows(case, out) -> list[int]:
    """Sampled output rows (flat over the leading dims): first, last, the first past 2^31 / row length, 5 drawn."""
    import random

    n_rows = out.numel() // out.shape[-1]
    d = case.dims
    row_len = {"softmax": lambda: d["N"], "matmul": lambda: d["K"], "embedding": lambda: d["D"],
               "attention": lambda: d["Nq"] * d["D"]}[case.op]()
    first_wrap = -(-2**31 // row_len)
    if case.op == "attention":
        first_wrap *= case.dims["Nq"]  # (rows are (b, h, query): the first head whose base passes 2^31)
    picks = {0, n_rows - 1, min(first_wrap, n_rows - 1), min(first_wrap + 1, n_rows - 1)}
    rnd = random.Random(7)
    picks |= {rnd.randrange(n_rows) for _ in range(5)}
    return sorted(picks)


def one(family: str, version: str, device: str, small: bool) -> dict:
    """Run one launcher at size in this process and judge sampled rows."""
    import numpy as np
    import torch

    from gpuemu import config
    from gpuemu.oracle import Oracle
    from gpuemu.production import subproblems
    from gpuemu.target import load

    op, dtype, i32, i64 = FAMILIES[family]
    target = f"examples/kernels/overflow/{i32 if version == 'int32' else i64}"
    case = _case(op, dtype, small)
    if device == "cpu":
        import gpuemu.runtime as rt

        rt.activate()
    fn = load(str(ROOT / target))
    inputs = _inputs(case, device)
    args = [inputs.get(a.name) for a in case.spec.args]
    kwargs = dict(case.kwargs)
    row = {"family": family, "version": version, "target": target, "op": op, "dtype": dtype,
           "shape": case.shape_label(), "elements": max(math.prod(a.resolve(case.dims, case.batch))
                                                         for a in case.spec.args if a.is_tensor)}
    empty = torch.empty

    def nan_empty(*a, **k):  # (unwritten output rows read NaN, not leftovers)
        t = empty(*a, **k)
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    torch.empty = nan_empty
    try:
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        if device == "cuda":
            torch.cuda.synchronize()
        row["kernel_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - the crash is the result
        row.update(status="CRASH", detail=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return row
    finally:
        torch.empty = empty
    picks = _rows(case, out)
    width = out.shape[-1]
    idx = (np.asarray(picks, dtype=np.int64)[:, None] * width + np.arange(width)).reshape(-1)
    from gpuemu.device_arith import case_tolerance

    oracle = Oracle.from_settings(config.resolve())
    # (the device's own tolerances: a GPU's exp2/rcp approximations and fp16 accumulation order, as gpuemu's CUDA runs use)
    tol = case_tolerance(oracle.tolerances.get(case.spec.name, case.dtype, device=device), case.spec, case.dims, device)
    cpu_inputs = inputs  # (subproblems slices on the device; the Oracle moves the restricted problems to the CPU)
    bad, worst = [], 0.0
    for what, sub, o in subproblems(case, cpu_inputs, out, idx):
        sub = {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in sub.items()}
        v = oracle.compare(case.spec, case.dtype, sub, kwargs, o.cpu(), tol=tol)
        if v.status != "pass":
            bad.append(f"{what}: {v.message[:120]}")
            worst = max(worst, v.worst_ratio or float("inf"))
    row["rows_checked"] = len(picks)
    if bad:
        row.update(status="WRONG", detail=f"{len(bad)} of the sampled regions off (worst {worst:.3g}x its bound); "
                                          + bad[0])
    else:
        row.update(status="right", detail=f"{len(picks)} sampled rows within the bound")
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    p.add_argument("--small", action="store_true", help="small sizes (nothing wraps): a check of the script itself")
    p.add_argument("--out", default=None, help="Markdown table")
    p.add_argument("--json", default=None, help="raw rows")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--one", nargs=2, metavar=("FAMILY", "VERSION"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], device, a.small)))
        return 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    rows = []
    for family in FAMILIES:
        for version in ("int32", "int64"):
            cmd = [sys.executable, __file__, "--one", family, version, "--device", device] + (["--small"] if a.small else [])
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=a.timeout)
                last = (proc.stdout.strip().splitlines() or [""])[-1]
                r = json.loads(last) if last.startswith("{") else {
                    "family": family, "version": version, "status": "CRASH",
                    "detail": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:200]}
            except subprocess.TimeoutExpired:
                r = {"family": family, "version": version, "status": "TIMEOUT", "detail": f"> {a.timeout:g} s"}
            r["process_s"] = time.perf_counter() - t0
            rows.append(r)
            print(f"{family:36s} {version}: {r['status']:6s} {r.get('detail', '')[:110]}", file=sys.stderr, flush=True)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (gpuemu runtime)"
    lines = [f"# The overflow pairs at real size on {name}", "",
             f"`python bench/overflow_h200.py{' --small' if a.small else ''}`, torch {torch.__version__}. "
             "Shapes as the CPU acceptance judges them (gpuemu/sizes.py, preset llama3-8b, seed 1); sampled rows vs "
             "the fp64 reference of those rows.", "",
             "| family | shape | elements | int32 | int64 |", "|---|---|---:|---|---|"]
    for family in FAMILIES:
        r32, r64 = (next(r for r in rows if r["family"] == family and r["version"] == v) for v in ("int32", "int64"))

        def cell(r):
            t = f" ({r['kernel_s'] * 1e3:.1f} ms)" if "kernel_s" in r else ""
            return f"**{r['status']}**{t}: {r.get('detail', '')}".replace("|", "/")

        lines.append(f"| {family} | {r32.get('shape', '')} | {r32.get('elements', '')} | {cell(r32)} | {cell(r64)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
