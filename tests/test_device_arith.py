"""The CUDA arithmetic model (gpuemu.device_arith): which cases a GPU's FMA contraction leaves undetermined."""

import torch

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
