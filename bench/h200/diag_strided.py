"""Why do paged_decode (fp32) and gqa_attention (fp16, bf16) fail on CUDA with non-contiguous inputs only, while the
same stored bytes pass on the CPU (GPU session F, bench/gpu_session_f.md)? Each stored case is rebuilt with its exact
layouts on the device, and the kernel is run as stored and in variants: each input made contiguous alone, all of them,
other num_warps / num_stages, three repeats (a race). The error is against the reference in fp64 on the CPU.

    python bench/h200/diag_strided.py [--device cuda] [--out DIR]

Prints one line per variant; with --out, the PTX of the stored and the all-contiguous launches of paged_decode.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpuemu.cases import _place, to_device  # noqa: E402
from gpuemu.store import decode_tensors  # noqa: E402
from gpuemu.target import load  # noqa: E402

RES = ROOT / "bench/h200/results_f/resf"
RECORDS = [("paged_decode", RES / "store-paged_decode", "0xbf00dfcca104b8b7"),
           ("gqa fp16", RES / "store-gqa-fp16", "0x9973d6e724e8a336"),
           ("gqa bf16", RES / "store-gqa-bf16", "0x9973d6e724e8a336")]


def _record(store: Path, seed: str) -> tuple[dict, dict]:
    path = next((store / "failures").glob(f"{seed}--*.json"))
    rec = json.loads(path.read_text())
    blob = (store / "snapshots" / (rec["snapshot"]["sha256"] + ".safetensors")).read_bytes()
    return rec, decode_tensors(blob)


def _err(got: torch.Tensor, ref: torch.Tensor) -> str:
    d = (got.detach().cpu().double() - ref).abs()
    if not torch.isfinite(d).all():
        return f"non-finite ({int((~torch.isfinite(d)).sum())} elements)"
    flat = int(d.argmax())
    at = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), d.shape))
    return f"max abs err {float(d.max()):.4g} at {at} (got {float(got.detach().cpu().double()[at]):.6g}, " \
           f"ref {float(ref[at]):.6g})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    dev = args.device
    for name, store, seed in RECORDS:
        rec, snap = _record(store, seed)
        case = rec["case"]
        bound = rec["bound"]
        fn = load(rec["target"])
        ref_fn = load(bound["reference"])
        order = [a["name"] for a in bound["schema"]["args"]]
        consts = {a["name"]: a.get("value") for a in bound["schema"]["args"] if a["kind"] == "const"}
        host = [snap[n] if n in snap else consts[n] for n in order]
        with torch.no_grad():
            ref = ref_fn(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in host])
        layouts = case["layouts"]
        print(f"== {name} {case['dtype']} dims {case['dims']} layouts {layouts} values {case['values']}", flush=True)
        print(f"   stored: {rec['line'][:160]}", flush=True)

        def placed(contiguous: set) -> list:
            out = []
            for n, t in zip(order, host):
                if not isinstance(t, torch.Tensor):
                    out.append(t)
                    continue
                lay = "contiguous" if n in contiguous else layouts.get(n, "contiguous")
                poison = 0 if not t.is_floating_point() else float("nan")
                out.append(to_device(_place(t.clone(), lay, poison), dev))
            return out

        tensors = [n for n, t in zip(order, host) if isinstance(t, torch.Tensor) and layouts.get(n, "contiguous")
                   != "contiguous"]
        variants = [("as stored", set())] + [(f"{n} contiguous", {n}) for n in tensors] + [("all contiguous",
                                                                                            set(order))]
        for label, cont in variants:
            for rep in range(3 if label == "as stored" else 1):
                ins = placed(cont)
                try:
                    got = fn(*ins)
                    if dev.startswith("cuda"):
                        torch.cuda.synchronize()
                    msg = _err(got, ref)
                except Exception as e:  # noqa: BLE001 - a diagnostic: say what happened and go on
                    msg = f"raised {type(e).__name__}: {str(e)[:200]}"
                print(f"   {label:<24} #{rep}: {msg}", flush=True)
        _variants_of_launch(name, fn, placed(set()), placed(set(order)), ref, dev, args.out)
    return 0


def _variants_of_launch(name: str, fn, stored: list, contiguous: list, ref, dev: str, out: str | None) -> None:
    """The kernel launched directly with other num_warps / num_stages, on the stored layouts."""
    import triton

    mod = sys.modules[fn.__module__]
    if name == "paged_decode":
        q, kc, vc, bt, sl = stored
        B, Hq, D = q.shape
        _, ps, Hkv, _ = kc.shape
        for warps in (1, 2, 4, 8):
            o = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
            try:
                ck = mod._paged_decode_kernel[(B, Hq)](
                    q, kc, vc, bt, sl, o, Hq, D, Hq // Hkv, ps, 1.0 / math.sqrt(D), *q.stride(), *kc.stride(),
                    *vc.stride(), *bt.stride(), sl.stride(0), *o.stride(), BLOCK_T=triton.next_power_of_2(ps),
                    BLOCK_D=triton.next_power_of_2(D), num_warps=warps)
                if dev.startswith("cuda"):
                    torch.cuda.synchronize()
                print(f"   num_warps={warps:<16}   : {_err(o, ref)}", flush=True)
                if out and dev.startswith("cuda") and warps == 4 and ck is not None:
                    Path(out).mkdir(parents=True, exist_ok=True)
                    Path(out, "paged_stored.ptx").write_text(ck.asm.get("ptx", ""))
                    Path(out, "paged_stored.ttgir").write_text(ck.asm.get("ttgir", ""))
            except Exception as e:  # noqa: BLE001
                print(f"   num_warps={warps:<16}   : raised {type(e).__name__}: {str(e)[:200]}", flush=True)
        if out and dev.startswith("cuda"):
            q, kc, vc, bt, sl = contiguous
            o = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
            ck = mod._paged_decode_kernel[(B, Hq)](
                q, kc, vc, bt, sl, o, Hq, D, Hq // Hkv, ps, 1.0 / math.sqrt(D), *q.stride(), *kc.stride(),
                *vc.stride(), *bt.stride(), sl.stride(0), *o.stride(), BLOCK_T=triton.next_power_of_2(ps),
                BLOCK_D=triton.next_power_of_2(D))
            Path(out, "paged_contiguous.ptx").write_text(ck.asm.get("ptx", ""))
            Path(out, "paged_contiguous.ttgir").write_text(ck.asm.get("ttgir", ""))
    else:
        q, k, v, causal = stored
        B, Hq, N, D = q.shape
        for warps, stages in ((4, 1), (4, 2), (4, 3), (8, 1), (8, 3)):
            o = torch.empty((B, Hq, N, D), dtype=q.dtype, device=q.device)
            try:
                ck = mod._gqa_attention_kernel[(triton.cdiv(N, mod.BLOCK_M), B * Hq)](
                    q, k, v, o, Hq, N, D, Hq // k.shape[1], 1.0 / math.sqrt(D), *q.stride(), *k.stride(),
                    *v.stride(), *o.stride(), CAUSAL=bool(causal), BLOCK_M=mod.BLOCK_M, BLOCK_N=mod.BLOCK_N,
                    BLOCK_D=max(16, triton.next_power_of_2(D)), num_warps=warps, num_stages=stages)
                if dev.startswith("cuda"):
                    torch.cuda.synchronize()
                shared = getattr(getattr(ck, "metadata", None), "shared", None)
                print(f"   num_warps={warps} num_stages={stages:<5}: {_err(o, ref)} (shared {shared})", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"   num_warps={warps} num_stages={stages:<5}: raised {type(e).__name__}: {str(e)[:160]}",
                      flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
