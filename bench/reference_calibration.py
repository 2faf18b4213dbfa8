"""The reference judge's bound on correct kernels: how close to it each correct twin comes.

    python bench/reference_calibration.py --iterations 60      # bench/reference_calibration.md

Every correct kernel of examples/families and examples/kernelbench, fuzzed against its PyTorch reference: per
dtype, the cases, how many passed, and the largest error/bound ratio of a passing case (1.0 is the bound). This is
what gpuemu.judge.REFERENCE_MULTIPLIER is chosen from: the correct kernels must stay well under 1 while the buggy
twins (bench/reference_bench.py) stay far over it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    import yaml

    import gpuemu
    from gpuemu.judge import REFERENCE_MULTIPLIER
    from gpuemu.target import load

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--out", default=str(ROOT / "bench/reference_calibration.md"))
    ap.add_argument("--store", default=str(ROOT / "bench/out/calibration-store"))
    ap.add_argument("filter", nargs="*")
    args = ap.parse_args()
    fams = [e for e in yaml.safe_load((ROOT / "examples/families/manifest.yaml").read_text()) if e["correct"]]
    kbs = sorted(p for p in (ROOT / "examples/kernelbench").iterdir() if (p / "problem.py").is_file())
    jobs = [(e["target"], e["reference"], e["inputs"]) for e in fams] + \
           [(f"{d.relative_to(ROOT)}/solution.py:ModelNew", f"{d.relative_to(ROOT)}/problem.py:Model", None) for d in kbs]
    rows = []
    for i, (t, ref, inp) in enumerate(jobs):
        if args.filter and not any(f in t for f in args.filter):
            continue
        seen: dict[str, list] = {}

        def on_case(_i, case, v, seen=seen):
            seen.setdefault(case.dtype, []).append((v.status, v.worst_ratio))

        t0 = time.time()
        r = gpuemu.fuzz(load(t), reference=ref, inputs=inp, iterations=args.iterations, seed=args.seed + i,
                        store=args.store, target=t, on_case=on_case)
        per = {}
        for dt, vs in seen.items():
            ratios = [x for s, x in vs if s == "pass" and x is not None]
            per[dt] = {"cases": len(vs), "passed": sum(1 for s, _ in vs if s == "pass"),
                       "worst": max(ratios) if ratios else None}
        rows.append({"kernel": t, "dtypes": per, "summary": r.summary(), "seconds": time.time() - t0})
        print(t, json.dumps(per), r.summary()[:160], file=sys.stderr, flush=True)
    lines = ["# The reference judge on correct kernels", "",
             f"Made by `python bench/reference_calibration.py --iterations {args.iterations}`; multiplier of the "
             f"eager error: {REFERENCE_MULTIPLIER}. Per dtype: cases, passed, the largest error/bound ratio of a "
             "passing case.", "", "| kernel | fp32 | fp16 | bf16 | summary |", "|---|---|---|---|---|"]
    for row in rows:
        cells = []
        for dt in ("fp32", "fp16", "bf16"):
            d = row["dtypes"].get(dt)
            cells.append("-" if d is None else f"{d['passed']}/{d['cases']}, worst {d['worst']:.2g}"
                         if d["worst"] is not None else f"{d['passed']}/{d['cases']}")
        lines.append(f"| {row['kernel'].split('examples/')[-1]} | " + " | ".join(cells) + f" | {row['summary']} |")
    worst = max((d["worst"] for r in rows for d in r["dtypes"].values() if d["worst"] is not None), default=None)
    lines += ["", f"Largest ratio of a passing case: {worst:.3g}." if worst is not None else ""]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
