"""`make bench-hook-real`: ``import gpuemu.hook`` on real models, against ``backend="inductor"``.

For each model — a randomly initialised GPT-2 from ``transformers`` (when installed; dropout 0) and the
Llama-style model of ``examples/llama_tiny.py`` (RMSNorm and rotary as Triton kernels, forward and
backward) — four fresh processes run in turn, I G I G: ``backend="inductor"`` without gpuemu, and
``import gpuemu.hook`` + ``backend="gpuemu"`` at default settings. Each trains N steps
(``torch.compile`` of forward + backward + AdamW) and then runs M eval forwards under bf16 autocast, timing
each call between CUDA synchronisations. Reported:

* bit for bit: every loss and eval output of G against I, on the steps where the two inductor runs
  agree with each other (the deterministic control: inductor differs from itself where kernels use
  atomics); and the final parameters;
* the step and forward time ratio G/I (medians over the calls after warm-up; means too);
* the hook's ``stats()``: checks by source, divergences (0 on a correct model), skip reasons;
* planted bugs: the Llama model with the tail-mask bug in its Triton RMSNorm forward, then backward:
  the first check of the buggy kernel, its replay seed, and ``gpuemu reproduce`` of it on the CPU
  (``TRITON_INTERPRET=1``, no GPU);
* the unsampled-launch microbenchmark of bench/hook_overhead.py (bare vs hook installed, disarmed).

    python bench/hook_real_model.py --out bench/hook_real_model.md --json bench/hook_real_model.json
    python bench/hook_real_model.py --quick      # CPU: the tiny Llama with aot_eager (no Inductor build)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclasses.dataclass(frozen=True)
class RunConfig:
    model: str  # gpt2 | llama | llama-tiny
    backend: str  # inductor | gpuemu
    inner: str = "inductor"  # the baseline backend and the gpuemu backend's inner one (aot_eager on a CPU)
    steps: int = 40
    evals: int = 40
    warmup: int = 5
    device: str = "cuda"
    bug: str | None = None  # forward | backward (llama only)
    eval_mode: str | None = None  # torch.compile(mode=...) of the eval forward ("reduce-overhead": CUDA graphs)
    deterministic: bool = False  # the bit-for-bit control: deterministic algorithms, cuBLAS workspace, math SDPA
    seed: int = 0
    store: str = ".gpuemu-bench-real"
    hook_settings: dict = dataclasses.field(default_factory=dict)  # install() arguments (default: defaults)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------- models


def _build(cfg: RunConfig) -> tuple[Any, Any, list, list]:
    """(model, loss function, training batches, eval batches) on cfg.device, from cfg.seed."""
    import torch

    torch.manual_seed(cfg.seed)
    if cfg.model == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        conf = GPT2Config(n_layer=4, n_embd=384, n_head=6, n_positions=256, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0)
        model = GPT2LMHeadModel(conf).to(cfg.device)
        vocab, batch, seq = conf.vocab_size, 8, 200

        def loss_fn(ids):
            return model(ids, labels=ids).loss

        def logits_fn(ids):
            return model(ids).logits
    else:
        from examples import llama_tiny as L

        conf = L.LlamaConfig.tiny() if cfg.model == "llama-tiny" else L.LlamaConfig(vocab=8192)
        model = L.LlamaTiny(conf).to(cfg.device)
        vocab = conf.vocab
        batch, seq = (2, 12) if cfg.model == "llama-tiny" else (8, 200)

        def loss_fn(ids):
            return L.loss_fn(model, ids)

        def logits_fn(ids):
            return model(ids)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    train = [torch.randint(0, vocab, (batch, seq), generator=g).to(cfg.device) for _ in range(cfg.steps)]
    evals = [torch.randint(0, vocab, (batch, seq), generator=g).to(cfg.device) for _ in range(cfg.evals)]
    return model, (loss_fn, logits_fn), train, evals


def _fingerprint(t: Any) -> str:
    """An exact integer fingerprint of a tensor's bits (equal bits -> equal fingerprint), computed on its device."""
    import torch

    b = t.detach().contiguous().reshape(-1)
    ints = b.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[b.element_size()]).to(torch.int64)
    w = torch.arange(1, ints.numel() + 1, device=b.device, dtype=torch.int64) % 1_000_003
    return f"{int((ints * w).sum())}:{int(ints.sum())}"


# ---------------------------------------------------------------------------------------------- one run


def run_one(cfg: RunConfig) -> dict:
    """Train and evaluate one model with one backend; returns losses, fingerprints, times and hook stats."""
    import contextlib

    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    attn = contextlib.nullcontext
    if cfg.deterministic:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        torch.use_deterministic_algorithms(True, warn_only=True)
        attn = lambda: sdpa_kernel([SDPBackend.MATH])  # noqa: E731  (fused attention backward uses atomics)
    hook = rt = None
    if cfg.backend == "gpuemu":
        import gpuemu.hook as hook

        if cfg.hook_settings or cfg.store:
            rt = hook.install(store=cfg.store, **cfg.hook_settings)
        else:
            rt = hook.current()
        if cfg.model.startswith("llama"):
            hook.bind("_rmsnorm_fwd", "rmsnorm")
            hook.bind("_rope_fwd", "rope")
    if cfg.model.startswith("llama"):
        from examples import llama_tiny as L

        L.set_bug(cfg.bug)
    torch._dynamo.reset()
    model, (loss_fn, logits_fn), train, evals = _build(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    backend = "gpuemu" if cfg.backend == "gpuemu" else cfg.inner
    options = {"backend": cfg.inner} if cfg.backend == "gpuemu" and cfg.inner != "inductor" else None
    cuda = cfg.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step(ids):
        loss = loss_fn(ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    step_c = torch.compile(step, backend=backend, options=options)
    out: dict = {"config": cfg.to_dict(), "losses": [], "step_s": [], "eval_fp": [], "eval_s": [],
                 "checks_after_step": [], "armed_step": [], "armed_eval": []}
    t0 = time.perf_counter()
    model.train()
    for ids in train:
        sync()
        armed = rt is not None and rt.arming.armed
        t = time.perf_counter()
        with attn():
            loss = step_c(ids)
        sync()
        out["step_s"].append(time.perf_counter() - t)
        out["armed_step"].append(armed or (rt is not None and rt.arming.armed))
        out["losses"].append(float(loss.detach().float().item()))
        out["checks_after_step"].append(rt.stats.checks if rt is not None else 0)
    out["params_fp"] = _fingerprint(torch.cat([p.detach().float().reshape(-1) for p in model.parameters()]))
    model.eval()
    eval_c = torch.compile(logits_fn, backend=backend, options=options, mode=cfg.eval_mode)
    amp = torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16)
    for ids in evals:
        with torch.no_grad(), amp, attn():
            sync()
            armed = rt is not None and rt.arming.armed
            t = time.perf_counter()
            logits = eval_c(ids)
            sync()
            out["eval_s"].append(time.perf_counter() - t)
            out["armed_eval"].append(armed or (rt is not None and rt.arming.armed))
        out["eval_fp"].append(_fingerprint(logits))
    out["wall_s"] = time.perf_counter() - t0
    if rt is not None:
        out["stats"] = rt.stats.to_dict()
        out["divergences"] = [d.to_dict() for d in rt.divergences]
        out["history"] = list(rt.history)
        out["errors"] = list(rt.errors)
        out["settings"] = rt.settings.describe()
        hook.uninstall()
    return out


# ---------------------------------------------------------------------------------------------- summaries


def _median_after(xs: list[float], warmup: int) -> float:
    tail = xs[warmup:] or xs
    return statistics.median(tail)


def _mean_after(xs: list[float], warmup: int) -> float:
    tail = xs[warmup:] or xs
    return statistics.fmean(tail)


def compare(runs: list[dict]) -> dict:
    """Bit-for-bit and speed of the gpuemu runs against the inductor runs (I G I G, or I G)."""
    ind = [r for r in runs if r["config"]["backend"] != "gpuemu"]
    gem = [r for r in runs if r["config"]["backend"] == "gpuemu"]
    w = runs[0]["config"]["warmup"]
    a = ind[0]
    control = ind[1] if len(ind) > 1 else None
    n = len(a["losses"])
    det_steps = [i for i in range(n) if control is None or control["losses"][i] == a["losses"][i]]
    det_evals = [i for i in range(len(a["eval_fp"])) if control is None or control["eval_fp"][i] == a["eval_fp"][i]]
    res: dict = {"model": a["config"]["model"], "steps": n, "evals": len(a["eval_fp"]),
                 "control_equal_steps": len(det_steps) if control is not None else None,
                 "control_equal_evals": len(det_evals) if control is not None else None,
                 "control_first_differing_step": next((i for i in range(n) if i not in det_steps), None)}
    eq_steps = all(g["losses"][i] == a["losses"][i] for g in gem for i in det_steps)
    eq_evals = all(g["eval_fp"][i] == a["eval_fp"][i] for g in gem for i in det_evals)
    res["gpuemu_equal_on_control_steps"] = eq_steps
    res["gpuemu_equal_on_control_evals"] = eq_evals
    res["gpuemu_equal_all_steps"] = all(g["losses"] == a["losses"] for g in gem)
    res["params_equal"] = all(g["params_fp"] == a["params_fp"] for g in gem)
    res["control_params_equal"] = control["params_fp"] == a["params_fp"] if control is not None else None

    def med(rs, key):
        return statistics.median(_median_after(r[key], w) for r in rs)

    def mean(rs, key):
        return statistics.fmean(_mean_after(r[key], w) for r in rs)

    for key, name in (("step_s", "step"), ("eval_s", "eval")):
        mi, mg = med(ind, key), med(gem, key)
        res[f"{name}_ms_inductor"] = mi * 1e3
        res[f"{name}_ms_gpuemu"] = mg * 1e3
        res[f"{name}_ratio"] = mg / mi
        res[f"{name}_mean_ratio"] = mean(gem, key) / mean(ind, key)
        res[f"{name}_ms_inductor_runs"] = [_median_after(r[key], w) * 1e3 for r in ind]
        res[f"{name}_ms_gpuemu_runs"] = [_median_after(r[key], w) * 1e3 for r in gem]
    st = [g["stats"] for g in gem]
    res["checks"] = [s["checks"] for s in st]
    res["checks_by_source"] = [s["checks_by_source"] for s in st]
    res["divergences"] = [s["divergences"] for s in st]
    res["skip_reasons"] = [s["skip_reasons"] for s in st]
    res["internal_errors"] = [s["internal_errors"] for s in st]
    res["shadow_s"] = [s["shadow_seconds"] for s in st]
    res["arms"] = [s["arms"] for s in st]
    res["divergence_lines"] = [d["line"] for g in gem for d in g["divergences"]][:5]
    res["errors"] = [g.get("errors", []) for g in gem]
    res["deterministic"] = a["config"].get("deterministic", False)
    res["armed_calls_timed"] = [sum(g["armed_step"][w:]) + sum(g["armed_eval"][w:]) for g in gem]
    return res


def planted(run: dict, kernel: str, *, store: str, device: str) -> dict:
    """Was the bug found on the buggy kernel's first check, and does ``gpuemu reproduce`` replay it on a CPU?"""
    hist = [h for h in run.get("history", []) if h[1] == kernel]
    first = hist[0][2] if hist else None
    divs = [d for d in run.get("divergences", []) if d["name"] == kernel]
    res: dict = {"bug": run["config"]["bug"], "kernel": kernel, "checks_of_kernel": len(hist),
                 "first_check_outcome": first, "divergences": len(divs),
                 "line": divs[0]["line"] if divs else None, "seed": divs[0]["seed"] if divs else None,
                 "stats": {k: run["stats"][k] for k in ("checks", "divergences", "checks_by_source",
                                                        "divergences_by_source")}}
    if divs:
        env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
        p = subprocess.run([sys.executable, "-m", "gpuemu", "reproduce", divs[0]["seed"], "--store", store,
                            "--device", "cpu"], cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
        res["reproduce_rc"] = p.returncode
        res["reproduce_output"] = p.stderr.strip().splitlines()[-6:]
        res["reproduced_on_cpu"] = p.returncode == 1 and "reproduced: same verdict" in p.stderr
    return res


# ---------------------------------------------------------------------------------------------- driver


def _spawn(cfg: RunConfig, tmp: Path) -> dict:
    """One run in a fresh process: inductor runs never import gpuemu.hook."""
    path = tmp / f"run-{time.time_ns()}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg.to_dict()),
                        "--worker-out", str(path)], cwd=str(ROOT), env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"worker {cfg.model}/{cfg.backend} failed (rc {p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(path.read_text())


def _save_partial(path: str | None, result: dict) -> None:
    """The results so far (a run cut off by a time limit still leaves them)."""
    if path:
        Path(path + ".partial").write_text(json.dumps(result, default=str))


def _has_transformers() -> bool:
    try:
        import transformers  # noqa: F401
    except Exception:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="Markdown table")
    ap.add_argument("--json", default=None, help="raw numbers")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--evals", type=int, default=40)
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--warmup", type=int, default=10, help="calls left out of the timing medians")
    ap.add_argument("--rounds", type=int, default=2, help="I G pairs per model (the second I is the control)")
    ap.add_argument("--skip-micro", action="store_true")
    ap.add_argument("--skip-bugs", action="store_true")
    ap.add_argument("--deterministic", action="store_true", help="model runs as the bit-for-bit control (math SDPA, "
                    "deterministic algorithms); bug and CUDA-graph runs stay at defaults")
    ap.add_argument("--llama-rounds", type=int, default=None, help="I G pairs for the Llama model (default: --rounds)")
    ap.add_argument("--cudagraphs", action="store_true", help="also GPT-2 eval with mode='reduce-overhead' (gpuemu)")
    ap.add_argument("--quick", action="store_true", help="CPU: tiny Llama, aot_eager, 3 steps")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        cfg = RunConfig(**json.loads(args.worker))
        Path(args.worker_out).write_text(json.dumps(run_one(cfg)))
        return 0
    import torch

    cuda = torch.cuda.is_available() and not args.quick
    device = "cuda" if cuda else "cpu"
    inner = "inductor" if cuda else "aot_eager"
    steps, evals = (args.steps, args.evals) if not args.quick else (3, 2)
    warmup = args.warmup if not args.quick else 1
    models = [m for m in args.models.split(",") if m != "gpt2" or _has_transformers()] if not args.quick else ["llama-tiny"]
    if not cuda:
        models = ["llama-tiny" if m == "llama" else m for m in models if m != "gpt2"]
    store = str(ROOT / ".gpuemu-bench-real")
    result: dict = {"device": torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu",
                    "torch": torch.__version__, "python": platform.python_version(), "models": [], "bugs": []}
    try:
        import triton

        result["triton"] = triton.__version__
    except Exception:
        result["triton"] = None
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        if not args.skip_micro:
            sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ holds bench.py: import the sibling
            from hook_overhead import launch_overhead

            result["micro"] = launch_overhead(calls=20000 if cuda else 300, rounds=5 if cuda else 2)
            print(f"micro: bare {result['micro']['bare_us']:.2f} us, hooked {result['micro']['hooked_us']:.2f} us "
                  f"(x{result['micro']['hooked_over_bare']:.4f})", file=sys.stderr, flush=True)
        for m in models:
            runs = []
            rounds = args.llama_rounds if m.startswith("llama") and args.llama_rounds else args.rounds
            for r in range(rounds):
                for be in ("inductor", "gpuemu"):
                    cfg = RunConfig(model=m, backend=be, inner=inner, steps=steps, evals=evals, warmup=warmup,
                                    device=device, store=store + f"-{m}", deterministic=args.deterministic)
                    runs.append(_spawn(cfg, tmp))
                    print(f"{m} {be} round {r}: step {statistics.median(runs[-1]['step_s'][warmup:] or runs[-1]['step_s']) * 1e3:.3f} ms",
                          file=sys.stderr, flush=True)
            c = compare(runs)
            result["models"].append(c)
            result.setdefault("runs", []).append(runs)
            _save_partial(args.json, result)
        if args.cudagraphs and cuda:
            m = "gpt2" if "gpt2" in models else models[0]
            cfg = RunConfig(model=m, backend="gpuemu", inner=inner, steps=3, evals=evals, warmup=warmup,
                            device=device, store=store + "-cg", eval_mode="reduce-overhead")
            run = _spawn(cfg, tmp)
            result["cudagraphs"] = {"model": m, "eval_ms": _median_after(run["eval_s"], warmup) * 1e3,
                                    "checks_by_source": run["stats"]["checks_by_source"],
                                    "skip_reasons": run["stats"]["skip_reasons"],
                                    "divergences": run["stats"]["divergences"], "errors": run.get("errors", []),
                                    "history": [h for h in run.get("history", []) if "graph" in h[0]][:10]}
        if not args.skip_bugs:
            m = "llama" if cuda else "llama-tiny"
            for bug, kernel in (("forward", "_rmsnorm_fwd"), ("backward", "_rmsnorm_bwd")):
                st = store + f"-bug-{bug}"
                cfg = RunConfig(model=m, backend="gpuemu", inner=inner, steps=min(steps, 6), evals=1, warmup=1,
                                device=device, bug=bug, store=st)
                run = _spawn(cfg, tmp)
                result["bugs"].append(planted(run, kernel, store=st, device=device))
                _save_partial(args.json, result)
    for r in result.get("runs", []):  # keep the JSON small: per-call lists stay, histories go
        for x in r:
            x.pop("history", None)
    text = render(result)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0


def render(res: dict) -> str:
    lines = [f"# `import gpuemu.hook` on real models ({res['device']}, torch {res['torch']}, triton {res['triton']})", ""]
    mi = res.get("micro")
    if mi:
        lines += ["| unsampled Triton launch (median of interleaved rounds) | µs | vs bare |", "|---|---:|---:|",
                  f"| bare `kernel[grid](...)` | {mi['bare_us']:.2f} | 1.0000 |",
                  f"| `import gpuemu.hook` installed, default settings, disarmed | {mi['hooked_us']:.2f} | "
                  f"**{mi['hooked_over_bare']:.4f}** |", "",
                  f"{mi['rounds']} rounds × {mi['calls_per_round']} calls; checks while timing: "
                  f"{mi['checks_during_timing']}; windows opened while timing: {mi.get('arms_during_timing')}.", ""]
    if res["models"]:
        lines += ["Model runs" + (" in the deterministic control (math SDPA, `torch.use_deterministic_algorithms`)"
                              if res["models"][0].get("deterministic") else "") + ":", ""]
        lines += ["| model | train step ms inductor → gpuemu | ratio (median; mean) | eval fwd ms inductor → gpuemu | "
                  "ratio (median; mean) | bit for bit vs inductor (control-equal steps / evals) | checks by source | "
                  "divergences | skip reasons |", "|---|---|---|---|---|---|---|---|---|"]
        for c in res["models"]:
            bfb = (f"losses {'equal' if c['gpuemu_equal_on_control_steps'] else 'DIFFER'} on "
                   f"{c['control_equal_steps']}/{c['steps']} steps, eval outputs "
                   f"{'equal' if c['gpuemu_equal_on_control_evals'] else 'DIFFER'} on "
                   f"{c['control_equal_evals']}/{c['evals']}; all steps equal: {c['gpuemu_equal_all_steps']}")
            src = "; ".join(", ".join(f"{k} {v}" for k, v in sorted(d.items())) for d in c["checks_by_source"])
            skips = "; ".join(", ".join(f"{k}: {v}" for k, v in d.items()) or "none" for d in c["skip_reasons"])
            lines.append(f"| {c['model']} | {c['step_ms_inductor']:.3f} → {c['step_ms_gpuemu']:.3f} | "
                         f"**{c['step_ratio']:.4f}**; {c['step_mean_ratio']:.4f} | {c['eval_ms_inductor']:.3f} → "
                         f"{c['eval_ms_gpuemu']:.3f} | **{c['eval_ratio']:.4f}**; {c['eval_mean_ratio']:.4f} | {bfb} | "
                         f"{src} | {c['divergences']} | {skips} |")
        lines.append("")
    cg = res.get("cudagraphs")
    if cg:
        lines += [f"CUDA graphs (`torch.compile(mode=\"reduce-overhead\")`, {cg['model']} eval, gpuemu): "
                  f"{cg['eval_ms']:.3f} ms per forward; checks by source {cg['checks_by_source']}; "
                  f"divergences {cg['divergences']}; skip reasons {cg['skip_reasons']}.", ""]
    errs = [e for c in res["models"] for es in c.get("errors", []) for e in es]
    if errs:
        lines += ["gpuemu internal errors (counted, never raised): " + "; ".join(sorted(set(errs))[:5]), ""]
    if res["bugs"]:
        lines += ["| planted bug | kernel | its first check | checks of it | divergence | replay seed | "
                  "`gpuemu reproduce` on the CPU |", "|---|---|---|---|---|---|---|"]
        for b in res["bugs"]:
            rep = "-"
            if b.get("seed"):
                rc = b.get("reproduce_rc")
                rep = "reproduced" if b.get("reproduced_on_cpu") else (
                    f"not reproduced (rc {rc})" if rc in (0, 1) else
                    f"the replay did not run (rc {rc}: {(b.get('reproduce_output') or ['?'])[-2].strip()})")
            lines.append(f"| RMSNorm {b['bug']} tail mask | `{b['kernel']}` | {b['first_check_outcome']} | "
                         f"{b['checks_of_kernel']} | {(b['line'] or 'none').replace('|', '/')} | "
                         f"{b['seed'] or '-'} | {rep} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
