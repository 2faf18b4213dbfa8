"""`make bench-lint`: gpuemu lint on the example corpus for sm_80, sm_86, sm_89 and sm_90, cold and warm.

Each run is a fresh `gpuemu lint --corpus` process (imports, example launches, compiles or cache reads,
rules, report), timed from the outside. Cold: an empty artifact cache (and Triton's own cache is always a
throw-away directory, so nothing is reused). Warm: the same command again on the filled cache.
Acceptance (issue 4): under 60 s cold and under 5 s warm on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = "sm_80,sm_86,sm_89,sm_90"
LIMITS = {"cold": 60.0, "warm": 5.0}


def _run(cache: Path, out: Path) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "gpuemu", "lint", "--corpus", "--target", TARGETS, "--cache", str(cache),
           "--json", str(out), "--quiet", "--exit-zero"]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"gpuemu lint exited {proc.returncode}")
    return wall, json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warm-runs", type=int, default=3, help="warm runs (the median is reported)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "lint_bench.json")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpuemu-lint-bench-") as d:
        cache = Path(d) / "cache"
        cold, doc = _run(cache, Path(d) / "cold.json")
        warm_runs = [_run(cache, Path(d) / f"warm{i}.json") for i in range(args.warm_runs)]
    warm_runs.sort(key=lambda r: r[0])
    warm, wdoc = warm_runs[len(warm_runs) // 2]
    s, t = doc["summary"], doc["timings"]
    print(f"gpuemu lint --corpus --target {TARGETS} on {os.cpu_count()} cores "
          f"({s['kernels']} kernels, {t['jobs']} compiles, {t['workers']} workers)")
    print(f"{'run':<6} {'wall s':>8} {'limit s':>8} {'collect s':>10} {'compile s':>10} {'from cache':>11}  verdict")
    rows = []
    for name, wall, d in (("cold", cold, doc), ("warm", warm, wdoc)):
        tm = d["timings"]
        ok = wall < LIMITS[name]
        rows.append({"run": name, "wall_s": round(wall, 2), "limit_s": LIMITS[name], "ok": ok, **tm})
        print(f"{name:<6} {wall:>8.1f} {LIMITS[name]:>8.0f} {tm['collect_s']:>10.1f} {tm['compile_s']:>10.1f} "
              f"{tm['cache_hits']:>5}/{tm['jobs']:<5}  {'PASS' if ok else 'FAIL'}")
    print(f"warm runs (s): {', '.join(f'{w:.2f}' for w, _ in warm_runs)}; findings: {s['findings']} "
          f"({', '.join(f'{n} {lv}' for lv, n in s['by_level'].items() if n) or 'none'})")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average at the end: {load:.1f} (other processes on the machine slow the cold run)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"targets": TARGETS, "cpu_count": os.cpu_count(), "rows": rows}, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
