"""`make bench-ray`: the example corpus under `gpuemu check`, locally and on a local Ray cluster, side by side.

    python bench/ray_bench.py [--iterations 10] [--workers 1,2] [--out bench/ray_bench.md]

For each worker count it runs the whole corpus manifest with local worker processes (``--jobs N``) and on a
local Ray cluster of N CPUs (``--ray``), one after another in this one process run, and prints the wall time,
the speed-up over one worker of the same kind, and whether every run gave the same verdicts as the first
(statuses, per-dtype matrix, worst cases and failures, timings left out). On a machine with more cores, pass
e.g. ``--workers 1,2,16``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _verdicts(result) -> dict:
    out = {}
    for k in result.kernels:
        fails = [(f["case"], {key: v for key, v in f["verdict"].items() if key != "seconds"}) for f in k.failures]
        out[k.target] = (k.status, k.statuses, k.matrix, k.worst, fails, k.iterations, k.error)
    return json.loads(json.dumps(out, sort_keys=True), parse_constant=str)  # NaN compares equal as text


def main() -> int:
    from gpuemu.check import manifest as mf
    from gpuemu.check.run import run_check

    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--modes", default="local,ray", help="local, ray or both (comma-separated), in that order")
    p.add_argument("--only", default=None, help="only launchers whose target contains this text")
    p.add_argument("--out", default="bench/ray_bench.md")
    args = p.parse_args()
    manifest = mf.load(str(ROOT / "examples" / "kernels" / "manifest.yaml"))
    if args.only:
        import dataclasses

        manifest = dataclasses.replace(manifest, kernels=tuple(e for e in manifest.kernels if args.only in e.target))
    counts = [int(w) for w in args.workers.split(",")]
    rows, first, same = [], None, True
    modes = [m for m, key in (("local processes", "local"), ("Ray (local cluster)", "ray")) if key in args.modes.split(",")]
    for mode in modes:
        base = None
        for n in counts:
            with tempfile.TemporaryDirectory() as store:
                t0 = time.perf_counter()
                result = run_check(manifest, device="cpu", jobs=n, seed=args.seed, iterations=args.iterations,
                                   store=store, ray="local" if mode.startswith("Ray") else None)
                wall = time.perf_counter() - t0
            v = _verdicts(result)
            first = first or v
            same = same and v == first
            base = base or wall
            rows.append((mode, n, wall, base / wall, v == first))
            print(f"{mode:22s} {n:3d} workers {wall:8.1f} s  x{base / wall:.2f}  same verdicts: {v == first}", flush=True)
    lines = [f"# `make bench-ray`: {len(manifest.kernels)} corpus launchers x {args.iterations} cases, seed {args.seed}, "
             f"{os.cpu_count()} CPUs", "",
             f"`python bench/ray_bench.py --iterations {args.iterations} --workers {args.workers} --modes {args.modes}`; wall times in one run, "
             "one after another; speed-up against one worker of the same kind.", "",
             "| runs on | workers | wall s | speed-up | same verdicts as the first run |", "|---|---|---|---|---|"]
    lines += [f"| {m} | {n} | {w:.1f} | x{s:.2f} | {'yes' if ok else 'NO'} |" for m, n, w, s, ok in rows]
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        [{"mode": m, "workers": n, "seconds": w, "speedup": s, "same_verdicts": ok} for m, n, w, s, ok in rows], indent=1))
    print(f"wrote {args.out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
