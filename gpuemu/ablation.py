"""The strategy and tolerance ablations behind gpuemu's defaults (``gpuemu bench --ablation``).

(a) Strategies: each of the seven case strategies alone, and the default mix, fuzz every kernel of the
    corpus plus every op's framework control for a fixed number of iterations; a buggy kernel counts as
    caught when any case fails, a correct one as a false positive when any case fails.
(b) Tolerance regimes on the same cases: the fixed ``atol=1e-5, rtol=1e-2`` on |ref|,
    ``torch.testing.assert_close``'s per-dtype defaults on |ref|, gpuemu's calibrated rtol on |ref|,
    gpuemu's calibrated rtol on the op's condition-aware error scale, and that bound or "no further from
    fp64 than twice PyTorch eager" (the default). Each kernel runs once per case; its output is judged by all
    five.

Everything is drawn from the seed, so the tables are the same on every rerun with the same seed.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cases import STRATEGIES, generate, materialize
from .rng import derive_seed
from .tolerance import Tolerance

# torch.testing.assert_close defaults (rtol, atol) per dtype
ASSERT_CLOSE = {"fp32": (1.3e-6, 1e-5), "fp16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5)}
FIXED = (1e-2, 1e-5)
# the third regime is the calibrated rtol applied to |ref| instead of the op's error scale: it separates what the
# fit contributes from what the condition-aware scale contributes
# the fourth is the calibrated bound alone; the fifth, gpuemu's default, adds the framework rule: a case outside
# the bound passes when the kernel is no further from fp64 than twice PyTorch eager's form of the op
REGIMES = ("fixed atol=1e-5 rtol=1e-2", "assert_close defaults", "calibrated rtol on |ref|", "calibrated",
           "calibrated or <= 2x eager (default)")


@dataclass(frozen=True)
class Subject:
    name: str
    op: str
    correct: bool
    fn: Callable
    bug: str | None = None
    expect: str = ""  # a correct launcher with a known contract (see gpuemu.corpus.Entry.expect)

    def failed(self, result) -> bool:
        """A fuzz result counts as failing: any failure, or for an ``expect`` subject any FAIL or ERROR."""
        return bool(result.failed) if self.expect else not result.ok


def subjects(manifest: str | Path | None = None, *, with_controls: bool = True) -> list[Subject]:
    """The corpus's kernels, and every op's framework controls (torch's op in fp32 rounded once, and as eager
    code writes it in the dtype)."""
    from . import ops
    from .calibrate import framework_controls
    from .corpus import load_manifest, resolve_target
    from .target import load

    out = []
    for e in load_manifest(manifest):
        out.append(Subject(e.target, e.op, e.correct, load(resolve_target(e)), e.bug, e.expect))
    if with_controls:
        for op in ops.names():
            out += [Subject(name, op, True, fn) for name, fn in framework_controls(op)]
    return out


def _summary(rows: list[dict], key: str) -> dict:
    bad = [r for r in rows if not r["correct"]]
    good = [r for r in rows if r["correct"]]
    caught = sum(1 for r in bad if r[key])
    fp = sum(1 for r in good if r[key])
    return {"caught": caught, "buggy": len(bad), "recall": caught / len(bad) if bad else math.nan,
            "false_positives": fp, "controls": len(good), "fp_rate": fp / len(good) if good else math.nan}


def strategy_ablation(subs: list[Subject], *, iterations: int, seed: int, on_row=None) -> dict:
    import gpuemu

    table = {}
    for strat in STRATEGIES:
        rows = []
        for s in subs:
            r = gpuemu.fuzz(s.fn, op=s.op, iterations=iterations, seed=seed, strategy=strat, save=False,
                            shrink_failures=False, max_failures=1, check_determinism=False, target=s.name)
            rows.append({"subject": s.name, "correct": s.correct, "failed": s.failed(r),
                         "first_failure": r.first_failure_iteration})
            if on_row:
                on_row(strat, s, s.failed(r))
        table[strat] = {"summary": _summary(rows, "failed"), "rows": rows}
    return table


def tolerance_ablation(subs: list[Subject], *, iterations: int, seed: int, on_row=None) -> dict:
    from . import config, ops
    from .oracle import Oracle
    from .preconditions import Requires, declared
    from .resources import LaunchRefused
    from .runners import bf16_unfaithful, run_launcher

    default = Oracle.from_settings(config.resolve())
    oracle = Oracle(default.tolerances, framework_factor=0)  # the bound alone, for the first four regimes
    contiguous = Requires(contiguous=("*",))
    rows = []
    for s in subs:
        spec = ops.get(s.op)
        failed = dict.fromkeys(REGIMES, False)
        dtypes = ["fp32", "fp16", "bf16"]
        skip_bf16 = False
        for i in range(iterations):
            dt = dtypes[i % 3]
            if dt == "bf16" and skip_bf16:
                dt = dtypes[i % 2]
            req = declared(s.fn)  # drawn under the launcher's declared sizes, as the fuzzer draws them
            case = generate(s.op, derive_seed(seed, i), dtype=dt, caps=req.max_dims)
            if s.expect:  # regimes judge numbers: give a contract-bound kernel the inputs its callers give it
                case = contiguous.apply(case)
            case = req.apply(case)
            inputs, kwargs = materialize(case)
            run = run_launcher(s.fn, [inputs[a.name] for a in spec.args], kwargs)
            if bf16_unfaithful(dt, run.launches):
                skip_bf16 = True  # the plain interpreter cannot run bf16 Triton kernels faithfully
                continue
            if isinstance(run.error, LaunchRefused):  # a launch the GPU refuses: a LIMIT, no numbers to judge
                continue
            if run.error is not None:
                for k in failed:
                    failed[k] = True
                continue
            tols = {
                REGIMES[0]: Tolerance(FIXED[0], FIXED[1], "fixed", scale="ref"),
                REGIMES[1]: Tolerance(*ASSERT_CLOSE[dt], "assert_close", scale="ref"),
                REGIMES[3]: oracle.tolerances.get(s.op, dt),
            }
            tols[REGIMES[2]] = dataclasses.replace(tols[REGIMES[3]], source="calibrated on |ref|", scale="ref")
            tols[REGIMES[4]] = tols[REGIMES[3]]
            for name, tol in tols.items():
                if not failed[name]:
                    judge = default if name == REGIMES[4] else oracle
                    v = judge.compare(spec, dt, inputs, kwargs, run.output, tol=tol)
                    failed[name] = v.status != "pass"
            if all(failed.values()):
                break
        row = {"subject": s.name, "correct": s.correct, "bug": s.bug, **failed}
        rows.append(row)
        if on_row:
            on_row("regimes", s, failed)
    return {name: {"summary": _summary(rows, name)} for name in REGIMES} | {"rows": rows}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a Markdown table cell


def render(result: dict) -> str:
    lines = [f"gpuemu ablation: {result['iterations']} iterations per kernel, seed {result['seed']}, "
             f"{result['buggy']} buggy kernels, {result['controls']} correct controls", "",
             "(a) strategies (calibrated tolerances)", "",
             "| strategy | bugs caught | recall | false positives |", "|---|---|---|---|"]
    for strat in STRATEGIES:
        s = result["strategies"][strat]["summary"]
        lines.append(f"| {strat} | {s['caught']}/{s['buggy']} | {100 * s['recall']:.0f}% | "
                     f"{s['false_positives']}/{s['controls']} |")
    lines += ["", "(b) tolerance regimes (default strategy, same cases)", "",
              "| regime | bugs caught | recall | false positives | FP rate |", "|---|---|---|---|---|"]
    for name in REGIMES:
        s = result["regimes"][name]["summary"]
        lines.append(f"| {_cell(name)} | {s['caught']}/{s['buggy']} | {100 * s['recall']:.0f}% | "
                     f"{s['false_positives']}/{s['controls']} | {100 * s['fp_rate']:.1f}% |")
    # the |ref| variant of the calibrated rtol fails nearly everything; list where the other three disagree
    headline = [n for n in REGIMES if n != REGIMES[2]]
    split = [r for r in result["regimes"]["rows"] if len({r[name] for name in headline}) > 1]
    if split:
        lines += ["", f"Where {', '.join(headline[:-1])} and {headline[-1]} disagree (FAIL: some case failed "
                  "under that regime):", "",
                  "| kernel | truth | " + " | ".join(_cell(n) for n in REGIMES) + " |", "|---|---|" + "---|" * len(REGIMES)]
        for r in split:
            truth = "correct" if r["correct"] else f"bug: {r.get('bug') or '?'}"
            lines.append(f"| {r['subject'].rsplit('/', 1)[-1]} | {truth} | "
                         + " | ".join("FAIL" if r[name] else "pass" for name in REGIMES) + " |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> bool:
    """A PNG of both tables; False when matplotlib (the `plot` extra) is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5))
    strats = list(STRATEGIES)
    rec = [100 * result["strategies"][s]["summary"]["recall"] for s in strats]
    fp = [100 * result["strategies"][s]["summary"]["fp_rate"] for s in strats]
    x = range(len(strats))
    a.bar([i - 0.2 for i in x], rec, 0.4, label="bug recall %")
    a.bar([i + 0.2 for i in x], fp, 0.4, label="false positive %")
    a.set_xticks(list(x), strats, rotation=35, ha="right")
    a.set_ylim(0, 105)
    a.set_title("(a) strategies")
    a.legend()
    regs = list(REGIMES)
    rec = [100 * result["regimes"][r]["summary"]["recall"] for r in regs]
    fp = [100 * result["regimes"][r]["summary"]["fp_rate"] for r in regs]
    x = range(len(regs))
    b.bar([i - 0.2 for i in x], rec, 0.4, label="bug recall %")
    b.bar([i + 0.2 for i in x], fp, 0.4, label="false positive %")
    b.set_xticks(list(x), ["fixed 1e-5/1e-2", "assert_close", "calibrated\non |ref|", "calibrated\nbound",
                           "bound or\n2x eager"])
    b.set_ylim(0, 105)
    b.set_title("(b) tolerance regimes")
    b.legend()
    fig.suptitle(f"gpuemu ablation: {result['iterations']} iterations/kernel, seed {result['seed']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def run(*, manifest=None, iterations: int = 20, seed: int = 1, out: str | Path = "bench/ablation", on_row=None) -> dict:
    subs = subjects(manifest)
    result = {"iterations": iterations, "seed": seed, "buggy": sum(not s.correct for s in subs),
              "controls": sum(s.correct for s in subs),
              "strategies": strategy_ablation(subs, iterations=iterations, seed=seed, on_row=on_row),
              "regimes": tolerance_ablation(subs, iterations=iterations, seed=seed, on_row=on_row)}
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "ablation.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (outdir / "ablation.md").write_text(render(result))
    result["png"] = str(outdir / "ablation.png") if plot(result, outdir / "ablation.png") else None
    return result
