"""Self-check of the kernel families in examples/families/ (dev aid, not part of gpuemu).

    TRITON_INTERPRET=1 python examples/families/_selfcheck.py [--plain] [family ...]

Kernels run under gpuemu's CPU runtime (gpuemu.runtime.activate(): Triton's interpreter with bounds-checked
memory and GPU bf16 semantics); --plain runs them under Triton's bare interpreter instead. The bare
interpreter of triton 3.8 cannot run a bf16 tl.dot (it multiplies the raw uint16 bit patterns), so under
--plain the bf16 cases of the dot-based families (moe_gemm, gqa_attention) fail by ~1e9.

For every family module:
  1. example call: both launchers on get_inputs() must pass
     torch.allclose(out, reference(*get_inputs()), atol=1e-2, rtol=1e-2) (every output, in the example dtype);
  2. correct launcher: a battery of odd sizes (1, 17, 100, 257, ...), non-contiguous views and fp32 / fp16 /
     bf16 inputs, compared with the reference evaluated in fp64 (floating inputs upcast): the normwise error
     max|out - ref| / max|ref| must stay within the dtype's rounding (fp32 1e-5, fp16 5e-3, bf16 3e-2);
  3. buggy launcher: the named trigger case must exceed that bound by far (or give NaN where ref is finite).
Prints one line per case and a summary table; exits non-zero on any failure.
"""
import importlib
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

torch.set_num_threads(2)
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parents[1]))    # this checkout's gpuemu, for its runtime

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
DTYPES = (F32, F16, BF16)
TOL = {F32: 1e-5, F16: 5e-3, BF16: 3e-2}
FAMILIES = ["int8_gemm", "fp8_gemm", "moe_gemm", "gqa_attention", "paged_decode", "add_rmsnorm",
            "rope_pos", "masked_softmax"]


def gen(seed):
    return torch.Generator().manual_seed(seed)


def up(a):
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.to(torch.float64)
    return a


def as_tuple(o):
    return tuple(o) if isinstance(o, (tuple, list)) else (o,)


def err(out, ref):
    """normwise error over all outputs; inf when NaN/inf appear where the reference is finite"""
    worst = 0.0
    for o, r in zip(as_tuple(out), as_tuple(ref)):
        o, r = o.to(torch.float64), r.to(torch.float64)
        fin = torch.isfinite(r)
        if not torch.equal(torch.isfinite(o), fin) or not torch.equal(torch.isnan(o), torch.isnan(r)):
            return math.inf
        if fin.any():
            d = (o[fin] - r[fin]).abs().max().item()
            worst = max(worst, d / max(r[fin].abs().max().item(), 1e-30))
    return worst


def allclose(out, ref):
    return all(torch.allclose(o, r, atol=1e-2, rtol=1e-2, equal_nan=True)
               for o, r in zip(as_tuple(out), as_tuple(ref)))


def strided(t, dim=-1):
    """the same values as t, seen through a step-2 slice of a buffer twice as wide along dim"""
    shape = list(t.shape)
    shape[dim] *= 2
    big = torch.zeros(shape, dtype=t.dtype)
    idx = [slice(None)] * t.dim()
    idx[dim] = slice(0, None, 2)
    big[tuple(idx)] = t
    return big[tuple(idx)]


def transposed(t, d0, d1):
    """the same values as t, stored with dims d0 and d1 swapped in memory"""
    return t.transpose(d0, d1).contiguous().transpose(d0, d1)


# ============================================================================ per-family cases
# each returns (correct_cases, trigger): correct_cases = [(label, dtype, args)], trigger = (label, dtype, args)

def int8_cases():
    def make(M, N, K, dt, seed, b_nk=False, a_strided=False, s_strided=False):
        g = gen(seed)
        a = torch.randint(-128, 128, (M, K), dtype=torch.int8, generator=g)
        if b_nk:
            b = torch.randint(-128, 128, (N, K), dtype=torch.int8, generator=g).t()
        else:
            b = torch.randint(-128, 128, (K, N), dtype=torch.int8, generator=g)
        if a_strided:
            a = strided(a)
        sa = (torch.rand(M, generator=g) * 0.02 + 0.001).to(dt)
        sb = (torch.rand(N, generator=g) * 0.02 + 0.001).to(dt)
        if s_strided:
            sa, sb = strided(sa), strided(sb)
        return [a, b, sa, sb]
    cases = []
    for dt in DTYPES:
        cases += [(f"M,N,K=1,1,1", dt, make(1, 1, 1, dt, 1)),
                  (f"M,N,K=17,33,100 B=[N,K].t()", dt, make(17, 33, 100, dt, 2, b_nk=True)),
                  (f"M,N,K=100,257,65 A step-2, scales step-2", dt,
                   make(100, 257, 65, dt, 3, a_strided=True, s_strided=True))]
    cases += [("M,N,K=64,64,1024 all -128", F32,
               [torch.full((64, 1024), -128, dtype=torch.int8), torch.full((1024, 64), -128, dtype=torch.int8),
                torch.full((64,), 1e-3), torch.full((64,), 1e-3)])]
    trig = ("K=100 (not a multiple of BLOCK_K=64), M=N=64", F32, make(64, 64, 100, F32, 4))
    return cases, trig


def fp8_cases():
    e4 = torch.float8_e4m3fn

    def make(M, N, K, dt, seed, per_row=True, b_nk=False, a_strided=False):
        g = gen(seed)
        a = (torch.randn(M, K, generator=g) * 4).to(e4)
        if b_nk:
            b = (torch.randn(N, K, generator=g) * 4).to(e4).t()
        else:
            b = (torch.randn(K, N, generator=g) * 4).to(e4)
        if a_strided:
            a = strided(a)
        if per_row:
            sa = (torch.rand(M, generator=g) * 0.05 + 0.01).to(dt)
            sb = (torch.rand(N, generator=g) * 0.05 + 0.01).to(dt)
        else:
            sa, sb = torch.tensor([0.03], dtype=dt), torch.tensor([0.02], dtype=dt)
        return [a, b, sa, sb]
    cases = []
    for dt in DTYPES:
        cases += [("M,N,K=1,1,1 per-tensor", dt, make(1, 1, 1, dt, 1, per_row=False)),
                  ("M,N,K=17,33,100 per-row, B=[N,K].t()", dt, make(17, 33, 100, dt, 2, b_nk=True)),
                  ("M,N,K=100,65,257 per-tensor, A step-2", dt, make(100, 65, 257, dt, 3, per_row=False,
                                                                    a_strided=True))]
    trig = ("B = w.t() with w [N,K] contiguous, M,N,K=64,96,128", F32, make(64, 96, 128, F32, 4, b_nk=True))
    return cases, trig


def moe_cases():
    def make(offsets, K, N, dt, seed, w_nk=False, x_strided=False):
        g = gen(seed)
        offsets = torch.tensor(offsets, dtype=torch.int32)
        T, E = int(offsets[-1]), len(offsets) - 1
        x = torch.randn(T, K, generator=g).to(dt)
        if w_nk:
            w = (torch.randn(E, N, K, generator=g) / K ** 0.5).to(dt).transpose(1, 2)
        else:
            w = (torch.randn(E, K, N, generator=g) / K ** 0.5).to(dt)
        if x_strided:
            x = strided(x)
        return [x, w, offsets]
    cases = []
    for dt in DTYPES:
        cases += [("T=1 E=1 K=1 N=1", dt, make([0, 1], 1, 1, dt, 1)),
                  ("T=17 E=3 (one empty expert) K=33 N=17, w=[E,N,K].transpose", dt,
                   make([0, 0, 12, 17], 33, 17, dt, 2, w_nk=True)),
                  ("T=100 E=4 offsets [0,60,70,90,100] K=100 N=65, x step-2", dt,
                   make([0, 60, 70, 90, 100], 100, 65, dt, 3, x_strided=True))]
    trig = ("T=100 E=4 offsets [0,60,70,90,100] (imbalanced) K=64 N=64", F32, make([0, 60, 70, 90, 100], 64, 64,
                                                                                   F32, 4))
    return cases, trig


def gqa_cases():
    def make(B, Hq, Hkv, N, D, causal, dt, seed, kv_token_major=False):
        g = gen(seed)
        q = torch.randn(B, Hq, N, D, generator=g).to(dt)
        k = torch.randn(B, Hkv, N, D, generator=g).to(dt)
        v = torch.randn(B, Hkv, N, D, generator=g).to(dt)
        if kv_token_major:   # k/v seen as views of a [B, N, Hkv, D] projection
            k, v = transposed(k, 1, 2), transposed(v, 1, 2)
        return [q, k, v, causal]
    cases = []
    for dt in DTYPES:
        cases += [("B,Hq,Hkv,N,D=1,1,1,1,16 causal", dt, make(1, 1, 1, 1, 16, True, dt, 1)),
                  ("B,Hq,Hkv,N,D=1,4,2,17,64 k/v token-major", dt, make(1, 4, 2, 17, 64, False, dt, 2, True)),
                  ("B,Hq,Hkv,N,D=1,4,1,200,40 causal", dt, make(1, 4, 1, 200, 40, True, dt, 3))]
    cases += [("B,Hq,Hkv,N,D=2,6,3,257,64 non-causal", F32, make(2, 6, 3, 257, 64, False, F32, 5))]
    trig = ("N=200 (two key blocks of 128), non-causal, B,Hq,Hkv,D=1,4,2,64", F32,
            make(1, 4, 2, 200, 64, False, F32, 4))
    return cases, trig


def paged_cases():
    def make(B, Hq, Hkv, D, page_size, max_pages, num_pages, seq_lens, dt, seed, strided_cache=False):
        g = gen(seed)
        q = torch.randn(B, Hq, D, generator=g).to(dt)
        kc = torch.randn(num_pages, page_size, Hkv, D, generator=g).to(dt)
        vc = torch.randn(num_pages, page_size, Hkv, D, generator=g).to(dt)
        if strided_cache:    # caches as the K and V halves of one [P, ps, 2*Hkv, D] buffer
            kv = torch.cat([kc, vc], dim=2)
            kc, vc = kv[:, :, :Hkv], kv[:, :, Hkv:]
        bt = torch.randint(0, num_pages, (B, max_pages), generator=g, dtype=torch.int32)
        return [q, kc, vc, bt, torch.tensor(seq_lens, dtype=torch.int32)]
    cases = []
    for dt in DTYPES:
        cases += [("B=1 Hq=Hkv=1 D=16 page 16, seq_len 1", dt, make(1, 1, 1, 16, 16, 1, 3, [1], dt, 1)),
                  ("B=3 Hq=4 Hkv=2 D=64 page 5 (non-pow2), seq_lens [17,1,40]", dt,
                   make(3, 4, 2, 64, 5, 8, 20, [17, 1, 40], dt, 2)),
                  ("B=2 Hq=6 Hkv=3 D=40 page 16, seq_lens [100,33], k/v halves of one buffer", dt,
                   make(2, 6, 3, 40, 16, 8, 12, [100, 33], dt, 3, strided_cache=True))]
    trig = ("seq_lens [100, 37, 5, 64] (partial last pages), B=4 Hq=8 Hkv=2 D=64 page 16", F32,
            make(4, 8, 2, 64, 16, 8, 40, [100, 37, 5, 64], F32, 4))
    return cases, trig


def rms_cases():
    def make(M, N, dt, seed, x_t=False, r_strided=False):
        g = gen(seed)
        x = torch.randn(M, N, generator=g).to(dt)
        r = torch.randn(M, N, generator=g).to(dt)
        w = (1.0 + 0.1 * torch.randn(N, generator=g)).to(dt)
        if x_t:
            x = transposed(x, 0, 1)
        if r_strided:
            r, w = strided(r), strided(w)
        return [x, r, w, 1e-6]
    cases = []
    for dt in DTYPES:
        cases += [("M,N=1,1", dt, make(1, 1, dt, 1)),
                  ("M,N=3,17 x column-major", dt, make(3, 17, dt, 2, x_t=True)),
                  ("M,N=5,100 residual/weight step-2", dt, make(5, 100, dt, 3, r_strided=True)),
                  ("M,N=2,1000", dt, make(2, 1000, dt, 4))]
    trig = ("N=257 (BLOCK_N=512), M=4", F32, make(4, 257, F32, 5))
    return cases, trig


def rope_cases():
    def make(B, N, H, D, max_pos, dt, seed, x_head_major=False, expanded=False, int32=False):
        g = gen(seed)
        x = torch.randn(B, N, H, D, generator=g).to(dt)
        if x_head_major:
            x = transposed(x, 1, 2)
        inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
        if expanded:
            pos = torch.arange(max_pos - N, max_pos).expand(B, N)
        else:
            pos = torch.randint(0, max_pos, (B, N), generator=g)
        if int32:
            pos = pos.to(torch.int32)
        return [x, ang.cos().to(dt), ang.sin().to(dt), pos]
    cases = []
    for dt in DTYPES:
        cases += [("B,N,H,D=1,1,1,2", dt, make(1, 1, 1, 2, 4, dt, 1)),
                  ("B,N,H,D=2,17,3,64 random pos int32, x head-major", dt, make(2, 17, 3, 64, 300, dt, 2, True,
                                                                               int32=True)),
                  ("B,N,H,D=3,5,7,80 expanded (stride-0) pos", dt, make(3, 5, 7, 80, 100, dt, 3, expanded=True))]
    trig = ("random position_ids per batch row, B,N,H,D=2,16,4,64", F32, make(2, 16, 4, 64, 256, F32, 4))
    return cases, trig


def softmax_cases():
    def make(B, H, Lq, L, dt, seed, kind, temp, x_t=False, scale=1.0):
        g = gen(seed)
        x = (torch.randn(B, H, Lq, L, generator=g) * scale).to(dt)
        if x_t:
            x = transposed(x, 2, 3)
        if kind == "bool-pad":
            lengths = torch.randint(1, L + 1, (B,), generator=g)
            mask = (torch.arange(L)[None, :] < lengths[:, None])[:, None, None, :]
        elif kind == "bool-causal":
            mask = torch.ones(Lq, L, dtype=torch.bool).tril(diagonal=L - Lq)[None, None]
        elif kind == "float-alibi":
            mask = (-0.5 * (torch.arange(L)[None, :] - torch.arange(Lq)[:, None]).abs().to(dt))[None, None]
            mask = mask.masked_fill(torch.arange(L)[None, None, None, :] > L - 2, float("-inf")) if L > 1 \
                else mask
        else:
            mask = torch.zeros(B, H, Lq, L, dtype=dt)
        return [x, mask, temp]
    cases = []
    for dt in DTYPES:
        cases += [("B,H,Lq,L=1,1,1,1 bool-pad", dt, make(1, 1, 1, 1, dt, 1, "bool-pad", 1.0)),
                  ("B,H,Lq,L=2,3,5,17 bool-causal T=0.3 x transposed", dt,
                   make(2, 3, 5, 17, dt, 2, "bool-causal", 0.3, x_t=True)),
                  ("B,H,Lq,L=1,2,4,100 float ALiBi + -inf T=2.0", dt, make(1, 2, 4, 100, dt, 3, "float-alibi", 2.0)),
                  ("B,H,Lq,L=2,1,3,257 bool-pad x*30", dt, make(2, 1, 3, 257, dt, 4, "bool-pad", 0.7, scale=30.0))]
    trig = ("x = 30 * randn, temperature 0.7 (logits up to ~130), B,H,Lq,L=1,2,4,100", F32,
            make(1, 2, 4, 100, F32, 5, "bool-pad", 0.7, scale=30.0))
    return cases, trig


CASES = {"int8_gemm": int8_cases, "fp8_gemm": fp8_cases, "moe_gemm": moe_cases, "gqa_attention": gqa_cases,
         "paged_decode": paged_cases, "add_rmsnorm": rms_cases, "rope_pos": rope_cases,
         "masked_softmax": softmax_cases}


def fp8_interpreter_probe():
    """What the interpreter does with float8_e4m3fn: load + .to(fp32) of all 256 bit patterns, an fp8 x fp8
    tl.dot, and (for information: fp8_gemm never does it) the fp32 -> e4m3fn downcast of 4096 values."""
    import triton
    import triton.language as tl

    @triton.jit
    def _cvt(x_ptr, o_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(o_ptr + offs, tl.load(x_ptr + offs).to(o_ptr.dtype.element_ty))

    @triton.jit
    def _dot(a_ptr, b_ptr, o_ptr, BLOCK: tl.constexpr):
        r = tl.arange(0, BLOCK)
        a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
        b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
        tl.store(o_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b, out_dtype=tl.float32))

    e4 = torch.float8_e4m3fn
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(e4)
    out = torch.empty(256)
    _cvt[(1,)](bits, out, BLOCK=256)
    want = bits.to(torch.float32)
    fin = ~want.isnan()
    finite_ok = torch.equal(out[fin], want[fin])
    nan_as = sorted({v for v in out[~fin].tolist()})
    a = (torch.randn(32, 32, generator=gen(0)) * 8).to(e4)
    b = (torch.randn(32, 32, generator=gen(1)) * 8).to(e4)
    o = torch.empty(32, 32)
    _dot[(1,)](a, b, o, BLOCK=32)
    ref = a.to(torch.float64) @ b.to(torch.float64)
    dot_err = ((o.double() - ref).abs().max() / ref.abs().max()).item()
    x = torch.randn(4096, generator=gen(2)) * 3
    q = torch.empty(4096, dtype=e4)
    _cvt[(1,)](x, q, BLOCK=4096)
    down_bad = int((q.view(torch.uint8) != x.to(e4).view(torch.uint8)).sum())
    print(f"fp8 probe: e4m3fn -> fp32 of the 254 finite bit patterns bit-exact: {finite_ok}; the NaN patterns "
          f"0x7f/0xff load as {nan_as} (NaN in torch); fp8 x fp8 tl.dot rel err vs fp64 {dot_err:.1e}; "
          f"fp32 -> e4m3fn downcast differs from torch on {down_bad}/4096 randn*3 values")
    return finite_ok and dot_err < 1e-6


def main(names):
    rows, ok_all = [], True
    if "fp8_gemm" in names:
        ok_all &= fp8_interpreter_probe()
    for name in names:
        mod = importlib.import_module(name)
        good, bad = getattr(mod, name), getattr(mod, name + "_buggy")
        t0 = time.time()
        ex = mod.get_inputs()
        ref = mod.reference(*ex)
        ac_good, ac_bad = allclose(good(*ex), ref), allclose(bad(*ex), ref)
        cases, (tlabel, tdt, targs) = CASES[name]()
        worst, fails = 0.0, []
        for label, dt, args in cases:
            e = err(good(*args), mod.reference(*[up(a) for a in args]))
            ok = e <= TOL[dt]
            worst = max(worst, e / TOL[dt])
            print(f"  {name:15s} correct {str(dt)[6:]:8s} {label:60s} err {e:.2e} {'ok' if ok else 'FAIL'}")
            if not ok:
                fails.append(label)
        tref = mod.reference(*[up(a) for a in targs])
        e_good = err(good(*targs), tref)
        e_bad = err(bad(*targs), tref)
        trig_ok = e_good <= TOL[tdt] and e_bad > 100 * TOL[tdt]
        ok = ac_good and ac_bad and not fails and trig_ok
        ok_all &= ok
        rows.append((name, ac_good, ac_bad, len(cases) - len(fails), len(cases), worst, tlabel, e_good, e_bad,
                     time.time() - t0, ok))
        print(f"{name}: example allclose correct={ac_good} buggy={ac_bad}; correct {len(cases) - len(fails)}/"
              f"{len(cases)} cases; trigger [{tlabel}] err correct {e_good:.2e} buggy {e_bad:.2e}; "
              f"{time.time() - t0:.1f}s")
    print()
    print(f"{'family':15s} | allclose ok/bug | correct cases (worst err/tol) | trigger | err correct | err buggy | ok")
    for r in rows:
        print(f"{r[0]:15s} | {str(r[1]):5s} / {str(r[2]):5s} | {r[3]:2d}/{r[4]:2d} ({r[5]:.2f}) | {r[6]} | "
              f"{r[7]:.2e} | {r[8]:.2e} | {'PASS' if r[10] else 'FAIL'}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--plain" in argv:
        argv.remove("--plain")
        print("Triton's bare interpreter")
    else:
        import gpuemu.runtime
        gpuemu.runtime.activate()
        print("gpuemu runtime active")
    sys.exit(main(argv or FAMILIES))
