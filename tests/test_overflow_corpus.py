"""Production sizes on the CPU (gpuemu.production, gpuemu.runtime.sparse, gpuemu.runtime.partial, gpuemu.sizes):
the overflow corpus pairs of examples/kernels/overflow (the int32 kernel is OVERFLOW with its line, the int64 one
passes), and the pieces: page-wise inputs, poison, sampled programs, restricted judging."""

import math
import time

import numpy as np
import pytest
import torch

from gpuemu import config
from gpuemu.corpus import load_manifest, resolve_target
from gpuemu.oracle import Oracle
from gpuemu.target import load

MANIFEST = "examples/kernels/overflow/manifest.yaml"
ENTRIES = load_manifest(MANIFEST)


@pytest.fixture(scope="module")
def oracle():
    return Oracle.from_settings(config.resolve())


def _case(entry, seed=1, dtype="fp16"):
    from gpuemu.cases import generate

    return generate(entry.op, seed, dtype=dtype, strategy=entry.strategy)


def test_the_manifest_pairs_every_family():
    assert {e.op for e in ENTRIES} == {"softmax", "matmul", "embedding", "attention"}
    for op in ("softmax", "matmul", "embedding", "attention"):
        pair = [e for e in ENTRIES if e.op == op]
        assert sorted(e.correct for e in pair) == [False, True]
        assert all(e.strategy.startswith("production:") for e in pair)
        assert all(e.bug == "int32 overflow" for e in pair if not e.correct)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_overflow_pair_at_production_size(oracle, entry):
    """The int32 kernel is OVERFLOW naming the wrapping product and its line; the int64 kernel passes, judged on
    what its sampled programs wrote. Every case is past 2^31 elements and stays within 60 s on the CPU."""
    case = _case(entry)
    biggest = max(math.prod(a.resolve(case.dims, case.batch)) for a in case.spec.args if a.is_tensor)
    assert biggest >= 2**31 or case.op == "embedding" and math.prod(case.shapes()["table"]) >= 2**32
    t0 = time.perf_counter()
    ev = oracle.evaluate(load(resolve_target(entry)), case)
    assert time.perf_counter() - t0 < 60
    v = ev.verdict
    if entry.correct:
        assert v.status == "pass", v.message
        assert "sampled programs wrote" in v.detail
    else:
        assert v.status == "overflow" and v.kind == "overflow", v.message
        assert "wraps int32 at" in v.message and "(line " in v.message and "use .to(tl.int64)" in v.message


def _softmax_i64():
    return load(resolve_target(next(e for e in ENTRIES if e.name == "softmax_i64")))


def test_a_wrong_value_in_a_sampled_row_fails_and_says_where(oracle):
    """The judge compares the rows the programs wrote against the fp64 reference of exactly those rows."""
    good = _softmax_i64()

    def corrupt(x):
        y = good(x)
        y[0, 5] = 0.5  # (a write through torch: the page is filled first, then changed)
        return y

    ev = oracle.evaluate(corrupt, _case(next(e for e in ENTRIES if e.name == "softmax_i64"), dtype="fp32"))
    assert ev.verdict.status == "fail" and ev.verdict.index[-1] == 5
    assert "written by the sampled programs" in ev.verdict.message


def test_a_row_left_half_written_fails_on_its_poison(oracle):
    from examples.kernels.overflow import rowwise

    def short(x):
        N = x.shape[-1]
        y = torch.empty_like(x)
        rowwise._softmax_rows[(x.shape[0],)](x, y, N - 7, x.stride(0), y.stride(0), BLOCK_N=4096, WIDE=True)
        return y  # (the last 7 columns of every row are never written)

    ev = oracle.evaluate(short, _case(next(e for e in ENTRIES if e.name == "softmax_i64"), dtype="fp32"))
    assert ev.verdict.status == "fail" and ev.verdict.kind == "nonfinite"


def test_a_launcher_that_writes_its_input_is_a_mutation(oracle):
    good = _softmax_i64()

    def writes_input(x):
        y = good(x)
        x[0, 3] = 1.0  # (row 0: a page the sampled programs read, which the check fills again and compares)
        return y

    ev = oracle.evaluate(writes_input, _case(next(e for e in ENTRIES if e.name == "softmax_i64"), dtype="fp32"))
    assert ev.verdict.status == "fail" and ev.verdict.kind == "mutation"


def test_page_values_are_the_same_whoever_touches_them_first():
    """A page's bytes depend on (case seed, argument, page) alone: filled in any order, the same tensor."""
    from gpuemu.production import make_inputs, read
    from gpuemu.sizes import production_case

    case = production_case("softmax", 3, dtype="bf16", preset="llama3-8b")
    a, b = make_inputs(case), make_inputs(case)
    try:
        xa, xb = a.tensors["x"], b.tensors["x"]
        rows = [0, 9000, xa.shape[0] - 1]
        first = [read(xa, [r]) for r in rows]
        last = [read(xb, [r]) for r in reversed(rows)][::-1]
        for u, w in zip(first, last):
            assert torch.equal(u.view(torch.int16), w.view(torch.int16))
        assert first[0].float().std() > 0.5  # normal values, not the mapping's zeros
        assert a.buffers["x"].committed() < 64 << 20  # (16 GiB reserved, a few pages committed)
    finally:
        a.close()
        b.close()


def test_sparse_buffers_poison_outputs_and_put_back_writes():
    from gpuemu.runtime import sparse

    owned = []
    with sparse.allocations(1 << 20, owned):
        y = torch.empty(1 << 30, dtype=torch.float16)  # 2 GiB: sparse
        z = torch.zeros(1 << 30, dtype=torch.float32)  # 4 GiB: sparse, zeros
        small = torch.empty(16)  # ordinary
    assert len(owned) == 2 and small.untyped_storage().data_ptr() not in (b.addr for b in owned)
    buf = owned[0]
    buf.ensure(0, 8)
    assert sparse.is_poison(y[:4]).all() and not sparse.is_poison(z[:4]).any()
    buf.keep()
    buf.touch(np.array([0]), 2, True)
    y[0] = 1.0
    buf.put_back()
    assert sparse.is_poison(y[:1]).all()
    assert sum(b.committed() for b in owned) <= 3 * sparse.PAGE
    for b in owned:
        b.close()


def test_partial_launches_sample_corners_neighbours_and_seeded_draws():
    from gpuemu.runtime.partial import partial, programs

    assert programs((1000, 1, 1)) is None  # (no plan: every program)
    with partial(seed=5) as plan:
        assert programs((64, 1, 1), plan) is None  # (few programs: all of them)
        chosen = programs((8253, 224, 1), plan)
        again = programs((8253, 224, 1), plan)
    assert chosen == again == sorted(chosen)
    for p in [(0, 0, 0), (8252, 0, 0), (0, 223, 0), (8252, 223, 0), (1, 0, 0), (8251, 0, 0), (0, 222, 0)]:
        assert p in chosen
    assert len(chosen) <= 16


@pytest.mark.parametrize("op", ["softmax", "matmul", "attention", "embedding", "rope", "layernorm", "cross_entropy",
                                "swiglu", "linear", "bmm", "cumsum", "argmax"])
def test_production_cases_are_past_2_31_and_valid(op):
    from gpuemu.sizes import presets, production_case

    for preset in sorted(presets()):
        c = production_case(op, 11, dtype="fp16", preset=preset)
        assert c.spec.check_dims(c.dims, c.kwargs) is None
        sizes = [math.prod(a.resolve(c.dims, c.batch)) for a in c.spec.args if a.is_tensor]
        if op == "bmm":
            sizes.append(c.dims["B"] * c.dims["M"] * c.dims["N"])  # (the output: the score matrix)
        assert max(sizes) >= 2**31, (preset, c.dims, c.batch)
        assert c.shape_kind == "production" and c.is_contiguous()


def test_the_cli_says_overflow_in_the_terminal_and_json_and_exits_1(tmp_path, capsys):
    import json

    from gpuemu.cli import main

    out = tmp_path / "r.json"
    rc = main(["fuzz", "examples/kernels/overflow/rowwise.py:softmax_i32", "--op", "softmax", "--sizes", "production",
               "--preset", "llama3-8b", "-n", "1", "--seed", "1", "--dtype", "fp32", "--json", str(out),
               "--store", str(tmp_path / "store"), "--target", "none"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "OVERFLOW seed=" in err and "row * stride_xm wraps int32" in err
    d = json.loads(out.read_text())
    assert d["failures"][0]["verdict"]["status"] == "overflow" and not d["ok"]
    rc = main(["fuzz", "examples/kernels/overflow/rowwise.py:softmax_i64", "--op", "softmax", "--sizes", "production",
               "--preset", "llama3-8b", "-n", "1", "--seed", "1", "--dtype", "fp32", "--store", str(tmp_path / "store"),
               "--target", "none"])
    assert rc == 0
