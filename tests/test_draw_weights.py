"""The default strategy's draws are weighted by the bug classes of an op's schema (never by a kernel's name):
one-signed rows for reductions, ties for index outputs, outer-dim views for structured arguments. Each claim is
checked on the draws, and on the corpus kernel of that class (caught within a few iterations at every seed)."""

from collections import Counter
from pathlib import Path

import pytest

import gpuemu
from gpuemu import cases, ops
from gpuemu.cases import Case, generate, materialize, parse_layout, stride_breaks
from gpuemu.target import load

KERNELS = Path(__file__).resolve().parent.parent / "examples" / "kernels"


def _values(op, n=600):
    return Counter(generate(op, s, dtype="fp32").values for s in range(n))


def test_negative_values_are_one_signed_below_zero():
    c = Case(op="amax", dtype="fp16", dims={"N": 300}, seed=3, batch=(4,), values="negative",
             value_params=cases.value_params("negative", ops.get("amax"), "fp16", {"N": 300}))
    x = materialize(c)[0]["x"]
    assert bool((x <= 0).all()) and bool(x.isfinite().all()) and float(x.min()) < -0.5


def test_reductions_draw_the_one_signed_rows_their_bug_classes_need():
    relu = _values("relu")  # elementwise: the base weights
    assert cases.value_weights(ops.get("relu")) == cases._VALUE_WEIGHTS
    for op in ("sum", "cumsum", "layernorm", "matmul"):  # additive: positive rows and a large common offset
        drawn = _values(op)
        assert drawn["positive"] + drawn["cancellation"] >= 0.27 * 600, (op, drawn)
    assert relu["positive"] + relu["cancellation"] <= 0.26 * 600, relu
    for op in ("amax", "argmax", "softmax", "cross_entropy"):  # max-type: rows entirely below zero
        drawn = _values(op)
        assert drawn["negative"] >= 0.09 * 600, (op, drawn)
    assert relu["negative"] <= 0.08 * 600, relu
    assert _values("attention")["negative"] <= 0.08 * 600  # its Nk is reduced by a softmax of q.k: no such class


def test_index_outputs_draw_ties_often():
    argmax = _values("argmax")
    assert argmax["ties"] + argmax["zeros"] >= 0.15 * 600, argmax
    amax = _values("amax")  # a float output of the same schema: ties decide nothing there
    assert amax["ties"] + amax["zeros"] <= 0.12 * 600, amax


def test_structured_arguments_get_views_that_break_an_outer_stride():
    # rope's x[B,N,H,D]: a KV-cache slice along N, or head-major storage, breaks stride(B) = N*stride(N)
    draws = [generate("rope", s, dtype="fp32") for s in range(400)]
    broken_b = [c for c in draws if any(b.startswith("stride(B)") for b in stride_breaks(
        c.shapes()["x"], cases.dim_names(ops.get("rope").args[0], c.batch), c.layouts["x"]))]
    assert len(broken_b) >= 0.05 * len(draws), len(broken_b)
    kinds = Counter(parse_layout(c.layouts["x"])[0] for c in draws)
    assert kinds["perm"] >= 0.03 * len(draws), kinds


# iterations within which each is caught at run seeds 1-3 (the weights before this were at 12/-/18, 17/18/28,
# 4/4/52: a miss and two late catches)
@pytest.mark.parametrize("name,op,within", [
    ("argmax.py:argmax_pad_zero", "argmax", 30),  # 0 in masked lanes wins only on an all-negative row
    ("argmax.py:argmax_last_tie", "argmax", 15),  # last index on ties
    ("layernorm.py:layernorm_naive_var", "layernorm", 10),  # E[x^2] - E[x]^2 under a large common offset
    ("precision.py:sum_low_precision_acc", "sum", 10),  # fp16 running total: one-signed rows
])
def test_the_corpus_kernel_of_each_class_is_caught_early_at_every_seed(name, op, within):
    fn = load(f"{KERNELS / name.split(':')[0]}:{name.split(':')[1]}")
    for seed in (1, 2, 3):
        r = gpuemu.fuzz(fn, op=op, iterations=within, seed=seed, save=False, max_failures=1, shrink_failures=False)
        assert r.first_failure_iteration is not None, (name, seed)
