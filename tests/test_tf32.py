"""fp32 tl.dot defaults to TF32 on sm_80+ GPUs and on gpuemu's runtime: the oracle judges such a kernel with
the fp32 tolerance in TF32 units, and says which precision it saw."""

import torch
import triton
import triton.language as tl

import gpuemu
from gpuemu.cases import Case
from gpuemu.oracle import Oracle


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    om = pm * BM + tl.arange(0, BM)
    on = pn * BN + tl.arange(0, BN)
    ok = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + ok
        a = tl.load(a_ptr + om[:, None] * sam + kk[None, :] * sak, mask=(om[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + on[None, :] * sbn, mask=(kk[:, None] < K) & (on[None, :] < N), other=0.0)
        acc += tl.dot(a, b)  # default input precision: TF32 for fp32 inputs
    tl.store(c_ptr + om[:, None] * scm + on[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(om[:, None] < M) & (on[None, :] < N))


def tf32_matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype)
    _mm[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                                   b.stride(1), c.stride(0), c.stride(1), BM=32, BN=32, BK=32)
    return c


def test_tf32_kernel_is_judged_in_tf32_units_and_says_so():
    case = Case(op="matmul", dtype="fp32", dims={"M": 33, "N": 40, "K": 70}, seed=4)
    v = Oracle.default().evaluate(tf32_matmul, case).verdict
    assert v.status == "pass", v.message
    r = gpuemu.fuzz(tf32_matmul, op="matmul", iterations=12, seed=1, dtypes="fp32", save=False)
    assert r.ok, r.report()


def test_tf32_error_is_real_and_beyond_the_ieee_tolerance():
    case = Case(op="matmul", dtype="fp32", dims={"M": 64, "N": 64, "K": 64}, seed=4)
    o = Oracle.default()
    ieee = o.tolerances.get("matmul", "fp32")
    from gpuemu.cases import materialize

    from gpuemu.oracle import dot_precision
    from gpuemu.runners import run_launcher

    inputs, _ = materialize(case)
    run = run_launcher(tf32_matmul, [inputs["a"], inputs["b"]], {})  # on gpuemu's runtime, as the fuzzer runs it
    assert "tf32" in (dot_precision(run.launches) or "")
    v = o.compare(case.spec, "fp32", inputs, {}, run.output, tol=ieee)
    assert v.status == "fail"  # TF32 rounding is far above fp32's: judged in fp32 units it would fail
