"""`make bench-hook-real`: ``import gpuemu.hook`` on real models, against ``backend="inductor"``.

For each model — a randomly initialised GPT-2 from ``transformers`` (when installed; dropout 0) and the
Llama-style model of ``examples/llama_tiny.py`` (RMSNorm and rotary as Triton kernels, forward and
backward) — a process trains N steps (``torch.compile`` of forward + backward + AdamW) and then runs M eval
forwards under bf16 autocast, timing each call between CUDA synchronisations, twice over side by side
(:func:`run_pair`): model A with ``backend="inductor"`` and its deep copy B with ``backend="gpuemu"``,
``import gpuemu.hook`` at default settings, calls alternating A B / B A. Across processes the same
inductor run differs by up to 29% on the H200 (measured), which hides a 1% effect; side by side it does
not. One more process runs inductor alone, never importing gpuemu. Reported:

* bit for bit: every loss and eval output of B against A, the final parameters, and A against the
  process without gpuemu (in the deterministic control: math SDPA, deterministic algorithms; inductor
  differs from itself where kernels use atomics);
* the step and forward time ratio B/A (medians over the calls after warm-up; the median of per-call
  ratios; means), and how many timed calls ran while the hook was armed;
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
    pair: bool = False  # run_pair: inductor and gpuemu side by side in this one process
    batch: int = 0  # the batch and sequence length of every call (0: the model's default, 8 x 200)
    seq: int = 0
    dump_skipped: str = ""  # a folder: each graph the sampled-rows analysis finds no plan for, with why (--dump-skipped)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------- models


def _build(cfg: RunConfig, copies: int = 1) -> tuple[list, list, list, list]:
    """([model, its copies], [(loss function, logits function) of each], training batches, eval batches) on
    cfg.device, from cfg.seed; the copies are deep copies (same parameters, bit for bit)."""
    import copy

    import torch

    torch.manual_seed(cfg.seed)
    if cfg.model == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        conf = GPT2Config(n_layer=4, n_embd=384, n_head=6, n_positions=256, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0)
        model = GPT2LMHeadModel(conf).to(cfg.device)
        vocab, batch, seq = conf.vocab_size, 8, 200
    else:
        from examples import llama_tiny as L

        conf = L.LlamaConfig.tiny() if cfg.model == "llama-tiny" else L.LlamaConfig(vocab=8192)
        model = L.LlamaTiny(conf).to(cfg.device)
        vocab = conf.vocab
        batch, seq = (2, 12) if cfg.model == "llama-tiny" else (8, 200)
    batch, seq = cfg.batch or batch, cfg.seq or seq
    models = [model] + [copy.deepcopy(model) for _ in range(copies - 1)]
    g = torch.Generator().manual_seed(cfg.seed + 1)
    train = [torch.randint(0, vocab, (batch, seq), generator=g).to(cfg.device) for _ in range(cfg.steps)]
    evals = [torch.randint(0, vocab, (batch, seq), generator=g).to(cfg.device) for _ in range(cfg.evals)]
    return models, [_model_fns(cfg, m, tag) for tag, m in enumerate(models)], train, evals


def _model_fns(cfg: RunConfig, model: Any, tag: int) -> tuple[Any, Any]:
    """(loss function, logits function) of ``model``, as functions of their own (Dynamo keys its cache by
    code object: two compiled copies of one function would share it)."""
    if cfg.model == "gpt2":
        def loss_fn(ids):
            return model(ids, labels=ids).loss

        def logits_fn(ids):
            return model(ids).logits
    else:
        from examples import llama_tiny as L

        def loss_fn(ids):
            return L.loss_fn(model, ids)

        def logits_fn(ids):
            return model(ids)
    return _own_code(loss_fn, tag), _own_code(logits_fn, tag)


def _own_code(fn: Any, tag: int) -> Any:
    """``fn`` with a code object of its own (same body and closure)."""
    import types

    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    out = types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)
    return out


def _fingerprint(t: Any) -> str:
    """An exact integer fingerprint of a tensor's bits (equal bits -> equal fingerprint), computed on its device."""
    import torch

    b = t.detach().contiguous().reshape(-1)
    ints = b.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[b.element_size()]).to(torch.int64)
    w = torch.arange(1, ints.numel() + 1, device=b.device, dtype=torch.int64) % 1_000_003
    return f"{int((ints * w).sum())}:{int(ints.sum())}"


# ---------------------------------------------------------------------------------------------- one run


def _process_setup(cfg: RunConfig, *, reuse_installed: bool = False) -> tuple[Any, Any, Any]:
    """(attention context, gpuemu.hook or None, Runtime or None) for a worker process: the deterministic
    control (cuBLAS workspace, deterministic algorithms, math SDPA: fused attention backward uses atomics),
    the hook installed for backend="gpuemu" (the Llama kernels bound to their ops), the planted bug."""
    import contextlib

    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    attn = contextlib.nullcontext
    if cfg.deterministic:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        torch.use_deterministic_algorithms(True, warn_only=True)
        attn = lambda: sdpa_kernel([SDPBackend.MATH])  # noqa: E731
    hook = rt = None
    if cfg.backend == "gpuemu" and cfg.dump_skipped:
        _dump_skipped(cfg.dump_skipped)
    if cfg.backend == "gpuemu":
        import gpuemu.hook as hook

        rt = hook.current() if reuse_installed else hook.install(store=cfg.store, **cfg.hook_settings)
        if cfg.model.startswith("llama"):
            hook.bind("_rmsnorm_fwd", "rmsnorm")
            hook.bind("_rope_fwd", "rope")
    if cfg.model.startswith("llama"):
        from examples import llama_tiny as L

        L.set_bug(cfg.bug)
    return attn, hook, rt


def _dump_skipped(folder: str) -> None:
    """Write each graph that gets no sampled-rows plan (its code, and why) to ``folder``: what a skip reason names."""
    from gpuemu.backends import row_local

    plan_rows = row_local.plan_rows
    Path(folder).mkdir(parents=True, exist_ok=True)

    def dumping(gm, **kw):
        plan = plan_rows(gm, **kw)
        if isinstance(plan, str):
            n = len(list(Path(folder).glob("graph-*.txt")))
            Path(folder, f"graph-{os.getpid()}-{n}.txt").write_text(
                plan + "\n" + gm.print_readable(print_output=False, include_stride=True))
        return plan

    row_local.plan_rows = dumping


def _hook_results(out: dict, hook: Any, rt: Any) -> None:
    """The hook's stats, divergences, check history and internal errors into ``out``; then uninstall."""
    if rt is None:
        return
    out["stats"] = rt.stats.to_dict()
    out["divergences"] = [d.to_dict() for d in rt.divergences]
    out["history"] = list(rt.history)
    out["errors"] = list(rt.errors)
    out["settings"] = rt.settings.describe()
    hook.uninstall()


def run_one(cfg: RunConfig) -> dict:
    """Train and evaluate one model with one backend; returns losses, fingerprints, times and hook stats."""
    import torch

    attn, hook, rt = _process_setup(cfg, reuse_installed=not (cfg.hook_settings or cfg.store))
    torch._dynamo.reset()
    (model,), ((loss_fn, logits_fn),), train, evals = _build(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    backend = "gpuemu" if cfg.backend == "gpuemu" else cfg.inner
    options = {"backend": cfg.inner} if cfg.backend == "gpuemu" and cfg.inner != "inductor" else None
    cuda = cfg.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    step_c = torch.compile(_step_fn(loss_fn, opt, 0), backend=backend, options=options)
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
    _hook_results(out, hook, rt)
    return out


def _step_fn(loss_fn: Any, opt: Any, tag: int) -> Any:
    def step(ids):
        loss = loss_fn(ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return _own_code(step, tag)


def run_pair(cfg: RunConfig) -> dict:
    """Inductor and gpuemu side by side in one process, the hook installed: model A compiled with the inner
    backend, its deep copy B with ``backend="gpuemu"``; each training step and eval forward runs A then B
    (B then A on odd calls), each timed between CUDA synchronisations. The ratio of B to A is the hook's
    cost to the compiled code; calls made while the hook was armed (a window after a compile, a scheduled
    tick) are counted, for A too (Inductor's ``CachingAutotuner.run`` is wrapped at class level then)."""
    import contextlib

    import torch

    attn, hook, rt = _process_setup(cfg)
    torch._dynamo.reset()
    models, fns, train, evals = _build(cfg, copies=2)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-4) for m in models]
    # backend="inductor": the noise floor of this method, A and B both inductor in a process without gpuemu
    backends = (cfg.inner, "gpuemu" if rt is not None else cfg.inner)
    options = (None, {"backend": cfg.inner} if rt is not None and cfg.inner != "inductor" else None)
    steps = [torch.compile(_step_fn(fns[i][0], opts[i], i), backend=backends[i], options=options[i]) for i in (0, 1)]
    cuda = cfg.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out: dict = {"config": cfg.to_dict(), "mode": "pair"}
    for k in ("losses", "step_s", "armed_step", "eval_fp", "eval_s", "armed_eval"):
        out[k] = ([], [])

    def armed_now() -> bool:
        return rt is not None and rt.arming.armed

    def timed(i: int, fn: Any, ids: Any, ctx: Any) -> tuple[Any, float, bool]:
        sync()
        armed = armed_now()
        t = time.perf_counter()
        with ctx():
            r = fn(ids)
        sync()
        return r, time.perf_counter() - t, armed or armed_now()

    t0 = time.perf_counter()
    for m in models:
        m.train()
    for n, ids in enumerate(train):
        for i in ((0, 1) if n % 2 == 0 else (1, 0)):
            loss, dt, armed = timed(i, steps[i], ids, attn)
            out["step_s"][i].append(dt)
            out["armed_step"][i].append(armed)
            out["losses"][i].append(float(loss.detach().float().item()))
    out["params_fp"] = [_fingerprint(torch.cat([p.detach().float().reshape(-1) for p in m.parameters()]))
                        for m in models]
    for m in models:
        m.eval()
    evals_c = [torch.compile(fns[i][1], backend=backends[i], options=options[i], mode=cfg.eval_mode) for i in (0, 1)]
    amp = torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16)

    @contextlib.contextmanager
    def eval_ctx():
        with torch.no_grad(), amp, attn():
            yield

    for n, ids in enumerate(evals):
        for i in ((0, 1) if n % 2 == 0 else (1, 0)):
            logits, dt, armed = timed(i, evals_c[i], ids, eval_ctx)
            out["eval_s"][i].append(dt)
            out["armed_eval"][i].append(armed)
            out["eval_fp"][i].append(_fingerprint(logits))
    out["wall_s"] = time.perf_counter() - t0
    _hook_results(out, hook, rt)
    return out


def noise_floor(pair: dict) -> dict:
    """B/A of a pair process where both are inductor and gpuemu is never imported: the method's own noise."""
    w = pair["config"]["warmup"]
    res = {"model": pair["config"]["model"]}
    for key, name in (("step_s", "step"), ("eval_s", "eval")):
        a, b = pair[key][0][w:], pair[key][1][w:]
        res[f"{name}_ratio"] = statistics.median(b) / statistics.median(a)
        res[f"{name}_paired_ratio"] = statistics.median(y / x for x, y in zip(a, b))
    res["losses_equal"] = sum(x == y for x, y in zip(*pair["losses"]))
    res["evals_equal"] = sum(x == y for x, y in zip(*pair["eval_fp"]))
    return res


def compare_pair(pair: dict, alone: dict | None) -> dict:
    """The pair's verdicts: bit for bit B vs A (and A vs an inductor process without gpuemu), time ratios."""
    w = pair["config"]["warmup"]
    la, lb = pair["losses"]
    ea, eb = pair["eval_fp"]
    res: dict = {"model": pair["config"]["model"], "steps": len(la), "evals": len(ea), "mode": "pair",
                 "deterministic": pair["config"].get("deterministic", False),
                 "losses_equal": sum(a == b for a, b in zip(la, lb)), "evals_equal": sum(a == b for a, b in zip(ea, eb)),
                 "params_equal": pair["params_fp"][0] == pair["params_fp"][1]}
    if alone is not None:  # the control: inductor in a process that never imported gpuemu
        res["control_losses_equal"] = sum(a == b for a, b in zip(alone["losses"], la))
        res["control_evals_equal"] = sum(a == b for a, b in zip(alone["eval_fp"], ea))
    for key, name in (("step_s", "step"), ("eval_s", "eval")):
        a, b = pair[key][0][w:], pair[key][1][w:]
        res[f"{name}_ms_inductor"] = statistics.median(a) * 1e3
        res[f"{name}_ms_gpuemu"] = statistics.median(b) * 1e3
        res[f"{name}_ratio"] = statistics.median(b) / statistics.median(a)
        res[f"{name}_paired_ratio"] = statistics.median(y / x for x, y in zip(a, b))
        res[f"{name}_mean_ratio"] = statistics.fmean(b) / statistics.fmean(a)
        res[f"{name}_ms_quartiles"] = [[round(q * 1e3, 4) for q in statistics.quantiles(x * 2 if len(x) < 2 else x, n=4)]
                                        for x in (a, b)]
        res[f"{name}_ms_calls"] = [[round(x * 1e3, 4) for x in pair[key][i]] for i in (0, 1)]
        armed = f"armed_{name}"
        res[f"{name}_armed_calls"] = [sum(pair[armed][0][w:]), sum(pair[armed][1][w:])]
        if alone is not None:
            res[f"{name}_ms_alone"] = _median_after(alone[key], w) * 1e3
    st = pair["stats"]
    for k in ("checks", "checks_by_source", "divergences", "skip_reasons", "internal_errors", "arms"):
        res[k] = st[k]
    res["shadow_s"] = st["shadow_seconds"]
    res["divergence_lines"] = [d["line"] for d in pair["divergences"]][:5]
    res["errors"] = pair.get("errors", [])
    res["slowest_checks"] = sorted((h for h in pair.get("history", []) if len(h) > 3), key=lambda h: -h[3])[:6]
    return res


# ---------------------------------------------------------------------------------------------- summaries


def _median_after(xs: list[float], warmup: int) -> float:
    tail = xs[warmup:] or xs
    return statistics.median(tail)


def _mean_after(xs: list[float], warmup: int) -> float:
    tail = xs[warmup:] or xs
    return statistics.fmean(tail)


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
        env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
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
    ap.add_argument("--rounds", type=int, default=1, help="pair processes per model (each: inductor and gpuemu "
                    "side by side); one more process per model runs inductor alone, without gpuemu (the control)")
    ap.add_argument("--noise-floor", action="store_true", help="also a pair process with inductor on both sides "
                    "(gpuemu never imported): the side-by-side method's own noise")
    ap.add_argument("--skip-micro", action="store_true")
    ap.add_argument("--micro-only", action="store_true", help="only the unsampled-launch microbenchmark")
    ap.add_argument("--skip-alone", action="store_true", help="no inductor-only process per model (its control)")
    ap.add_argument("--skip-bugs", action="store_true")
    ap.add_argument("--deterministic", action="store_true", help="model runs as the bit-for-bit control (math SDPA, "
                    "deterministic algorithms); bug and CUDA-graph runs stay at defaults")
    ap.add_argument("--cudagraphs", action="store_true", help="also GPT-2 eval with mode='reduce-overhead' (gpuemu)")
    ap.add_argument("--quick", action="store_true", help="CPU: tiny Llama, aot_eager, 3 steps")
    ap.add_argument("--large", action="store_true",
                    help="GPT-2 with its LM head (vocab 50257) at batch 64 x 256 tokens: logits of 3.3 GB (fp32), past "
                         "the hook's 1 GiB capture cap, so its graphs and the kernels reading the logits take the "
                         "large-call checks (gpuemu/hook/large.py); only the pair and the control run")
    ap.add_argument("--batch", type=int, default=0, help="batch of every call (default: 8; --large: 64)")
    ap.add_argument("--seq", type=int, default=0, help="tokens per sequence (default: 200; --large: 256)")
    ap.add_argument("--max-capture-mb", type=float, default=None,
                    help="the hook's max_capture_bytes in MiB (default: the hook's own, 1024)")
    ap.add_argument("--dump-skipped", default="", help="write the graphs the sampled-rows analysis finds no plan for "
                    "(their code, and why) to this folder")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        cfg = RunConfig(**json.loads(args.worker))
        Path(args.worker_out).write_text(json.dumps(run_pair(cfg) if cfg.pair else run_one(cfg)))
        return 0
    import torch

    cuda = torch.cuda.is_available() and not args.quick
    device = "cuda" if cuda else "cpu"
    inner = "inductor" if cuda else "aot_eager"
    steps, evals = (args.steps, args.evals) if not args.quick else (3, 2)
    warmup = args.warmup if not args.quick else 1
    models = [m for m in args.models.split(",") if m != "gpt2" or _has_transformers()] if not args.quick else ["llama-tiny"]
    if args.large:
        models = ["gpt2"] if cuda and _has_transformers() else ["llama-tiny"]
        args.skip_bugs = args.skip_micro = True
    if not cuda:
        models = ["llama-tiny" if m == "llama" else m for m in models if m != "gpt2"]
    batch = args.batch or (64 if args.large and cuda else 0)
    seq = args.seq or (256 if args.large and cuda else 0)
    hook_settings = {} if args.max_capture_mb is None else {"max_capture_bytes": int(args.max_capture_mb * 2**20)}
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

            result["micro"] = launch_overhead(calls=20000 if cuda else 300, rounds=15 if cuda else 3)
            print(f"micro: bare {result['micro']['bare_us']:.2f} us, hooked {result['micro']['hooked_us']:.2f} us "
                  f"(x{result['micro']['hooked_over_bare']:.4f})", file=sys.stderr, flush=True)
        for m in (models if not args.micro_only else []):
            base = RunConfig(model=m, backend="gpuemu", inner=inner, steps=steps, evals=evals, warmup=warmup,
                             device=device, store=store + f"-{m}", deterministic=args.deterministic, pair=True,
                             batch=batch, seq=seq, hook_settings=hook_settings, dump_skipped=args.dump_skipped)
            alone = None if args.skip_alone else _spawn(dataclasses.replace(base, backend="inductor", pair=False), tmp)
            if args.noise_floor:
                nf = noise_floor(_spawn(dataclasses.replace(base, backend="inductor"), tmp))
                result.setdefault("noise_floor", []).append(nf)
                print(f"{m} noise floor (inductor vs inductor, no gpuemu): step x{nf['step_ratio']:.4f}, "
                      f"eval x{nf['eval_ratio']:.4f}", file=sys.stderr, flush=True)
            for r in range(args.rounds):
                pair = _spawn(base, tmp)
                c = compare_pair(pair, alone)
                result["models"].append(c)
                print(f"{m} pair {r}: step {c['step_ms_inductor']:.3f} -> {c['step_ms_gpuemu']:.3f} ms "
                      f"(x{c['step_ratio']:.4f}), eval {c['eval_ms_inductor']:.3f} -> {c['eval_ms_gpuemu']:.3f} ms "
                      f"(x{c['eval_ratio']:.4f}); paired x{c['step_paired_ratio']:.4f} / x{c['eval_paired_ratio']:.4f}; checks "
                      f"{c['checks_by_source']}", file=sys.stderr, flush=True)
                _save_partial(args.json, result)
        if args.cudagraphs and cuda and not args.micro_only:
            m = "gpt2" if "gpt2" in models else models[0]
            cfg = RunConfig(model=m, backend="gpuemu", inner=inner, steps=3, evals=evals, warmup=warmup,
                            device=device, store=store + "-cg", eval_mode="reduce-overhead")
            run = _spawn(cfg, tmp)
            result["cudagraphs"] = {"model": m, "eval_ms": _median_after(run["eval_s"], warmup) * 1e3,
                                    "checks_by_source": run["stats"]["checks_by_source"],
                                    "skip_reasons": run["stats"]["skip_reasons"],
                                    "divergences": run["stats"]["divergences"], "errors": run.get("errors", []),
                                    "history": [h for h in run.get("history", []) if "graph" in h[0]][:10]}
        if not args.skip_bugs and not args.micro_only:
            m = "llama" if cuda else "llama-tiny"
            for bug, kernel in (("forward", "_rmsnorm_fwd"), ("backward", "_rmsnorm_bwd")):
                st = store + f"-bug-{bug}"
                cfg = RunConfig(model=m, backend="gpuemu", inner=inner, steps=min(steps, 6), evals=1, warmup=1,
                                device=device, bug=bug, store=st)
                run = _spawn(cfg, tmp)
                result["bugs"].append(planted(run, kernel, store=st, device=device))
                _save_partial(args.json, result)
    text = render(result)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def render(res: dict) -> str:
    lines = [f"# `import gpuemu.hook` on real models ({res['device']}, torch {res['torch']}, triton {res['triton']})", ""]
    mi = res.get("micro")
    if mi:
        lines += ["| unsampled Triton launch (median of interleaved rounds, order rotating) | µs | vs bare: median of "
                  "per-round ratios (ratio of medians) |", "|---|---:|---:|",
                  f"| bare `kernel[grid](...)` | {mi['bare_us']:.2f} | 1.0000 |",
                  f"| `import gpuemu.hook` installed, default settings, disarmed | {mi['hooked_us']:.2f} | "
                  f"**{mi['hooked_over_bare']:.4f}** ({mi.get('hooked_over_bare_of_medians', mi['hooked_over_bare']):.4f}) |", "",
                  f"{mi['rounds']} rounds × {mi['calls_per_round']} calls; checks while timing: "
                  f"{mi['checks_during_timing']}; windows opened while timing: {mi.get('arms_during_timing')}.", ""]
    if res["models"]:
        det = res["models"][0].get("deterministic")
        lines += ["Model runs, inductor and gpuemu side by side in one process (A: `backend=\"inductor\"`, B: its "
                  "deep copy with `import gpuemu.hook` + `backend=\"gpuemu\"` at default settings; calls alternate "
                  "A B / B A)" + (", in the deterministic control (math SDPA, `torch.use_deterministic_algorithms`)"
                                  if det else "") + ":", "",
                  "| model | train step ms A → B (medians) | ratio B/A: **paired median**; ratio of medians; of means | "
                  "eval fwd ms A → B (medians) | ratio B/A: **paired median**; ratio of medians; of means | inductor alone, own process: step / eval ms | "
                  "bit for bit: B = A (losses, evals, final params); A = alone | checks by source | divergences | "
                  "calls timed while armed (A, B) | skip reasons |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in res["models"]:
            bfb = (f"{c['losses_equal']}/{c['steps']}, {c['evals_equal']}/{c['evals']}, "
                   f"{'equal' if c['params_equal'] else 'DIFFER'}; A = alone: {c.get('control_losses_equal')}/"
                   f"{c['steps']}, {c.get('control_evals_equal')}/{c['evals']}")
            src = ", ".join(f"{k} {v}" for k, v in sorted(c["checks_by_source"].items())) or "none"
            skips = ", ".join(f"{k}: {v}" for k, v in c["skip_reasons"].items()) or "none"
            lines.append(f"| {c['model']} | {c['step_ms_inductor']:.3f} → {c['step_ms_gpuemu']:.3f} | "
                         f"**{c['step_paired_ratio']:.4f}**; {c['step_ratio']:.4f}; {c['step_mean_ratio']:.4f} | "
                         f"{c['eval_ms_inductor']:.3f} → {c['eval_ms_gpuemu']:.3f} | **{c['eval_paired_ratio']:.4f}**; "
                         f"{c['eval_ratio']:.4f}; {c['eval_mean_ratio']:.4f} | {_ms(c.get('step_ms_alone'))} / "
                         f"{_ms(c.get('eval_ms_alone'))} | {bfb} | {src} | {c['divergences']} | "
                         f"steps {c['step_armed_calls']}, evals {c['eval_armed_calls']} | {skips} |")
        lines.append("")
        lines += ["The paired median is the median over calls of B's time over its neighbouring A call's (the two run "
                  "back to back, order alternating), so drift and clock states that affect both cancel; the ratio of "
                  "the two medians moves when the times are bimodal. Quartiles of each side's call times (ms, after "
                  "warm-up): " + "; ".join(f"{c['model']} step A {c['step_ms_quartiles'][0]} B "
                                           f"{c['step_ms_quartiles'][1]}, eval A {c['eval_ms_quartiles'][0]} B "
                                           f"{c['eval_ms_quartiles'][1]}" for c in res["models"]) + ".", ""]
        for nf in res.get("noise_floor", []):
            lines += [f"Noise floor of this method ({nf['model']}: both sides inductor, gpuemu never imported): step "
                      f"ratio {nf['step_ratio']:.4f} (paired {nf['step_paired_ratio']:.4f}), eval ratio "
                      f"{nf['eval_ratio']:.4f} (paired {nf['eval_paired_ratio']:.4f}); B = A on {nf['losses_equal']} "
                      f"losses and {nf['evals_equal']} evals.", ""]
        slow = [(c["model"], h) for c in res["models"] for h in c.get("slowest_checks", [])[:3]]
        if slow:
            lines += ["Costliest checks (shadow seconds): " + "; ".join(f"{m} {h[0]} `{h[1]}` {h[3]:.3f} s ({h[2]})"
                                                                      for m, h in slow), ""]
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
