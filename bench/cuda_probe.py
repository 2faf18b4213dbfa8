"""What a CUDA run of the corpus looks like from inside (issue: the same verdict on a GPU as on the CPU).

Run on a GPU machine from the repository root: ``PYTHONPATH=. python3 bench/cuda_probe.py [--out DIR]``. It prints

1. layouts: a strided case materialised on CUDA keeps its strides, and a kernel that reads a strided view as
   flat memory is caught there;
2. dot precision: the ``tt.dot`` lines of the TTIR Triton compiled for the corpus's fp32 matmul and attention
   kernels on this GPU, and their metadata (what a verdict must read to know a dot ran in TF32);
3. resources: for the corpus attention kernel at D = 64, 129, 257, the shared memory the compiled kernel asks
   for (metadata.shared), what the launch raised, and the same launch compiled ahead of time for this GPU's
   target by gpuemu's runtime on the CPU interpreter path (``compile_for``) — the figure a GPU-less prediction
   would give;
4. time: where a 20-iteration CUDA fuzz of the correct softmax and attention kernels spends its time (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _compiled(jitfn):
    """The CompiledKernels Triton cached for ``jitfn`` on this device (newest last)."""
    caches = getattr(jitfn, "device_caches", {})
    out = []
    for entry in caches.values():
        kernels = entry[0] if isinstance(entry, tuple) else entry
        out += list(kernels.values())
    return out


def layouts() -> dict:
    import torch

    import gpuemu
    from gpuemu.cases import Case, materialize

    case = Case(op="softmax", dtype="fp32", dims={"N": 7}, seed=11, batch=(3,), layouts={"x": "strided"})
    x = materialize(case, "cuda")[0]["x"]

    def reads_as_flat(x):
        flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage(), x.storage_offset(),
                                                                      x.shape, torch.empty(x.shape).stride())
        return torch.softmax(flat.float(), -1).to(x.dtype)

    r = gpuemu.fuzz(reads_as_flat, op="softmax", iterations=40, seed=1, save=False, device="cuda")
    return {"strides_on_cuda": list(x.stride()), "contiguous": x.is_contiguous(), "caught": not r.ok,
            "precondition": r.precondition_cases, "failed": len(r.failed), "summary": r.summary()}


def dot_precision() -> dict:
    import torch

    from gpuemu.target import load

    out = {}
    for target, args in (("examples/kernels/matmul.py:matmul", lambda: (torch.randn(64, 64, device="cuda"),
                                                                         torch.randn(64, 64, device="cuda"))),
                         ("examples/kernels/attention.py:attention",
                          lambda: tuple(torch.randn(1, 1, 16, 32, device="cuda") for _ in range(3)))):
        fn = load(str(ROOT / target))
        module = sys.modules[fn.__module__]
        fn(*args())
        torch.cuda.synchronize()
        for name in dir(module):
            obj = getattr(module, name)
            if hasattr(obj, "device_caches"):
                for ck in _compiled(obj):
                    ttir = ck.asm.get("ttir", "")
                    meta = ck.metadata._asdict() if hasattr(ck.metadata, "_asdict") else dict(vars(ck.metadata))
                    out[f"{target}:{name}"] = {
                        "dots": [ln.strip()[:200] for ln in ttir.splitlines() if "tt.dot" in ln],
                        "metadata": {k: str(v) for k, v in meta.items() if not k.startswith("_")},
                    }
    return out


def resources() -> list:
    import torch

    from gpuemu.runners import run_launcher
    from gpuemu.target import load

    fn = load(str(ROOT / "examples/kernels/attention.py:attention"))
    module = sys.modules[fn.__module__]
    cap = torch.cuda.get_device_capability()
    rows = []
    for D in (64, 129, 257):
        for dtype in (torch.float32, torch.float16):
            q, k, v = (torch.randn(1, 1, 16, D, device="cuda", dtype=dtype) for _ in range(3))
            row = {"D": D, "dtype": str(dtype).replace("torch.", "")}
            try:
                fn(q, k, v)
                torch.cuda.synchronize()
                row["launch"] = "ok"
            except Exception as e:
                row["launch"] = f"{type(e).__name__}: {str(e)[:200]}"
            sizes = []
            for name in dir(module):
                obj = getattr(module, name)
                if hasattr(obj, "device_caches"):
                    for ck in _compiled(obj):
                        meta = ck.metadata._asdict() if hasattr(ck.metadata, "_asdict") else dict(vars(ck.metadata))
                        sizes.append({k: meta.get(k) for k in ("shared", "num_warps", "num_stages", "name")})
            row["compiled_on_gpu"] = sizes[-2:]
            try:  # the same launch on the CPU path, compiled ahead of time for this GPU
                from gpuemu.runtime import compile_for

                with compile_for(f"sm_{cap[0]}{cap[1]}") as comp:
                    run_launcher(fn, [q.cpu(), k.cpu(), v.cpu()], {}, device="cpu")
                row["aot_from_cpu"] = [{"error": c.error, **{k: c.metadata.get(k) for k in ("shared", "num_warps",
                                                                                              "num_stages")}}
                                       for c in comp]
            except Exception as e:
                row["aot_from_cpu"] = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(row)
    return rows


def fuzz_time() -> dict:
    import gpuemu
    from gpuemu.target import load

    out = {}
    for target, op in (("examples/kernels/softmax.py:softmax", "softmax"),
                       ("examples/kernels/attention.py:attention", "attention")):
        fn = load(str(ROOT / target))
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        r = gpuemu.fuzz(fn, op=op, iterations=20, seed=1, save=False, device="cuda")
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
        out[target] = {"seconds": time.perf_counter() - t0, "summary": r.summary(), "timings": r.timings,
                       "profile": buf.getvalue()[-6000:]}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "bench/out"))
    a = p.parse_args()
    result = {}
    for name, step in (("layouts", layouts), ("dot_precision", dot_precision), ("resources", resources),
                       ("fuzz_time", fuzz_time)):
        t0 = time.perf_counter()
        try:
            result[name] = step()
        except Exception:
            result[name] = {"error": traceback.format_exc()[-3000:]}
        print(f"== {name} ({time.perf_counter() - t0:.1f} s)", flush=True)
        print(json.dumps(result[name], indent=1, default=str)[:5000], flush=True)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "cuda_probe.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
