"""View layouts that real callers make (row-padded, KV-cache and fused-projection slices, head-major storage) and
rows of several blocks: how they are built, drawn, described, shrunk, and the corpus kernels only they catch."""

import math
from pathlib import Path

import pytest
import torch

import gpuemu
from gpuemu import cases
from gpuemu.cases import Case, dim_names, layout_note, materialize, parse_layout, stride_breaks, view_geometry
from gpuemu.errors import InvalidArgument
from gpuemu.target import load

KERNELS = Path(__file__).resolve().parent.parent / "examples" / "kernels"


def _rope(layout, **dims):
    d = dict({"B": 2, "N": 5, "H": 3, "D": 8}, **dims)
    return Case(op="rope", dtype="fp32", dims=d, seed=7, layouts={"x": layout, "cos": "contiguous", "sin": "contiguous"})


def test_parse_layout_reads_views_and_names_the_way_out():
    assert parse_layout("padded:N+13@5") == ("padded", {"dim": "N", "extra": 13, "start": 5})
    assert parse_layout("padded:D/2+3") == ("padded", {"dim": "D/2", "extra": 3, "start": 0})
    assert parse_layout("perm:0213") == ("perm", {"order": (0, 2, 1, 3)})
    assert parse_layout("strided") == ("strided", {})
    for bad in ("padded:N+0", "padded:N+3@4", "padded:+3", "perm:0013", "perm:x", "diagonal"):
        with pytest.raises(InvalidArgument, match="layout"):
            parse_layout(bad)


@pytest.mark.parametrize("layout", ["padded:N+7", "padded:H+6@3", "padded:D+16@8", "perm:0213"])
def test_a_view_holds_the_same_values_with_its_own_strides_and_nan_gaps(layout):
    case = _rope(layout)
    x = materialize(case)[0]["x"]
    flat = materialize(case.replace(layouts={"x": "contiguous", "cos": "contiguous", "sin": "contiguous"}))[0]["x"]
    assert torch.equal(x, flat)  # same seed, same logical values: only the geometry differs
    names = dim_names(case.spec.args[0], case.batch)
    assert (tuple(x.stride()), x.storage_offset()) == view_geometry(tuple(x.shape), names, layout)
    storage = torch.empty(0).set_(x.untyped_storage(), 0, (x.untyped_storage().nbytes() // 4,), (1,))
    used = torch.zeros(storage.numel(), dtype=torch.bool)
    idx = torch.as_strided(torch.arange(storage.numel()), x.shape, x.stride(), x.storage_offset())
    used[idx.reshape(-1)] = True
    assert storage[~used].isnan().all()  # every gap and the guard zone after the view reads NaN
    assert (~used[-cases.GUARD:]).all()


def test_stride_breaks_name_the_dim_whose_stride_a_kernel_must_not_assume():
    names = ("B", "N", "H", "D")
    # a KV-cache slice cache[:, :5] of a [2, 12, 3, 8] buffer: only B's stride breaks the from-the-sizes rule
    assert stride_breaks((2, 5, 3, 8), names, "padded:N+7") == ["stride(B) = 288, not N*stride(N) = 120"]
    # a head slice of a fused qkv projection: N's stride is 3*H*D
    assert stride_breaks((2, 5, 3, 8), names, "padded:H+6@3") == ["stride(N) = 72, not H*stride(H) = 24"]
    assert stride_breaks((2, 5, 3, 8), names, "contiguous") == []
    note = layout_note(_rope("padded:N+7"), "x")
    assert note == "x padded:N+7 (x[B,N,H,D]: stride(B) = 288, not N*stride(N) = 120)"
    row = Case(op="softmax", dtype="fp32", dims={"N": 200}, seed=1, batch=(6,), layouts={"x": "padded:N+100"})
    assert layout_note(row, "x") == "x padded:N+100 (x[...,N]: stride(dim 0) = 300, not N*stride(N) = 200)"


def test_view_cases_round_trip_and_survive_shrinking_dims():
    case = _rope("padded:D+16@8")
    assert Case.from_dict(case.to_dict()) == case
    small = cases.with_dims(case, {"D": 2, "N": 1})
    assert materialize(small)[0]["x"].shape == (2, 1, 3, 2)


def _draws(op, n=300, **kw):
    return [cases.generate(op, seed, dtype="fp32", **kw) for seed in range(n)]


def test_views_are_drawn_often_for_every_kind_of_argument():
    rows = _draws("add")
    padded = [c for c in rows if any(v.startswith("padded:N+") for v in c.layouts.values())]
    assert len(padded) >= 0.2 * len(rows)
    ropes = _draws("rope")
    x_layouts = {c.layouts["x"].split("+")[0] for c in ropes}
    assert {"padded:N", "padded:H", "padded:D", "perm:0213"} <= x_layouts
    logits = {c.layouts["logits"].split("+")[0] for c in _draws("cross_entropy")}
    assert "padded:C" in logits  # a vocab-padded logits buffer sliced back
    attn = {c.layouts["k"].split("+")[0] for c in _draws("attention")}
    assert {"padded:Nk", "padded:H", "perm:0213"} <= attn  # a KV cache, head-major <-> token-major
    assert all(c.is_contiguous() for c in _draws("rope", 40, strategy="fixed"))


def test_long_rows_are_few_short_and_far_past_the_caps():
    for op, dim, cap in (("cross_entropy", "C", 65536), ("softmax", "N", 65536), ("rmsnorm", "N", 16384),
                         ("matmul", "K", 16384)):
        draws = _draws(op, 400)
        long = [c for c in draws if c.shape_kind == "long_row"]
        assert 4 <= len(long) <= 50, (op, len(long))
        hi = cases.dim_limits(cases.ops.get(op), dim)[1]
        for c in long:
            assert 2 * hi < c.dims[dim] <= cap
            rows = math.prod(c.batch) * (c.dims["N"] if op == "cross_entropy" else 1)
            assert rows <= 2
            others = [v for d, v in c.dims.items() if d != dim and c.spec.dims[d] != "batch"]
            assert all(v <= 16 for v in others)
        assert any(c.values == "large_spread" for c in long)  # past a max-free exp's overflow


def test_real_sizes_are_few_and_reach_a_1024_gemm_and_2048_tokens():
    for op, want in (("matmul", {"M", "N", "K"}), ("bmm", {"M", "N", "K"}), ("linear", {"N", "K"}),
                     ("attention", {"Nq", "Nk"})):
        spec = cases.ops.get(op)
        real = [c for c in _draws(op, 400) if c.shape_kind == "real_size"]
        assert 8 <= len(real) <= 50, (op, len(real))
        for c in real:
            for d in want:
                lo, hi = spec.real_sizes[d]
                assert lo <= c.dims[d] <= hi
            assert all(c.dims[d] == 1 for d, role in spec.dims.items() if role == "batch")
            assert c.spec.check_dims(c.dims, c.kwargs) is None
        assert max(max(c.dims[d] for d in want) for c in real) >= 1024
        if op == "attention":
            assert {c.dims["D"] for c in real} == {64, 128}
            assert max(c.dims["Nk"] for c in real) > 1500
        if op == "linear":
            assert all(len(c.batch) == 1 and 257 <= c.batch[0] <= 1100 for c in real)
    # with a block seen on a dim, half the real-size draws sit on a multiple of it or one off
    blocks = cases.Blocks(by_dim={"M": {64}, "N": {64}, "K": {32}})
    real = [c for c in (cases.generate("matmul", s, dtype="fp32", blocks=blocks) for s in range(400))
            if c.shape_kind == "real_size"]
    edges = [c for c in real if c.dims["M"] % 64 in (0, 1, 63)]
    assert len(edges) >= len(real) // 4
    assert not any(c.shape_kind == "real_size" for c in _draws("matmul", 200, long_rows=False))
    assert not any(c.shape_kind == "real_size" for c in _draws("softmax", 200))  # rows have their long-row cases


def test_shrinking_keeps_only_the_view_the_failure_needs_and_the_hint_names_the_dim():
    from gpuemu import config
    from gpuemu.engine.classify import layout_precondition as _layout_precondition
    from gpuemu.engine.run import Runner as _Runner
    from gpuemu.oracle import PRECONDITION
    from gpuemu.shrink import shrink
    from gpuemu.oracle import Oracle

    fn = load(f"{KERNELS / 'rope_tokens.py'}:rope_tokens_batch_stride")
    run = _Runner(fn, Oracle.from_settings(config.resolve()), "cpu", False)
    case = _rope("perm:0213", N=4, D=6).replace(layouts={"x": "perm:0213", "cos": "padded:D/2+3", "sin": "contiguous"})
    ev = run(case)
    assert ev.verdict.status == "fail"
    small, _, _ = shrink(run, case, ev.verdict, cases.Blocks(), 24)
    # cos's view is dropped; x's permutation becomes the one slice that still fails: a KV-cache slice
    assert small.layouts == {"x": "padded:N+1", "cos": "contiguous", "sin": "contiguous"}
    verdict = _layout_precondition(run, small, run(small).verdict, attribute=True)
    assert verdict.status == PRECONDITION
    assert "x padded:N+1 (x[B,N,H,D]: stride(B) = " in verdict.message and "not N*stride(N)" in verdict.message


def test_the_correct_twins_accept_every_view():
    from gpuemu import config
    from gpuemu.oracle import Oracle

    oracle = Oracle.from_settings(config.resolve())
    for target, op, layouts in (("rope_tokens.py:rope_tokens", "rope", {"x": "perm:0213", "cos": "padded:D/2+3"}),
                                ("rope_tokens.py:rope_tokens", "rope", {"x": "padded:N+9@4", "sin": "padded:D/2+1"}),
                                ("add_rows.py:add_rows", "add", {"x": "padded:N+5", "y": "padded:N+64@64"})):
        fn = load(f"{KERNELS / target.split(':')[0]}:{target.split(':')[1]}")
        for seed in range(2):
            case = cases.generate(op, seed, dtype="fp32", strategy="random_shapes")
            case = case.replace(layouts=dict(case.layouts, **layouts))
            if op == "add":
                case = cases.with_dims(case, batch=(3,))
            v = oracle.evaluate(fn, case, device="cpu").verdict
            assert v.status == "pass", (case.describe(), v.message)


def test_bf16_stays_tested_after_a_bf16_case_was_refused():
    # the launcher refuses strided bf16 input before it launches: that case says nothing against bf16 on the
    # runtime, so the bf16 bug of the normalise launch must still be found after it
    from gpuemu import config
    from gpuemu.oracle import Oracle
    from gpuemu.rng import derive_seed
    from gpuemu.runners import bf16_unfaithful

    fn = load(f"{KERNELS / 'softmax_bf16_path.py'}:softmax_bf16_path_unlooped")
    raising = cases.generate("softmax", derive_seed(2, 0), dtype="bf16")
    ev = Oracle.from_settings(config.resolve()).evaluate(fn, raising, device="cpu")
    assert (ev.verdict.status, ev.verdict.kind, len(ev.launches)) == ("rejected", "refusal", 0)
    assert not bf16_unfaithful("bf16", ev.launches)

    seen = []
    r = gpuemu.fuzz(fn, op="softmax", iterations=30, seed=2, save=False, shrink_failures=False, dtypes="bf16",
                    on_case=lambda i, c, v: seen.append((i, v.kind)))
    assert "bf16" not in r.skipped and r.iterations == 30
    assert seen[0] == (0, "refusal")
    assert any(k in ("mismatch", "nonfinite") for i, k in seen[1:]), seen


def test_a_long_row_the_gpu_refuses_to_launch_is_skipped_once_not_failed():
    # one block per row: past some size a GPU refuses the launch; that is the launcher's design limit, so the run
    # stops drawing long rows (and says so) instead of failing a kernel that is right at every size it launches
    from gpuemu.resources import LaunchRefused, Refusal

    calls = []

    def softmax_one_block(x):
        calls.append(x.shape[-1])
        if x.shape[-1] > 4096:
            raise LaunchRefused([Refusal("_softmax", "sm_90", "shared memory", 4 * x.shape[-1] * 64, 232448)],
                                predicted=True)
        return torch.softmax(x.double(), -1).to(x.dtype)

    r = gpuemu.fuzz(softmax_one_block, op="softmax", iterations=80, seed=2, save=False)
    assert r.ok and r.iterations == 80, r.report()
    assert "long rows" in r.skipped and "refused" in r.skipped["long rows"]
    assert sum(n > 4096 for n in calls) == 1  # one refused case, then no more long rows
