"""`make bench`: gpuemu against the field-standard check on the example corpus, plus the RNG's speed.

For every launcher in examples/kernels/manifest.yaml it prints the one-shape torch.allclose verdict beside
gpuemu's, the iterations and seconds to gpuemu's first failure, and the share of time gpuemu spends outside
the kernel (case generation, fp64 reference, comparison, mpmath guard, shrinking), with the guard's seconds.
Totals: bugs caught and false positives for both oracles. Then the margins: for every buggy launcher, the
iterations to its first failure at ``--seeds`` run seeds (min / median / max; a seed that does not catch it
within ``--iterations`` counts as a miss), and the cost rows: launchers of ops outside the corpus whose
reference checks were once the run's bottleneck (log_softmax), timed over ``--iterations``.
Writes bench/out/results.json and bench/out/results.md.

    python bench/bench.py [--iterations 100] [--seed 1] [--seeds 5] [--only softmax] [--no-table]
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
    p.add_argument("--only", default=None, help="only entries whose target contains one of these comma-separated texts")
    p.add_argument("--out", default=str(ROOT / "bench" / "out"))
    p.add_argument("--seeds", type=int, default=5, help="run seeds per buggy launcher for the margins (0: none)")
    p.add_argument("--no-table", action="store_true", help="only the margins and the cost rows")
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
        if not _selected(e.target, a.only) or a.no_table:
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
            "seconds": secs, "own_share": r.own_share(), "mpmath_seconds": r.timings.get("mpmath", 0.0),
            "line": r.failures[0].line() if r.failures else "",
        })
        print(f"  {e.name:36s} allclose={'pass' if ac_ok else 'FAIL'} gpuemu={'pass' if e.verdict_ok(r) else 'FAIL'} "
              f"it={r.first_failure_iteration or r.iterations} {secs:.1f}s own={100 * r.own_share():.0f}% "
              f"mpmath={r.timings.get('mpmath', 0.0):.2f}s", file=sys.stderr, flush=True)
    margins = [] if a.seeds <= 0 else margin_rows(entries, a)
    cost = cost_rows(a)
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
              "rng_seconds_per_1e6_fp32": speed, "seeds": list(range(a.seed, a.seed + max(a.seeds, 0))),
              "margins": margins, "cost": cost}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    md = render(result)
    (out / "results.md").write_text(md)
    print(md)
    return 0


def _selected(target: str, only: str | None) -> bool:
    return not only or any(part and part in target for part in only.split(","))


def margin_rows(entries, a) -> list[dict]:
    """Per buggy launcher: the iteration of its first failure at each of ``a.seeds`` run seeds (None: a miss)."""
    import gpuemu
    from gpuemu.corpus import resolve_target
    from gpuemu.target import load

    out = []
    seeds = list(range(a.seed, a.seed + a.seeds))
    for e in entries:
        if e.correct or not _selected(e.target, a.only):
            continue
        fn = load(resolve_target(e))
        firsts = []
        t = time.perf_counter()
        for s in seeds:
            r = gpuemu.fuzz(fn, op=e.op, iterations=a.iterations, seed=s, save=False, max_failures=1,
                            shrink_failures=False, target=e.target)
            firsts.append(r.first_failure_iteration)
        secs = time.perf_counter() - t
        out.append({"target": e.target, "op": e.op, "bug": e.bug, "seeds": seeds, "first_failure": firsts,
                    "seconds": secs})
        print(f"  margin {e.name:36s} first failure at {firsts} {secs:.1f}s", file=sys.stderr, flush=True)
    return out


# launchers of ops outside the corpus, timed for gpuemu's own share: (target, op)
COST_TARGETS = (("bench/log_softmax_kernels.py:log_softmax", "log_softmax"),)


def cost_rows(a) -> list[dict]:
    import gpuemu
    from gpuemu.target import load

    out = []
    for target, op in COST_TARGETS:
        if not _selected(target, a.only):
            continue
        fn = load(str(ROOT / target.split(":")[0]) + ":" + target.split(":")[1])
        t = time.perf_counter()
        r = gpuemu.fuzz(fn, op=op, iterations=a.iterations, seed=a.seed, save=False, target=target)
        secs = time.perf_counter() - t
        out.append({"target": target, "op": op, "iterations": r.iterations, "passed": r.passed, "seconds": secs,
                    "own_share": r.own_share(), "timings": dict(r.timings)})
        print(f"  cost {target} {r.passed}/{r.iterations} passed {secs:.1f}s own={100 * r.own_share():.0f}%",
              file=sys.stderr, flush=True)
    return out


def _margin(firsts: list, iterations: int) -> tuple[str, str, str, int]:
    """(min, median, max, caught) of the first-failure iterations; a miss counts as past ``iterations``."""
    keyed = sorted(f if f is not None else iterations + 1 for f in firsts)
    word = {iterations + 1: f">{iterations}"}
    med = statistics.median_low(keyed)
    return (word.get(keyed[0], str(keyed[0])), word.get(med, str(med)), word.get(keyed[-1], str(keyed[-1])),
            sum(f is not None for f in firsts))


def render(result: dict) -> str:
    rows, t, sp = result["rows"], result["totals"], result["rng_seconds_per_1e6_fp32"]
    lines = [f"gpuemu bench: {result['iterations']} iterations per kernel, seed {result['seed']}", "",
             "| kernel | op | truth | allclose (1 shape) | gpuemu | iterations to 1st failure | s to 1st failure | s in all | gpuemu's own share | mpmath guard s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        truth = "correct" if r["correct"] else f"bug: {r['bug']}"
        ac = "-" if r["allclose_pass"] is None else ("pass" if r["allclose_pass"] else "FAIL")
        gp = "pass" if r["gpuemu_pass"] else "FAIL"
        it = r["first_failure_iteration"] or "-"
        s1 = f"{r['first_failure_seconds']:.2f}" if r["first_failure_seconds"] is not None else "-"
        lines.append(f"| {r['target'].rsplit(':', 1)[-1]} | {r['op']} | {truth} | {ac} | {gp} | {it} | {s1} | "
                     f"{r['seconds']:.1f} | {100 * r['own_share']:.0f}% | {r.get('mpmath_seconds', 0.0):.2f} |")
    lines += ["", "| oracle | bugs caught | false positives |", "|---|---|---|",
              f"| torch.allclose, one power-of-two shape | {t['allclose_caught']}/{t['buggy']} | "
              f"{t['allclose_false_positives']}/{t['correct']} |",
              f"| gpuemu fuzz, {result['iterations']} iterations | {t['gpuemu_caught']}/{t['buggy']} | "
              f"{t['gpuemu_false_positives']}/{t['correct']} |", "",
              f"gpuemu's own share of fuzzing time (generation, reference, compare, shrink): "
              f"{100 * t['gpuemu_own_share']:.1f}% (the rest is the kernels under Triton's interpreter)",
              f"RNG: 10^6 fp32 values in {1e3 * sp['uniform']:.1f} ms (uniform), {1e3 * sp['normal']:.1f} ms (normal); "
              f"median of 7", f"wall time: {t['wall_seconds']:.0f} s", ""]
    if rows:
        worst = max(rows, key=lambda r: r["own_share"])
        lines.insert(-3, f"largest own share of one kernel: {100 * worst['own_share']:.0f}% "
                         f"({worst['target'].rsplit(':', 1)[-1]})")
    if result.get("margins"):
        n = result["iterations"]
        lines += [f"Margins: iterations to the first failure at run seeds {', '.join(map(str, result['seeds']))} "
                  f"({n} iterations each, no shrinking)", "",
                  "| kernel | op | bug | caught | min | median | max | per seed |", "|---|---|---|---|---|---|---|---|"]
        for m in result["margins"]:
            lo, med, hi, caught = _margin(m["first_failure"], n)
            per = " ".join("-" if f is None else str(f) for f in m["first_failure"])
            lines.append(f"| {m['target'].rsplit(':', 1)[-1]} | {m['op']} | {m['bug']} | "
                         f"{caught}/{len(m['first_failure'])} | {lo} | {med} | {hi} | {per} |")
        lines.append("")
    if result.get("cost"):
        lines += ["Cost rows: ops outside the corpus whose reference checks once dominated a run", "",
                  "| launcher | op | passed | s | gpuemu's own share | mpmath guard s |", "|---|---|---|---|---|---|"]
        for c in result["cost"]:
            lines.append(f"| {c['target']} | {c['op']} | {c['passed']}/{c['iterations']} | {c['seconds']:.1f} | "
                         f"{100 * c['own_share']:.0f}% | {c['timings'].get('mpmath', 0.0):.2f} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
