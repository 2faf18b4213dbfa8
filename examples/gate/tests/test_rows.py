"""The launchers of kernels/rows.py as pytest items (the gpuemu plugin loads through its pytest11 entry point)."""
import pytest

from kernels import rows

row_softmax = pytest.mark.gpuemu(op="softmax", dtypes=["fp32"])(rows.row_softmax)
row_softmax_tail = pytest.mark.gpuemu(op="softmax", dtypes=["fp32"])(rows.row_softmax_tail)
# its callers pass contiguous tensors: declared, no strided case is drawn
flat_add = pytest.mark.gpuemu(op="add", dtypes=["fp32"], requires={"contiguous": True})(rows.flat_add)


def test_softmax_in_a_test(gpuemu_fuzz):
    gpuemu_fuzz(rows.row_softmax, op="softmax", dtypes=["fp16"], iterations=5)
