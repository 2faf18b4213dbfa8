"""Recorded kernels (gpuemu.runtime.trace): a replay gives the bits the ordinary path gives, control flow
that differs is caught by its guard and re-run the ordinary way from the memory the launch started with,
and a finding in a replay reads exactly as it does without one."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from gpuemu import runtime
from gpuemu.errors import KernelFinding
from gpuemu.runtime import trace
from gpuemu.runtime.report import observe


def same_bits(a, b) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().contiguous().reshape(-1), b.detach().contiguous().reshape(-1)
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and same_bits(a, b)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(_same, a, b))
    return repr(a) == repr(b)


@pytest.fixture
def clean(rt):
    trace.clear()
    trace.stats.update(dict.fromkeys(trace.stats, 0))
    before = trace.ENABLED
    yield rt
    trace.ENABLED = before
    trace.clear()


@pytest.fixture
def fresh(clean, monkeypatch):
    # (these tests record on a specialisation's second launch with the same arguments; the default is the
    # third: test_a_launch_records_once_its_arguments_recurred)
    monkeypatch.setattr(trace, "RECORD_AFTER", 1)
    yield clean


def _counts():
    return dict(trace.stats)


# ---------------------------------------------------------------------- kernels
@triton.jit
def _scale_rows(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + pid * stride + offs, mask=m, other=0.0)
    tl.store(y_ptr + pid * stride + offs, x / tl.sum(x, axis=0), mask=m)


@triton.jit
def _chunks(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):  # the trip count is a guard on the argument n
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + tl.arange(0, BLOCK), acc)


@triton.jit
def _bump_then_branch(x_ptr, flag_ptr, BLOCK: tl.constexpr):
    """Adds 1 to x (a read-modify-write), then branches on a loaded value: a replay that diverges at the
    branch has already stored; re-running it from there would add 1 twice."""
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)
    if tl.load(flag_ptr) > 0:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 10.0)
    else:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) - 100.0)


@triton.jit
def _copy_unmasked(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


SCALE = 2.0


@triton.jit
def _times_global(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * SCALE)


# ---------------------------------------------------------------------- tests
@pytest.mark.parametrize("grid", ["batched", "sequential"])
def test_a_third_launch_replays_and_gives_the_same_bits(fresh, grid):
    runtime.configure(grid=grid)
    x = torch.randn(5, 37)
    outs = []
    before = _counts()
    for _ in range(4):  # the first launch notes the specialisation, the second records, then replays
        y = torch.full_like(x, float("nan"))
        _scale_rows[(5,)](x, y, 37, x.stride(0), BLOCK=64)
        outs.append(y)
    after = _counts()
    assert after["recorded"] == before["recorded"] + 1 and after["replayed"] == before["replayed"] + 2
    trace.ENABLED = False
    y = torch.full_like(x, float("nan"))
    _scale_rows[(5,)](x, y, 37, x.stride(0), BLOCK=64)
    assert all(same_bits(o, y) for o in outs)


def test_a_launch_records_once_its_arguments_recurred(clean):
    """trace.RECORD_AFTER (the default, not the tests' 1): a fuzz run's pattern, each case launched twice with
    new arguments, records nothing (recording costs more than the one replay it would get); the third launch
    with the same arguments records, and the trace then serves those and other arguments alike."""
    assert trace.RECORD_AFTER == 2
    start = _counts()
    x = torch.randn(5, 64)
    for n in (64, 40, 17, 33):
        for _ in range(2):
            _scale_rows[(5,)](x, torch.empty_like(x), n, x.stride(0), BLOCK=64)
    assert _counts() == start
    outs = []
    for n in (64, 64, 40):  # the third launch with n=64 records, the next replays, and so does n=40
        y = torch.full_like(x, float("nan"))
        _scale_rows[(5,)](x, y, n, x.stride(0), BLOCK=64)
        outs.append(y)
    end = _counts()
    assert end["recorded"] == start["recorded"] + 1 and end["replayed"] == start["replayed"] + 2
    trace.ENABLED = False
    for n, out in zip((64, 64, 40), outs):
        y = torch.full_like(x, float("nan"))
        _scale_rows[(5,)](x, y, n, x.stride(0), BLOCK=64)
        assert same_bits(out, y), n


def test_new_argument_values_replay_where_the_control_flow_is_the_same(fresh):
    x = torch.randn(5, 64)
    for n in (64, 64, 40, 17):  # another n, the same body: one recording serves all
        outs = []
        for enabled in (True, False):
            trace.ENABLED = enabled
            y = torch.zeros_like(x)
            _scale_rows[(5,)](x, y, n, x.stride(0), BLOCK=64)
            outs.append(y)
        trace.ENABLED = True
        assert same_bits(*outs), n
        assert torch.equal(outs[0][:, n:], torch.zeros(5, 64 - n))
    assert trace.stats["replayed"] >= 2


def test_a_loop_bound_from_an_argument_is_a_guard_checked_before_anything_runs(fresh):
    x = torch.randn(300)
    results = {}
    for n in (100, 300, 100, 300, 100, 300, 50):  # noted, noted, recorded, recorded, replayed, replayed, noted
        y = torch.empty(64)
        _chunks[(1,)](x, y, n, BLOCK=64)
        results.setdefault(n, []).append(y)
    for n, ys in results.items():
        expect = torch.nn.functional.pad(x[:n], (0, -n % 64)).reshape(-1, 64).sum(0)
        for y in ys:
            torch.testing.assert_close(y, expect)
        assert all(same_bits(ys[0], y) for y in ys)
    assert trace.stats["replayed"] >= 2 and trace.stats["diverged"] == 0  # argument guards pick a trace


def test_a_branch_on_a_loaded_value_that_differs_reruns_from_the_original_bytes(fresh):
    x0 = torch.arange(8, dtype=torch.float32)
    for flag, expect in ((1, (x0 + 1) * 10), (1, (x0 + 1) * 10), (0, x0 + 1 - 100), (1, (x0 + 1) * 10)):
        x = x0.clone()
        _bump_then_branch[(1,)](x, torch.tensor([flag], dtype=torch.int32), BLOCK=8)
        assert torch.equal(x, expect), (flag, x)
    assert trace.stats["diverged"] >= 1


def test_a_finding_in_a_replay_reads_as_without_replays(fresh):
    x = torch.randn(128)
    for _ in range(2):  # in bounds: noted, then recorded
        _copy_unmasked[(4,)](x, torch.empty(128), BLOCK=32)
    found = []
    for enabled in (True, False):
        trace.ENABLED = enabled
        y = torch.zeros(128)
        with pytest.raises(KernelFinding) as ei:
            _copy_unmasked[(4,)](x[:100], y, BLOCK=32)
        found.append((str(ei.value), y.clone()))
    assert found[0][0] == found[1][0] and "program (3, 0, 0)" in found[0][0]
    assert torch.equal(found[0][1], found[1][1])


def test_a_changed_module_global_is_a_new_specialisation(fresh, monkeypatch):
    x = torch.randn(16)
    y = torch.empty(16)
    _times_global[(1,)](x, y, BLOCK=16)
    _times_global[(1,)](x, y, BLOCK=16)
    assert torch.equal(y, x * 2)
    monkeypatch.setitem(_times_global.fn.__globals__, "SCALE", 3.0)
    _times_global[(1,)](x, y, BLOCK=16)
    assert torch.equal(y, x * 3)


@pytest.mark.slow  # the whole corpus, ~11 s; the invariant-values corpus run and the unit tests stay in the default run
def test_the_corpus_replays_bit_for_bit(fresh, monkeypatch):
    """Every launcher of examples/kernels, fp32/fp16/bf16 batched and fp32 one program at a time: the first
    launch (noting the specialisation), the second (recording), the third (replaying as recorded) and the
    fourth (replaying with direct lines: here trace.UPGRADE_AFTER = 1) give the bits of a launch with
    recording off."""
    from gpuemu import cases, corpus, target

    monkeypatch.setattr(trace, "UPGRADE_AFTER", 1)
    checked = 0
    unstable: list = []
    start = _counts()
    for entry in corpus.load_manifest():
        fn = target.load(corpus.resolve_target(entry))
        seed = next(s for s in range(1000, 1400)
                    if int(np.prod(list(cases.generate(entry.op, s, dtype="fp32").dims.values()))) >= 512)
        for grid, dtype in (("batched", "fp32"), ("batched", "fp16"), ("batched", "bf16"), ("sequential", "fp32")):
            runtime.configure(grid=grid)
            case = cases.generate(entry.op, seed, dtype=dtype)
            outs = {}
            for mode in ("off", "first", "record", "replay", "replay direct", "off again"):
                if mode == "off again" and all(_same(outs["off"], outs[m])
                                               for m in ("first", "record", "replay", "replay direct")):
                    break
                trace.ENABLED = not mode.startswith("off")
                inputs, kwargs = cases.materialize(case)
                with observe(), np.errstate(all="ignore"):
                    try:
                        outs[mode] = fn(**inputs, **kwargs)
                    except Exception as e:  # noqa: BLE001 - a finding or a refusal: the same one every way
                        outs[mode] = f"{type(e).__name__}: {e}"
            if "off again" in outs:
                # a launcher whose output holds memory it never wrote (torch.empty) differs from itself
                assert not _same(outs["off"], outs["off again"]), (entry.target, grid, dtype, outs["off"])
                unstable.append((entry.target, grid, dtype))
            checked += 1
    assert checked >= 4 * 60 and len(unstable) <= 4, unstable
    end = _counts()
    # the replay engaged: most third and fourth launches replayed, and traces were rebuilt with direct lines
    assert end["replayed"] - start["replayed"] >= 2 * 0.5 * checked, (start, end)
    assert sum(t.source.count(" = TH(C[") for t in _traces()) > checked, "no direct line in any trace"


def test_a_lean_replay_sets_the_builder_and_only_the_patches_a_replay_reaches():
    """executor.Patches.for_replay: every instance overlay (the builder's methods) and, of the attributes set one
    by one, only those named in REPLAY_REACHES (construction, dtype lookup, overflow and shape checks)."""
    from gpuemu.runtime.executor import REPLAY_REACHES, Patches

    class Builder:
        pass

    class Tensor:
        pass

    b, entries = Builder(), []
    for i in range(Patches.OVERLAY_FROM):
        entries.append((b, f"create_{i}", i))
    entries += [(Tensor, "__init__", 1), (Tensor, "__add__", 2), (Tensor, "__bool__", 3), (tl, "load", 4)]
    p = Patches(entries)
    part = p.for_replay()
    assert part.overlays == p.overlays and len(part.overlays[0][1]) == Patches.OVERLAY_FROM
    assert part.names == ["__init__"] and set(part.names) <= REPLAY_REACHES and part is p.for_replay()


def test_a_lean_replay_leaves_the_language_and_the_builder_as_they_were(fresh):
    """A replay that skips Triton's language patches still sets and restores the runtime's own: after it,
    triton.language, tl.tensor and the interpreter's builder hold exactly what they held before."""
    from gpuemu.runtime import _compat, executor

    x = torch.randn(5, 37)
    y = torch.empty_like(x)
    for _ in range(2):  # noted, then recorded
        _scale_rows[(5,)](x, y, 37, x.stride(0), BLOCK=64)
    builder = _compat.builder()
    before = (dict(vars(tl)), dict(vars(tl.core)), dict(vars(tl.core.tensor)), dict(vars(builder)))
    leans = []
    real = executor._lean
    try:
        executor._lean = lambda *a: leans.append(real(*a)) or leans[-1]
        _scale_rows[(5,)](x, y, 37, x.stride(0), BLOCK=64)
    finally:
        executor._lean = real
    after = (dict(vars(tl)), dict(vars(tl.core)), dict(vars(tl.core.tensor)), dict(vars(builder)))
    assert len(leans) == 1 and leans[0] is not None  # (mode, trace key, traces): the launch was lean
    for b, a in zip(before, after):
        assert b.keys() == a.keys()
        changed = [k for k in b if b[k] is not a[k]]
        assert set(changed) <= {"grid_idx", "grid_dim"}, changed  # the builder's place in the grid is per launch


def _traces():
    return [t for e in trace._cache.values() for t in e.traces]


def test_elementwise_calls_replay_in_numpy_and_a_widened_block_is_not_built(fresh, monkeypatch):
    """trace._direct: once a trace has been replayed (trace.UPGRADE_AFTER times), the divide, the index
    arithmetic and the pointer offsets of _scale_rows replay as numpy expressions, and the splats that
    widened a per-program sum or pointer are not built at all (numpy broadcasts their operands alike); the
    bits are those of the builder's calls. Before that the trace runs as recorded (here trace.UPGRADE_AFTER = 1;
    by default it is built so when recorded)."""
    monkeypatch.setattr(trace, "UPGRADE_AFTER", 1)
    x = torch.randn(5, 37)
    for i in range(2 + trace.UPGRADE_AFTER + 1):  # noted, recorded, replayed as recorded, then upgraded
        y = torch.empty_like(x)
        _scale_rows[(5,)](x, y, 37, x.stride(0), BLOCK=64)
        if i == 1:  # as recorded
            (t,) = _traces()
            assert "b.create_fdiv" in t.source
    (t,) = _traces()
    live = [ln.strip() for ln in t.source.splitlines() if not ln.strip().startswith("IR(")]
    assert not any("b.create_fdiv" in ln or "b.create_addptr" in ln or "b.create_splat" in ln for ln in live), \
        t.source
    assert any(ln.startswith("v") and " = TH(C[" in ln and "[:, None]" in ln for ln in live), t.source
    trace.DIRECT = False
    try:
        trace.clear()
        for _ in range(2 + trace.UPGRADE_AFTER + 1):
            z = torch.empty_like(x)
            _scale_rows[(5,)](x, z, 37, x.stride(0), BLOCK=64)
        (t_off,) = _traces()
        assert "b.create_fdiv" in t_off.source
    finally:
        trace.DIRECT = True
    assert same_bits(y, z)


def test_a_method_the_interpreter_computes_otherwise_keeps_the_builders_call(fresh, monkeypatch):
    """_direct_ops checks each numpy stand-in against the interpreter's own method once per process: one
    that differs (here a create_fsub that rounds to fp16 on the way) is not taken, and the replay runs the
    builder's method."""
    from gpuemu.runtime import _compat

    cls = type(_compat.builder())
    own = cls.__dict__["create_fsub"]

    def fsub_via_fp16(self, lhs, rhs):
        out = own(self, lhs, rhs)
        return type(out)(out.data.astype(np.float16).astype(out.data.dtype), out.dtype)

    monkeypatch.setattr(trace, "_direct_checked", None)
    monkeypatch.setattr(cls, "create_fsub", fsub_via_fp16)
    ops = trace._direct_ops()
    assert "create_fsub" not in ops and "create_fadd" in ops


# ---------------------------------------------------------------------- launch-invariant values (trace._Memo)
def _launches_until_reused(kernel, grid, make_args, **constexprs):
    """Launch until a replay took its launch-invariant values from the trace's memo (noted, recorded,
    replayed, rebuilt with direct lines and a memo, reused): returns the outputs of every launch."""
    outs = []
    for _ in range(8):
        args = make_args()
        before = trace.stats["invariant"]
        kernel[grid](*args, **constexprs)
        outs.append(args)
        if trace.stats["invariant"] > before:
            return outs
    raise AssertionError(f"no replay reused launch-invariant values: {trace.stats}")


@pytest.mark.parametrize("grid", ["batched", "sequential"])
def test_a_relaunch_reuses_the_launch_invariant_values_and_reads_new_data(fresh, grid):
    """The addresses, masks and overflow checks of _scale_rows depend only on its arguments and the program
    ids: a replay with the arguments and program ids of an earlier one takes them from the trace's memo and
    runs only the loads, the arithmetic on loaded values and the stores, which see the new data. Another
    argument value computes them again. Each output has the bits of a launch with recording off."""
    runtime.configure(grid=grid)
    xs = [torch.randn(5, 37) * (i + 1) for i in range(8)]
    it = iter(xs)
    outs = _launches_until_reused(_scale_rows, (5,), lambda: (next(it), torch.full((5, 37), float("nan")), 37, 37),
                                  BLOCK=64)
    (t,) = _traces()
    assert "M.get(_k)" in t.source and "create_masked_load" in t.source.split("else:")[1], t.source
    reused, passes = trace.stats["invariant"], 1 if grid == "batched" else 5  # (one at a time: a key per program)
    x_new = torch.randn(5, 37) * 100
    y_new = torch.full((5, 37), float("nan"))
    _scale_rows[(5,)](x_new, y_new, 37, 37, BLOCK=64)
    assert trace.stats["invariant"] == reused + passes
    y_other_n = torch.zeros(5, 37)
    _scale_rows[(5,)](x_new, y_other_n, 20, 37, BLOCK=64)  # another n: a new key, computed again
    assert trace.stats["invariant"] == reused + passes
    trace.ENABLED = False
    for x, y, n, _ in outs + [(x_new, y_new, 37, 37), (x_new, y_other_n, 20, 37)]:
        want = torch.zeros(5, 37) if n == 20 else torch.full((5, 37), float("nan"))
        _scale_rows[(5,)](x, want, n, 37, BLOCK=64)
        assert same_bits(y, want), n


def test_a_reused_launch_still_checks_bounds_against_the_tensors_it_gets(fresh):
    """The memo is keyed by the arguments (pointers as the runtime's virtual addresses, the same for a tensor
    of another size), so a launch with a shorter output reuses the addresses; the arena sees that the
    region's extent changed and checks them again: the out-of-bounds store is found and reads as without
    recording."""
    x = torch.randn(128)
    _launches_until_reused(_copy_unmasked, (4,), lambda: (x, torch.empty(128)), BLOCK=32)
    found = []
    for enabled in (True, False):
        trace.ENABLED = enabled
        y = torch.zeros(100)
        with pytest.raises(KernelFinding) as ei:
            _copy_unmasked[(4,)](x, y, BLOCK=32)
        found.append((str(ei.value), y.clone()))
    assert found[0][0] == found[1][0] and "out-of-bounds write" in found[0][0] and "program (3, 0, 0)" in found[0][0]
    assert torch.equal(found[0][1], found[1][1])


def test_every_chunk_of_a_large_grid_has_its_own_invariant_values(fresh):
    """A batched launch of more programs than a pass holds runs several passes, each with its own program
    ids: each pass's values are kept under its own key, and a relaunch reuses each for its own pass."""
    from gpuemu.runtime import batched

    rows = batched.CHUNK * 2 + 77
    runtime.configure(grid="batched")
    outs = _launches_until_reused(_scale_rows, (rows,), lambda: (torch.randn(rows, 8), torch.empty(rows, 8), 8, 8),
                                  BLOCK=8)
    before = trace.stats["invariant"]
    x, y = torch.randn(rows, 8), torch.empty(rows, 8)
    _scale_rows[(rows,)](x, y, 8, 8, BLOCK=8)
    assert trace.stats["invariant"] - before == len(batched.chunks(rows)) == 3
    trace.ENABLED = False
    for x, y, _, _ in outs[-2:] + [(x, y, 8, 8)]:
        want = torch.empty(rows, 8)
        _scale_rows[(rows,)](x, want, 8, 8, BLOCK=8)
        assert same_bits(y, want)


def test_the_memo_keeps_few_keys_and_bounded_bytes_and_its_arrays_are_read_only(monkeypatch):
    from triton.runtime.interpreter import TensorHandle

    monkeypatch.setattr(trace, "MEMO_KEYS", 2)
    monkeypatch.setattr(trace, "MEMO_BYTES", 4 * 4096)
    monkeypatch.setattr(trace, "MEMO_TRIES", 100)
    trace._Memo.clear_all()
    a, b = trace._Memo(), trace._Memo()

    def values(n):  # (n fp32 values)
        return (TensorHandle(np.zeros(n, dtype=np.float32), tl.float32),)

    try:
        for k in range(3):
            a.put((k,), values(16))
        assert list(a.entries) == [(1,), (2,)]  # the oldest key went first
        held = a.get((2,))[0].data
        assert not held.flags.writeable
        with pytest.raises(ValueError):
            held[0] = 1.0
        b.put(("big",), values(1024))  # 4 KiB, more than an eighth of the bound (16 KiB): not kept
        assert b.get(("big",)) is None and not b.entries
        memos = [trace._Memo() for _ in range(6)]
        for m in memos[:5]:
            for k in range(2):
                m.put((k,), values(400))  # 1600 bytes each: five memos of two and a's fit (16128 bytes)
        assert a.entries and all(len(m.entries) == 2 for m in memos[:5])
        memos[5].put((0,), values(400))  # over the bound: the least recently stored go, a's first
        assert not a.entries and list(memos[0].entries) == [(1,)] and len(memos[5].entries) == 1
        held = [h.data.nbytes for m in (a, *memos) for v in m.entries.values() for h in v]
        assert trace._Memo._bytes == sum(held) == 16000 <= trace.MEMO_BYTES
    finally:
        trace._Memo.clear_all()


def test_the_corpus_reuses_invariant_values_bit_for_bit_on_new_data(fresh):
    """Every launcher of examples/kernels, fp32, batched and one program at a time: launched until a replay
    reuses launch-invariant values, then on other values in the same tensors (the same arguments: the memo
    serves), the outputs have the bits of launches with recording off."""
    from gpuemu import cases, corpus, target

    checked, reused, unstable = 0, 0, []
    for entry in corpus.load_manifest():
        fn = target.load(corpus.resolve_target(entry))
        seed = next(s for s in range(1000, 1400)
                    if int(np.prod(list(cases.generate(entry.op, s, dtype="fp32").dims.values()))) >= 512)
        case = cases.generate(entry.op, seed, dtype="fp32")
        for grid in ("batched", "sequential"):
            runtime.configure(grid=grid)
            inputs, kwargs = cases.materialize(case)

            def call():
                with observe(), np.errstate(all="ignore"):
                    try:
                        return fn(**inputs, **kwargs)
                    except Exception as e:  # noqa: BLE001 - a finding or a refusal: the same one every way
                        return f"{type(e).__name__}: {e}"

            trace.ENABLED = True
            before = trace.stats["invariant"]
            for _ in range(5):
                call()
            gen = torch.Generator().manual_seed(seed)
            with torch.no_grad():  # other values, the same tensors
                for v in inputs.values():
                    if isinstance(v, torch.Tensor) and v.is_floating_point():
                        v.copy_(torch.randn(v.shape, generator=gen) * 3)
            got = call()
            reused += trace.stats["invariant"] > before
            trace.ENABLED = False
            want = call()
            if not _same(got, want):
                assert not _same(want, call()), (entry.target, grid, got, want)  # (torch.empty outputs)
                unstable.append((entry.target, grid))
            checked += 1
    assert checked >= 2 * 60 and len(unstable) <= 4, unstable
    assert reused >= checked // 2, (reused, checked)


def test_a_replay_loads_in_c_order_whatever_the_layout_of_its_address_block(fresh):
    """A direct line may build an address block from its operands before they were widened (numpy broadcasts
    them alike), so the block can have another memory layout than the interpreter's; a load gathers in C order
    (as Triton's own load returns), so a dot of the loaded block sums as without recording. The case: a
    bench.py run of the correct corpus attention, fp16 causal with tiny values, whose replay gave 16 other
    output elements (the V block came back transposed in memory, and numpy's matmul summed it in another
    order)."""
    from gpuemu import cases, corpus, target

    entry = next(e for e in corpus.load_manifest() if e.name == "attention")
    fn = target.load(corpus.resolve_target(entry))
    case = cases.Case(op="attention", dtype="fp16", dims={"B": 1, "H": 1, "Nq": 128, "Nk": 128, "D": 64},
                      seed=15565445264529232784, batch=(), layouts={"q": "contiguous", "k": "contiguous",
                                                                       "v": "contiguous"},
                      values="tiny", value_params={"scale": 0.00048828125}, kwargs={"causal": True},
                      strategy="default", shape_kind="real_size")
    inputs, kwargs = cases.materialize(case)
    with np.errstate(all="ignore"):
        trace.ENABLED = False
        want = fn(**inputs, **kwargs)
        trace.ENABLED = True
        got = [fn(**inputs, **kwargs) for _ in range(5)]  # noted, recorded, replayed, replayed reusing
    assert trace.stats["replayed"] >= 2
    assert all(same_bits(g, want) for g in got), [int((g != want).sum()) for g in got]


def test_a_gather_of_every_lane_comes_back_in_c_order():
    from gpuemu.runtime.memory import Arena

    t = torch.arange(64, dtype=torch.float32)
    arena = Arena()
    p = arena.add(t, "t")
    addr = (np.uint64(p) + np.arange(64, dtype=np.uint64).reshape(8, 8) * np.uint64(4)).T  # (a transposed view)
    got = arena.gather(addr, np.ones((8, 8), dtype=bool), None, np.dtype(np.float32))
    assert got.flags.c_contiguous and np.array_equal(got, t.numpy().reshape(8, 8).T)
