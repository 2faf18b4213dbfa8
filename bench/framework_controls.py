"""The correct JAX (Pallas, interpret mode) and TensorFlow launchers, 300 cases per dtype on the CPU: every one
must pass (issue 37: XLA's and TF's CPU kernels flush subnormal inputs, which the judge must not count as a bug).

    python bench/framework_controls.py [-n 300] [--out bench/framework_controls.md]

One `gpuemu fuzz TARGET --op OP --dtype DT -n N --seed S` process per launcher and dtype (the CLI a user runs);
the table is its JSON: cases, passed, failures, LIMIT lines, seconds.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTROLS = [  # (target, op)
    ("examples/pallas/rmsnorm.py:rmsnorm", "rmsnorm"),
    ("examples/pallas/softmax.py:softmax", "softmax"),
    ("examples/pallas/layernorm.py:layernorm", "layernorm"),
    ("examples/tf/ops.py:rmsnorm", "rmsnorm"),
    ("examples/tf/ops.py:softmax", "softmax"),
    ("examples/tf/ops.py:layernorm", "layernorm"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=300, help="cases per dtype")
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--out", default=str(ROOT / "bench/framework_controls.md"))
    args = ap.parse_args()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as td:
        for i, (target, op) in enumerate(CONTROLS):
            for j, dt in enumerate(args.dtypes.split(",")):
                js = Path(td) / f"{i}-{dt}.json"
                cmd = [sys.executable, "-m", "gpuemu", "fuzz", target, "--op", op, "--dtype", dt, "-n", str(args.n),
                       "--seed", str(args.seed + 10 * i + j), "--store", str(Path(td) / "store"), "--json", str(js)]
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                secs = time.perf_counter() - t0
                r = json.loads(js.read_text()) if js.exists() else {}
                limits = len(r.get("limits") or [])
                fails = [f.get("line", "") for f in r.get("failures", [])]
                ok &= proc.returncode == 0
                rows.append(f"| {target} | {dt} | {r.get('iterations', '-')} | {r.get('passed', '-')} | "
                            f"{len(fails)}{(': ' + fails[0][:100]) if fails else ''} | {limits} | "
                            f"{proc.returncode} | {secs:.0f} |")
                print(rows[-1], file=sys.stderr, flush=True)
    text = "\n".join(["# Correct JAX and TensorFlow launchers, CPU", "",
                      f"`python bench/framework_controls.py -n {args.n}` ({args.n} cases per dtype, seed "
                      f"{args.seed}+; one `gpuemu fuzz` process per row).", "",
                      "| launcher | dtype | cases | passed | failures | LIMIT | exit | s |", "|---|---|---:|---:|---|---:|---:|---:|",
                      *rows, "", f"All exit 0: {ok}.", ""])
    Path(args.out).write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
