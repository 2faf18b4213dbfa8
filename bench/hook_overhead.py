"""`make bench-hook`: what the hook costs a running program.

1. Per-call cost of an unsampled Triton launch against a bare one, as a ratio in one run:
   ``kernel[grid](...)`` with Triton's own ``JITFunction.run`` (bare), with gpuemu's class-level launch
   wrapper and no interceptor (what an armed hook adds before its own work), and with the hook installed
   at default settings once its install window has closed (disarmed: Triton's own ``run``; a scheduled
   tick may arm it while timing, and that cost is in the figure). Rounds of each are interleaved;
   medians per call.
2. A sampled check's cost per op and size: a ``@shadow`` launcher (op check against the fp64 reference),
   the ``gpuemu`` backend's graph check of an MLP, and a metamorphic re-launch.

Writes bench/hook_overhead.md (CPU figures from this run, GPU figures from bench/hook_h200.json when the
H200 run has been committed) and prints the same tables.

    python bench/hook_overhead.py [--out bench/hook_overhead.md] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0") else "cpu"


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def _add1(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)

    return _add1


def launch_overhead(*, calls: int, rounds: int) -> dict:
    """Median per-call seconds of bare / wrapper-only / hooked launches of one tiny kernel, interleaved.

    The order of the three within a round rotates from round to round (a fixed order lets drift and the
    install step favour one of them); ``hooked_over_bare`` is the median over rounds of the round's hooked
    time over its bare time, ``hooked_over_bare_of_medians`` the ratio of the two medians."""
    import torch

    import gpuemu.hook as hook
    from gpuemu.runners import launches

    device = _device()
    kern = _kernel()
    x = torch.zeros(1024, device=device)
    y = torch.empty_like(x)
    grid = (1,)

    def launch():
        kern[grid](x, y, 1024, BLOCK=1024)

    hook.uninstall()
    cls = type(kern)
    bare = getattr(cls.run, "__gpuemu_wrapped__", cls.run)
    wrapped = launches._wrap(bare)  # the class-level wrapper (what gpuemu puts on JITFunction.run while armed)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def timed_hooked(rt) -> float:
        sync()
        t = time.perf_counter()
        for _ in range(calls):
            launch()
        sync()
        return (time.perf_counter() - t) / calls

    def timed(mode: str) -> float:
        if mode == "bare":
            cls.run = bare
        else:
            cls.run = wrapped
        try:
            sync()
            t = time.perf_counter()
            for _ in range(calls):
                launch()
            sync()
            return (time.perf_counter() - t) / calls
        finally:
            cls.run = bare

    for _ in range(3):
        launch()  # compile / warm every path
    samples: dict[str, list[float]] = {"bare": [], "wrapper": [], "hooked": []}
    rt = None
    checks = arms = 0
    try:
        modes = ("bare", "wrapper", "hooked")
        for r in range(rounds):
            for mode in modes[r % 3:] + modes[:r % 3]:
                if mode == "hooked":
                    rt = hook.install(store=str(ROOT / ".gpuemu-bench"))  # default sample rate and budget
                    for _ in range(5000):  # the install window: the first call is checked, then it closes
                        if not rt.arming.armed:
                            break
                        launch()
                    c0, a0 = rt.stats.checks, sum(rt.stats.arms.values())
                    samples[mode].append(timed_hooked(rt))
                    checks += rt.stats.checks - c0
                    arms += sum(rt.stats.arms.values()) - a0
                    hook.uninstall()
                else:
                    samples[mode].append(timed(mode))
    finally:
        cls.run = bare
        hook.uninstall()
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {"device": device, "calls_per_round": calls, "rounds": rounds,
            "bare_us": med["bare"] * 1e6, "wrapper_us": med["wrapper"] * 1e6, "hooked_us": med["hooked"] * 1e6,
            "wrapper_overhead_us": (med["wrapper"] - med["bare"]) * 1e6,
            "hook_overhead_us": (med["hooked"] - med["bare"]) * 1e6,
            "hooked_over_bare": statistics.median(h / b for h, b in zip(samples["hooked"], samples["bare"])),
            "hooked_over_bare_of_medians": med["hooked"] / med["bare"],
            "wrapper_over_bare": statistics.median(w / b for w, b in zip(samples["wrapper"], samples["bare"])),
            "checks_during_timing": checks, "arms_during_timing": arms, "spread_bare_us": [min(samples["bare"]) * 1e6, max(samples["bare"]) * 1e6],
            "spread_hooked_us": [min(samples["hooked"]) * 1e6, max(samples["hooked"]) * 1e6]}


def fast_path_cost(*, calls: int = 200_000) -> dict:
    """What an armed hook adds to a launch whose key was already checked (the slow path every call takes while
    a window is open), timed against a do-nothing call_next (no Triton, no wrapper). Disarmed, no call
    reaches it."""
    import torch

    import gpuemu.hook as hook
    from gpuemu.hook.triton import TritonShadow

    rt = hook.install(mode="shadow", sample_rate=0.0, budget=1.0, store=str(ROOT / ".gpuemu-bench"))
    hook.uninstall()
    shadow = TritonShadow(rt)

    class K:  # stands in for a JITFunction: the fast path only looks it up by id
        fn = None

    k, x = K(), torch.zeros(8)
    site = rt.site(("triton", id(k)), "k")
    site.countdown, site.sig, site.shape, site.dtype = 1 << 60, 0, x.shape, x.dtype
    site.key = ("fp32", "8")
    site.seen.add(site.key)
    shadow.sites[id(k)] = site
    args, kw = (x, x, 8), {"BLOCK": 8}
    nxt = lambda a, k_, g, w: None  # noqa: E731

    def loop(f):
        t = time.perf_counter()
        for _ in range(calls):
            f(k, args, kw, (1,), False, nxt)
        return (time.perf_counter() - t) / calls

    base = min(loop(lambda kk, a, k_, g, w, n: n(a, k_, g, w)) for _ in range(5))
    hooked = min(loop(shadow) for _ in range(5))
    return {"passthrough_ns": base * 1e9, "fast_path_ns": hooked * 1e9, "fast_path_extra_ns": (hooked - base) * 1e9}


def check_costs(*, sizes: list[tuple[int, int]], repeats: int = 3) -> list[dict]:
    """Seconds of shadow work per sampled check, by op and size (the real call's time excluded)."""
    import torch

    import gpuemu.hook as hook

    device = _device()
    rows = []

    @hook.shadow(op="rmsnorm")
    def rmsnorm(x, weight, eps=1e-6):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    @hook.shadow(op="softmax")
    def softmax(x):
        return torch.softmax(x, -1)

    @hook.shadow(op="matmul")
    def matmul(a, b):
        return a @ b

    cases = [("rmsnorm", lambda m, n: rmsnorm(torch.randn(m, n, device=device), torch.randn(n, device=device))),
             ("softmax", lambda m, n: softmax(torch.randn(m, n, device=device))),
             ("matmul", lambda m, n: matmul(torch.randn(m, n, device=device), torch.randn(n, m, device=device)))]
    for op, call in cases:
        for m, n in sizes:
            if op == "matmul" and m * n > 1 << 22:
                continue
            secs = []
            for r in range(repeats):
                rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=str(ROOT / ".gpuemu-bench"))
                t = time.perf_counter()
                call(m, n)
                wall = time.perf_counter() - t
                secs.append((rt.stats.shadow_seconds, wall, rt.stats.checks))
                hook.uninstall()
            shadow = statistics.median(s[0] for s in secs)
            rows.append({"check": "op (fp64 reference)", "op": op, "shape": f"{m}x{n}", "device": device,
                         "shadow_ms": shadow * 1e3, "call_ms": statistics.median(s[1] for s in secs) * 1e3 - shadow * 1e3})
    rows += graph_check_costs(device=device, widths=[64, 512] if device == "cpu" else [512, 4096])
    return rows


def graph_check_costs(*, device: str, widths: list[int], batch: int = 64) -> list[dict]:
    import torch

    import gpuemu.hook as hook

    rows = []
    inner = "inductor" if device == "cuda" else "aot_eager"
    for w in widths:
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.GELU(), torch.nn.Linear(w, w)).to(device)
        compiled = torch.compile(model, backend="gpuemu", options={"backend": inner})
        x = torch.randn(batch, w, device=device)
        hook.install(mode="off")
        compiled(x)  # compile outside the timing
        t = time.perf_counter()
        for _ in range(5):
            compiled(x)
        if device == "cuda":
            torch.cuda.synchronize()
        plain = (time.perf_counter() - t) / 5
        rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=str(ROOT / ".gpuemu-bench"))
        for _ in range(3):
            compiled(x)
        shadow = rt.stats.shadow_seconds / max(rt.stats.checks, 1)
        hook.uninstall()
        rows.append({"check": f"graph ({inner}, fp64 + eager control)", "op": f"MLP {w}-{w}-{w}",
                     "shape": f"{batch}x{w}", "device": device, "shadow_ms": shadow * 1e3, "call_ms": plain * 1e3})
    return rows


def render(cpu: dict, gpu: dict | None, command: str) -> str:
    def table(res: dict) -> list[str]:
        lo = res["overhead"]
        fp = res.get("fast_path", {})
        out = [f"Machine: {res['machine']}; torch {res['torch']}, triton {res['triton']}; device {lo['device']}.", "",
               "| per launch (median of interleaved rounds) | µs | vs bare |", "|---|---:|---:|",
               f"| bare `kernel[grid](...)` (Triton's own run) | {lo['bare_us']:.2f} | 1.000 |",
               f"| + gpuemu's launch wrapper, no interceptor | {lo['wrapper_us']:.2f} | {lo['wrapper_over_bare']:.4f} |",
               f"| + hook installed, default settings, disarmed | {lo['hooked_us']:.2f} | **{lo['hooked_over_bare']:.4f}** |",
               "", f"Unsampled overhead: {lo['hook_overhead_us']:.2f} µs per launch "
                   f"({100 * (lo['hooked_over_bare'] - 1):.2f}% of a bare launch; of which the wrapper "
                   f"{lo['wrapper_overhead_us']:.2f} µs). {lo['rounds']} rounds × {lo['calls_per_round']} calls; "
                   f"bare spread {lo['spread_bare_us'][0]:.2f}–{lo['spread_bare_us'][1]:.2f} µs, hooked spread "
                   f"{lo['spread_hooked_us'][0]:.2f}–{lo['spread_hooked_us'][1]:.2f} µs; checks while timing: "
                   f"{lo['checks_during_timing']}; windows opened while timing: {lo.get('arms_during_timing')}."]
        if fp:
            out += ["", f"While armed (a window after a compile or a tick), the interceptor's slow path costs "
                        f"{fp['fast_path_extra_ns']:.0f} ns per call over a pass-through interceptor "
                        f"({fp['passthrough_ns']:.0f} ns); disarmed, no call reaches it."]
        out += ["", "| sampled check | op | shape | device | shadow work (ms) | the call itself (ms) |",
                "|---|---|---|---|---:|---:|"]
        for r in res["checks"]:
            out.append(f"| {r['check']} | {r['op']} | {r['shape']} | {r['device']} | {r['shadow_ms']:.2f} | "
                       f"{r['call_ms']:.2f} |")
        return out

    lines = ["# Hook overhead", "", f"Produced by `{command}` (CPU) and `python bench/hook_h200.py` on an H200 "
             "(GPU; its JSON is bench/hook_h200.json, its log bench/hook_h200_output.txt).", "",
             "Target: an unsampled intercepted launch costs ≤ 3% of a bare GPU launch. A sampled check's cost is "
             "bounded by the budget (GPUEMU_BUDGET, default 5% of wall time): at 5 ms per check and 5%, at most "
             "one check every 0.1 s of wall time.", ""]
    if gpu:
        lo = gpu["overhead"]
        lines += ["## H200 (GPU)", "", "(Measured before arming, when the hook decided per launch; "
                  "bench/hook_real_model.md has the disarmed figure.)", ""] + table(gpu) + [
            "", "**Finding then: the ≤ 3% target was not met.** Unsampled, a launch paid "
                f"{lo['hook_overhead_us']:.2f} µs ({100 * (lo['hooked_over_bare'] - 1):.1f}%): "
                f"{lo['wrapper_overhead_us']:.2f} µs is gpuemu's class-level launch wrapper itself "
                "(runners/launches.py: argument repacking, two thread-local writes, a closure per interceptor "
                "per call), the rest the interceptor chain and the hook's fast path (a dict lookup by kernel, a "
                "countdown, a shape and dtype compare of the first tensor argument). Both are Python on the "
                "launch path; the H200 host's CPU runs this Python about as slowly as this 2-core machine. "
                "Reaching 3% (≈ 0.5 µs) needs the wrapper to skip the chain for launches no interceptor wants "
                "(a gate the interceptor answers from its countdown) — see docs/hook.md, 'Overhead'.",
            "", "Sampled checks of large tensors are dominated by the Oracle's comparison, which gathers the "
                "output and the fp64 reference to the CPU (≈ 0.23 s for 4M elements); the budget (5%) then spaces "
                "such checks ≈ 5 s apart. Graph checks of the MLP cost 7–15 ms on the GPU.", ""]
    else:
        lines += ["## H200 (GPU)", "", "Not measured yet: run `python bench/hook_h200.py` on a GPU machine.", ""]
    lines += ["## CPU (this machine; Triton under the interpreter)", ""] + table(cpu) + [
        "", "On the CPU a 'launch' is a whole interpreted kernel run (milliseconds), so the ratio mostly shows that "
            "the hook is noise there; the µs difference is the figure that carries over to a GPU launch.", ""]
    return "\n".join(lines)


def environment() -> dict:
    import torch
    import triton

    name = platform.processor() or platform.machine()
    if torch.cuda.is_available():
        name = f"{torch.cuda.get_device_name(0)}, {os.cpu_count()} CPU cores"
    else:
        name = f"{name or 'CPU'}, {os.cpu_count()} cores, no GPU"
    return {"machine": name, "torch": torch.__version__, "triton": triton.__version__}


def run_all(*, quick: bool) -> dict:
    res = environment()
    dev = _device()
    calls = (200 if dev == "cpu" else 20000) if not quick else (50 if dev == "cpu" else 2000)
    res["overhead"] = launch_overhead(calls=calls, rounds=5 if not quick else 3)
    res["fast_path"] = fast_path_cost(calls=50_000 if quick else 200_000)
    sizes = [(64, 256), (512, 1024)] if dev == "cpu" else [(64, 256), (1024, 4096), (8192, 8192)]
    res["checks"] = check_costs(sizes=sizes)
    return res


def main(argv: list[str] | None = None) -> int:
    if _device() == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "bench" / "hook_overhead.md"))
    p.add_argument("--json", default=None, help="also write the raw numbers here")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    import logging

    logging.getLogger("gpuemu.hook").setLevel(logging.ERROR)
    res = run_all(quick=a.quick)
    gpu_json = ROOT / "bench" / "hook_h200.json"
    gpu = json.loads(gpu_json.read_text()) if gpu_json.is_file() else None
    text = render(res, gpu, "make bench-hook")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    Path(a.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
