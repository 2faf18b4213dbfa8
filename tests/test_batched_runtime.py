"""Batched-grid execution (gpuemu.runtime.batched): the same bits as one program at a time, and a fallback
with its reason for what a program axis cannot do."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from gpuemu import runtime
from gpuemu.errors import KernelFinding
from gpuemu.runtime import batched
from gpuemu.runtime.report import observe


def both(fn, *args):
    """(sequential outputs, batched outputs, the batched launches' grid modes); ``fn`` makes fresh outputs."""
    out = {}
    modes = []
    for mode in ("sequential", "batched"):
        runtime.configure(grid=mode)
        with observe() as reps:
            out[mode] = fn(*args)
        if mode == "batched":
            modes = [r.grid_mode for r in reps]
    return out["sequential"], out["batched"], modes


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and same_bits(a, b)
    return repr(a) == repr(b)


def same_bits(a, b) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().contiguous().reshape(-1), b.detach().contiguous().reshape(-1)
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


# ---------------------------------------------------------------------- kernels


@triton.jit
def _center_rows(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + pid * stride + offs, mask=m, other=0.0)
    s = tl.sum(x, axis=0)
    big = tl.max(tl.where(m, x, float("-inf")), axis=0)
    tl.store(y_ptr + pid * stride + offs, x - s / n + 0 * big, mask=m)


@triton.jit
def _rows_to(x_ptr, y_ptr, n, WRAP: tl.constexpr, REVERSE: tl.constexpr, BLOCK: tl.constexpr):
    """Program p copies row p of x to row (p % WRAP) of y, or to row (n_programs - 1 - p) when REVERSE."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    row = (tl.num_programs(0) - 1 - pid) if REVERSE else pid % WRAP
    tl.store(y_ptr + row * n + offs, tl.load(x_ptr + pid * n + offs, mask=m) + 0.0 * pid, mask=m)


@triton.jit
def _tile_ops(a_ptr, b_ptr, c_ptr, idx_ptr, cs_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + (pm * M + rm)[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * (N * tl.num_programs(1)) + (pn * N + rn)[None, :])
    c = tl.dot(a, b)
    c = c + tl.sum(c, axis=1, keep_dims=True) * 0.5 + tl.reshape(tl.trans(c.T), (M, N))
    tl.store(c_ptr + (pm * M + rm)[:, None] * (N * tl.num_programs(1)) + (pn * N + rn)[None, :], c)
    arg = tl.argmax(c, axis=1)
    tl.store(idx_ptr + (pm * tl.num_programs(1) + pn) * M + rm, arg)
    cs = tl.cumsum(tl.sum(c, axis=0), axis=0)
    tl.store(cs_ptr + (pm * tl.num_programs(1) + pn) * N + rn, cs + tl.expand_dims(tl.max(cs, axis=0), 0))


@triton.jit
def _first_program_writes(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 0:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2)
    else:
        tl.store(y_ptr + pid * BLOCK + offs, tl.load(x_ptr + pid * BLOCK + offs))


@triton.jit
def _count(c_ptr):
    tl.atomic_add(c_ptr, 1)


@triton.jit
def _no_mask(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


# ---------------------------------------------------------------------- tests


def test_program_ids_follow_the_sequential_order_and_no_chunk_is_one_program():
    x, y, z = batched.program_ids((2, 3, 2), 0, 12)
    order = [(x0, y0, z0) for x0 in range(2) for y0 in range(3) for z0 in range(2)]
    assert list(zip(x.tolist(), y.tolist(), z.tolist())) == order
    assert batched.chunks(1025, 512) == [(0, 512), (512, 1025)]  # the last program joins the chunk before
    assert all(b - a > 1 for a, b in batched.chunks(2 * 512 + 1, 512))


@pytest.mark.parametrize("rows,n", [(3, 37), (7, 64), (1030, 19)])  # 1030 programs: three chunks
def test_row_kernel_bits_equal_and_it_ran_batched(rt, rows, n):
    x = torch.randn(rows, n)

    def go():
        y = torch.full_like(x, float("nan"))
        _center_rows[(rows,)](x, y, n, x.stride(0), BLOCK=triton.next_power_of_2(n))
        return y

    seq, bat, modes = both(go)
    assert same_bits(seq, bat)
    assert modes and modes[0].startswith("batched")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_2d_grid_dot_reduce_scan_reshape_and_transpose_bits_equal(rt, dtype):
    M, N, K, gm, gn = 16, 16, 16, 3, 2
    a = torch.randn(gm * M, K).to(dtype)
    b = torch.randn(K, gn * N).to(dtype)

    def go():
        c = torch.empty(gm * M, gn * N, dtype=torch.float32)
        idx = torch.empty(gm * gn * M, dtype=torch.int32)
        cs = torch.empty(gm * gn * N, dtype=torch.float32)
        _tile_ops[(gm, gn)](a, b, c, idx, cs, M=M, N=N, K=K)
        return c, idx, cs

    seq, bat, modes = both(go)
    assert all(same_bits(s, t) for s, t in zip(seq, bat))
    assert modes[0].startswith("batched")


def test_a_branch_on_the_program_id_runs_program_by_program_and_says_why(rt):
    x = torch.randn(4 * 32)

    def go():
        y = torch.zeros_like(x)
        _first_program_writes[(4,)](x, y, BLOCK=32)
        return y

    seq, bat, modes = both(go)
    assert same_bits(seq, bat)
    assert modes == ["sequential: a branch or loop condition depends on the program id"]


def test_atomics_run_program_by_program(rt):
    def go():
        c = torch.zeros(1, dtype=torch.int32)
        _count[(37,)](c)
        return c

    seq, bat, modes = both(go)
    assert int(bat) == 37 and same_bits(seq, bat)
    assert modes == ["sequential: atomics (programs communicating)"]


def test_a_finding_is_reported_exactly_as_one_program_at_a_time_reports_it(rt):
    x = torch.randn(100)  # 4 programs of 32: the last reads past the end
    found = {}
    for mode in ("sequential", "batched"):
        runtime.configure(grid=mode)
        y = torch.zeros(128)
        with pytest.raises(KernelFinding) as ei:
            _no_mask[(4,)](x, y, BLOCK=32)
        found[mode] = str(ei.value)
    assert found["batched"] == found["sequential"] and "program (3, 0, 0)" in found["sequential"]


def test_the_fallback_restores_what_a_batched_attempt_wrote(rt):
    """The batched attempt stores before it meets the branch; the sequential run starts from the bytes
    the launch was given (y all zeros), so a kernel reading its own output is not fooled."""
    x = torch.randn(4 * 32)
    runtime.configure(grid="batched")
    y = torch.zeros_like(x)
    _first_program_writes[(4,)](x, y, BLOCK=32)
    expect = x.clone()
    expect[:32] *= 2
    assert torch.equal(y, expect)


def test_the_corpus_runs_bit_for_bit_the_same_batched(rt):
    """Every launcher of examples/kernels on fp32, fp16 and bf16 cases big enough for several programs:
    the batched runtime's outputs (or its error) equal the sequential runtime's, bit for bit."""
    from gpuemu import cases, corpus, target

    checked = batched_launches = launches = 0
    reasons: dict = {}
    unstable: list = []
    for entry in corpus.load_manifest():
        fn = target.load(corpus.resolve_target(entry))
        seed = next(s for s in range(1000, 1400)
                    if int(np.prod(list(cases.generate(entry.op, s, dtype="fp32").dims.values()))) >= 512)
        for dtype in ("fp32", "fp16", "bf16"):
            case = cases.generate(entry.op, seed, dtype=dtype)
            outs = {}
            for mode in ("sequential", "batched", "sequential again"):
                if mode == "sequential again" and _same(outs["sequential"], outs["batched"]):
                    break
                runtime.configure(grid=mode.split()[0])
                inputs, kwargs = cases.materialize(case)
                with observe() as reps, np.errstate(all="ignore"):
                    try:
                        outs[mode] = fn(**inputs, **kwargs)
                    except Exception as e:  # noqa: BLE001 - a finding or a refusal: the same one both ways
                        outs[mode] = f"{type(e).__name__}: {e}"
                if mode == "batched":
                    for r in reps:
                        launches += 1
                        batched_launches += r.grid_mode.startswith("batched")
                        if not r.grid_mode.startswith("batched"):
                            reasons[r.grid_mode] = reasons.get(r.grid_mode, 0) + 1
            if "sequential again" in outs:
                # a launcher whose output holds memory it never wrote (torch.empty) differs from itself
                assert not _same(outs["sequential"], outs["sequential again"]), (entry.target, dtype, seed)
                unstable.append((entry.target, dtype))
            checked += 1
    assert checked >= 3 * 60 and len(unstable) <= 3, unstable
    # the engine engaged: most launches of several programs ran batched (the rest say why)
    assert batched_launches >= 0.5 * (launches - reasons.get("sequential: one program", 0)), reasons


def test_programs_writing_one_row_leave_the_sequential_orders_value_and_tiles_in_any_order_scatter():
    """A batched store scatters with numpy only where no two lanes write one element (memory._distinct):
    programs whose tiles come in reverse order do; programs that overwrite each other's row take Triton's
    lane-by-lane store, so the last program of the grid order wins as one program at a time."""
    runtime.activate()
    try:
        x = torch.randn(6, 40)
        for wrap, reverse in ((6, True), (2, False), (1, False)):
            def run():
                y = torch.zeros(6, 40)
                _rows_to[(6,)](x, y, 40, WRAP=wrap, REVERSE=reverse, BLOCK=64)
                return y
            seq, bat, modes = both(run)
            assert same_bits(seq, bat), (wrap, reverse)
            assert modes and modes[0].startswith("batched")
            if not reverse:
                assert torch.equal(seq[:wrap], x[6 - wrap:])  # the last programs' rows
    finally:
        runtime.deactivate()
