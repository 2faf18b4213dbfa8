"""Poisoning the outputs a launcher allocates.

An element the kernel never writes must not pass as a lucky zero (torch.empty on a fresh page is often
zero). While a launcher runs, every ``torch.empty``-family allocation it makes is filled with NaN
(integers with a sentinel no index can take); allocations made by Triton's own runtime during a
launch are left alone.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

INT_POISON = -0x5A5A5A5A  # no op returns a negative index
_POISONED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def _fill(t) -> None:
    import torch

    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        info = torch.iinfo(t.dtype)
        t.fill_(max(info.min, INT_POISON) if info.min < 0 else info.max)


@contextlib.contextmanager
def poison_allocations(enabled: bool = True) -> Iterator[None]:
    if not enabled:
        yield
        return
    from torch.overrides import TorchFunctionMode

    from .launches import in_launch

    class _Poison(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in _POISONED and not in_launch():
                _fill(result)
            return result

    with _Poison():
        yield
