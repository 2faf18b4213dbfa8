"""`make bench`: gpuemu against the field-standard check on the example corpus, plus the RNG's speed.

For every launcher in examples/kernels/manifest.yaml it prints the one-shape torch.allclose verdict beside
gpuemu's, the iterations and seconds to gpuemu's first failure, and the share of time gpuemu spends outside
the kernel (case generation, fp64 reference, comparison, shrinking). Totals: bugs caught and false positives
for both oracles. Writes bench/out/results.json and bench/out/results.md.

    python bench/bench.py [--iterations 100] [--seed 1] [--only softmax]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rng_speed(n: int = 10**6, repeats: int = 7) -> dict:
    import torch

    from gpuemu import rng

    out = {}
    for name, fn in (("uniform", rng.uniform01), ("normal", rng.normal)):
        times = []
        for r in range(repeats):
            t = time.perf_counter()
            torch.from_numpy(fn(r, n)).to(torch.float32)
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times)
    return out


def main() -> int:
    import gpuemu
    from gpuemu.corpus import Entry, allclose_verdict, load_manifest, resolve_target
    from gpuemu.target import load

    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", default=None, help="only entries whose target contains this text")
    p.add_argument("--out", default=str(ROOT / "bench" / "out"))
    a = p.parse_args()

    entries = load_manifest()
    shapes_by_op: dict[str, Entry] = {}
    for e in entries:
        if not e.correct:
            shapes_by_op.setdefault(e.op, e)
    rows = []
    kernel_s = total_s = 0.0
    t_all = time.perf_counter()
    for e in entries:
        if a.only and a.only not in e.target:
            continue
        fn = load(resolve_target(e))
        probe = e if e.allclose_shapes else shapes_by_op.get(e.op)
        ac_ok = None
        if probe is not None:
            ac_ok, _, _ = allclose_verdict(Entry(e.target, e.op, e.correct, allclose_shapes=probe.allclose_shapes,
                                                 allclose_kwargs=probe.allclose_kwargs), fn=fn)
        t = time.perf_counter()
        r = gpuemu.fuzz(fn, op=e.op, iterations=a.iterations, seed=a.seed, save=False,
                        max_failures=None if e.correct else 1, target=e.target)
        secs = time.perf_counter() - t
        kernel_s += r.timings.get("kernel", 0.0)
        total_s += r.seconds
        rows.append({
            "target": e.target, "op": e.op, "correct": e.correct, "bug": e.bug,
            "allclose_pass": ac_ok, "gpuemu_pass": e.verdict_ok(r), "iterations": r.iterations,
            "first_failure_iteration": r.first_failure_iteration, "first_failure_seconds": r.first_failure_seconds,
            "seconds": secs, "own_share": r.own_share(),
            "line": r.failures[0].line() if r.failures else "",
        })
        print(f"  {e.name:36s} allclose={'pass' if ac_ok else 'FAIL'} gpuemu={'pass' if e.verdict_ok(r) else 'FAIL'} "
              f"it={r.first_failure_iteration or r.iterations} {secs:.1f}s", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t_all
    buggy = [r for r in rows if not r["correct"]]
    good = [r for r in rows if r["correct"]]
    totals = {
        "buggy": len(buggy), "correct": len(good),
        "allclose_caught": sum(1 for r in buggy if r["allclose_pass"] is False),
        "gpuemu_caught": sum(1 for r in buggy if not r["gpuemu_pass"]),
        "allclose_false_positives": sum(1 for r in good if r["allclose_pass"] is False),
        "gpuemu_false_positives": sum(1 for r in good if not r["gpuemu_pass"]),
        "gpuemu_own_share": 1 - kernel_s / total_s if total_s else 0.0,
        "wall_seconds": wall,
    }
    speed = rng_speed()
    result = {"iterations": a.iterations, "seed": a.seed, "rows": rows, "totals": totals,
              "rng_seconds_per_1e6_fp32": speed}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    md = render(result)
    (out / "results.md").write_text(md)
    print(md)
    return 0


def render(result: dict) -> str:
    rows, t, sp = result["rows"], result["totals"], result["rng_seconds_per_1e6_fp32"]
    lines = [f"gpuemu bench: {result['iterations']} iterations per kernel, seed {result['seed']}", "",
             "| kernel | op | truth | allclose (1 shape) | gpuemu | iterations to 1st failure | s to 1st failure | gpuemu's own share |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        truth = "correct" if r["correct"] else f"bug: {r['bug']}"
        ac = "-" if r["allclose_pass"] is None else ("pass" if r["allclose_pass"] else "FAIL")
        gp = "pass" if r["gpuemu_pass"] else "FAIL"
        it = r["first_failure_iteration"] or "-"
        s1 = f"{r['first_failure_seconds']:.2f}" if r["first_failure_seconds"] is not None else "-"
        lines.append(f"| {r['target'].rsplit(':', 1)[-1]} | {r['op']} | {truth} | {ac} | {gp} | {it} | {s1} | "
                     f"{100 * r['own_share']:.0f}% |")
    lines += ["", "| oracle | bugs caught | false positives |", "|---|---|---|",
              f"| torch.allclose, one power-of-two shape | {t['allclose_caught']}/{t['buggy']} | "
              f"{t['allclose_false_positives']}/{t['correct']} |",
              f"| gpuemu fuzz, {result['iterations']} iterations | {t['gpuemu_caught']}/{t['buggy']} | "
              f"{t['gpuemu_false_positives']}/{t['correct']} |", "",
              f"gpuemu's own share of fuzzing time (generation, reference, compare, shrink): "
              f"{100 * t['gpuemu_own_share']:.1f}% (the rest is the kernels under Triton's interpreter)",
              f"RNG: 10^6 fp32 values in {1e3 * sp['uniform']:.1f} ms (uniform), {1e3 * sp['normal']:.1f} ms (normal); "
              f"median of 7", f"wall time: {t['wall_seconds']:.0f} s", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
