"""The 30 ops fuzzed at production size on the CPU: time and peak memory per op (`make bench`).

For each op of the registry: the first correct launcher of examples/kernels/manifest.yaml (else the int64-safe
launcher of bench/production_kernels.py), run as its own process

    gpuemu fuzz TARGET --op OP --sizes production -n N --seed S --dtype fp16,fp32 --no-shrink

with its wall time and peak resident memory (os.wait4's ru_maxrss of that process alone) and its verdicts. The
cases are the shapes real models launch (gpuemu/sizes.py, rulepacks/production.yaml), tens of GiB each; the CPU
runs sampled programs over sparse memory (docs/production-sizes.md). An OVERFLOW row is a corpus kernel that
computes its offsets in int32: correct at the fuzzed sizes, wrong on a GPU at these.

    python bench/production_sizes.py --out bench/production_sizes.md [--ops softmax,matmul] [-n 2] [--seed 1]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def targets() -> dict[str, tuple[str, str]]:
    """op -> (target, where it comes from)."""
    from gpuemu import ops
    from gpuemu.corpus import load_manifest

    out: dict[str, tuple[str, str]] = {}
    for e in load_manifest(ROOT / "examples" / "kernels" / "manifest.yaml"):
        if e.correct and not e.expect and e.op not in out and "eager" not in e.target:
            out[e.op] = (e.target, "corpus")
    import importlib.util

    spec = importlib.util.spec_from_file_location("production_kernels", ROOT / "bench" / "production_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for op in ops.names():
        if op not in out and hasattr(mod, op):
            out[op] = (f"bench/production_kernels.py:{op}", "bench (int64 offsets)")
    return out


def run_one(op: str, target: str, n: int, seed: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        js = Path(tmp) / "r.json"
        cmd = [sys.executable, "-m", "gpuemu", "fuzz", target, "--op", op, "--sizes", "production", "-n", str(n),
               "--seed", str(seed), "--dtype", "fp16,fp32", "--no-shrink", "--json", str(js),
               "--store", str(Path(tmp) / "store"), "--target", "none"]
        env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except KeyboardInterrupt:
            proc.kill()
            raise
        wall = time.perf_counter() - t0
        err = proc.stderr.read() if proc.stderr else ""
        rc = os.waitstatus_to_exitcode(status)
        row = {"op": op, "target": target, "rc": rc, "wall_s": wall, "maxrss_mib": usage.ru_maxrss / 1024,
               "cpu_s": usage.ru_utime + usage.ru_stime}
        if js.is_file():
            d = json.loads(js.read_text())
            row["passed"], row["iterations"] = d.get("passed"), d.get("iterations")
            row["failures"] = [f["verdict"]["status"].upper() + " " + f["verdict"]["message"][:160]
                               for f in d.get("failures", [])]
            row["cases"] = [f["case"] for f in d.get("failures", [])]
        else:
            row["error"] = err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
        return row


def case_sizes(op: str, seed: int, n: int) -> list[str]:
    """The shapes the run draws (the same draws as the fuzz run: derive_seed(seed, i))."""
    from gpuemu.cases import generate
    from gpuemu.rng import derive_seed

    out = []
    for i, dt in zip(range(n), ["fp16", "fp32"] * n):
        c = generate(op, derive_seed(seed, i), dtype=dt, strategy="production")
        gib = sum(math.prod(a.resolve(c.dims, c.batch)) for a in c.spec.args if a.is_tensor) * \
            (2 if dt == "fp16" else 4) / 2**30
        out.append(f"{c.shape_label()} {dt} ({gib:.0f} GiB in)")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="write the Markdown table here")
    p.add_argument("--ops", default=None, help="comma-separated ops (default: all 30)")
    p.add_argument("-n", type=int, default=2, help="cases per op (fp16, fp32 alternately)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600)
    a = p.parse_args(argv)
    table = targets()
    chosen = a.ops.split(",") if a.ops else sorted(table)
    rows = []
    for op in chosen:
        if op not in table:
            print(f"{op}: no launcher", file=sys.stderr)
            continue
        target, origin = table[op]
        r = run_one(op, target, a.n, a.seed, a.timeout)
        r["origin"], r["shapes"] = origin, case_sizes(op, a.seed, a.n)
        verdict = "ERROR " + r["error"] if "error" in r else \
            f"{r['passed']}/{r['iterations']} passed" + ("; " + r["failures"][0] if r["failures"] else "")
        r["verdict"] = verdict
        rows.append(r)
        print(f"{op:14s} {r['wall_s']:6.1f} s  {r['maxrss_mib']:6.0f} MiB  {verdict[:120]}", file=sys.stderr)
    if a.out:
        write(Path(a.out), rows, a)
    return 0


def write(path: Path, rows: list[dict], a) -> None:
    import triton
    import torch

    walls = sorted(r["wall_s"] / max(1, r.get("iterations") or a.n) for r in rows)
    rss = max((r["maxrss_mib"] for r in rows), default=0)
    over = [r["op"] for r in rows if any(f.startswith("OVERFLOW") for f in r.get("failures", []))]
    lines = [
        "# The 30 ops at production size on the CPU",
        "",
        f"`make bench` (`python bench/production_sizes.py -n {a.n} --seed {a.seed}`), triton {triton.__version__}, "
        f"torch {torch.__version__}, {os.cpu_count()} cores, {platform.machine()}. Each row: one process "
        "`gpuemu fuzz TARGET --op OP --sizes production` (the first correct launcher of the corpus, else "
        "bench/production_kernels.py's), fp16 then fp32 cases drawn from model presets (rulepacks/production.yaml); "
        "wall time and peak resident memory of that process (process start and imports included, ~3 s / ~380 MiB).",
        "",
        f"**Summary**: {len(rows)} ops; per case median {walls[len(walls) // 2]:.1f} s, max {walls[-1]:.1f} s; "
        f"peak memory of any run {rss:.0f} MiB. OVERFLOW (int32 offsets in a kernel that is correct at the fuzzed "
        f"sizes): {', '.join(over) or 'none'}.",
        "",
        "| op | launcher | shapes (inputs' virtual size) | verdicts | wall s | peak MiB |",
        "|---|---|---|---|---:|---:|",
    ]
    for r in rows:
        v = r["verdict"].replace("|", "\\|")
        lines.append(f"| {r['op']} | {r['target']} ({r['origin']}) | {'<br>'.join(r['shapes'])} | {v} | "
                     f"{r['wall_s']:.1f} | {r['maxrss_mib']:.0f} |")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
