"""`make soak`: every correct control under `gpuemu fuzz` defaults, N iterations per dtype, must pass.

The controls are the corpus's correct kernels (examples/kernels/manifest.yaml) and every op's framework
control (torch's own op with fp32 math, the default control of `gpuemu calibrate`). Each runs as
`gpuemu.fuzz(fn, op=..., iterations=N, dtypes=[dtype], seed=S)` with everything else at its default
(the default strategy mix, determinism check, shrinking): exactly what `gpuemu fuzz --dtype D -n N` does.
A control that fails any case is a false positive of gpuemu's defaults. Work is spread over --jobs
processes; each finished (control, dtype) is appended to soak.jsonl, so an interrupted run resumes.

    python bench/soak.py [--iterations 1000] [--seed 20261201] [--jobs 2] [--only softmax] [--out bench/soak]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DTYPES = ("fp32", "fp16", "bf16")
# the interpreter's cost per case differs by two orders of magnitude between ops: start the slow ones first
_SLOW_FIRST = ("attention", "matmul", "layernorm", "rmsnorm", "cross_entropy", "softmax", "logsumexp", "cumsum")


def controls(manifest: str | None) -> list[tuple[str, str]]:
    """(target, op) of every correct control; framework controls are named ``torch:OP``."""
    from gpuemu.ablation import subjects

    return [(s.name, s.op) for s in subjects(manifest) if s.correct]


def _load(target: str, op: str):
    from gpuemu.calibrate import framework_controls
    from gpuemu.corpus import default_manifest
    from gpuemu.target import load

    if target.startswith("torch"):
        return dict(framework_controls(op))[target]
    file, _, fn = target.rpartition(":")
    return load(f"{(default_manifest().parent.parent.parent / file).resolve()}:{fn}")


def _expect(target: str) -> str:
    """The manifest's ``expect`` for a corpus target ("" for framework controls and plain entries)."""
    from gpuemu.corpus import load_manifest

    return next((e.expect for e in load_manifest() if e.target == target), "")


STRICT_PACK = ROOT / "bench" / "soak_strict.yaml"  # oracle.framework_factor: 0 (the bound alone)


def soak_one(target: str, op: str, dtype: str, iterations: int, seed: int, strict: bool = False) -> dict:
    """One control in one dtype under fuzz defaults (runs in a worker process). A control with a known
    contract (``expect`` in the manifest) fails only on a FAIL or ERROR: its PRECONDITION verdicts and
    refusals are what it should get, and are counted."""
    import torch

    import gpuemu

    torch.set_num_threads(1)  # one worker per core
    t = time.perf_counter()
    r = gpuemu.fuzz(_load(target, op), op=op, iterations=iterations, dtypes=[dtype], seed=seed, save=False,
                    target=target, rulepack=[str(STRICT_PACK)] if strict else ())
    expect = _expect(target)
    bad = r.failed if expect else r.ordered_failures()
    return {"target": target, "op": op, "dtype": dtype, "iterations": r.iterations, "passed": r.passed,
            "failed": r.failed_cases - (r.precondition_cases if expect else 0),
            "precondition": r.precondition_cases, "rejected": r.rejected, "framework_passes": r.framework_passes,
            "skipped": r.skipped.get(dtype), "seconds": time.perf_counter() - t,
            "first_failure": bad[0].line() if bad else None, "report": r.report() if bad else None}


def _key(row: dict) -> tuple[str, str]:
    return row["target"], row["dtype"]


def render(result: dict) -> str:
    rows = result["rows"]
    by_target: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_target.setdefault(r["target"], {})[r["dtype"]] = r
    failed = sorted({r["target"] for r in rows if r["failed"]})
    n = result["iterations"]
    mode = ("the fp64 bound alone (--strict: the 2x-eager rule off)" if result.get("strict")
            else "`gpuemu fuzz` defaults")
    lines = [f"gpuemu soak: every correct control under {mode}, {n} iterations per dtype, "
             f"seed {result['seed']}", "",
             "| control | op | fp32 | fp16 | bf16 | seconds |", "|---|---|---|---|---|---|"]
    for target, per in by_target.items():
        cells = []
        for dt in DTYPES:
            r = per.get(dt)
            if r is None:
                cells.append("-")
            elif r["skipped"]:
                cells.append("skipped")
            else:
                notes = "".join(f" ({r[k]} {k})" for k in ("precondition", "rejected") if r.get(k))
                cells.append(f"{r['passed']}/{r['iterations']}{notes}" + ("" if not r["failed"] else " FAIL"))
        secs = sum(r["seconds"] for r in per.values())
        lines.append(f"| {target.rsplit('/', 1)[-1]} | {next(iter(per.values()))['op']} | " + " | ".join(cells)
                     + f" | {secs:.0f} |")
    cases = sum(r["iterations"] for r in rows)
    lines += ["", f"{len(by_target)} controls, {cases} cases: "
              + (f"{len(failed)} failed ({', '.join(failed)})" if failed else "none failed"),
              f"wall time of the last invocation {result['wall_seconds']:.0f} s with {result['jobs']} jobs", ""]
    for r in rows:
        if r["failed"]:
            lines += [f"{r['target']} {r['dtype']}:", "```", r["report"], "```", ""]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=1000, help="cases per control and dtype (default 1000)")
    p.add_argument("--seed", type=lambda t: int(t, 0), default=20261201)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--only", default=None, help="only controls whose target contains this text")
    p.add_argument("--manifest", default=None, help="corpus manifest (default: examples/kernels/manifest.yaml)")
    p.add_argument("--out", default=str(ROOT / "bench" / "soak"))
    p.add_argument("--strict", action="store_true",
                   help="judge by the fp64 bound alone (the 'no further than 2x PyTorch eager' rule off): "
                        "an eager control passes by that rule trivially, this shows the bound covers it")
    a = p.parse_args()

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "soak.jsonl"
    done: dict[tuple[str, str], dict] = {}
    if log.exists():  # resume: keep the rows of this very configuration
        for line in log.read_text().splitlines():
            row = json.loads(line)
            if row.get("iterations_asked") == a.iterations and row.get("seed") == a.seed:
                done[_key(row)] = row
    todo = [(t, op, dt) for t, op in controls(a.manifest) for dt in DTYPES
            if (not a.only or a.only in t) and (t, dt) not in done]
    todo.sort(key=lambda x: next((i for i, o in enumerate(_SLOW_FIRST) if o == x[1]), len(_SLOW_FIRST)))
    print(f"soak: {len(todo)} (control, dtype) runs of {a.iterations} cases to do, {len(done)} done before; "
          f"{a.jobs} jobs", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=a.jobs) as pool, log.open("a") as fh:
        futs = {pool.submit(soak_one, t, op, dt, a.iterations, a.seed, a.strict): (t, dt) for t, op, dt in todo}
        for f in as_completed(futs):
            row = f.result() | {"iterations_asked": a.iterations, "seed": a.seed}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[_key(row)] = row
            status = "FAIL " + row["first_failure"] if row["failed"] else f"{row['passed']}/{row['iterations']} pass"
            print(f"  {row['target']:55s} {row['dtype']} {status} ({row['seconds']:.0f} s)", file=sys.stderr,
                  flush=True)
    order = {(t, dt): i for i, (t, dt) in enumerate((t, dt) for t, _ in controls(a.manifest) for dt in DTYPES)}
    rows = sorted((r for r in done.values() if not a.only or a.only in r["target"]),
                  key=lambda r: order.get(_key(r), len(order)))
    result = {"iterations": a.iterations, "seed": a.seed, "jobs": a.jobs, "rows": rows, "strict": a.strict,
              "wall_seconds": time.perf_counter() - t0, "failed": sorted({r["target"] for r in rows if r["failed"]})}
    (out / "soak.json").write_text(json.dumps(result, indent=2) + "\n")
    md = render(result)
    (out / "soak.md").write_text(md)
    print(md)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
