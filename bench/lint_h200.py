"""Proof on a real GPU that ``gpuemu lint`` reads the right numbers, and that what it flags is slower.

Two halves, because the lint's point is that it needs no GPU:

1. ``python bench/lint_h200.py cpu --out bench/out/lint_cpu.json`` (on a machine without a GPU): for each
   case below, ``gpuemu lint`` compiles the kernel for sm_90 ahead of time from a recorded launch and
   records registers, spills, stack and findings, plus the inputs' shapes and dtypes.
2. ``python bench/lint_h200.py gpu --cpu bench/out/lint_cpu.json [...] --out DIR`` (on the H200): runs
   the same launchers on CUDA tensors of the same shapes and dtypes (so Triton's own binder picks the same
   specialisation, which is checked), reads Triton's ``n_regs`` / ``n_spills`` of what it compiled, and
   times the cases with ``triton.testing.do_bench``. Prints the Markdown table (``bench/lint_h200.md``).

Triton's ``n_spills`` is ``CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES / 4``; the lint's comparable number is
``(stack + local bytes) / 4`` from ``cuobjdump --dump-resource-usage`` (its own spill metric is the ptxas
``-v`` spill stores + loads in bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (label, launcher, op, dims). The matmul_* launchers below run the corpus's own matmul kernel with other
# block sizes: the change under test ("a larger BLOCK that spills").
CASES = [
    ("matmul corpus 32x32x64", "examples/kernels/matmul.py:matmul", "matmul", {"M": 4096, "N": 4096, "K": 4096}),
    ("matmul 64x64x32", "bench/lint_h200.py:matmul_64x64", "matmul", {"M": 4096, "N": 4096, "K": 4096}),
    ("matmul 128x128x32", "bench/lint_h200.py:matmul_128x128", "matmul", {"M": 4096, "N": 4096, "K": 4096}),
    ("matmul 128x256x64", "bench/lint_h200.py:matmul_128x256", "matmul", {"M": 4096, "N": 4096, "K": 4096}),
    ("attention corpus", "examples/kernels/attention.py:attention", "attention",
     {"B": 8, "H": 16, "Nq": 128, "Nk": 128, "D": 64}),
    ("flash_attention corpus", "examples/kernels/flash_attention.py:flash_attention", "attention",
     {"B": 8, "H": 16, "Nq": 128, "Nk": 128, "D": 64}),
    ("softmax corpus", "examples/kernels/softmax.py:softmax", "softmax", {"N": 4096}),
    ("layernorm corpus", "examples/kernels/layernorm.py:layernorm", "layernorm", {"N": 4096}),
]


def _matmul_blocks(a, b, BM: int, BN: int, BK: int, num_warps: int = 4):
    import torch
    import triton

    from gpuemu.lint.examples import load_module

    kernel = load_module(ROOT / "examples" / "kernels" / "matmul.py")._matmul_kernel
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=num_warps)
    return c


def matmul_64x64(a, b):
    """The corpus matmul kernel with 64x64x32 blocks, 4 warps."""
    return _matmul_blocks(a, b, 64, 64, 32)


def matmul_128x128(a, b):
    """128x128x32 blocks, 4 warps: more registers, no spills."""
    return _matmul_blocks(a, b, 128, 128, 32)


def matmul_128x256(a, b):
    """128x256x64 blocks, 4 warps: the accumulator no longer fits in registers (spills)."""
    return _matmul_blocks(a, b, 128, 256, 64)


# ------------------------------------------------------------------------------------------------ CPU


def run_cpu(out: Path) -> None:
    import triton

    from gpuemu.lint import engine
    from gpuemu.lint.examples import example_inputs

    cases = []
    for label, target, op, dims in CASES:
        t0 = time.perf_counter()
        res = engine.lint([str(ROOT / target)], target="sm_90", op=op, dtype="fp16", dims=dims, use_cache=False,
                          workers=1, root=ROOT)
        args, kwargs = example_inputs(op, dtype="fp16", dims=dims)
        kernels = []
        for r in res.reports:
            m = r.metrics
            kernels.append({"kernel": r.kernel_id, "name": r.name, "specialization": r.specialization,
                            "error": r.error,
                            "registers": m.registers if m else None, "stack_bytes": m.stack_bytes if m else None,
                            "local_bytes": m.local_bytes if m else None,
                            "spill_bytes": m.spill_bytes if m else None,
                            "n_spills_equiv": m.triton_n_spills if m else None,
                            "shared": m.shared_bytes if m else None,
                            "occupancy": m.occupancy.occupancy if m else None,
                            "findings": [f"{f.rule}: {f.measured} > {f.allowed} {f.unit}".strip()
                                         for f in res.findings if f.kernel == r.kernel_id]})
        cases.append({"label": label, "target": target, "op": op, "dims": dims,
                      "inputs": [None if a is None else {"shape": list(a.shape), "dtype": str(a.dtype).split(".")[-1],
                                                         "stride": list(a.stride())} for a in args],
                      "kwargs": kwargs, "kernels": kernels, "seconds": round(time.perf_counter() - t0, 2)})
        print(f"{label}: " + ", ".join(f"{k['name']} regs={k['registers']} spill={k['spill_bytes']}B "
                                       f"n_spills~{k['n_spills_equiv']}" for k in kernels), flush=True)
    doc = {"triton": triton.__version__, "host": os.uname().nodename, "cases": cases}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")


# ------------------------------------------------------------------------------------------------ GPU


def _inputs(desc, device):
    import torch

    g = torch.Generator(device="cpu").manual_seed(0)
    out = []
    for d in desc:
        if d is None:
            out.append(None)
            continue
        t = torch.randn(d["shape"], generator=g, dtype=torch.float32).to(getattr(torch, d["dtype"]))
        out.append(t.to(device).contiguous())
    return out


def run_gpu(cpu_files: list[Path], out_dir: Path, rep: int) -> str:
    import torch
    import triton
    from triton.testing import do_bench

    from gpuemu.lint.examples import load_module
    from gpuemu.lint.specialize import specialize
    from gpuemu.lint.targets import get
    from gpuemu.runners.launches import add_interceptor, remove_interceptor

    docs = [json.loads(p.read_text()) for p in cpu_files]
    ref = docs[0]
    compiled: list = []

    def capture(kernel, args, kwargs, grid, warmup, call_next):
        ck = call_next(args, kwargs, grid, warmup)
        spec = specialize(kernel, tuple(args), dict(kwargs), get("sm_90")).describe()
        compiled.append((kernel.fn.__name__, ck, spec))
        return ck

    rows, timing = [], []
    for ci, case in enumerate(ref["cases"]):
        file, _, fn_name = case["target"].rpartition(":")
        fn = getattr(load_module(ROOT / file), fn_name)
        args = _inputs(case["inputs"], "cuda")
        compiled.clear()
        add_interceptor(capture)
        try:
            fn(*args, **case["kwargs"])
            torch.cuda.synchronize()
        finally:
            remove_interceptor(capture)
        for ki, (name, ck, spec) in enumerate(compiled):
            ck._init_handles() if hasattr(ck, "_init_handles") else None
            lint = [d["cases"][ci]["kernels"][ki] if ki < len(d["cases"][ci]["kernels"]) else {} for d in docs]
            same_spec = all(_spec_core(spec) == _spec_core(x.get("specialization", {})) for x in lint)
            rows.append({"case": case["label"], "kernel": name, "same_spec": same_spec,
                         "gpu_regs": ck.n_regs, "gpu_spills": ck.n_spills,
                         "lint": [{"triton": d["triton"], "regs": x.get("registers"), "spill_bytes": x.get("spill_bytes"),
                                   "n_spills": x.get("n_spills_equiv"), "findings": x.get("findings", [])}
                                  for d, x in zip(docs, lint)]})
        ms = do_bench(lambda: fn(*args, **case["kwargs"]), warmup=25, rep=rep, quantiles=[0.5, 0.2, 0.8])
        timing.append({"case": case["label"], "ms": ms})
        print(f"{case['label']}: {[(r['kernel'], r['gpu_regs'], r['gpu_spills']) for r in rows if r['case'] == case['label']]}"
              f" {ms[0]:.4f} ms", flush=True)
    md = _markdown(rows, timing, docs, torch.cuda.get_device_name(), triton.__version__, torch.__version__)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "lint_h200.md").write_text(md)
    (out_dir / "lint_h200.json").write_text(json.dumps({"rows": rows, "timing": timing}, indent=1, default=str))
    print(md)
    return md


def _spec_core(s: dict) -> tuple:
    return (json.dumps(s.get("signature"), sort_keys=True), json.dumps(s.get("constexprs"), sort_keys=True),
            tuple(s.get("divisible_by_16") or ()), s.get("num_warps"), s.get("num_stages"))


def _markdown(rows, timing, docs, device, triton_v, torch_v) -> str:
    hosts = ", ".join(f"triton {d['triton']}" for d in docs)
    lines = [f"# gpuemu lint vs Triton on an {device}", "",
             f"GPU side: triton {triton_v}, torch {torch_v}. Lint side (sm_90, compiled ahead of time on a 2-core "
             f"machine with no GPU): {hosts}. `n_spills` = local memory per thread / 4 (Triton's definition); "
             f"the lint's `spill B` is ptxas's spill stores + loads.", "",
             "| case | kernel | same specialisation | H200 n_regs | H200 n_spills | "
             + " | ".join(f"lint regs ({d['triton']}) | lint n_spills ({d['triton']}) | lint spill B ({d['triton']})"
                          for d in docs) + " | lint findings |",
             "|---|---|---|---|---|" + "---|---|---|" * len(docs) + "---|"]
    for r in rows:
        cells = []
        for x in r["lint"]:
            cells += [str(x["regs"]), str(x["n_spills"]), str(x["spill_bytes"])]
        found = "; ".join(r["lint"][0]["findings"]) or "none"
        lines.append(f"| {r['case']} | {r['kernel']} | {'yes' if r['same_spec'] else 'NO'} | {r['gpu_regs']} | "
                     f"{r['gpu_spills']} | " + " | ".join(cells) + f" | {found} |")
    lines += ["", "## Time on the H200 (triton.testing.do_bench, median [p20, p80])", "",
              "| case | ms | p20 | p80 |", "|---|---|---|---|"]
    for t in timing:
        ms = t["ms"]
        lines.append(f"| {t['case']} | {ms[0]:.4f} | {ms[1]:.4f} | {ms[2]:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("cpu", help="lint the cases for sm_90 here (no GPU)")
    c.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "lint_cpu.json")
    g = sub.add_parser("gpu", help="compare with Triton on a CUDA GPU and time the cases")
    g.add_argument("--cpu", type=Path, nargs="+", required=True, help="JSON files written by the cpu mode")
    g.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "bench" / "out")))
    g.add_argument("--rep", type=int, default=200, help="do_bench rep (ms)")
    a = p.parse_args(argv)
    if a.mode == "cpu":
        os.environ.pop("TRITON_INTERPRET", None)
        run_cpu(a.out)
    else:
        run_gpu(a.cpu, a.out, a.rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
