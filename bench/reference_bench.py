"""Kernels judged against their PyTorch reference: the shipped families and KernelBench-format problems.

    python bench/reference_bench.py                       # both tables, CPU (bench/reference_bench.md)
    python bench/reference_bench.py --correct 300 --bugs 100 --only families
    python bench/reference_bench.py --device cuda         # the same on a GPU

For each kernel family (examples/families: a launcher, its buggy twin, reference(), get_inputs()) and each
KernelBench-format problem (examples/kernelbench/NN_name: problem.py's Model, solution.py's and
solution_buggy.py's ModelNew): what the field checks (torch.allclose(atol=1e-2, rtol=1e-2) on the example call,
the same init inputs and parameters for Model and ModelNew), then gpuemu fuzz with exactly the CLI's binding
(gpuemu.fuzz(kernel, reference=..., inputs=...)): the buggy twin for --bugs iterations (the iteration and the
seconds to its first failure, the shrunk case and the hint), the correct one for --correct iterations per dtype.
Each run has its own seed (--seed, then +1 per run); nothing is tuned to these kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if "--device" not in sys.argv or "cpu" in sys.argv[sys.argv.index("--device") + 1:][:1]:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # on the CPU: before any kernel module is imported
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _allclose(kernel_out, ref_out) -> bool:
    import torch

    from gpuemu.schema.calls import flatten_outputs

    ks, rs = flatten_outputs(kernel_out), flatten_outputs(ref_out)
    return len(ks) == len(rs) and all(
        k.shape == r.shape and torch.allclose(k.double().cpu(), r.double().cpu(), atol=1e-2, rtol=1e-2)
        for k, r in zip(ks, rs))


def _on(x, device: str):
    """``x`` (a tensor, or a list/tuple/dict of them) on ``device``: the example call where the kernel runs."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_on(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _on(v, device) for k, v in x.items()}
    return x


def allclose_family(target: str, module, device: str = "cpu") -> bool:
    import torch

    from gpuemu.target import load

    args = _on(module.get_inputs(), device)
    with torch.no_grad():
        want = module.reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    return _allclose(load(target)(*args), want)


def allclose_problem(problem: Path, solution: Path, device: str = "cpu") -> bool:
    import torch

    from gpuemu.schema.calls import _fork_rng, match_params, state_entries
    from gpuemu.target import load

    Model = load(f"{problem}:Model")
    New = load(f"{solution}:ModelNew")
    mod = sys.modules[Model.__module__]
    init = list(mod.get_init_inputs())
    torch.manual_seed(0)
    with _fork_rng():
        model = Model(*init)
        new = New(*init)
    params = state_entries(model)
    mapping = dict(zip([n for n, _ in state_entries(new)], match_params(new, [(n, tuple(t.shape)) for n, t in params])))
    values = dict(params)
    with torch.no_grad():
        for n, src in mapping.items():
            owner, _, leaf = n.rpartition(".")
            m = new.get_submodule(owner) if owner else new
            getattr(m, leaf).data = values[src].detach().clone()
    torch.manual_seed(1)
    inputs = _on(mod.get_inputs(), device)
    with torch.no_grad():
        return _allclose(new.to(device)(*inputs), model.to(device)(*inputs))


def fuzz_one(kernel: str, reference: str, inputs: str | None, *, iterations: int, seed: int, dtypes=None,
             device: str = "cpu", store: str) -> dict:
    import gpuemu
    from gpuemu.target import load

    t0 = time.perf_counter()

    def heartbeat(i, case, verdict) -> None:  # (where a run cut short by a timeout had got to)
        if i % 50 == 0:
            print(f"  {kernel} {dtypes or 'all dtypes'}: case {i}, {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr, flush=True)

    r = gpuemu.fuzz(load(kernel), reference=reference, inputs=inputs, iterations=iterations, seed=seed,
                    dtypes=dtypes, device=device, store=store, target=kernel, max_failures=1, on_case=heartbeat,
                    compile_workers=_OPTIONS.get("compile_workers"))
    first = r.failures[0] if r.failures else None
    row = {"kernel": kernel, "iterations": r.iterations, "passed": r.passed, "ok": r.ok, "seconds": time.perf_counter() - t0,
            "first_failure_iteration": r.first_failure_iteration, "first_failure_seconds": r.first_failure_seconds,
            "line": first.line() if first else None, "hint": first.hint if first else None,
            "case": first.case.describe() if first else None, "limits": r.limits,
            "envelope": r.envelope.get("text") if r.envelope else None, "summary": r.summary()}
    if _PARTIAL:  # each run as it ends (a run cut short by a timeout still leaves the ones before it)
        with open(_PARTIAL[0], "a") as f:
            f.write(json.dumps({"dtypes": dtypes, **row}, default=str) + "\n")
    return row


_PARTIAL: list = []  # the --json file's name + ".partial.jsonl", once main has parsed its arguments
_OPTIONS: dict = {}  # fuzz options from the command line (compile_workers)


def families(args, rows: list) -> None:
    import yaml

    from gpuemu.target import load

    entries = yaml.safe_load((ROOT / "examples/families/manifest.yaml").read_text())
    fams = {}
    for e in entries:
        fams.setdefault(e["reference"], {})["correct" if e["correct"] else "buggy"] = e
    for i, (ref, pair) in enumerate(fams.items()):
        name = ref.split("/")[-1].split(".py")[0]
        if args.filter and not any(f in name for f in args.filter):
            continue
        mod = sys.modules[load(ref).__module__]
        row = {"table": "families", "name": name, "bug": pair["buggy"].get("bug"),
               "allclose_correct": allclose_family(pair["correct"]["target"], mod, args.device),
               "allclose_buggy": allclose_family(pair["buggy"]["target"], mod, args.device)}
        row["buggy"] = fuzz_one(pair["buggy"]["target"], ref, pair["buggy"]["inputs"], iterations=args.bugs,
                                seed=args.seed + 2 * i, device=args.device, store=args.store) \
            if args.twins != "correct" else None
        row["correct"] = [fuzz_one(pair["correct"]["target"], ref, pair["correct"]["inputs"], iterations=args.correct,
                                   seed=args.seed + 2 * i + 1, dtypes=[dt], device=args.device, store=args.store)
                          for dt in args.dtypes] if args.twins != "buggy" else []
        rows.append(row)
        _progress(row)


def kernelbench(args, rows: list) -> None:
    import yaml

    meta = {e["problem"]: e for e in yaml.safe_load((ROOT / "examples/kernelbench/manifest.yaml").read_text())}
    dirs = sorted(p for p in (ROOT / "examples/kernelbench").iterdir() if (p / "problem.py").is_file())
    for i, d in enumerate(dirs):
        if args.filter and not any(f in d.name for f in args.filter):
            continue
        rel = d.relative_to(ROOT)
        row = {"table": "kernelbench", "name": d.name, "level": meta.get(d.name, {}).get("level"),
               "bug": meta.get(d.name, {}).get("bug"),
               "allclose_correct": allclose_problem(d / "problem.py", d / "solution.py", args.device),
               "allclose_buggy": allclose_problem(d / "problem.py", d / "solution_buggy.py", args.device)}
        ref = f"{rel}/problem.py:Model"
        row["buggy"] = fuzz_one(f"{rel}/solution_buggy.py:ModelNew", ref, None, iterations=args.bugs,
                                seed=args.seed + 100 + 2 * i, device=args.device, store=args.store) \
            if args.twins != "correct" else None
        row["correct"] = [fuzz_one(f"{rel}/solution.py:ModelNew", ref, None, iterations=args.correct,
                                   seed=args.seed + 101 + 2 * i, dtypes=[dt], device=args.device, store=args.store)
                          for dt in args.dtypes] if args.twins != "buggy" else []
        rows.append(row)
        _progress(row)


def _progress(row: dict) -> None:
    b = row["buggy"] or {"first_failure_iteration": "not run", "first_failure_seconds": None}
    c = ", ".join(f"{x['passed']}/{x['iterations']}{' +LIMIT' if x['limits'] else ''}" for x in row["correct"])
    print(f"{row['name']}: allclose {row['allclose_correct']}/{row['allclose_buggy']}; buggy first failure "
          f"{b['first_failure_iteration']} ({_s(b['first_failure_seconds'])}); correct {c}", file=sys.stderr, flush=True)


def _s(x) -> str:
    return "-" if x is None else f"{x:.1f} s"


def markdown(rows: list, args) -> str:
    out = ["# Kernels judged against their PyTorch reference", "",
           f"Made by `{' '.join(['python', 'bench/reference_bench.py'] + sys.argv[1:])}` on {args.device}; "
           f"buggy twins {args.bugs} iterations, correct ones {args.correct} per dtype ({', '.join(args.dtypes)}). "
           "allclose: torch.allclose(atol=1e-2, rtol=1e-2) on the example call, what the field checks.", ""]
    for table, title in (("families", "Kernel families (examples/families)"),
                         ("kernelbench", "KernelBench-format problems (examples/kernelbench)")):
        rs = [r for r in rows if r["table"] == table]
        if not rs:
            continue
        out += [f"## {title}", "", "| kernel | bug | allclose (correct / buggy) | gpuemu on the buggy twin | first failure "
                "| correct twin | shrunk case and hint |", "|---|---|---|---|---|---|---|"]
        for r in rs:
            b = r["buggy"] or {"ok": None, "first_failure_iteration": None, "line": "(buggy twin not run: --twins)"}
            verdict = "not run" if b["ok"] is None else "caught" if not b["ok"] else "**missed**"
            first = "-" if b["first_failure_iteration"] is None else \
                f"case {b['first_failure_iteration']}, {b['first_failure_seconds']:.1f} s"
            corr = ", ".join(f"{c['passed']}/{c['iterations']}" + (f" ({c['limits']} LIMIT)" if c["limits"] else "")
                             + ("" if c["ok"] else " **FAIL**") for c in r["correct"])
            shrunk = (b["line"] or "").replace("|", "/")[:160]
            out.append(f"| {r['name']} | {r['bug']} | {r['allclose_correct']} / {r['allclose_buggy']} | {verdict} | "
                       f"{first} | {corr} | {shrunk} |")
        ran = [r["buggy"] for r in rs if r["buggy"]]
        times = [b["first_failure_seconds"] for b in ran if b["first_failure_seconds"] is not None]
        caught = sum(1 for b in ran if not b["ok"])
        clean = sum(1 for r in rs if r["correct"] and all(c["ok"] for c in r["correct"]))
        out += ["", f"Buggy twins caught: {caught}/{len(ran)}; median seconds to the first failure "
                f"{statistics.median(times) if times else float('nan'):.1f}; correct twins passing every dtype: "
                f"{clean}/{sum(1 for r in rs if r['correct'])}.", ""]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bugs", type=int, default=100)
    ap.add_argument("--correct", type=int, default=100, help="iterations per dtype of each correct twin")
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", choices=("families", "kernelbench"))
    ap.add_argument("--store", default=str(ROOT / "bench/out/reference-store"))
    ap.add_argument("--out", default=str(ROOT / "bench/reference_bench.md"))
    ap.add_argument("--json", default=str(ROOT / "bench/reference_bench.json"))
    ap.add_argument("--twins", choices=("both", "buggy", "correct"), default="both",
                    help="run only one twin of each kernel (a long run split over processes)")
    ap.add_argument("--compile-workers", type=int, default=None,
                    help="each fuzz run's CUDA compile-ahead processes (default: the rule pack's; 0 where several "
                         "runs share the machine's cores already)")
    ap.add_argument("filter", nargs="*", help="only kernels whose name contains one of these")
    args = ap.parse_args()
    args.dtypes = args.dtypes.split(",")
    _PARTIAL.append(args.json + ".partial.jsonl")
    _OPTIONS["compile_workers"] = args.compile_workers
    rows: list = []
    if args.only in (None, "families"):
        families(args, rows)
    if args.only in (None, "kernelbench"):
        kernelbench(args, rows)
    Path(args.out).write_text(markdown(rows, args) + "\n")
    Path(args.json).write_text(json.dumps(rows, indent=1, default=str) + "\n")
    print(markdown(rows, args))
    bad = [r["name"] for r in rows if (r["buggy"] or {}).get("ok") or not all(c["ok"] for c in r["correct"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
