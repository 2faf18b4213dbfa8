"""The CUDA arithmetic model (gpuemu.device_arith): which cases a GPU's FMA contraction leaves undetermined."""

import torch

from gpuemu import ops
from gpuemu.device_arith import SCALED_EXP2_RANGE, undetermined


def test_scaled_exp2_ops_are_undetermined_on_cuda_past_the_range():
    big = {"x": torch.tensor([1.0, 2.0 * SCALED_EXP2_RANGE])}
    why = undetermined("softmax", big, "cuda:0")
    assert why is not None and "2^24/log2(e)" in why
    assert undetermined("cross_entropy", {"logits": big["x"], "target": torch.tensor([0])}, torch.device("cuda"))


def test_determined_below_the_range_on_the_cpu_and_for_other_ops():
    near = {"x": torch.tensor([-0.99 * SCALED_EXP2_RANGE, 3.0])}
    assert undetermined("softmax", near, "cuda") is None
    big = {"x": torch.tensor([1e30])}
    assert undetermined("softmax", big, "cpu") is None  # the interpreter has no FMA: judged there
    assert undetermined("relu", big, "cuda") is None
    assert undetermined("softmax", {"x": torch.tensor([float("inf"), 1.0])}, "cuda") is None  # inf is not magnitude


# ---------------------------------------------------------------- accumulation past the calibrated length, FTZ


def test_accumulation_factor_grows_linearly_past_the_calibrated_length():
    from gpuemu.cases import dim_limits
    from gpuemu.device_arith import accumulation_factor

    softmax, matmul = ops.get("softmax"), ops.get("matmul")
    cap = dim_limits(softmax, "N")[1]
    assert accumulation_factor(softmax, {"N": cap}) == (1.0, "")
    factor, why = accumulation_factor(softmax, {"N": 8 * cap})
    assert factor == 8.0 and f"N={8 * cap}" in why
    k_cap = dim_limits(matmul, "K")[1]
    assert accumulation_factor(matmul, {"M": 10_000, "N": 10_000, "K": k_cap})[0] == 1.0  # tiled dims do not count
    assert accumulation_factor(matmul, {"M": 8, "N": 8, "K": 4 * k_cap})[0] == 4.0


def test_case_tolerance_scales_rtol_and_on_cuda_lets_subnormal_results_flush():
    from gpuemu.device_arith import case_tolerance
    from gpuemu.tolerance import Tolerance, bounds

    tol = Tolerance(1e-6, 1e-37, "pack")
    spec = ops.get("softmax")
    cpu = case_tolerance(tol, spec, {"N": 2200}, "cpu")
    assert cpu.rtol == 2e-6 and not cpu.flush_subnormals and "past the calibrated" in cpu.source
    cuda = case_tolerance(tol, spec, {"N": 10}, "cuda:0")
    assert cuda.rtol == 1e-6 and cuda.flush_subnormals and "flush" in cuda.source
    # exp's result 4.97e-40 (bf16, measured on the H200): the GPU wrote 0 -- allowed on CUDA only; a normal
    # result written as 0 stays far outside either bound
    ref = torch.tensor([4.97e-40], dtype=torch.float64)  # atol is dropped: every element is below it
    assert bounds(ref, ref, cpu, "bf16")[0] < 4.97e-40 <= bounds(ref, ref, cuda, "bf16")[0]
    normal = torch.tensor([1e-30], dtype=torch.float64)
    assert bounds(normal, normal, cuda, "bf16")[0] < 1e-30


def test_a_call_without_a_case_gets_the_tolerance_of_its_lengths():
    # the hook judges production calls through Oracle.compare with no Case: a 50k-class cross_entropy row is past
    # the calibrated length there too
    from gpuemu.device_arith import dims_from_inputs

    ce = ops.get("cross_entropy")
    x, t = torch.zeros(4, 50257), torch.zeros(4, dtype=torch.int64)
    assert dims_from_inputs(ce, {"logits": x, "target": t}) == {"N": 4, "C": 50257}
    from gpuemu.oracle import Oracle

    oracle = Oracle.default()
    base = oracle.tolerances.get("cross_entropy", "fp32")
    # a correct fp32 loss whose error is 20x the calibrated rtol's allowance passes at C=50257, fails at C=1000
    logits = torch.randn(4, 50257, generator=torch.Generator().manual_seed(0))
    target = torch.tensor([1, 2, 3, 4])
    for c, want in ((50257, "pass"), (1000, "fail")):
        x = logits[:, :c].contiguous()
        ref = torch.nn.functional.cross_entropy(x.double(), target, reduction="none")
        scale = 1 + x.double().abs().max(-1).values  # a generous stand-in: the op's scale is at least ~|lse|
        out = (ref + 20 * base.rtol * scale * ref.sign().clamp_min(1)).float()
        v = oracle.compare(ce, "fp32", {"logits": x, "target": target}, {}, out)
        assert v.status == want, (c, v.message)
    mm = ops.get("matmul")
    assert dims_from_inputs(mm, {"a": torch.zeros(3, 7), "b": torch.zeros(7, 5)}) == {"M": 3, "K": 7, "N": 5}
