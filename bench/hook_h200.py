"""The hook on a real GPU (run on the H200): overhead, check costs, a planted bug caught and replayed on CPU.

    python bench/hook_h200.py --out DIR      # writes DIR/hook_h200.json and prints the log

1. Overhead of an unsampled intercepted launch against a bare one (bench/hook_overhead.py's method).
2. A sampled check's cost per op and size on the GPU.
3. The GPU proof: a Triton RMSNorm with a planted bug, launched on the GPU and bound to the rmsnorm op, is
   shadow-checked with the fp64 reference computed on the GPU; the divergence is stored; a fresh process
   with no GPU (CUDA_VISIBLE_DEVICES='', TRITON_INTERPRET=1) replays it from the snapshot, re-running the
   same kernel under Triton's interpreter. The correct kernel passes. An unbound kernel with a tail bug
   is caught metamorphically.
4. torch.compile(backend="gpuemu") over Inductor on the GPU: training losses bit for bit equal to
   backend="inductor", the graph checks pass, and Inductor's generated kernels (CachingAutotuner.run) are
   seen and re-run without a divergence.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@triton.jit
def _rmsnorm_gpu_bug(x_ptr, w_ptr, y_ptr, N, eps, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / BLOCK_N + eps)  # PLANTED BUG: padded block, not N
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rmsnorm_gpu_ok(x_ptr, w_ptr, y_ptr, N, eps, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rowsum_gpu_bug(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, N - BLOCK + 1, BLOCK):  # PLANTED BUG: drops the tail when N % BLOCK != 0
        offs = s + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + offs)
    tl.store(y_ptr + row, tl.sum(acc, 0))


def rmsnorm(kernel, x, w, eps=1e-6):
    y = torch.empty_like(x)
    kernel[(x.shape[0],)](x, w, y, x.shape[1], eps, x.stride(0), BLOCK_N=triton.next_power_of_2(x.shape[1]))
    return y


def log(msg: str) -> None:
    print(msg, flush=True)


def gpu_proof(store: Path) -> dict:
    import gpuemu.hook as hook
    from gpuemu import judge

    rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=str(store), seed=0)
    hook.bind("_rmsnorm_gpu_bug", "rmsnorm")
    hook.bind("_rmsnorm_gpu_ok", "rmsnorm")
    seen_devices = []
    real_compare_op = judge.compare_op

    def spy(oracle, spec, dtype, inputs, kwargs, output):  # record where the fp64 reference runs
        import dataclasses

        base = spec.reference

        def ref(**kw):
            out = base(**kw)
            seen_devices.append((str(out.device), str(out.dtype)))
            return out

        return real_compare_op(oracle, dataclasses.replace(spec, reference=ref), dtype, inputs, kwargs, output)

    import gpuemu.hook.triton as ht

    ht.compare_op = spy
    try:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(64, 3000, device="cuda", generator=g)
        w = torch.randn(3000, device="cuda", generator=g)
        y_ok = rmsnorm(_rmsnorm_gpu_ok, x, w)
        y_bug = rmsnorm(_rmsnorm_gpu_bug, x, w)
        xr = torch.randn(8, 1000, device="cuda", generator=g)
        yr = torch.empty(8, device="cuda")
        _rowsum_gpu_bug[lambda meta: (8,)](xr, yr, 1000, BLOCK=64)
        torch.cuda.synchronize()
    finally:
        ht.compare_op = real_compare_op
    out = {"stats": rt.stats.to_dict(), "reference_devices": seen_devices,
           "divergences": [d.to_dict() for d in rt.divergences]}
    for d in rt.divergences:
        log(d.line)
        log(f"replay: {d.replay}   snapshot: {d.snapshot}")
    log(f"fp64 reference computed on: {seen_devices}")
    hook.uninstall()
    names = [d.name for d in rt.divergences]
    out["correct_kernel_passed"] = "_rmsnorm_gpu_ok" not in names
    log(f"correct RMSNorm kernel passed on the GPU: {out['correct_kernel_passed']}")
    assert "_rmsnorm_gpu_bug" in names and "_rowsum_gpu_bug" in names, names
    assert all(dev.startswith("cuda") and dt == "torch.float64" for dev, dt in seen_devices)
    # replay on CPU from the snapshot, in a process that sees no GPU
    replays = []
    for d in [d for d in rt.divergences if d.name != "_rmsnorm_gpu_ok"]:
        code = ("import json,sys; from gpuemu.store import Store; from gpuemu.hook import replay_record; "
                "import torch; assert not torch.cuda.is_available(); "
                f"rec, ts = Store({str(store)!r}).fetch({d.seed!r}); r = replay_record(rec, ts, device='cpu'); "
                "print(r.report()); print(json.dumps({'same': r.same, 'rerun': r.rerun.status if r.rerun else None, "
                "'how': r.how}))")
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        log(f"--- CPU replay of {d.seed} (exit {p.returncode}, {time.perf_counter() - t:.1f} s):\n{p.stdout}{p.stderr[-2000:]}")
        res = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {"error": p.stderr[-500:]}
        replays.append(dict(res, seed=d.seed))
    out["cpu_replays"] = replays
    # the RMSNorm replay must reproduce; the row-sum kernel's runtime-bounded loop hits a known interpreter
    # bug of triton 3.6 with numpy >= 2.4 (see shared TRITON_NOTES), so its re-run is reported, not required
    assert replays[0].get("same") and replays[0].get("rerun") == "fail", replays
    assert torch.isfinite(y_ok).all() and y_bug.shape == y_ok.shape
    return out


def compile_proof(store: Path) -> dict:
    import gpuemu.hook as hook

    def train(backend, options, steps=4):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.LayerNorm(512),
                                    torch.nn.Linear(512, 10)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        compiled = torch.compile(model, backend=backend, options=options)
        g = torch.Generator(device="cuda").manual_seed(1)
        losses = []
        for _ in range(steps):
            x = torch.randn(64, 256, device="cuda", generator=g)
            t = torch.randint(0, 10, (64,), device="cuda", generator=g)
            loss = torch.nn.functional.cross_entropy(compiled(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    t = time.perf_counter()
    plain = train("inductor", None)
    t_plain = time.perf_counter() - t
    rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=str(store), seed=0)
    t = time.perf_counter()
    hooked = train("gpuemu", None)  # inner backend: inductor, the default
    t_hooked = time.perf_counter() - t
    graph_stats = rt.stats.to_dict()
    # unsampled graph calls let Inductor's own kernel launches be sampled (first call of each kernel)
    rt = hook.install(mode="shadow", sample_rate=0.0, budget=1.0, store=str(store), seed=0)
    train("gpuemu", None, steps=2)
    kernel_stats = rt.stats.to_dict()
    from gpuemu.hook import inductor

    wrapped = inductor._original is not None
    hook.uninstall()
    same = [a.hex() for a in plain] == [b.hex() for b in hooked]
    log(f"inductor losses:        {[f'{x:.6f}' for x in plain]}")
    log(f"gpuemu(inductor) losses: {[f'{x:.6f}' for x in hooked]}  bit for bit: {same}")
    log(f"graph checks: {graph_stats}")
    log(f"inductor kernel checks (sample_rate 0, first call of each kernel): {kernel_stats}")
    assert same, (plain, hooked)
    assert graph_stats["divergences"] == 0 and graph_stats["passed"] >= 1
    return {"losses_inductor": plain, "losses_gpuemu": hooked, "bit_for_bit": same, "graph_stats": graph_stats,
            "inductor_kernel_stats": kernel_stats, "caching_autotuner_wrapped": wrapped,
            "seconds_plain": t_plain, "seconds_hooked": t_hooked}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "bench"))
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("hook_h200.py needs a CUDA GPU", file=sys.stderr)
        return 2
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = Path(os.environ.get("TMPDIR", "/tmp")) / "gpuemu-h200-store"
    import importlib.util

    spec = importlib.util.spec_from_file_location("hook_overhead", ROOT / "bench" / "hook_overhead.py")
    ho = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ho)  # by path: bench/ holds a bench.py that shadows a package named bench

    res = ho.environment()
    log(f"{res}")
    res["overhead"] = ho.launch_overhead(calls=20000, rounds=7)
    log(f"overhead: {res['overhead']}")
    res["fast_path"] = ho.fast_path_cost(calls=200_000)
    log(f"fast path: {res['fast_path']}")
    for name, fn in (("proof", lambda: gpu_proof(store)), ("compile", lambda: compile_proof(store / "compile"))):
        try:
            res[name] = fn()
        except Exception as e:  # keep what the other parts measured
            import traceback

            traceback.print_exc()
            res[name] = {"error": f"{type(e).__name__}: {e}"}
    try:
        res["checks"] = ho.check_costs(sizes=[(64, 256), (1024, 4096)])
    except Exception as e:
        import traceback

        traceback.print_exc()
        res["checks"] = []
        res["checks_error"] = str(e)
    for r in res["checks"]:
        log(f"check: {r}")
    (out_dir / "hook_h200.json").write_text(json.dumps(res, indent=2, default=str))
    print(ho.render(res, None, "python bench/hook_h200.py"))
    ok = all("error" not in res.get(k, {}) for k in ("proof", "compile"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
