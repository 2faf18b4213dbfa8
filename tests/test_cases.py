import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuemu import cases, ops
from gpuemu.cases import Blocks, Case, generate, materialize


def _storage(t):
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()).clone()


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(ops.names()), seed=st.integers(0, 2**64 - 1), dtype=st.sampled_from(["fp32", "fp16", "bf16"]),
       strategy=st.sampled_from(cases.STRATEGIES))
def test_case_json_round_trip_and_determinism(op, seed, dtype, strategy):
    c = generate(op, seed, dtype=dtype, strategy=strategy, blocks=Blocks(unattributed={16, 64}))
    assert Case.from_dict(c.to_dict()) == c
    assert generate(op, seed, dtype=dtype, strategy=strategy, blocks=Blocks(unattributed={16, 64})) == c
    assert ops.get(op).check_dims(c.dims, c.kwargs) is None
    a, _ = materialize(c)
    b, _ = materialize(Case.from_dict(c.to_dict()))
    for k in a:
        if a[k] is None:
            assert b[k] is None
            continue
        assert a[k].shape == b[k].shape and a[k].stride() == b[k].stride()
        assert torch.equal(_storage(a[k]), _storage(b[k]))


def test_layouts_are_what_they_say():
    base = Case(op="matmul", dtype="fp32", dims={"M": 5, "N": 6, "K": 7}, seed=3, values="normal",
                value_params={"scale": 1.0})
    vals = {}
    for lay in ("contiguous", "transposed", "strided", "offset"):
        t, _ = materialize(base.replace(layouts={"a": lay, "b": "contiguous"}))
        a = t["a"]
        vals[lay] = a.clone()
        if lay == "contiguous":
            assert a.is_contiguous()
        if lay == "transposed":
            assert a.stride() == (1, 5)
        if lay == "strided":
            assert a.stride() == (14, 2)
        if lay == "offset":
            assert a.storage_offset() == cases.OFFSET and a.is_contiguous()
    # the logical values do not depend on the layout, so a layout-only failure isolates a stride bug
    for lay in vals:
        assert torch.equal(vals[lay], vals["contiguous"])


def test_gaps_and_guard_are_poisoned():
    c = Case(op="softmax", dtype="fp16", dims={"N": 5}, seed=1, batch=(3,), layouts={"x": "strided"})
    x = materialize(c)[0]["x"]
    full = torch.empty(0, dtype=torch.float16).set_(x.untyped_storage())
    assert full.isnan().sum() == full.numel() - 15  # 15 values, the rest is poison
    assert not x.isnan().any()


def test_values_are_rounded_f64_to_f32_to_dtype():
    c = Case(op="relu", dtype="bf16", dims={"N": 64}, seed=9, values="normal", value_params={"scale": 1.0})
    x = materialize(c)[0]["x"]
    assert x.dtype == torch.bfloat16


@pytest.mark.parametrize("dist", cases.DISTRIBUTIONS)
def test_distributions_stay_finite_and_in_range(dist):
    for op in ("softmax", "matmul", "layernorm", "sum", "swiglu"):
        spec = ops.get(op)
        for dt in ("fp32", "fp16", "bf16"):
            c = generate(op, 5, dtype=dt, strategy="fixed").replace(values=dist)
            c = cases.with_dims(c)
            t, _ = materialize(c)
            for a in spec.float_args():
                v = t[a.name]
                assert torch.isfinite(v).all(), (op, dt, dist)
            if dist == "zeros":
                assert (t[spec.args[0].name] == 0).all()


def test_ties_have_ties():
    c = Case(op="argmax", dtype="fp32", dims={"N": 50}, seed=2, values="ties", value_params={"levels": 5.0})
    x = materialize(c)[0]["x"]
    assert len(set(x.tolist())) <= 5


def test_spike_puts_one_spike_per_row():
    c = Case(op="softmax", dtype="fp32", dims={"N": 40}, seed=2, batch=(6,), values="spike",
             value_params={"scale": 1.0, "spike": 60.0})
    x = materialize(c)[0]["x"]
    assert ((x == 60.0).sum(-1) == 1).all()


def test_tile_edges_come_from_observed_blocks():
    b = Blocks(by_dim={"N": {64}})
    sizes = {generate("softmax", s, dtype="fp32", strategy="tile_edges", blocks=b).dims["N"] for s in range(60)}
    assert sizes <= {63, 65, 127, 129, 193}
    assert {63, 65, 129} <= sizes


def test_boundary_and_regular_shapes():
    reg = {generate("softmax", s, dtype="fp32", strategy="fixed").dims["N"] for s in range(5)}
    assert reg == {256}
    bnd = {generate("softmax", s, dtype="fp32", strategy="boundary_shapes").dims["N"] for s in range(80)}
    assert 1 in bnd and all(n in cases._BOUNDARY_SIZES for n in bnd)


def test_magnitude_limits_keep_correct_results_finite():
    spec = ops.get("matmul")
    lim = cases.magnitude_limit(spec, "fp16", {"M": 4, "N": 4, "K": 100})
    assert lim * lim * 100 * 4 <= 65504 * 1.001


def test_bad_case_records():
    with pytest.raises(TypeError):
        Case.from_dict({"schema_version": 99})
    with pytest.raises(TypeError):
        cases.canonical_dtype("fp8")
    assert cases.canonical_dtype("float16") == "fp16"
    assert math.isfinite(cases.magnitude_limit(ops.get("layernorm"), "bf16", {"N": 1000}))
