"""gpuemu.runtime: numerics, memory checking, findings, settings, reports and the runner integration."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from gpuemu.errors import KernelFinding, InvalidArgument
from tests.kernels_runtime import gaps as G


# ---------------------------------------------------------------------- bf16 conversions
def test_bf16_from_f32_matches_torch_round_to_nearest_even():
    from gpuemu.runtime import bf16

    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[~np.isnan(x)]
    ours = bf16.from_f32(x)
    theirs = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(ours, theirs)
    assert np.array_equal(bf16.to_f32(ours), torch.from_numpy(theirs.view(np.int16)).view(torch.bfloat16).float().numpy())


def test_bf16_from_f64_rounds_once():
    from gpuemu.runtime import bf16

    # 1 + 2^-8 is a tie between 1 and 1+2^-7: ties to even (1.0); a hair above rounds up. Double rounding
    # through fp32 (1 + 2^-8 + 2^-40 -> 1 + 2^-8) would wrongly round the second down.
    x = np.array([1.0 + 2**-8, 1.0 + 2**-8 + 2**-40, -(1.0 + 2**-8 + 2**-40), 3.4e38, np.inf, np.nan])
    out = bf16.from_f64(x)
    assert out[0] == 0x3F80 and out[1] == 0x3F81 and out[2] == 0xBF81
    assert out[3] == 0x7F80 and out[4] == 0x7F80 and (out[5] & 0x7F80) == 0x7F80 and (out[5] & 0x7F)


def test_fp32_erf_is_the_interpreters_bit_for_bit():
    """numerics.erf_f32 (whole-array) against Triton's interpreter (math.erf per value, rounded to fp32): every
    fp32 bit pattern class -- random bits (NaNs with payloads, infinities, subnormals), +-0, a dense sweep of
    [-6, 6] where the rounding midpoints are -- gives the same bits."""
    import math

    from gpuemu.runtime.numerics import erf_f32

    triton_erf = np.vectorize(math.erf, otypes=[np.float32])
    rng = np.random.default_rng(5)
    with np.errstate(all="ignore"):
        for x in (rng.integers(0, 2**32, size=300_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                  np.array([0.0, -0.0, 1e-45, -1e-45, 1e-38, np.inf, -np.inf, np.nan, 3.9, -3.9], dtype=np.float32),
                  np.linspace(-6, 6, 400_001, dtype=np.float32).reshape(400_001, 1)):
            ours, theirs = erf_f32(x), triton_erf(x)
            assert ours.shape == theirs.shape and ours.dtype == np.float32
            assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_tf32_truncates_low_mantissa_bits():
    from gpuemu.runtime.numerics import tf32

    x = np.array([1.0 + 2**-10, 1.0 + 2**-11 + 2**-12, -3.0, np.nan, np.inf], dtype=np.float32)
    out = tf32(x)
    assert out[0] == np.float32(1.0 + 2**-10) and out[1] == 1.0 and out[2] == -3.0
    assert np.isnan(out[3]) and np.isinf(out[4])


# ---------------------------------------------------------------------- numerics in kernels
def test_fp32_dot_precision_setting_and_report(rt):
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    c = torch.empty(32, 32)
    with rt.observe() as reports:
        G.dot_kernel[(1,)](a, b, c, N=32, IEEE=False)
    tf32_err = float((c.double() - a.double() @ b.double()).abs().max())
    assert reports[0].dot_precision == "tf32" and tf32_err > 1e-3
    with rt.observe() as reports:
        G.dot_kernel[(1,)](a, b, c, N=32, IEEE=True)
    assert reports[0].dot_precision == "ieee" and float((c.double() - a.double() @ b.double()).abs().max()) < 1e-4
    rt.configure(dot_precision="ieee")
    with rt.observe() as reports:
        G.dot_kernel[(1,)](a, b, c, N=32, IEEE=False)
    assert reports[0].dot_precision == "ieee" and float((c.double() - a.double() @ b.double()).abs().max()) < 1e-4


def test_bad_dot_precision_is_a_usage_error():
    from gpuemu import runtime

    with pytest.raises(InvalidArgument, match="dot_precision"):
        runtime.configure(dot_precision="fast")


def test_bf16_sum_rounds_partial_sums_like_the_gpu(rt):
    # 1 + 64 * 2^-9: each partial sum of the tree stays exact in fp32 and is rounded to bf16 as on the GPU;
    # a single final rounding would give a different value
    x = torch.full((1, 128), 2.0**-9).bfloat16()
    x[0, 0] = 1.0
    y = torch.empty(1, dtype=torch.bfloat16)
    G.bf16_rowsum_kernel[(1,)](x, y, N=128)
    assert y.float().item() == pytest.approx(float(torch.tensor(1.0 + 127 * 2.0**-9).bfloat16()), abs=2**-7)


def test_heuristics_kernel_runs(rt):
    x = torch.randn(37)
    y = torch.empty(37)
    G.heuristic_kernel[(1,)](x, y, 37)
    assert torch.allclose(y, x - x.max())


def test_correct_autotuned_kernel_reports_chosen_config(rt):
    x = torch.randn(3, 100)
    y = torch.empty(3)
    with rt.observe() as reports:
        G.autotuned_rowsum_kernel[(3,)](x, y, 100)
    assert torch.allclose(y, x.sum(-1), atol=1e-5)
    auto = reports[0].autotune
    assert auto["configs_run"] == 3 and auto["agree"] and auto["chosen"]["BLOCK"] in (16, 32, 64)
    assert reports[0].launch_options()["autotune_config"].startswith("BLOCK=")


# ---------------------------------------------------------------------- memory
def test_reading_outside_a_view_but_inside_its_storage_is_out_of_bounds(rt):
    base = torch.randn(200)
    x = base[50:100]  # the storage continues on both sides of the view
    y = torch.empty(64)
    with pytest.raises(KernelFinding) as e:
        G.buggy_tail_load_kernel[(1,)](x, y, 50, BLOCK=64)
    assert e.value.kind == "oob" and "element offset 50" in e.value.message and "valid element offsets 0..49" in e.value.message
    assert e.value.details["argument"] == "x_ptr" and e.value.details["lane"] == (50,)


def test_masked_lanes_are_not_checked(rt):
    x = torch.randn(65)
    y = torch.empty(65)
    G.copy_kernel[(2,)](x, y, 65, BLOCK=64)  # lanes 65..127 of program 1 are masked off
    assert torch.equal(x, y)


def test_strided_views_and_aliases_work(rt):
    base = torch.randn(40)
    x = base[::2]  # a step-2 view: extent covers the gaps
    y = torch.empty(20)
    G.copy_kernel[(1,)](x.contiguous(), y, 20, BLOCK=32)
    assert torch.equal(y, x)
    z = torch.randn(30)
    G.copy_kernel[(1,)](z, z, 30, BLOCK=32)  # the same tensor twice: one memory, two windows


def test_arena_rejects_unknown_and_misaligned_pointers():
    from gpuemu.runtime.memory import Arena, MemoryError_

    t = torch.zeros(8)
    arena = Arena()
    ptr = arena.add(t, "t")
    with pytest.raises(MemoryError_, match="does not point into any tensor"):
        arena.translate(np.array([12345], dtype=np.uint64), None, 4, "read")
    with pytest.raises(MemoryError_, match="misaligned"):
        arena.translate(np.array([ptr + 2], dtype=np.uint64), None, 4, "read")
    real = arena.translate(np.array([ptr, ptr + 28], dtype=np.uint64), None, 4, "read")
    assert int(real[1]) - int(real[0]) == 28 and int(real[0]) == t.data_ptr()


def test_the_arena_keeps_only_what_is_written_and_puts_shared_bytes_back_as_they_were():
    """Arena.keep_writes (copy on first write): a region only read is never copied; after writes through two
    arguments over the same bytes (the second kept after the first wrote), put_back returns every byte to its
    value at keep_writes, and so does a write Triton's own path makes (keep_all)."""
    from gpuemu.runtime.memory import Arena

    base = torch.arange(16, dtype=torch.float32)
    src = torch.arange(100, 108, dtype=torch.float32)
    before = base.clone()
    arena = Arena()
    pa, pb, ps = arena.add(base[0:12], "a"), arena.add(base[4:16], "b"), arena.add(src, "s")
    arena.keep_writes()
    every = np.ones(4, dtype=bool)
    lanes = np.arange(4, dtype=np.uint64) * np.uint64(4)
    got = arena.gather(np.uint64(ps) + lanes, every, None, np.dtype(np.float32))
    assert got.tolist() == [100.0, 101.0, 102.0, 103.0] and not arena.saved  # a read keeps nothing
    assert arena.scatter(np.uint64(pa + 16) + lanes, np.full(4, -1.0, dtype=np.float32), every)  # a: 4..7
    assert arena.scatter(np.uint64(pb) + lanes, np.full(4, -2.0, dtype=np.float32), every)  # b: 4..7 again
    assert list(arena.saved) == [1, 2] and torch.equal(base[4:8], torch.full((4,), -2.0))
    arena.put_back()
    assert torch.equal(base, before)
    base[0] = 7.0  # (a write the arena did not see, after put_back: not its business)
    arena.keep_all()  # before a write of Triton's own: the one region not kept yet is kept now
    assert list(arena.saved) == [1, 2, 3]
    src.zero_()
    arena.put_back()
    assert torch.equal(src, torch.arange(100, 108, dtype=torch.float32)) and base[0] == 0.0


def test_a_pointer_block_leaving_its_tensor_is_not_gathered_but_left_to_the_lane_by_lane_path():
    """Arena.gather / scatter (numpy over the argument's bytes) take a pointer block only where every active
    lane is in bounds of one argument and aligned; anything else (before the view, past it, misaligned) is
    left to translate(), which reports it."""
    from gpuemu.runtime.memory import Arena

    base = torch.arange(16, dtype=torch.float32)
    view = base[4:12]  # the storage continues on both sides
    arena = Arena()
    p = arena.add(view, "v")
    f32, every = np.dtype(np.float32), np.ones(2, dtype=bool)

    def at(*offsets):
        return np.array([p + o for o in offsets], dtype=np.uint64)

    assert arena.gather(at(0, 28), every, None, f32).tolist() == [4.0, 11.0]
    assert arena.gather(at(-4, 0), every, None, f32) is None  # one element before the view
    assert arena.gather(at(0, 32), every, None, f32) is None  # one past its end
    assert arena.gather(at(0, 2), every, None, f32) is None  # misaligned
    assert arena.gather(at(-4, 4), np.array([False, True]), None, f32).tolist() == [0.0, 5.0]  # masked: unchecked
    assert not arena.scatter(at(28, 30), np.zeros(2, dtype=np.float32), every)  # a misaligned store
    assert arena.scatter(at(0, 28), np.array([-1.0, -2.0], dtype=np.float32), every)
    assert base.tolist()[3:13] == [3.0, -1.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, -2.0, 12.0]


def test_arguments_bind_as_inspect_binds_them():
    """executor._Signature.bind (a launch's arguments by parameter, defaults applied) gives inspect's answer,
    in parameter order, and inspect's error for a call that does not bind; keywords the kernel does not take
    (num_warps, ...) are left out."""
    import inspect

    from gpuemu.runtime.executor import _Signature

    def k(x_ptr, y_ptr, n, stride=7, BLOCK: tl.constexpr = 16):
        pass

    def inspected(args, kwargs):
        b = inspect.signature(k).bind(*args, **{n: v for n, v in kwargs.items() if n != "num_warps"})
        b.apply_defaults()
        return dict(b.arguments)

    sig = _Signature(k)
    for args, kwargs in [((1, 2, 3), {}), ((1, 2), {"n": 3}), ((1, 2, 3, 4), {"BLOCK": 32, "num_warps": 4}),
                         ((1,), {"n": 3, "y_ptr": 2}), ((), {"stride": 1, "x_ptr": 1, "y_ptr": 2, "n": 3}),
                         ((1, 2, 3, 4, 64), {})]:
        got, want = sig.bind(args, kwargs), inspected(args, kwargs)
        assert got == want and list(got) == list(want), (args, kwargs)
    for args, kwargs in [((1, 2), {}), ((1, 2, 3), {"n": 4}), ((1, 2, 3, 4, 5, 6), {})]:
        with pytest.raises(TypeError) as ours:
            sig.bind(args, kwargs)
        with pytest.raises(TypeError) as theirs:
            inspected(args, kwargs)
        assert str(ours.value) == str(theirs.value)


def test_a_repeated_launch_binds_as_a_new_one():
    """executor._bind_launch keeps what a launch's scalars, constexprs and grid bind to for later launches with
    the same ones (converting only their tensors): every such launch gets exactly the arguments a first launch
    gets (pointers, scalar bits, constexprs, grid), and another value, sign of zero, type or default binds anew."""
    from gpuemu.runtime import executor
    from gpuemu.runtime.executor import Arena, Settings, _bind_launch

    def k(x_ptr, y_ptr, n, scale, flag, BLOCK: tl.constexpr = 16):
        pass

    def described(kargs):
        return {p: (str(v.type), v.handle.data.tobytes()) if isinstance(v, tl.tensor) else v for p, v in kargs.items()}

    settings = Settings()
    x, y = torch.randn(8), torch.randn(3, 5)[:, 1:]
    calls = [((x, y, 8, 0.5, True), {}), ((x, y, 8, 0.0, True), {}), ((x, y, 8, -0.0, True), {}),
             ((x, y, 8, 0.5, 1), {}), ((x,), {"y_ptr": y, "n": 9, "scale": 0.5, "flag": False, "num_warps": 4}),
             ((x, y, 8, 0.5, True, 64), {}), ((y, x, 8, 0.5, True), {})]
    fresh = []
    for args, kwargs in calls:
        executor._bound.clear()
        fresh.append(described(_bind_launch(k, args, kwargs, (2,), settings, Arena())[1]))
    for _ in range(2):  # the first round keeps every launch's binding, the second finds it
        for (args, kwargs), want in zip(calls, fresh):
            bound, kargs = _bind_launch(k, args, kwargs, (2,), settings, Arena())
            assert described(kargs) == want and bound.grid3 == (2, 1, 1), (args, kwargs)
    zero, minus = (described(_bind_launch(k, (x, y, 8, z, True), {}, (2,), settings, Arena())[1])["scale"][1]
                   for z in (0.0, -0.0))
    assert zero != minus
    k.__defaults__ = (32,)  # a default changed between launches: bound anew
    assert _bind_launch(k, (x, y, 8, 0.5, True), {}, (2,), settings, Arena())[1]["BLOCK"] == 32
    kept = [b for b in executor._bound.values() if b.signature.fn is k]
    assert kept and all(not v.handle.data.flags.writeable for b in kept for v in b.kargs.values()
                        if isinstance(v, tl.tensor))


def test_distinct_shows_tiles_of_a_batched_store_and_never_a_repeated_element():
    """memory._distinct (a batched store may scatter with numpy only where no two lanes write one element):
    strictly increasing lanes, and programs' tiles in any order, are shown distinct; a repeat never is."""
    from gpuemu.runtime.memory import _distinct

    every = np.ones((3, 4), dtype=bool)
    assert _distinct(np.arange(12), every, True)
    tiles = np.array([8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7])  # program 0 writes the last tile
    assert _distinct(tiles, every, True)
    assert not _distinct(np.array([0, 1, 2, 3, 0, 1, 2, 3, 8, 9, 10, 11]), every, True)  # two programs, one tile
    assert not _distinct(np.array([4, 5, 6, 7, 0, 1, 1, 3, 8, 9, 10, 11]), every, True)  # a repeat inside one
    assert not _distinct(np.array([4, 5, 6, 7, 0, 1, 2, 5, 8, 9, 10, 11]), every, True)  # spans overlapping
    some = every.copy()
    some[1, 2:] = False  # program 1 has two active lanes, program 2 none
    some[2] = False
    assert _distinct(np.array([8, 9, 10, 11, 0, 1]), some, False)
    assert not _distinct(np.array([8, 9, 10, 11, 1, 9]), some, False)
    assert _distinct(np.array([3, 2, 1]), np.ones(3, dtype=bool), True) is False  # one program, not increasing


def test_distinct_marked_shows_interleaved_tiles_and_never_a_repeated_element():
    """memory._distinct_marked: exact for indices in any order (the tiles of a 2-D grid interleave in memory,
    which _distinct cannot show); a repeat anywhere is never shown distinct; a table much larger than the
    indices is not built (not shown)."""
    from gpuemu.runtime.memory import _distinct, _distinct_marked

    # a 4x4 output in 2x2 tiles, programs (0,0) (0,1) (1,0) (1,1): each tile's rows interleave with the next's
    tiles = np.array([0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15])
    assert _distinct_marked(tiles, 16)
    assert not _distinct(tiles, np.ones((4, 4), dtype=bool), True)
    for i in range(16):
        repeated = tiles.copy()
        repeated[i] = tiles[(i + 5) % 16]
        assert not _distinct_marked(repeated, 16)
    assert not _distinct_marked(np.arange(4), 1 << 20)  # would need a table of 2**20 flags for 4 indices
    assert _distinct_marked(np.array([7]), 1 << 20)


def test_interleaved_tiles_of_a_2d_grid_store_with_numpy_and_equal_one_program_at_a_time(rt, monkeypatch):
    """The stores of a tiled matmul (grid 2 x 3, tiles interleaving in the output) take the numpy scatter,
    not Triton's lane by lane store, and the result is the sequential runtime's bit for bit."""
    from gpuemu.runtime import memory
    from tests.kernels_runtime import gaps

    a, b = torch.randn(40, 24), torch.randn(24, 48)
    outs = {}
    for grid in ("sequential", "batched"):
        rt.configure(grid=grid)
        c = torch.full((40, 48), float("nan"))
        gaps.tiled_matmul[(2, 3)](a, b, c, 40, 48, 24, BM=32, BN=16, BK=8)
        outs[grid] = c
    assert torch.equal(outs["sequential"].view(torch.int32), outs["batched"].view(torch.int32))
    lane_by_lane = []
    native_store = memory.Arena.scatter

    def scatter(self, addr, value, mask):
        ok = native_store(self, addr, value, mask)
        lane_by_lane.append(not ok)
        return ok

    monkeypatch.setattr(memory.Arena, "scatter", scatter)
    rt.configure(grid="batched")
    gaps.tiled_matmul[(2, 3)](a, b, torch.empty(40, 48), 40, 48, 24, BM=32, BN=16, BK=8)
    assert lane_by_lane == [False]


# ---------------------------------------------------------------------- findings and errors
def test_endless_loop_is_a_timeout_finding_not_a_hang(rt):
    rt.configure(timeout_s=0.5)
    x = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(KernelFinding) as e:
        G.endless_kernel[(1,)](x, 5)
    assert e.value.kind == "timeout" and "endless_kernel" in e.value.message and "gaps.py:" in e.value.message


def test_python_error_inside_a_kernel_names_the_line(rt):
    from gpuemu.runtime import KernelError

    x = torch.randn(10)
    y = torch.empty(10)
    with pytest.raises(KernelError, match=r"copy_kernel at gaps.py:\d+"):
        G.copy_kernel[(1,)](x, y, 10, BLOCK=12)  # arange needs a power of two


def test_oracle_turns_an_oob_finding_into_a_fail_verdict():
    from gpuemu.cases import generate
    from gpuemu.oracle import Oracle

    seen = []

    def launcher(x):
        y = torch.empty_like(x)
        n = x.numel()
        seen.append(n)
        G.buggy_tail_load_kernel[(triton.cdiv(n, 64),)](x.contiguous(), y, n, BLOCK=64)
        return y

    oracle = Oracle.default()
    for seed in range(20):
        ev = oracle.evaluate(launcher, generate("gelu", seed, dtype="fp32"), check_determinism=False)
        if seen[-1] % 64:
            break
    assert seen[-1] % 64, "no case with a partial tail block in 20 seeds"
    assert ev.verdict.status == "fail" and ev.verdict.kind == "oob"
    assert "out-of-bounds read of 'x_ptr'" in ev.verdict.message
    assert "buggy_tail_load_kernel at gaps.py:" in ev.verdict.message


# ---------------------------------------------------------------------- activation and the runner
def test_activate_is_idempotent_and_reversible():
    from gpuemu import runtime
    from gpuemu.runners import launches

    assert not runtime.active()
    runtime.activate()
    runtime.activate()
    assert runtime.active() and launches._interceptors.count(runtime._intercept) == 1
    runtime.deactivate()
    runtime.deactivate()
    assert not runtime.active() and runtime._intercept not in launches._interceptors


def test_run_launcher_uses_the_runtime_on_cpu_and_reports_it():
    from gpuemu import runtime
    from gpuemu.runners import ran_on_runtime, run_launcher

    def launcher(a, b):
        c = torch.empty(32, 32)
        G.dot_kernel[(1,)](a, b, c, N=32, IEEE=False)
        return c

    out = run_launcher(launcher, [torch.randn(32, 32), torch.randn(32, 32)], {})
    assert out.error is None and ran_on_runtime(out.launches)
    assert out.launches[0].options["dot_precision"] == "tf32" and not runtime.active()
    plain = run_launcher(launcher, [torch.randn(32, 32), torch.randn(32, 32)], {}, runtime=False)
    assert plain.error is None and not ran_on_runtime(plain.launches)


def test_fuzz_runs_bf16_cases_on_the_runtime():
    import gpuemu

    r = gpuemu.fuzz(_softmax_launcher, op="softmax", iterations=6, seed=3, dtypes="bf16", save=False)
    assert r.ok and r.iterations == 6 and "bf16" not in r.skipped


def _softmax_launcher(x):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "kernels"))
    import softmax

    return softmax.softmax(x)


def test_bf16_max_and_argmax_compare_values_not_bit_patterns(rt):
    x = torch.randn(4, 64).bfloat16()  # negative values have larger bit patterns than positive ones
    m = torch.empty(4, dtype=torch.bfloat16)
    i = torch.empty(4, dtype=torch.int32)
    G.bf16_rowmax_kernel[(4,)](x, m, i, N=64)
    assert torch.equal(m, x.max(-1).values) and torch.equal(i.long(), x.float().argmax(-1))


def test_bool_argument_is_an_i1_scalar(rt):
    x = torch.randn(20)
    y = torch.empty(20)
    G.flag_kernel[(1,)](x, y, 20, True, BLOCK=32)
    assert torch.equal(y, -x)
    G.flag_kernel[(1,)](x, y, 20, False, BLOCK=32)
    assert torch.equal(y, x)
