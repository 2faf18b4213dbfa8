"""The lint's int32-index-product rule: an i32 product of a program id and a runtime argument that reaches an
address, read from the TTIR of a real compile (sm_90), with its source line; widened products are not flagged."""

import pytest
import torch

import gpuemu.runtime as rt
from gpuemu.lint.artifacts import ttir_int32_index_products
from gpuemu.lint.rules import RULES
from gpuemu.target import load


def _ttir(target, *args):
    rt.activate()
    try:
        with rt.compile_for("sm_90") as compiled:
            load(target)(*args)
    finally:
        rt.deactivate()
    if compiled[0].error:
        pytest.skip(f"no AOT compile here: {compiled[0].error}")
    return compiled[0].asm["ttir"]


def test_int32_row_offsets_are_flagged_with_their_line_and_int64_ones_are_not():
    x = torch.randn(8, 300)
    flagged = ttir_int32_index_products(_ttir("examples/kernels/overflow/rowwise.py:softmax_i32", x))
    assert flagged == ["rowwise.py:20: %row * %stride_xm", "rowwise.py:21: %row * %stride_ym"]
    assert ttir_int32_index_products(_ttir("examples/kernels/overflow/rowwise.py:softmax_i64", x)) == []


def test_a_product_of_constants_or_of_no_program_id_is_not_flagged():
    ttir = """
  tt.func public @k(%x_ptr: !tt.ptr<f32> loc(#loc), %n: i32 loc(#loc), %s: i32 loc(#loc)) {
    %c4_i32 = arith.constant 4 : i32 loc(#loc)
    %pid = tt.get_program_id x : i32 loc(#loc)
    %a = arith.muli %pid, %c4_i32 : i32 loc(#loc)
    %b = arith.muli %n, %s : i32 loc(#loc)
    %w = arith.extsi %pid : i32 to i64 loc(#loc)
    %c = arith.muli %w, %w : i64 loc(#loc)
    %p = tt.addptr %x_ptr, %a : !tt.ptr<f32>, i32 loc(#loc)
    %q = tt.addptr %x_ptr, %b : !tt.ptr<f32>, i32 loc(#loc)
    tt.return loc(#loc)
  } loc(#loc)
"""
    assert ttir_int32_index_products(ttir) == []
    assert RULES["int32-index-product"].level == "note"
