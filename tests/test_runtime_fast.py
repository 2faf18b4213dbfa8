"""The runtime's per-launch caches and fast paths (gpuemu.runtime.fast) keep Triton's behaviour exactly."""

import functools

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from gpuemu.errors import KernelFinding
from gpuemu.runtime import _compat, fast


@triton.jit
def _index_kernel(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    row = offs * stride  # int32 index arithmetic: overflows when stride is huge
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x + (row - row).to(tl.float32), mask=m)


@pytest.mark.parametrize("grid_mode", ["sequential", "batched"])
def test_int32_overflow_wraps_as_on_a_gpu_and_is_an_assertion_in_debug_mode(rt, grid_mode):
    """Compiled Triton checks + - * of integers for overflow only in debug mode (the check is a device assertion);
    otherwise int32 wraps, as GPU integers do."""
    rt.configure(grid=grid_mode)
    x, y = torch.randn(64), torch.empty(64)
    _index_kernel[(4,)](x, y, 64, 3, BLOCK=16)  # no overflow: runs, exact
    assert torch.equal(x, y)
    y.zero_()
    _index_kernel[(4,)](x, y, 64, 2**30, BLOCK=16)  # offs * stride wraps: row - row is still 0
    assert torch.equal(x, y)
    with pytest.raises(KernelFinding) as ei:
        _index_kernel[(4,)](x, y, 64, 2**30, BLOCK=16, debug=True)
    assert ei.value.kind == "assert"
    assert "int32 overflow detected for operation mul" in str(ei.value)
    triton.knobs.runtime.debug = True
    try:
        with pytest.raises(KernelFinding, match="int32 overflow detected"):
            _index_kernel[(4,)](x, y, 64, 2**30, BLOCK=16)
    finally:
        triton.knobs.runtime.debug = False


def _snapshot():
    objs = _compat._language_objects()
    return {id(o): dict(vars(o)) for o in objs}


def _same_patch(a, b) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, functools.partial):
        return _same_patch(a.func, b.func) and a.args == b.args and a.keywords == b.keywords
    if isinstance(a, property):
        return a.fget.__code__ is b.fget.__code__
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    return code_a is not None and code_a is code_b and (a.__kwdefaults__ or {}) == (b.__kwdefaults__ or {})


def _patched_state(patch):
    anchor = type(_snapshot)((lambda: None).__code__, {"tl": tl, "core": tl.core})
    before = _snapshot()
    scope = patch(anchor)
    after = _snapshot()
    scope.restore()
    restored = _snapshot()
    # (inspect.getmembers, inside Triton's patch, gives a class an empty __annotations__: not a patch)
    return {(oid, k): v for oid, d in after.items() for k, v in d.items()
            if before[oid].get(k, None) is not v and k != "__annotations__"}, \
        restored


def test_the_recorded_language_patch_is_tritons_own():
    it = _compat.interp()
    with _compat.unpatched_language():  # from Triton's own definitions (a plain launch may have left patches)
        (ours, ours_after), (theirs, theirs_after) = _patched_state(fast.patch_lang), _patched_state(it._patch_lang)
    assert ours_after == theirs_after  # restore leaves the language as Triton's own restore does
    assert ours.keys() == theirs.keys() and len(ours) > 100
    assert all(_same_patch(ours[k], theirs[k]) for k in ours)


@triton.jit
def _max_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs), 0.0))


def test_a_plain_interpreter_launch_in_between_does_not_disturb_the_plan(rt):
    x, y = torch.tensor([-1.0, 2.0, -3.0, 4.0]), torch.empty(4)
    _max_kernel[(1,)](x, y, BLOCK=4)
    plan = fast._plan
    rt.deactivate()
    _max_kernel[(1,)](x, y, BLOCK=4)  # Triton's interpreter leaves some of tl.core patched
    rt.activate()
    y.zero_()
    _max_kernel[(1,)](x, y, BLOCK=4)
    assert y.tolist() == [0.0, 2.0, 0.0, 4.0] and fast._plan is plan


@triton.jit
def _row_sum_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.store(y_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


def test_what_a_plain_launch_leaves_in_the_language_keeps_the_plan(rt, monkeypatch):
    """A plain interpreter launch of a kernel that calls a helper (tl.sum) leaves tl.core patched, static_print
    as the builtin print: what the plan sets itself, so the plan (part of every trace's key) stays, the next
    launch still replays, and the plan takes what it finds as the language from then on."""
    from gpuemu.runtime import trace

    monkeypatch.setattr(tl.core, "static_print", tl.static_print)  # Triton's own, as before any plain launch
    x, y = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.empty(1)
    for _ in range(4):  # the third launch records, the fourth replays
        _row_sum_kernel[(1,)](x, y, BLOCK=4)
    plan, replayed = fast._plan, trace.stats["replayed"]
    rt.deactivate()
    _row_sum_kernel[(1,)](x, y, BLOCK=4)
    rt.activate()
    assert tl.core.static_print is print  # (what Triton 3.6-3.8 leaves; the checks below are the point)
    y.zero_()
    _row_sum_kernel[(1,)](x, y, BLOCK=4)
    assert y.item() == 10.0 and fast._plan is plan and trace.stats["replayed"] > replayed
    assert tl.core.static_print is print and any(b is print for b in plan.befores)


def test_a_rebase_in_place_leaves_the_plan_a_new_one_would_have(rt):
    """_Plan._rebase updates only the entries a plain launch changed: the columns, the per-object quick
    check and the values a launch puts back are those of a plan built from the same entries at once."""
    import itertools

    x, y = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.empty(1)
    _row_sum_kernel[(1,)](x, y, BLOCK=4)  # (the plan exists)
    plan = fast._plan
    rt.deactivate()
    _row_sum_kernel[(1,)](x, y, BLOCK=4)  # a plain launch: its leftovers in tl.core
    rt.activate()
    now = list(map(getattr, plan.objs, plan.names, itertools.repeat(fast._MISSING, len(plan.objs))))
    changed = [i for i, (a, b) in enumerate(zip(now, plan.befores)) if a is not b]
    assert changed and plan.unchanged(rebase=True)
    fresh = fast._Plan(list(zip(plan.objs, plan.names, now, plan.afters)))
    assert all(map(lambda a, b: a is b, plan.befores, fresh.befores))
    assert all(map(lambda a, b: a is b, plan.set_values, fresh.set_values))
    assert [(o, n, b) for o, n, b in plan.rest] == [(o, n, b) for o, n, b in fresh.rest]
    assert [(o, b) for o, _, b in plan.own] == [(o, b) for o, _, b in fresh.own]
    assert all(get(o.__dict__) == b for o, get, b in plan.own)  # (the quick check passes)


def test_a_language_changed_after_the_plan_was_recorded_is_patched_as_it_is_now(rt, monkeypatch):
    x, y = torch.tensor([-1.0, 2.0, -3.0, 4.0]), torch.empty(4)
    _max_kernel[(1,)](x, y, BLOCK=4)  # the plan is recorded by now
    assert y.tolist() == [0.0, 2.0, 0.0, 4.0]
    monkeypatch.setattr(tl, "maximum", tl.minimum)  # another tool swaps a builtin
    _max_kernel[(1,)](x, y, BLOCK=4)
    assert y.tolist() == [-1.0, 0.0, -3.0, 0.0]


@triton.jit
def _bad_shape_kernel(y_ptr, N: tl.constexpr):
    v = tl.full([N], 1.0, tl.float32)
    tl.store(y_ptr + tl.arange(0, 4), tl.sum(v, axis=0) + tl.zeros([4], tl.float32))


@pytest.mark.parametrize("grid_mode", ["sequential", "batched"])
def test_a_block_shape_triton_rejects_is_still_rejected_after_valid_ones_were_cached(rt, grid_mode):
    rt.configure(grid=grid_mode)
    y = torch.empty(4)
    _bad_shape_kernel[(3,)](y, N=8)
    assert y.tolist() == [8.0] * 4
    with pytest.raises(Exception, match="power of 2"):
        _bad_shape_kernel[(3,)](y, N=6)


def test_a_keyword_the_kernel_does_not_take_raises_as_tritons_launch_does(rt):
    x, y = torch.arange(4.0), torch.empty(4)
    _index_kernel[(1,)](x, y, 4, 1, BLOCK=4, num_warps=2)  # a launch option: taken
    assert y.tolist() == x.tolist()
    with pytest.raises(KeyError, match="Keyword argument NARROW was specified but unrecognised"):
        _index_kernel[(1,)](x, y, 4, 1, BLOCK=4, NARROW=True)


@pytest.mark.slow  # the whole corpus, ~16 s; each fast operation is tested alone above
def test_the_corpus_runs_bit_for_bit_the_same_with_and_without_the_fast_paths(rt, monkeypatch):
    """Every launcher of examples/kernels on fp32 (two seeds), fp16 and bf16 cases: the runtime with its fast
    paths (operators, constructors, overflow check; batched grid) gives the bits, or the error, that it
    gives with Triton's own semantic layer one program at a time."""
    import numpy as np

    from gpuemu import cases, corpus, target
    from tests.test_batched_runtime import _same

    checked, differ, unstable = 0, [], []
    for entry in corpus.load_manifest():
        fn = target.load(corpus.resolve_target(entry))
        seeds = [s for s in range(1000, 1400)
                 if int(np.prod(list(cases.generate(entry.op, s, dtype="fp32").dims.values()))) >= 512][:2]
        for dtype, seed in (("fp32", seeds[0]), ("fp32", seeds[1]), ("fp16", seeds[0]), ("bf16", seeds[0])):
            case = cases.generate(entry.op, seed, dtype=dtype)
            outs = {}
            for mode in ("triton", "fast", "triton again"):
                if mode == "triton again" and _same(outs["triton"], outs["fast"]):
                    break
                monkeypatch.setattr(fast, "ENABLED", mode == "fast")
                rt.configure(grid="batched" if mode == "fast" else "sequential")
                inputs, kwargs = cases.materialize(case)
                with np.errstate(all="ignore"):
                    try:
                        outs[mode] = fn(**inputs, **kwargs)
                    except Exception as e:  # noqa: BLE001 - a finding or a refusal: the same one both ways
                        outs[mode] = f"{type(e).__name__}: {e}"
            if "triton again" in outs:
                # a launcher whose output holds memory it never wrote (torch.empty) differs from itself
                (unstable if not _same(outs["triton"], outs["triton again"]) else differ).append((entry.target, dtype))
            checked += 1
    assert not differ
    assert checked >= 4 * 60 and len(unstable) <= 4, unstable


def test_the_arena_fast_translation_equals_the_lane_by_lane_one(monkeypatch):
    """Random pointers (in bounds, out of bounds, misaligned, in another argument, masked) through
    Arena.translate with and without its whole-array fast path: the same host addresses or the same error."""
    import numpy as np

    from gpuemu.runtime.memory import Arena, MemoryError_

    def run(arena, ptrs, mask, size):
        try:
            return arena.translate(ptrs, mask, size, "read")
        except MemoryError_ as e:
            return str(e)

    rng = np.random.default_rng(0)
    a, b = torch.zeros(100, dtype=torch.float32), torch.zeros(37, dtype=torch.float16)
    arena = Arena()
    pa, pb = arena.add(a, "a"), arena.add(b[5:], "b")
    outcomes = set()
    for _ in range(400):
        base, size = (pa, 4) if rng.random() < 0.6 else (pb, 2)
        n = int(rng.integers(1, 40))
        offs = rng.integers(-3, 110, n) * size + (rng.random() < 0.1) * int(rng.integers(1, size))
        if rng.random() < 0.05:
            offs = offs + (pb - pa if base == pa else pa - pb)  # into the other argument
        ptrs = (np.int64(base) + offs).astype(np.uint64)
        mask = None if rng.random() < 0.3 else rng.random(n) < rng.random()
        fast_r = run(arena, ptrs, mask, size)
        with monkeypatch.context() as m:
            m.setattr(Arena, "_translate_fast", lambda self, addr, active, size: None)
            slow_r = run(arena, ptrs, mask, size)
        if isinstance(slow_r, str):
            assert fast_r == slow_r
            outcomes.add("error")
        else:
            assert isinstance(fast_r, np.ndarray) and fast_r.dtype == slow_r.dtype and np.array_equal(fast_r, slow_r)
            outcomes.add("ok")
    assert outcomes == {"ok", "error"}


def _bits(v):
    """What an op produced, comparable bit for bit: (type, data dtype, shape, bytes) per tensor."""
    import numpy as np

    if isinstance(v, tl.tensor):
        data = v.handle.data if v.handle is not None else None
        if data is None:
            return (str(v.type), None)
        a = np.asarray(data)
        return (str(v.type), str(a.dtype), a.shape, np.ascontiguousarray(a).tobytes())
    if isinstance(v, tuple):
        return tuple(_bits(x) for x in v)
    return repr(v)


@pytest.mark.parametrize("grid_mode", ["sequential", "batched"])
def test_every_fast_operation_gives_the_bits_and_type_tritons_path_gives(rt, monkeypatch, grid_mode):
    """Every corpus launcher on fp32, fp16 and bf16 cases with each fast path shadowed: operators, pointer
    offsets, tl.where, tl.load, tl.store and tl.max/min/sum return the same type and the same bits (masked
    lanes included) as Triton's own path for the same arguments."""
    import numpy as np

    from gpuemu import cases, corpus, target

    seen: dict = {}
    bad: list = []

    def shadow(name, fast_result, triton_result):
        seen[name] = seen.get(name, 0) + 1
        if _bits(fast_result) != _bits(triton_result) and len(bad) < 5:
            bad.append((name, _bits(fast_result)[:3], _bits(triton_result)[:3]))

    monkeypatch.setattr(fast, "SHADOW", shadow)
    rt.configure(grid=grid_mode)
    for entry in corpus.load_manifest():
        fn = target.load(corpus.resolve_target(entry))
        seed = next(s for s in range(1000, 1400)
                    if int(np.prod(list(cases.generate(entry.op, s, dtype="fp32").dims.values()))) >= 512)
        for dtype in ("fp32", "fp16", "bf16"):
            inputs, kwargs = cases.materialize(cases.generate(entry.op, seed, dtype=dtype))
            with np.errstate(all="ignore"):
                try:
                    fn(**inputs, **kwargs)
                except Exception:  # noqa: BLE001 - a finding: the operations before it were compared
                    pass
    assert not bad
    for name in ("__add__", "__mul__", "__sub__", "__lt__", "where", "load", "store", "max", "sum"):
        assert seen.get(name, 0) > 10, (name, seen)


@triton.jit
def _ops_kernel(x_ptr, y_ptr, i_ptr, out_ptr, s, k, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs, mask=offs < BLOCK - 1, other=2.0)
    i = tl.load(i_ptr + offs)
    xs = tl.sum(x, axis=0)  # a scalar tensor
    acc = x + y + (x - y) * (y - x) / (y + 5.0) + (2.0 - x) + (3 * x) + x / 4 + 1.5 / (y + 9.0) + xs - xs * y
    acc = (1.0 + acc) + (1 + x)
    acc += tl.where(x < y, 1.0, 0.0) + tl.where(x <= y, 2.0, 0.0) + tl.where(x > y, 4.0, 0.0)
    acc += tl.where(x >= y, 8.0, 0.0) + tl.where(x == y, 16.0, 0.0) + tl.where(x != y, 32.0, 0.0)
    acc += tl.where(x < 1.0, x, y) + tl.where(y >= xs, 0.5, y) + tl.where(x == 2.0, xs, 7)
    j = i * k + i - 3 + (5 - i) + (i < k).to(tl.int32) + (i <= 2).to(tl.int32) + (k == i).to(tl.int32)
    acc += j.to(tl.float32) + tl.max(x, axis=0) + tl.min(y, axis=0) + s * x
    tl.store(out_ptr + offs, acc)
    tl.store(out_ptr + BLOCK + offs, j, mask=offs < BLOCK // 2)
    tl.store(out_ptr + 2 * BLOCK + offs, xs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("grid_mode", ["sequential", "batched"])
def test_operators_with_ties_scalars_and_numbers_match_tritons_path_op_by_op(rt, monkeypatch, dtype, grid_mode):
    """Values with ties (x == y in places), scalar tensors, Python numbers on either side, int32 index
    arithmetic: each fast path's result has the type and bits of Triton's path for the same arguments."""
    bad, seen = [], set()

    def shadow(name, fast_result, triton_result):
        seen.add(name)
        if _bits(fast_result) != _bits(triton_result):
            bad.append(name)

    monkeypatch.setattr(fast, "SHADOW", shadow)
    rt.configure(grid=grid_mode)
    x = torch.tensor([0.0, 1.0, 2.0, 3.0, -1.0, 2.0, 0.5, 7.0] * 2).to(dtype)
    y = torch.tensor([0.0, 2.0, 2.0, 1.0, -1.0, 3.0, 0.5, -7.0] * 2).to(dtype)
    i = torch.arange(16, dtype=torch.int32) - 4
    out = torch.zeros(48, dtype=dtype)
    _ops_kernel[(3,)](x, y, i, out, 0.25, 3, BLOCK=16)
    assert not bad, sorted(set(bad))
    expected = {"__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__lt__", "__le__", "__gt__",
                "__ge__", "__eq__", "__ne__", "where", "load", "store", "sum"}
    if dtype == torch.float32:  # tl.max / tl.min of fp16 and bf16 upcast in their @jit body: no shortcut
        expected |= {"max", "min"}
    assert expected <= seen, seen


def test_in_range_is_the_interval_bound_of_the_overflow_check():
    """fast.in_range (the runtime's overflow check and a replay's pre-check): True only where no pair of values
    from the operands' ranges leaves the type, whatever the broadcast pairs."""
    from gpuemu.runtime.fast import in_range

    lo, hi = -2**31, 2**31 - 1
    a = np.array([0, 5, 2**30], dtype=np.int32)
    assert in_range(a, np.array([2**30 - 1], dtype=np.int32), "add", lo, hi)
    assert not in_range(a, np.array([2**30], dtype=np.int32), "add", lo, hi)  # 2**30 + 2**30 overflows
    assert in_range(np.array([-3], dtype=np.int32), a, "sub", lo, hi)
    assert not in_range(np.array([-2**31 + 10], dtype=np.int32), a, "sub", lo, hi)  # -2**31 + 10 - 2**30
    neg = np.array([-2**16, 3], dtype=np.int32)
    assert in_range(neg, np.array([2**15 - 1, -2**15 + 1], dtype=np.int32), "mul", lo, hi)
    assert not in_range(neg, np.array([2**15 - 1, -2**15], dtype=np.int32), "mul", lo, hi)  # (-2**16)(-2**15) = 2**31
    assert not in_range(neg, np.array([-2**15 - 1], dtype=np.int32), "mul", lo, hi)  # 2**31 + 2**16
    assert not in_range(neg, np.array([2**16, -2**16], dtype=np.int32), "mul", lo, hi)  # (-2**16) * (-2**16)
    assert not in_range(np.array([], dtype=np.int32), a, "add", lo, hi)  # nothing shown
    # an operand given as its (min, max), as a replay gives a recorded constant's: the same answers
    assert in_range((0, 2**30), np.array([2**30 - 1], dtype=np.int32), "add", lo, hi)
    assert not in_range(a, (0, 2**30), "add", lo, hi)
    assert in_range(neg, (-2**15 + 1, 2**15 - 1), "mul", lo, hi) and not in_range((-2**16, 3), (-2**15, 0), "mul", lo, hi)


def test_a_language_changed_after_the_kernel_replays_is_patched_as_it_is_now(rt, monkeypatch):
    """A launch that replays a recording without Triton's language patches (lean) checks the language against
    the plan first: a builtin swapped after the kernel replayed is seen, and the kernel runs as it reads now."""
    from gpuemu.runtime import trace

    x, y = torch.tensor([-1.0, 2.0, -3.0, 4.0]), torch.empty(4)
    for _ in range(3):  # noted, recorded, replayed
        _max_kernel[(1,)](x, y, BLOCK=4)
    replayed = trace.stats["replayed"]
    _max_kernel[(1,)](x, y, BLOCK=4)
    assert trace.stats["replayed"] == replayed + 1 and y.tolist() == [0.0, 2.0, 0.0, 4.0]
    monkeypatch.setattr(tl, "maximum", tl.minimum)
    _max_kernel[(1,)](x, y, BLOCK=4)
    assert y.tolist() == [-1.0, 0.0, -3.0, 0.0]


def test_the_plan_check_sees_a_replaced_a_deleted_and_an_inherited_attribute():
    """fast._Plan.unchanged reads most attributes from their object's own dict at once: a replaced value, a
    deleted one and a changed inherited one (read with getattr) are each seen; the value the plan itself sets,
    left in place (as a plain interpreter launch leaves some), is not a change."""
    import types

    def f1():
        pass

    def f2():
        pass

    def f3():  # what the plan sets
        pass

    class Base:
        g = f1

    class Sub(Base):
        pass

    ns = types.SimpleNamespace(a=f1, b=f2)
    plan = fast._Plan([(ns, "a", f1, f3), (ns, "b", f2, f3), (Sub, "g", f1, f3)])
    assert len(plan.own) == 1 and len(plan.rest) == 1  # Sub.g is inherited: read with getattr
    assert plan.unchanged()
    ns.a = f2
    assert not plan.unchanged()
    ns.a = f1
    del ns.b
    assert not plan.unchanged()
    ns.b = f2
    assert plan.unchanged()
    Base.g = f2
    assert not plan.unchanged()
    Base.g = ns.a = f3
    assert plan.unchanged()


def test_value_handles_are_built_and_checked_as_the_interpreter_builds_them():
    """fast.install's TensorHandle constructor: the dataclass's fields (a fresh attr dict each, or the one
    given) and its size check (data wider than the type is refused with the interpreter's error; pointers and
    int1 pass as they do)."""
    from gpuemu.runtime import _compat
    from gpuemu.runtime.executor import _Scope

    TH = _compat.interp().TensorHandle
    scope = _Scope()
    fast.install(scope)
    try:
        a, b = TH(np.zeros(2, dtype=np.float32), tl.float32), TH(np.zeros(2, dtype=np.float32), tl.float32)
        assert a.attr == {} and a.attr is not b.attr and a.dtype is tl.float32
        given = {"_rank": 1}
        assert TH(np.zeros(2, dtype=np.int32), tl.int32, given).attr is given
        assert TH(data=np.zeros(1, dtype=np.uint64), dtype=tl.pointer_type(tl.float32)).data.size == 1
        assert TH(np.zeros(3, dtype=bool), tl.int1).dtype is tl.int1
        with pytest.raises(ValueError, match="exceeds dtype primitive_bitwidth"):
            TH(np.zeros(2, dtype=np.float64), tl.float32)
    finally:
        scope.restore()
    with pytest.raises(ValueError, match="exceeds dtype primitive_bitwidth"):  # and Triton's own, after
        TH(np.zeros(2, dtype=np.float64), tl.float32)
    assert "__init__" not in vars(TH) or vars(TH)["__init__"].__module__ != "gpuemu.runtime.fast"
