"""What the runtime does where it cannot run a launch itself, and with a kernel's own Python errors: the
launch goes to Triton's interpreter from the bytes it started with (the reason in its LaunchReport), and an
error Triton's interpreter raises too is the kernel's, raised as Triton raises it (an InterpreterError)."""

import textwrap

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.errors import InterpreterError

from gpuemu.runtime import executor
from gpuemu.runtime.report import observe


@triton.jit
def _bump(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


@triton.jit
def _mismatch(x_ptr, y_ptr, BLOCK: tl.constexpr):
    a = tl.load(x_ptr + tl.arange(0, BLOCK))
    b = tl.load(y_ptr + tl.arange(0, 2 * BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), a + b)


def test_a_kernel_built_with_exec_runs_on_the_runtime(rt):
    """No source to read (exec): the kernel runs as written, as Triton's interpreter runs it, not as an error."""
    src = textwrap.dedent("""
        @triton.jit
        def made(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2.0)
    """)
    ns = {}
    exec(src, {"triton": triton, "tl": tl}, ns)
    x, y = torch.randn(16), torch.zeros(16)
    with observe() as reps:
        ns["made"][(1,)](x, y, BLOCK=16)
    assert torch.equal(y, x * 2)
    assert reps and reps[0].fallback is None


def test_a_kernels_own_error_is_triton_s_interpreter_error_with_its_line(rt):
    x, y = torch.zeros(8), torch.zeros(16)
    with pytest.raises(InterpreterError) as ei:
        _mismatch[(1,)](x, y, BLOCK=8)
    err = ei.value
    assert isinstance(err, executor.KernelError) and isinstance(err, RuntimeError)
    assert isinstance(err.__cause__, ValueError)  # the kernel's own exception, as Triton's interpreter chains it
    assert "incompatible dimensions" in str(err) and "test_runtime_fallback.py:28" in str(err)
    assert torch.equal(x, torch.zeros(8))


@pytest.mark.parametrize("grid_mode", ["sequential", "batched"])
def test_a_launch_the_runtime_cannot_run_goes_to_triton_s_interpreter_from_its_first_bytes(rt, monkeypatch,
                                                                                          grid_mode):
    """A construct the runtime lacks (simulated: its program loop raises after the kernel wrote) is not the kernel's
    error: the arguments get their bytes back, Triton's interpreter runs the launch, the report says why."""
    rt.configure(grid=grid_mode)
    real = executor._run_programs

    def lacking(passes, kargs, grid3, state, builder, arena):
        real(passes, kargs, grid3, state, builder, arena)  # (the kernel's stores happened)
        raise AttributeError("a construct the runtime lacks")

    monkeypatch.setattr(executor, "_run_programs", lacking)
    x = torch.arange(40, dtype=torch.float32)
    with observe() as reps:
        _bump[(3,)](x, 40, BLOCK=16)
    assert torch.equal(x, torch.arange(40, dtype=torch.float32) + 1)  # once: the first run was undone
    assert len(reps) == 1 and reps[0].grid_mode == "interpreter"
    assert "AttributeError: a construct the runtime lacks" in reps[0].fallback
    assert reps[0].to_dict()["fallback"] == reps[0].fallback
    assert reps[0].launch_options()["runtime_fallback"] == reps[0].fallback


def test_an_error_on_both_is_the_kernels_with_the_interpreters_cause(rt, monkeypatch):
    """Where Triton's interpreter fails too, the kernel's error is raised, located, and nothing is left written."""
    x, y = torch.zeros(8), torch.zeros(16)
    calls = []
    real = executor._on_interpreter

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(executor, "_on_interpreter", spy)
    with pytest.raises(executor.KernelError, match="incompatible dimensions"):
        _mismatch[(1,)](x, y, BLOCK=8)
    assert calls == [1]


@triton.jit
def _from_shape(y_ptr, desc, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.full((BLOCK,), desc[1][0] * 100 + desc[1][1], tl.float32), mask=offs < desc[1][0])


def test_pre_run_hooks_run_before_the_launch_and_a_torch_size_argument_stays_ints(rt):
    """Triton's language tests test_pre_run_hooks and test_namedtuple: a kernel's add_pre_run_hook runs with the
    launch's arguments first; a torch.Size inside a tuple argument reaches the kernel as its ints."""
    x = torch.ones(4)
    hooked = triton.jit(_bump.fn)
    hooked.add_pre_run_hook(lambda *a, **k: a[0].zero_())
    hooked[(1,)](x, 4, BLOCK=4)
    assert torch.equal(x, torch.ones(4))  # zeroed by the hook, then + 1
    y = torch.zeros(8)
    z = torch.empty(3, 7)
    _from_shape[(1,)](y, (z, z.shape), BLOCK=8)
    assert torch.equal(y[:3], torch.full((3,), 307.0)) and not y[3:].any()
