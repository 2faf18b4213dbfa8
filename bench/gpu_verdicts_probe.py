"""The same verdict on the GPU as on the CPU: launch refusals and TF32 dots (issue 12, parts 7 and 2).

Run on a GPU machine from the repository root (about 2-3 minutes on an H200)::

    PYTHONPATH=. python3 bench/gpu_verdicts_probe.py --out bench/gpu_verdicts_h200.md

1. Refusals. For examples/kernels/attention.py and flash_attention.py at head dims 129 and 257, fp32 and fp16
   (and one attention launch that fits), the verdict gpuemu's CPU path predicts without a GPU (a child process
   with TRITON_INTERPRET=1 and no CUDA device: every launch compiled for this GPU's target by the guard the CPU
   runner installs; refused launches also judged by the oracle on the CPU) next to the real CUDA launch judged
   by the oracle on this GPU. "same" means the same status, kind and message, word for word; a launch whose
   tiles exceed 32K elements is refused on the CPU from its TTGIR with "at least N B" (a lower bound: the
   exact figure would need minutes of lowering), the same class with a figure <= the GPU's.
2. TF32. A fp32 matmul whose ``tl.dot`` takes the default input precision (TF32 on sm_80+): the dot precision
   read from the CompiledKernel on CUDA and the verdict of ``gpuemu fuzz ... --device cuda --iterations 20``;
   the same kernel with ``input_precision="ieee"`` as a control, and a kernel wrong by more than TF32 allows
   (it drops the last K column), which must still be caught.

Writes a markdown table to ``--out`` (and the raw results next to it as JSON).
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# (kernel file:function, dtype, D, Nk); Nq = 16, B = H = 1
CASES = [
    ("examples/kernels/attention.py:attention", "fp32", 129, 128),
    ("examples/kernels/attention.py:attention", "fp32", 257, 64),
    ("examples/kernels/attention.py:attention", "fp32", 257, 16),  # BLOCK_N = 16: fits (98,304 B)
    ("examples/kernels/attention.py:attention", "fp16", 129, 128),
    ("examples/kernels/attention.py:attention", "fp16", 257, 128),
    ("examples/kernels/flash_attention.py:flash_attention", "fp32", 129, 64),
    ("examples/kernels/flash_attention.py:flash_attention", "fp32", 257, 64),
    ("examples/kernels/flash_attention.py:flash_attention", "fp16", 129, 64),
    ("examples/kernels/flash_attention.py:flash_attention", "fp16", 257, 64),
]


# ------------------------------------------------------------------------------------- TF32 matmul kernels
@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               IEEE: tl.constexpr, DROP_LAST_K: tl.constexpr,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    om = pm * BM + tl.arange(0, BM)
    on = pn * BN + tl.arange(0, BN)
    ok = tl.arange(0, BK)
    kmax = K - 1 if DROP_LAST_K else K
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + ok
        a = tl.load(a_ptr + om[:, None] * sam + kk[None, :] * sak, mask=(om[:, None] < M) & (kk[None, :] < kmax), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + on[None, :] * sbn, mask=(kk[:, None] < kmax) & (on[None, :] < N), other=0.0)
        if IEEE:
            acc += tl.dot(a, b, input_precision="ieee")
        else:
            acc += tl.dot(a, b)  # the default: TF32 for fp32 inputs on sm_80+
    tl.store(c_ptr + om[:, None] * scm + on[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(om[:, None] < M) & (on[None, :] < N))


def _mm(a, b, ieee=False, drop_last_k=False):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    _mm_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), IEEE=ieee, DROP_LAST_K=drop_last_k,
                     BM=32, BN=32, BK=32)
    return c


def tf32_matmul(a, b):
    """Correct fp32 matmul; its dots run in TF32 on the GPU."""
    return _mm(a, b)


def ieee_matmul(a, b):
    """The control: the same kernel asking for full fp32 dots."""
    return _mm(a, b, ieee=True)


def tf32_matmul_drops_last_k(a, b):
    """Buggy: leaves out the last K column, an error far beyond TF32 rounding."""
    return _mm(a, b, drop_last_k=True)


# ------------------------------------------------------------------------------------- helpers
def _case(dtype: str, D: int, Nk: int):
    from gpuemu.cases import Case

    return Case(op="attention", dtype=dtype, dims={"B": 1, "H": 1, "Nq": 16, "Nk": Nk, "D": D}, seed=1)


def _key(spec: str, dtype: str, D: int, Nk: int) -> str:
    return f"{spec.split('/')[-1]} {dtype} D={D} Nk={Nk}"


def _verdict(v) -> dict:
    return {"status": v.status, "kind": v.kind, "message": v.message, "detail": v.detail}


def _line(v: dict | None) -> str:
    if v is None:
        return "-"
    return f"{v['status'].upper()} {v['kind']}: {v['message']}" if v["message"] else f"{v['status'].upper()} {v['kind']}"


# ------------------------------------------------------------------------------------- 1a. the CPU side
def predict_on_cpu(target: str, out: str) -> None:
    """Child process (TRITON_INTERPRET=1, no CUDA device): the CPU path's prediction for every case."""
    from gpuemu.cases import materialize
    from gpuemu.oracle import Oracle
    from gpuemu.resources import LaunchRefused, guard, predicting
    from gpuemu.runners.launches import add_interceptor, guarding, observe_launches, remove_interceptor
    from gpuemu.runtime import aot
    from gpuemu.target import load

    shared: list = []

    def swallow(kernel, args, kwargs, grid, warmup, call_next):  # the guard has let it through: do not run it
        compiled = aot.compile_launch(kernel, args, kwargs, aot.parse_target(target), target_name=target,
                                      limits_only=True)  # the guard's figure, from the in-process cache
        shared.append(compiled.metadata.get("shared"))
        return None

    results = {}
    oracle = Oracle.default()
    for spec, dtype, D, Nk in CASES:
        t0 = time.perf_counter()
        fn = load(spec)
        case = _case(dtype, D, Nk)
        inputs, kwargs = materialize(case, "cpu")
        shared.clear()
        res: dict = {}
        add_interceptor(swallow)
        try:
            with predicting(target), observe_launches(), guarding(guard):
                fn(*[inputs[a.name] for a in case.spec.args], **kwargs)
            res["refused"] = False
            res["line"] = f"launches (shared {shared[0]:,} B on {target})" if shared and shared[0] is not None else "launches"
        except LaunchRefused as e:
            res["refused"] = True
            res["line"] = e.message
        except Exception as e:  # keep going: the table says what failed
            res["refused"] = False
            res["error"] = res["line"] = f"{type(e).__name__}: {e}"[:300]
        finally:
            remove_interceptor(swallow)
        if res["refused"]:
            with predicting(target):  # the oracle's own verdict on the CPU: refused before the interpreter runs it
                res["verdict"] = _verdict(oracle.evaluate(fn, case, device="cpu").verdict)
        res["seconds"] = round(time.perf_counter() - t0, 2)
        results[_key(spec, dtype, D, Nk)] = res
        print(f"cpu  {_key(spec, dtype, D, Nk):45s} {res['line']} ({res['seconds']} s)", flush=True)
        Path(out).write_text(json.dumps(results, indent=1))  # after each case: a killed child still reports


# ------------------------------------------------------------------------------------- 1b. the CUDA side
def on_cuda() -> dict:
    from gpuemu.oracle import Oracle
    from gpuemu.target import load

    oracle = Oracle.default()
    results = {}
    for spec, dtype, D, Nk in CASES:
        t0 = time.perf_counter()
        v = oracle.evaluate(load(spec), _case(dtype, D, Nk), device="cuda", check_determinism=False).verdict
        res = {"verdict": _verdict(v), "seconds": round(time.perf_counter() - t0, 2)}
        results[_key(spec, dtype, D, Nk)] = res
        print(f"cuda {_key(spec, dtype, D, Nk):45s} {_line(res['verdict'])} ({res['seconds']} s)", flush=True)
    return results


# ------------------------------------------------------------------------------------- 2. TF32
def tf32_single() -> dict:
    """One 64^3 case of each matmul on CUDA: what the launch record says about its dots, and the verdict."""
    from gpuemu.cases import Case, materialize
    from gpuemu.oracle import Oracle, dot_precision
    from gpuemu.runners import run_launcher

    case = Case(op="matmul", dtype="fp32", dims={"M": 64, "N": 64, "K": 64}, seed=4)
    oracle = Oracle.default()
    out = {}
    for fn in (tf32_matmul, ieee_matmul, tf32_matmul_drops_last_k):
        inputs, _ = materialize(case, "cuda")
        run = run_launcher(fn, [inputs["a"], inputs["b"]], {}, device="cuda")
        v = oracle.evaluate(fn, case, device="cuda").verdict
        out[fn.__name__] = {"dot_precision": dot_precision(run.launches),
                            "source": sorted({str(lch.options.get("dot_precision_source")) for lch in run.launches}),
                            "verdict": _verdict(v)}
        print(f"tf32 {fn.__name__:28s} dots {out[fn.__name__]['dot_precision']} -> {_line(out[fn.__name__]['verdict'])}",
              flush=True)
    return out


_JSONSCHEMA_STUB = (
    "import sys, types\n"
    "try:\n    import jsonschema\n"
    "except ImportError:  # not installed on this machine: store records unvalidated (said in the table)\n"
    "    m = types.ModuleType('jsonschema')\n"
    "    class Draft202012Validator:\n"
    "        def __init__(self, schema): pass\n"
    "        def iter_errors(self, rec): return iter(())\n"
    "    m.Draft202012Validator = Draft202012Validator\n"
    "    m.exceptions = types.SimpleNamespace(best_match=lambda errors: None)\n"
    "    sys.modules['jsonschema'] = m\n"
)


def fuzz_cli(name: str, tmp: Path, iterations: int) -> dict:
    """``gpuemu fuzz bench/gpu_verdicts_probe.py:NAME --op matmul --device cuda`` in a fresh process."""
    js = tmp / f"fuzz_{name}.json"
    argv = ["fuzz", f"bench/gpu_verdicts_probe.py:{name}", "--op", "matmul", "--device", "cuda", "--dtype", "fp32",
            "--iterations", str(iterations), "--seed", "1", "--json", str(js), "--store", str(tmp / "store")]
    code = _JSONSCHEMA_STUB + f"from gpuemu.cli import main\nsys.exit(main({argv!r}))\n"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=150,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    res = {"rc": p.returncode, "seconds": round(time.perf_counter() - t0, 1),
           "stderr_tail": "\n".join(p.stderr.strip().splitlines()[-6:])}
    if js.is_file():
        d = json.loads(js.read_text())
        res.update(passed=d["passed"], iterations=d["iterations"], failed=d["failed"], ok=d["ok"])
        if d["failures"]:
            f = d["failures"][0]
            res["first_failure"] = f["line"]
            res["first_failure_dots"] = sorted({str(lch["options"].get("dot_precision")) for lch in f["launches"]})
    print(f"fuzz {name:28s} rc={res['rc']} {res.get('passed')}/{res.get('iterations')} passed ({res['seconds']} s)",
          flush=True)
    return res


# ------------------------------------------------------------------------------------- report
def markdown(env: dict, cpu: dict, cuda: dict, single: dict, fuzz: dict, seconds: float) -> str:
    rows = ["# Launch refusals and TF32 dots: CPU prediction vs CUDA (bench/gpu_verdicts_probe.py)", "",
            f"{env['gpu']} ({env['target']}), torch {env['torch']}, triton {env['triton']}, "
            f"jsonschema {'present' if env['jsonschema'] else 'absent (fuzz records stored unvalidated)'}; "
            f"total {seconds:.0f} s.", "",
            "## 1. Launch refusals", "",
            f"CPU: a child process with TRITON_INTERPRET=1 and no CUDA device, predicting for {env['target']}. "
            "CUDA: the oracle on this GPU (Triton's own OutOfResources).", "",
            "| case | CPU prediction | CPU verdict | CUDA verdict | same |", "|---|---|---|---|---|"]
    for key in (_key(*c) for c in CASES):
        c, g = cpu.get(key, {}), cuda.get(key, {})
        cv, gv = c.get("verdict"), g.get("verdict")
        if c.get("refused") and cv:
            same = "yes" if gv and (cv["status"], cv["kind"], cv["message"]) == (gv["status"], gv["kind"], gv["message"]) \
                else "same class, CPU figure a lower bound" if gv and (cv["status"], cv["kind"]) == (gv["status"], gv["kind"]) \
                and "at least" in cv["message"] else "**no**"
        else:
            same = "yes" if gv and gv["kind"] != "out_of_resources" else "**no**"
        rows.append(f"| {key} | {c.get('line', c.get('error', '-'))} | {_line(cv) if cv else 'not refused (not run on the CPU here)'} "
                    f"| {_line(gv) if gv else g.get('error', '-')} | {same} |")
    rows += ["", "CUDA detail of the refused launches (Triton's words):", ""]
    for key in (_key(*c) for c in CASES):
        gv = cuda.get(key, {}).get("verdict")
        if gv and gv["kind"] == "out_of_resources":
            rows.append(f"- {key}: {gv['detail'].splitlines()[-1]}")
    rows += ["", "## 2. TF32 dots on CUDA", "",
             "| kernel | dot precision read on CUDA (source) | verdict of one 64^3 case | `gpuemu fuzz --device cuda -n 20` |",
             "|---|---|---|---|"]
    for name, s in single.items():
        f = fuzz.get(name, {})
        fz = (f"{f.get('passed')}/{f.get('iterations')} passed, rc {f['rc']}, {f['seconds']} s"
              + (f"; first: {f['first_failure']} (dots {', '.join(f.get('first_failure_dots', []))})" if f.get("first_failure") else "")
              if f else "not run")
        rows.append(f"| {name} | {s['dot_precision']} ({', '.join(s['source'])}) | {_line(s['verdict'])} | {fz} |")
    rows += ["", "Verdict detail of the TF32 kernel's case:", "", "```",
             single.get("tf32_matmul", {}).get("verdict", {}).get("detail", ""), "```", ""]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="markdown table to write (raw JSON next to it)")
    ap.add_argument("--iterations", type=int, default=20, help="iterations of each CUDA fuzz (default 20)")
    ap.add_argument("--predict-cpu", metavar="JSON", help=argparse.SUPPRESS)
    ap.add_argument("--target", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.predict_cpu:
        predict_on_cpu(args.target, args.predict_cpu)
        return 0
    t_start = time.perf_counter()
    if not torch.cuda.is_available():
        print("no CUDA device: this probe compares the CPU prediction with a real GPU", file=sys.stderr)
        return 2
    from gpuemu.resources import cuda_target_name

    target = cuda_target_name()
    out = Path(args.out)
    tmp = out.with_suffix(".work")
    tmp.mkdir(parents=True, exist_ok=True)
    import importlib.util

    env = {"gpu": torch.cuda.get_device_name(), "target": target, "torch": torch.__version__,
           "triton": triton.__version__, "jsonschema": importlib.util.find_spec("jsonschema") is not None}
    # 1a. the CPU prediction, in a process that has no GPU and runs kernels on the interpreter
    cpu_json = tmp / "cpu.json"
    child_env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    cpu_proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--target", target,
                                 "--predict-cpu", str(cpu_json)], cwd=ROOT, env=child_env)
    # 2b. the CUDA fuzz runs (fresh processes) while this one judges on the GPU
    results: dict = {"env": env}
    try:
        cuda = on_cuda()
    except Exception as e:  # keep going: the table says what failed
        cuda = {"error": f"{type(e).__name__}: {e}"}
    results["cuda"] = cuda
    results["tf32_single"] = single = tf32_single()
    fuzz = {}
    for name in ("tf32_matmul", "tf32_matmul_drops_last_k"):
        if time.perf_counter() - t_start > 200:
            fuzz[name] = {"rc": None, "seconds": 0, "note": "skipped: the probe's 4-minute budget"}
            continue
        fuzz[name] = fuzz_cli(name, tmp, args.iterations)
    results["fuzz"] = fuzz
    try:
        cpu_proc.wait(timeout=max(10.0, 230 - (time.perf_counter() - t_start)))
        cpu = json.loads(cpu_json.read_text()) if cpu_json.is_file() else {}
    except subprocess.TimeoutExpired:
        cpu_proc.kill()
        cpu = json.loads(cpu_json.read_text()) if cpu_json.is_file() else {}
    results["cpu"] = cpu
    seconds = time.perf_counter() - t_start
    out.write_text(markdown(env, cpu, cuda, single, fuzz, seconds))
    out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str))
    print(f"wrote {out} and {out.with_suffix('.json')} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
