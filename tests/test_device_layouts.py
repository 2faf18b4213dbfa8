"""Layout fidelity on every device: a case keeps its strides, offset, NaN gaps and guard zone when it moves."""

from __future__ import annotations

import math

import pytest
import torch

from gpuemu.cases import GUARD, Case, _move_storage, materialize, to_device


def _strided_case(dtype="fp32"):
    return Case(op="softmax", dtype=dtype, dims={"N": 7}, seed=11, batch=(3,), layouts={"x": "strided"})


def test_a_moved_view_keeps_its_geometry_and_poison():
    inputs, _ = materialize(_strided_case())
    x = inputs["x"]
    moved = _move_storage(x, "cpu")  # the path a CUDA move takes, onto a fresh storage
    assert moved.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert moved.shape == x.shape and moved.stride() == x.stride() and moved.storage_offset() == x.storage_offset()
    assert not moved.is_contiguous()
    whole = torch.empty(0, dtype=x.dtype).set_(moved.untyped_storage())
    assert torch.equal(moved, x)
    assert whole.numel() == 3 * 14 + GUARD and bool(whole[1::2][:21].isnan().all())  # the gaps stay NaN
    assert bool(whole[-GUARD:].isnan().all())  # and so does the guard zone


def test_offset_and_transposed_layouts_survive_a_move():
    for layout in ("offset", "transposed"):
        case = Case(op="add", dtype="fp16", dims={"N": 5}, seed=3, batch=(4,), layouts={"x": layout, "y": "contiguous"})
        x = materialize(case)[0]["x"]
        moved = _move_storage(x, "cpu")
        assert (moved.stride(), moved.storage_offset()) == (x.stride(), x.storage_offset()) and torch.equal(moved, x)


def test_same_device_is_a_no_op():
    x = materialize(_strided_case())[0]["x"]
    assert to_device(x, "cpu") is x and to_device(None, "cpu") is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_materialize_keeps_strides_and_a_stride_assuming_kernel_is_caught():
    import gpuemu

    x = materialize(_strided_case(), "cuda")[0]["x"]
    assert x.is_cuda and not x.is_contiguous() and x.stride() == (14, 2)

    def reads_as_flat(x):  # walks a non-dense view as flat memory, as a kernel ignoring strides does
        flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage(), x.storage_offset(),
                                                                      x.shape, torch.empty(x.shape).stride())
        return torch.softmax(flat.float(), -1).to(x.dtype)

    r = gpuemu.fuzz(reads_as_flat, op="softmax", iterations=40, seed=1, save=False, device="cuda")
    assert not r.ok and (r.preconditions or r.failed)
    assert not math.isnan(float(r.iterations))


def test_the_eager_attention_control_builds_its_causal_mask_on_the_inputs_device():
    # on CUDA the framework rule ("within 2x of PyTorch eager's error") ran eager attention with a CPU mask, raised,
    # and rescued nothing: HF's own eager attention failed on the H200 (bf16, Nk=8900) where it passes on the CPU.
    # The meta device stands in for CUDA: a CPU mask on it raises the same way.
    from gpuemu import ops

    q, k, v = (torch.empty(1, 2, n, 16, device="meta") for n in (5, 9, 9))
    out = ops.get("attention").eager(q, k, v, causal=True)
    assert out.device.type == "meta" and tuple(out.shape) == (1, 2, 5, 16)
