import torch
import triton
import triton.language as tl

from gpuemu.runners import observe_launches
from gpuemu.runners.launches import add_interceptor, remove_interceptor


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


def _launch(x, block=16):
    y = torch.empty_like(x)
    _double[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel(), BLOCK=block)
    return y


def test_observes_kernel_constexprs_and_callable_grid():
    x = torch.arange(40, dtype=torch.float32)
    with observe_launches() as seen:
        y = _launch(x)
    assert torch.equal(y, 2 * x)
    assert len(seen) == 1
    assert seen[0].kernel == "_double" and seen[0].constexprs == {"BLOCK": 16} and seen[0].grid == (3,)


def test_nothing_observed_outside_the_block():
    with observe_launches() as seen:
        pass
    _launch(torch.ones(3))
    assert seen == []


def test_interceptors_chain_and_can_be_removed():
    calls = []

    def outer(kernel, args, kwargs, grid, warmup, call_next):
        calls.append(("outer", kwargs.get("BLOCK")))
        return call_next(args, kwargs, grid)

    def inner(kernel, args, kwargs, grid, warmup, call_next):
        calls.append(("inner", kernel.fn.__name__))
        return call_next(args, kwargs, grid)

    add_interceptor(outer)
    add_interceptor(inner)
    add_interceptor(outer)  # idempotent
    try:
        x = torch.arange(5, dtype=torch.float32)
        assert torch.equal(_launch(x), 2 * x)
    finally:
        remove_interceptor(outer)
        remove_interceptor(inner)
    assert calls == [("outer", 16), ("inner", "_double")]
    _launch(torch.ones(2))
    assert len(calls) == 2


def test_interceptor_gate_skips_unwanted_launches():
    calls = []

    def gated(kernel, args, kwargs, grid, warmup, call_next):
        calls.append(kernel.fn.__name__)
        return call_next(args, kwargs, grid)

    gated.wants = lambda kernel, args: len(calls) == 0 and args[0].numel() == 4  # only the first launch
    add_interceptor(gated)
    try:
        x = torch.arange(4, dtype=torch.float32)
        for _ in range(3):
            assert torch.equal(_launch(x), 2 * x)
    finally:
        remove_interceptor(gated)
    assert calls == ["_double"]


def test_describing_binds_as_inspect_does():
    """_describe's binder gives inspect's bind_partial + apply_defaults (parameter order, defaults, missing
    parameters left out), and raises as inspect does where a keyword repeats a positional argument."""
    import inspect

    import pytest

    from gpuemu.runners.launches import _all_plain, _bind

    def plain(a, b, c=3, D=4):
        pass

    def star(a, *rest, k=1):
        pass

    def want(fn, args, kwargs):
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    for fn, args, kwargs in ((plain, (1, 2), {}), (plain, (1,), {"D": 9}), (plain, (), {"c": 5}),
                             (plain, (1, 2, 3, 4), {}), (plain, (1,), {"c": 0, "b": 7}),
                             (star, (1, 2, 3), {"k": 2}), (star, (1,), {})):
        sig = inspect.signature(fn)
        got = _bind(sig, _all_plain(sig), args, kwargs)
        assert got == want(fn, args, kwargs) and list(got) == list(want(fn, args, kwargs)), (fn, args, kwargs)
    with pytest.raises(TypeError):
        _bind(inspect.signature(plain), True, (1,), {"a": 2})
