"""On CUDA the dot precision of a launch is read from the CompiledKernel that JITFunction.run returns (its
TTIR), and the oracle judges it in TF32 units exactly as it judges the CPU runtime's report.

No GPU here: a real ``triton.compile(..., target=GPUTarget("cuda", 90, 32))`` gives the TTIR, and an
interceptor stands in for the GPU launch by returning that compiled kernel from ``run``."""

from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl

from gpuemu.cases import Case, materialize
from gpuemu.oracle import FAIL, PASS, Oracle
from gpuemu.runners import dots, run_launcher
from gpuemu.runners.launches import add_interceptor, observe_launches, remove_interceptor
from gpuemu.runtime import aot

F32 = "tensor<16x16xf32> * tensor<16x16xf32> -> tensor<16x16xf32>"
F16 = "tensor<16x16xf16> * tensor<16x16xf16> -> tensor<16x16xf32>"


def test_ttir_dots_are_read_with_their_operand_types_and_precision():
    ttir = (f"%c = tt.dot %a, %b, %z, inputPrecision = tf32x3 : {F32} loc(#loc1)\n"
            f"%d = tt.dot %a, %b, %c : {F32}\n"
            f"%e = tt.dot %h, %h, %d, inputPrecision = tf32 : {F16}\n")
    assert dots.dot_ops(ttir) == [("f32", "tf32x3"), ("f32", None), ("f16", "tf32")]
    # an attribute left out is the op's default, which changed between Triton versions
    assert dots.precision_from_ttir(ttir, elided="tf32") == "tf32x3+tf32+fp16"
    assert dots.precision_from_ttir(ttir, elided="ieee") == "tf32x3+ieee+fp16"
    assert dots.precision_from_ttir("tt.func @k() { tt.return }", elided="tf32") is None


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, P: tl.constexpr):
    om = tl.arange(0, 16)
    ok = tl.arange(0, 64)
    a = tl.load(a_ptr + om[:, None] * sam + ok[None, :] * sak, mask=(om[:, None] < M) & (ok[None, :] < K), other=0.0)
    b = tl.load(b_ptr + ok[:, None] * sbk + om[None, :] * sbn, mask=(ok[:, None] < K) & (om[None, :] < N), other=0.0)
    if P == 0:
        c = tl.dot(a, b)  # the default: TF32 on sm_80+
    elif P == 1:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b, input_precision="tf32x3")
    tl.store(c_ptr + om[:, None] * scm + om[None, :] * scn, c, mask=(om[:, None] < M) & (om[None, :] < N))


def _args(M=16, N=16, K=64):
    a, b, c = torch.zeros(M, K), torch.zeros(K, N), torch.zeros(M, N)
    return (a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride())


_COMPILED: dict = {}


def _compiled_for_sm90(P: int):
    """The real sm_90 compile of ``_mm`` (Triton's TTIR of this installed version)."""
    if P not in _COMPILED:
        cl = aot.compile_launch(_mm, _args(), {"P": P}, aot.parse_target("sm_90"), cache=True)
        assert cl.error is None, cl.error
        _COMPILED[P] = SimpleNamespace(asm=cl.asm, metadata=cl.metadata, hash=f"test-{P}")
    return _COMPILED[P]


@pytest.mark.parametrize("P, expected", [(0, "tf32"), (1, "ieee"), (2, "tf32x3")])
def test_real_sm90_compile_gives_the_precision_the_kernel_asked_for(P, expected):
    compiled = _compiled_for_sm90(P)
    assert compiled.metadata["default_dot_input_precision"] == "tf32"
    assert dots.compiled_dot_precision(compiled) == expected
    assert dots.elided_precision() in ("tf32", "ieee")


def _gpu_standin(P: int):
    """An interceptor that plays the GPU: it computes what a TF32 (or fp32) tensor core gives, writes it to
    the output and returns the CompiledKernel, as JITFunction.run does on CUDA."""
    from gpuemu.runtime.numerics import tf32

    def intercept(kernel, args, kwargs, grid, warmup, call_next):
        a, b, c = args[0], args[1], args[2]
        if P == 0:
            a = torch.from_numpy(tf32(a.numpy().astype("float32")))
            b = torch.from_numpy(tf32(b.numpy().astype("float32")))
        c.copy_((a.double() @ b.double()).float())
        return _compiled_for_sm90(P)

    intercept.wants = lambda kernel, args: getattr(getattr(kernel, "fn", None), "__name__", "") == "_mm"
    return intercept


def gpu_mm(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype)
    _mm[(1,)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), P=0)
    return c


@pytest.fixture
def on_cuda(monkeypatch):
    import gpuemu.runners as runners

    monkeypatch.setattr(runners, "_sync", lambda device: None)
    added = []

    def use(P):
        f = _gpu_standin(P)
        add_interceptor(f)
        added.append(f)

    yield use
    for f in added:
        remove_interceptor(f)


def test_launch_record_carries_the_compiled_kernels_precision(on_cuda):
    on_cuda(0)
    a, b = torch.randn(16, 64), torch.randn(64, 16)
    with observe_launches() as seen:
        gpu_mm(a, b)
    [lch] = seen
    assert lch.kernel == "_mm"
    assert lch.options["dot_precision"] == "tf32"
    assert lch.options["dot_precision_source"] == "compiled kernel (TTIR)"


def test_oracle_judges_a_cuda_tf32_launch_in_tf32_units_and_says_so(on_cuda):
    on_cuda(0)
    case = Case(op="matmul", dtype="fp32", dims={"M": 16, "N": 16, "K": 64}, seed=4)
    inputs, _ = materialize(case)
    o = Oracle.default()
    v = o.evaluate(gpu_mm, case, device="cuda", inputs=inputs).verdict
    assert v.status == PASS, v.message
    assert "dot precision: tf32 (read from the compiled kernel (TTIR); judged as on the CPU runtime)" in v.detail
    # the same TF32 output judged at the fp32 tolerance fails: the TF32 units are what lets it pass
    run = run_launcher(gpu_mm, [inputs["a"], inputs["b"]], {}, device="cuda")
    strict = o.compare(case.spec, "fp32", inputs, {}, run.output, tol=o.tolerances.get("matmul", "fp32"))
    assert strict.status == FAIL


def test_a_kernel_wrong_by_more_than_tf32_allows_is_still_caught_on_cuda(on_cuda):
    on_cuda(0)

    def off_by_a_bit(a, b):  # drops the last K column: an accumulator bug, far beyond TF32 rounding
        return gpu_mm(a[:, :-1], b[:-1])

    case = Case(op="matmul", dtype="fp32", dims={"M": 16, "N": 16, "K": 64}, seed=4)
    inputs, _ = materialize(case)
    v = Oracle.default().evaluate(off_by_a_bit, case, device="cuda", inputs=inputs).verdict
    assert v.status == FAIL and "dot precision: tf32" in v.detail


def test_an_ieee_kernel_on_cuda_keeps_the_fp32_tolerance(on_cuda):
    on_cuda(1)  # the stand-in GPU computes in full precision and the TTIR says ieee

    def tf32_result_from_an_ieee_kernel(a, b):  # a TF32 result is then too far off for an ieee kernel
        from gpuemu.runtime.numerics import tf32

        gpu_mm(a, b)
        return (torch.from_numpy(tf32(a.numpy())).double() @ torch.from_numpy(tf32(b.numpy())).double()).float()

    case = Case(op="matmul", dtype="fp32", dims={"M": 16, "N": 16, "K": 64}, seed=4)
    inputs, _ = materialize(case)
    v = Oracle.default().evaluate(tf32_result_from_an_ieee_kernel, case, device="cuda", inputs=inputs).verdict
    assert v.status == FAIL and "dot precision: ieee" in v.detail
