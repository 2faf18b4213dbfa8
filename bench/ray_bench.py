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
    p.add_argument("--cache", choices=("cold", "warm"), default="cold",
                   help="cold: every run starts with an empty Triton cache (the CPU fuzz's per-specialisation compiles "
                        "for the target GPUs are kept there), as in a fresh CI job; warm: runs share one cache, "
                        "filled by an unmeasured run first")
    p.add_argument("--only", default=None, help="only launchers whose target contains this text")
    p.add_argument("--out", default="bench/ray_bench.md")
    args = p.parse_args()
    manifest = mf.load(str(ROOT / "examples" / "kernels" / "manifest.yaml"))
    if args.only:
        import dataclasses

        manifest = dataclasses.replace(manifest, kernels=tuple(e for e in manifest.kernels if args.only in e.target))
    counts = [int(w) for w in args.workers.split(",")]
    rows, first, same = [], None, True
    caches = tempfile.TemporaryDirectory(prefix="gpuemu-bench-triton-")

    def cache_dir(label: str) -> str:
        # Triton (and gpuemu's resource prediction beside it) read TRITON_CACHE_DIR when they compile; worker
        # processes and a Ray cluster started by the run inherit it
        d = os.path.join(caches.name, label if args.cache == "cold" else "shared")
        os.environ["TRITON_CACHE_DIR"] = d
        return d

    if args.cache == "warm":
        with tempfile.TemporaryDirectory() as store:
            cache_dir("warm-up")
            run_check(manifest, device="cpu", jobs=max(counts), seed=args.seed, iterations=args.iterations, store=store)
    modes = [m for m, key in (("local processes", "local"), ("Ray (local cluster)", "ray")) if key in args.modes.split(",")]
    for mode in modes:
        base = None
        for n in counts:
            with tempfile.TemporaryDirectory() as store:
                cdir = cache_dir(f"{mode.split()[0]}-{n}")
                t0 = time.perf_counter()
                result = run_check(manifest, device="cpu", jobs=n, seed=args.seed, iterations=args.iterations,
                                   store=store, ray="local" if mode.startswith("Ray") else None)
                wall = time.perf_counter() - t0
            v = _verdicts(result)
            first = first or v
            same = same and v == first
            base = base or wall
            entries = len(os.listdir(cdir)) if os.path.isdir(cdir) else 0  # one per compile this run made
            rows.append((mode, n, wall, base / wall, v == first, entries))
            print(f"{mode:22s} {n:3d} workers {wall:8.1f} s  x{base / wall:.2f}  same verdicts: {v == first}  "
                  f"triton cache entries: {entries}", flush=True)
    lines = [f"# `make bench-ray`: {len(manifest.kernels)} corpus launchers x {args.iterations} cases, seed {args.seed}, "
             f"{os.cpu_count()} CPUs", "",
             f"`python bench/ray_bench.py --iterations {args.iterations} --workers {args.workers} --modes {args.modes} --cache {args.cache}`; wall "
             "times in one run, one after another; speed-up against one worker of the same kind. "
             + ("Every run started with an empty Triton cache (a CPU fuzz compiles each new specialisation for the "
                "target GPUs, to predict launches they would refuse, and keeps it there), as a fresh CI job does."
                if args.cache == "cold" else "The runs shared one Triton cache, filled by an unmeasured run first."),
             "",
             "| runs on | workers | wall s | speed-up | same verdicts as the first run | Triton cache entries after the run |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {m} | {n} | {w:.1f} | x{s:.2f} | {'yes' if ok else 'NO'} | {c} |" for m, n, w, s, ok, c in rows]
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        [{"mode": m, "workers": n, "seconds": w, "speedup": s, "same_verdicts": ok, "cache_entries": c}
         for m, n, w, s, ok, c in rows], indent=1))
    print(f"wrote {args.out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
