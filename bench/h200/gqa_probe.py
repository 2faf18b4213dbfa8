"""Session L probe (bench/gpu_session_l.md): is the GQA family's correct kernel non-deterministic on CUDA with a
transposed k (session K: q [8, 16, 63, 17] fp16, k transposed, v offset, two calls differed at 61,076 elements)?

Runs the kernel 6 times per variant on the same inputs and prints, per variant, how many elements differ between
any two runs and the max abs error against the fp64 reference. Variants separate the causes: the layouts (k
transposed or contiguous, v offset or contiguous), num_stages / num_warps, and a form of the kernel that loads
k^T directly as a [BLOCK_D, BLOCK_N] tile instead of tl.trans of a [BLOCK_N, BLOCK_D] load.

    python bench/h200/gqa_probe.py            # on a GPU
"""
import math
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples/families"))
import gqa_attention as fam  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"  # (on the CPU with TRITON_INTERPRET=1: the probe's own check)


@triton.jit
def _kt_kernel(q_ptr, k_ptr, v_ptr, o_ptr, Hq, N, D, GROUP, sm_scale,
               sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, son, sod,
               CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    kvh = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_n0 = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < N) & (offs_d[None, :] < D), other=0.0)
    k_base = k_ptr + b * skb + kvh * skh
    v_base = v_ptr + b * svb + kvh * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, N) if CAUSAL else N
    for n0 in range(0, hi, BLOCK_N):
        offs_n = n0 + offs_n0
        kt = tl.load(k_base + offs_n[None, :] * skn + offs_d[:, None] * skd,
                     mask=(offs_n[None, :] < N) & (offs_d[:, None] < D), other=0.0)
        s = tl.dot(q, kt, input_precision="ieee") * sm_scale
        valid = offs_n[None, :] < N
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + offs_n[:, None] * svn + offs_d[None, :] * svd,
                    mask=(offs_n[:, None] < N) & (offs_d[None, :] < D), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < N) & (offs_d[None, :] < D))


def launch(kernel, q, k, v, causal, **meta):
    B, Hq, N, D = q.shape
    o = torch.empty((B, Hq, N, D), dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(N, fam.BLOCK_M), B * Hq)
    kernel[grid](q, k, v, o, Hq, N, D, Hq // k.shape[1], 1.0 / math.sqrt(D), *q.stride(), *k.stride(),
                 *v.stride(), *o.stride(), CAUSAL=bool(causal), BLOCK_M=fam.BLOCK_M, BLOCK_N=fam.BLOCK_N,
                 BLOCK_D=max(16, triton.next_power_of_2(D)), **meta)
    return o


def transposed(x):  # gpuemu's "transposed" layout: the last two dims swapped in memory
    return x.transpose(-1, -2).contiguous().transpose(-1, -2)


def offset(x, pad=7):
    flat = torch.empty(pad + x.numel() + 64, dtype=x.dtype, device=x.device)
    view = flat[pad:pad + x.numel()].view(x.shape)
    view.copy_(x)
    return view


def probe(name, kernel, q, k, v, causal, runs=6, ptx=None, **meta):
    if ptx:  # the compiled kernel's PTX, before any launch (a faulting launch leaves the context unusable)
        B, Hq, N, D = q.shape
        o = torch.empty((B, Hq, N, D), dtype=q.dtype, device=q.device)
        grid = (triton.cdiv(N, fam.BLOCK_M), B * Hq)
        ck = kernel.warmup(q, k, v, o, Hq, N, D, Hq // k.shape[1], 1.0 / math.sqrt(D), *q.stride(), *k.stride(),
                           *v.stride(), *o.stride(), CAUSAL=bool(causal), BLOCK_M=fam.BLOCK_M, BLOCK_N=fam.BLOCK_N,
                           BLOCK_D=max(16, triton.next_power_of_2(D)), grid=grid, **meta)
        Path(ptx).write_text(ck.asm["ptx"])
    try:
        outs = [launch(kernel, q, k, v, causal, **meta) for _ in range(runs)]
        if DEV == "cuda":
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a variant that does not launch is a line of the table
        print(f"{name:44s} raised {type(e).__name__}: {str(e)[:80]}")
        return
    bits = [o.view(torch.int16) if o.element_size() == 2 else o.view(torch.int32) for o in outs]
    differ = max(int((b != bits[0]).sum()) for b in bits[1:])
    truth = fam.reference(q.double(), k.double(), v.double(), causal)
    err = max(float((o.double() - truth).abs().nan_to_num(nan=float("inf")).max()) for o in outs)
    print(f"{name:44s} differ {differ:7d} / {outs[0].numel()}   max abs err {err:.3g}")


def strided(x):  # gpuemu's "strided" layout: every other element of a last dim twice as long
    big = torch.empty(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
    big[..., ::2] = x
    return big[..., ::2]


# name: (dtype, (B, Hq, Hkv, N, D, causal), k layout, v layout, kernel, launch options)
VARIANTS = {
    "base": ("fp16", (8, 16, 8, 63, 17, False), None, None, "K", {}),
    "kT": ("fp16", (8, 16, 8, 63, 17, False), transposed, None, "K", {}),
    "voff": ("fp16", (8, 16, 8, 63, 17, False), None, offset, "K", {}),
    "kT_vT": ("fp16", (8, 16, 8, 63, 17, False), transposed, transposed, "K", {}),
    "kT_ns1": ("fp16", (8, 16, 8, 63, 17, False), transposed, None, "K", {"num_stages": 1}),
    "kT_ns2": ("fp16", (8, 16, 8, 63, 17, False), transposed, None, "K", {"num_stages": 2}),
    "kT_w8": ("fp16", (8, 16, 8, 63, 17, False), transposed, None, "K", {"num_warps": 8}),
    "kT_causal": ("fp16", (8, 16, 8, 63, 17, True), transposed, None, "K", {}),
    "kT_fp32": ("fp32", (8, 16, 8, 63, 17, False), transposed, None, "K", {}),
    "kT_bf16": ("bf16", (8, 16, 8, 63, 17, False), transposed, None, "K", {}),
    "kT_D64": ("fp16", (2, 8, 2, 200, 64, False), transposed, None, "K", {}),
    "kT_D16": ("fp16", (2, 8, 2, 64, 16, False), transposed, None, "K", {}),
    "kT_small": ("fp16", (1, 1, 1, 63, 17, False), transposed, None, "K", {}),
    "kstrided": ("fp16", (8, 16, 8, 63, 17, False), strided, None, "K", {}),
    "kTload_kT": ("fp16", (8, 16, 8, 63, 17, False), transposed, None, "KT", {}),
    "kTload_base": ("fp16", (8, 16, 8, 63, 17, False), None, None, "KT", {}),
    "kTload_kT_D64": ("fp16", (2, 8, 2, 200, 64, False), transposed, None, "KT", {}),
    "kTload_kT_fp32": ("fp32", (8, 16, 8, 63, 17, False), transposed, None, "KT", {}),
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def run_variant(name, ptx_dir=None):
    dt, (B, Hq, Hkv, N, D, causal), kl, vl, which, meta = VARIANTS[name]
    torch.manual_seed(0)
    q = torch.randn(B, Hq, N, D, device=DEV).to(DTYPES[dt])
    k = torch.randn(B, Hkv, N, D, device=DEV).to(DTYPES[dt])
    v = torch.randn(B, Hkv, N, D, device=DEV).to(DTYPES[dt])
    k, v = kl(k) if kl else k, vl(v) if vl else v
    kernel = fam._gqa_attention_kernel if which == "K" else _kt_kernel
    ptx = f"{ptx_dir}/{name}.ptx" if ptx_dir and name in ("base", "kT", "kT_ns1", "kTload_kT") else None
    desc = f"{name} [{dt} B={B} Hq={Hq} Hkv={Hkv} N={N} D={D}{' causal' if causal else ''}]"
    probe(desc, kernel, q, k, v, causal, ptx=ptx, **meta)


def main():
    import os
    import subprocess

    if len(sys.argv) > 1:  # one variant, in its own process (an illegal address poisons the CUDA context)
        run_variant(sys.argv[1], os.environ.get("PTX_DIR"))
        return
    print(torch.cuda.get_device_name() if DEV == "cuda" else "cpu", torch.__version__, triton.__version__, flush=True)
    for name in VARIANTS:
        r = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True, timeout=120)
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
        print(lines[-1][:200] if r.returncode == 0 and lines else f"{name}: exit {r.returncode}: "
              + " / ".join(lines[-2:])[:200], flush=True)


if __name__ == "__main__":
    main()
