"""Integer overflow in index arithmetic (gpuemu.runtime.overflow): the runtime's integers wrap exactly as a GPU's,
op by op, and a wrapped value that reaches an address is an ``overflow`` finding naming the first wrapping
expression, its operands and line, in every grid mode and through recorded traces; a wrap that never reaches an
address (a hash, a random stream) is not."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from gpuemu.errors import KernelFinding
from gpuemu.runtime import trace

MODES = ["batched", "sequential"]


def _wrap(v: int, bits: int) -> int:
    """Two's complement: what a GPU's ``bits``-bit signed integer holds for the exact value ``v``."""
    return (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


@triton.jit
def _int_ops(a_ptr, b_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    tl.store(out_ptr + 0 * N + offs, a + b, mask=m)
    tl.store(out_ptr + 1 * N + offs, a - b, mask=m)
    tl.store(out_ptr + 2 * N + offs, a * b, mask=m)
    tl.store(out_ptr + 3 * N + offs, -a, mask=m)
    tl.store(out_ptr + 4 * N + offs, a * 3 + 7, mask=m)  # int constants take the operand's type
    tl.store(out_ptr + 5 * N + offs, (a.to(tl.int64) * b).to(a.dtype), mask=m)  # int64 product, truncated


@pytest.mark.parametrize("dtype,bits", [(torch.int32, 32), (torch.int16, 16), (torch.int8, 8)])
@pytest.mark.parametrize("grid_mode", MODES)
def test_integers_wrap_op_by_op_as_twos_complement(rt, grid_mode, dtype, bits):
    """Every + - * and unary - of signed integers, on the extremes and on random values, is the exact result
    reduced to the type in two's complement (numpy arrays of the kernel's own type: no Python int, no silent
    widening), on the ordinary path and in replays of a recorded trace (five launches)."""
    rt.configure(grid=grid_mode)
    info = torch.iinfo(dtype)
    ext = [info.min, info.min + 1, -2, -1, 0, 1, 2, info.max - 1, info.max]
    rng = np.random.default_rng(7)
    a = ext * len(ext) + rng.integers(info.min, info.max, 64, endpoint=True).tolist()
    b = [e for e in ext for _ in ext] + rng.integers(info.min, info.max, 64, endpoint=True).tolist()
    n = len(a)
    ta, tb = torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)
    want = torch.tensor([_wrap(x + y, bits) for x, y in zip(a, b)] + [_wrap(x - y, bits) for x, y in zip(a, b)]
                        + [_wrap(x * y, bits) for x, y in zip(a, b)] + [_wrap(-x, bits) for x in a]
                        + [_wrap(x * 3 + 7, bits) for x in a] + [_wrap(x * y, bits) for x, y in zip(a, b)], dtype=dtype)
    for _ in range(5):  # (the third launch records; the fourth and fifth replay)
        out = torch.zeros(6 * n, dtype=dtype)
        _int_ops[(1,)](ta, tb, out, n, BLOCK=256)
        assert torch.equal(out, want)


@triton.jit
def _widen(a_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs, mask=offs < N)
    tl.store(out_ptr + offs, a.to(tl.int64) * 4096 + (a.to(tl.int64) << 20), mask=offs < N)


def test_int32_to_int64_sign_extends_and_int64_does_not_wrap_at_2_31(rt):
    a = torch.tensor([-2**31, -1, 0, 2**31 - 1, 123456789], dtype=torch.int32)
    out = torch.zeros(5, dtype=torch.int64)
    _widen[(1,)](a, out, 5, BLOCK=8)
    assert out.tolist() == [v * 4096 + v * 2**20 for v in a.tolist()]


@triton.jit
def _rows(x_ptr, y_ptr, start, stride_m, N, BLOCK: tl.constexpr):
    pid_m = tl.program_id(0) + start
    offs = pid_m * stride_m
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + cols, mask=cols < N)
    tl.store(y_ptr + cols, x, mask=cols < N)


@triton.jit
def _rows_from2(x_ptr, y_ptr, start, stride_m, N, BLOCK: tl.constexpr):
    pid_m = tl.program_id(0) + start
    offs = pid_m * stride_m
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + cols, mask=(cols < N) & (pid_m >= 2))
    tl.store(y_ptr + cols, x, mask=cols < N)


@triton.jit
def _rows_i64(x_ptr, y_ptr, start, stride_m, N, BLOCK: tl.constexpr):
    pid_m = tl.program_id(0) + start
    offs = pid_m.to(tl.int64) * stride_m
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + cols, mask=cols < N)
    tl.store(y_ptr + cols, x, mask=cols < N)


@pytest.mark.parametrize("grid_mode", MODES)
def test_a_wrapped_offset_reaching_an_address_is_an_overflow_finding(rt, grid_mode):
    """pid_m * stride_m wraps int32 at pid_m=2, stride_m=2**30: reported at the product, with its operands and
    line, for the first program whose offset wraps (program 1 of a grid starting at pid_m=1), not as the
    out-of-bounds access the wrapped pointer makes."""
    rt.configure(grid=grid_mode)
    x, y = torch.randn(4, 16), torch.empty(16)
    with pytest.raises(KernelFinding) as ei:
        _rows_from2[(4,)](x, y, 1, 2**30, 16, BLOCK=16)  # (program 0's pointer is out of range but masked off)
    e = ei.value
    assert e.kind == "overflow"
    line = _rows_from2.fn.__code__.co_firstlineno + 3  # (the decorator's line, then def, pid_m, offs)
    assert e.message.startswith(f"offs = pid_m * stride_m wraps int32 at pid_m=2, stride_m=1073741824 (line {line}): "
                                "use .to(tl.int64)")
    assert "2147483648 becomes -2147483648" in e.message
    assert e.details["program"] == (1, 0, 0)
    assert e.details["operands"] == {"pid_m": 2, "stride_m": 2**30}
    assert e.details["address_site"].endswith(f":{line + 2}")
    # the int64 version computes the true offset: an ordinary out-of-bounds read of this small tensor
    with pytest.raises(KernelFinding) as ei:
        _rows_i64[(4,)](x, y, 1, 2**30, 16, BLOCK=16)
    assert ei.value.kind == "oob"


@triton.jit
def _rows_cast_after(x_ptr, y_ptr, start, stride_m, N, BLOCK: tl.constexpr):
    pid_m = tl.program_id(0) + start
    offs = (pid_m * stride_m).to(tl.int64)  # too late: the product already wrapped
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + cols, mask=cols < N)
    tl.store(y_ptr + cols, x, mask=cols < N)


@triton.jit
def _nested(x_ptr, y_ptr, bos, H, h, K, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    base = (bos * H + h) * K
    x = tl.load(x_ptr + base + cols)
    tl.store(y_ptr + cols, x)


@pytest.mark.parametrize("grid_mode", MODES)
def test_the_note_survives_casts_splats_and_sums_and_names_the_first_wrap(rt, grid_mode):
    rt.configure(grid=grid_mode)
    x, y = torch.randn(64), torch.empty(16)
    with pytest.raises(KernelFinding) as ei:
        _rows_cast_after[(2,)](x, y, 2, 2**30, 16, BLOCK=16)
    assert ei.value.kind == "overflow" and ei.value.details["expression"] == "pid_m * stride_m"
    with pytest.raises(KernelFinding) as ei:
        _nested[(1,)](x, y, 70000, 32, 3, 1024, BLOCK=16)  # bos * H fits; (bos * H + h) * K wraps
    assert ei.value.kind == "overflow"
    assert ei.value.details["expression"] == "base = (bos * H + h) * K"
    assert ei.value.details["operands"] == {"bos * H + h": 70000 * 32 + 3, "K": 1024}


@triton.jit
def _hash_rows(x_ptr, y_ptr, n_rows, N, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    h = (pid + seed) * 1103515245 + 12345  # int32 LCG: wraps on purpose
    row = (h & 0x7FFFFFFF) % n_rows  # a bitwise mask folds it into a valid row: intentional
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N)
    noise = (h * 31 + cols).to(tl.float32) * 0.0  # a wrapped value used as data, never as an address
    tl.store(y_ptr + pid * N + cols, x + noise, mask=cols < N)


@triton.jit
def _philox(y_ptr, seed, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = tl.randint(seed, offs)  # uint32 Philox rounds: unsigned wraps are defined
    tl.store(y_ptr + offs, r.to(tl.int32, bitcast=True), mask=offs < N)


@pytest.mark.parametrize("grid_mode", MODES)
def test_intentional_wraps_that_never_reach_an_address_are_not_flagged(rt, grid_mode):
    rt.configure(grid=grid_mode)
    trace.clear()
    x = torch.randn(7, 32)
    want = None
    before = dict(trace.stats)
    for _ in range(5):  # ordinary, recorded and replayed launches alike: the replays see the wraps and go on
        y = torch.empty(6, 32)
        _hash_rows[(6,)](x, y, 7, 32, 12345, BLOCK=32)
        rows = [(((p + 12345) * 1103515245 + 12345 + 2**31) % 2**32 - 2**31) & 0x7FFFFFFF for p in range(6)]
        assert torch.equal(y, x[[r % 7 for r in rows]])
        out = torch.empty(1000, dtype=torch.int32)
        _philox[(8,)](out, 42, 1000, BLOCK=128)
        if want is None:
            want = out.clone()
        assert torch.equal(out, want)
    assert trace.stats["replayed"] > before["replayed"] and trace.stats["diverged"] == before["diverged"]


def test_a_replay_that_would_hide_a_wrap_falls_back_and_reports_it(rt):
    """Recorded with a small stride (no wrap), replayed with one that wraps: the replay's overflow check sees
    the wrap, the launch runs the ordinary way, and the finding reads as it does without traces."""
    rt.configure(grid="batched")
    trace.clear()
    x, y = torch.randn(4, 16), torch.empty(16)
    before = dict(trace.stats)
    for _ in range(4):
        _rows_from2[(4,)](x, y, 0, 4, 16, BLOCK=16)
    assert trace.stats["replayed"] > before["replayed"]
    with pytest.raises(KernelFinding) as ei:
        _rows_from2[(4,)](x, y, 1, 2**30, 16, BLOCK=16)
    assert ei.value.kind == "overflow" and ei.value.details["program"] == (1, 0, 0)
    for _ in range(3):  # and launches that do not wrap still give the same bits
        _rows_from2[(4,)](x, y, 0, 4, 16, BLOCK=16)
        assert torch.equal(y, x.reshape(-1)[12:28])


def test_debug_mode_keeps_tritons_overflow_assertion(rt):
    x, y = torch.randn(4, 16), torch.empty(16)
    with pytest.raises(KernelFinding) as ei:
        _rows[(4,)](x, y, 2, 2**30, 16, BLOCK=16, debug=True)
    assert ei.value.kind == "assert" and "int32 overflow detected for operation mul" in ei.value.message


def _launch_rows(x, stride):
    y = torch.empty(16)
    _rows[(2,)](x, y, 2, stride, 16, BLOCK=16)
    return y


def test_an_overflow_finding_is_its_own_verdict_class(rt):
    from gpuemu.compare import OVERFLOW
    from gpuemu.oracle import Verdict
    from gpuemu.results import Failure
    from gpuemu.runners import run_launcher

    run = run_launcher(_launch_rows, [torch.randn(4, 16), 2**30], {})
    assert isinstance(run.error, KernelFinding) and run.error.kind == "overflow"
    v = Verdict(OVERFLOW, "overflow", run.error.message)
    assert not v.passed
    from gpuemu.cases import generate

    f = Failure(case=generate("softmax", 1, dtype="fp32"), verdict=v)
    assert f.line().startswith("OVERFLOW seed=")
