"""How much compiling a cold ``gpuemu check --device cuda`` of a manifest asks for, measured without a GPU.

For each launcher: its launches over the check's cases (the same plan and seeds as ``gpuemu check -n N --seed S``),
the distinct Triton specialisations among them (gpuemu.runtime.aot.specialization_key: Triton's own binding, the
compile identity of its cache), and, with ``--sample K``, the mean seconds of a full sm_90 compile (TTIR to cubin,
ptxas included) over K of them on this machine. The estimate of compile work is specialisations x that mean;
divided by a machine's cores it is a lower bound on a cold check's wall time there, whatever the warm-up's schedule.

    python bench/compile_keys.py [--manifest examples/kernels/manifest.yaml] [-n 100] [--seed 1] [--sample 3]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_INTERPRET", "1")


def keys_of(entry, manifest, n: int, seed: int, sample: int) -> dict:
    """{"launches", "keys", "compiled", "seconds"} of one manifest entry: check.warm's discovery of its cases, then
    its compile phase over the first ``sample`` keys, each compiled in full for sm_90 and timed."""
    from gpuemu.check import warm
    from gpuemu.check.run import kernel_seed
    from gpuemu.runtime.aot import compile_launch

    kw = dict(seed=kernel_seed(seed, entry), iterations=n, dtypes=manifest.setting(entry, "dtypes"),
              strategy=manifest.setting(entry, "strategy"), rulepacks=(), requires=None, preconditions=None,
              framework=manifest.setting(entry, "framework"))
    draws = warm._draws("cpu", entry.target, entry.op, entry.reference, entry.inputs, entry.schema, kw)
    _, per_case = warm._walk("cpu", draws)
    first: dict[str, dict] = {}  # key -> the record of the case that first made it
    for keys, case in per_case or ():
        for key in keys:
            first.setdefault(key, case)
    out = {"launches": sum(len(keys) for keys, _ in per_case or ()), "keys": len(first), "compiled": 0,
           "seconds": 0.0}

    def timed(kernel, args, kwargs, gpu_target):
        t0 = time.perf_counter()
        if compile_launch(kernel, args, kwargs, gpu_target).error is None:
            out["compiled"] += 1
            out["seconds"] += time.perf_counter() - t0

    todo = list(first)[:sample]
    if todo:
        warm._compile("cpu", draws, set(todo), tuple({id(first[k]): first[k] for k in todo}.values()), timed)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default="examples/kernels/manifest.yaml")
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample", type=int, default=0, help="full sm_90 compiles timed per launcher (0: none)")
    args = ap.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    from gpuemu.check.manifest import load

    m = load(args.manifest)
    rows = []
    for e in m.kernels:
        r = keys_of(e, m, args.n, args.seed, args.sample)
        rows.append((e.target.split("/")[-1], r))
        print(f"  {rows[-1][0]}: {r['launches']} launches, {r['keys']} specialisations", file=sys.stderr, flush=True)
    print(f"| launcher | launches | specialisations | {'s per compile (sm_90, here) | est. compile s |' if args.sample else ''}")
    print(f"|---|---:|---:|{'---:|---:|' if args.sample else ''}")
    total = est = 0.0
    for name, r in sorted(rows, key=lambda x: -x[1]["keys"]):
        per = r["seconds"] / r["compiled"] if r["compiled"] else 0.0
        total += r["keys"]
        est += per * r["keys"]
        extra = f" {per:.2f} | {per * r['keys']:.0f} |" if args.sample else ""
        print(f"| {name} | {r['launches']} | {r['keys']} |{extra}")
    launches = sum(r["launches"] for _, r in rows)
    print(f"\n{len(rows)} launchers, {launches} launches, {int(total)} specialisations"
          + (f", estimated compile work {est:.0f} s on this machine's cores" if args.sample else ""))


if __name__ == "__main__":
    main()
