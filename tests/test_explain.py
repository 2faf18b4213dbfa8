"""The hint table and rules of gpuemu.explain, on pure-torch launchers with planted bugs."""

import torch

import gpuemu
from gpuemu import ops
from gpuemu.cases import DISTRIBUTIONS, generate, with_dims
from gpuemu.explain import INDEX_VALUE_HINTS, VALUE_HINTS, diagnose, value_hint
from gpuemu.engine.run import Runner as _Runner
from gpuemu.oracle import Oracle


def zero_padded_amax(x, block=32):
    """amax whose padding lanes (to a multiple of 32) hold 0, not -inf: right while some value is above 0."""
    pad = (-x.shape[-1]) % block
    return torch.nn.functional.pad(x, (0, pad), value=0.0).amax(-1)


def test_every_drawn_distribution_has_a_hint():
    # a distribution added to the generator without words here would get the bare fallback
    assert set(DISTRIBUTIONS) - {"normal"} <= set(VALUE_HINTS)
    assert set(INDEX_VALUE_HINTS) <= set(VALUE_HINTS)


def test_value_hint_reads_the_op_schema_not_its_name():
    assert value_hint(ops.get("argmax"), "zeros").startswith("tie-breaking suspected")
    assert value_hint(ops.get("softmax"), "zeros").startswith("fails only for all-zero inputs")
    assert value_hint(ops.get("amax"), "negative").startswith("max-type bug suspected")


def test_negative_values_hint_names_the_zero_filled_lane():
    spec = ops.get("amax")
    base = generate("amax", 7, dtype="fp32")
    case = with_dims(base.replace(values="negative", layouts={a.name: "contiguous" for a in spec.args}),
                     {"N": 200}, batch=(8,))
    run = _Runner(zero_padded_amax, Oracle.default(), "cpu", True)
    ev = run(case)
    assert ev.verdict.status == "fail"  # every row is below zero: the padded 0 wins
    hint = diagnose(run, case, ev.verdict, ev.launches)
    assert hint == VALUE_HINTS["negative"]
    assert "instead of -inf" in hint



def test_negative_hint_end_to_end_from_the_drawn_case():
    # shrunk to N=1, a normal row is all negative half the time: the drawn case gives the evidence
    r = gpuemu.fuzz(zero_padded_amax, op="amax", iterations=60, seed=1, save=False, dtypes="fp32")
    first = r.failures[0]
    assert first.case.values == "negative" and first.original is not None
    assert "max-type bug suspected" in (first.hint or "")
