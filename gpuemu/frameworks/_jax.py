"""torch <-> JAX by DLPack (imported only for a JAX launcher or ``gpuemu.jax.shadow``)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ._numpy import from_numpy, owned


def _x64() -> bool:
    return bool(jax.config.read("jax_enable_x64"))


def to_native(t: Any) -> Any:
    """A torch tensor as a JAX array (zero-copy by DLPack where JAX accepts the buffer); anything else as is.

    int64 (index arguments) becomes int32 when JAX runs without x64, as JAX itself would make it; the values
    (indices below 2**31) are unchanged."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    if t.dtype == torch.int64 and not _x64():
        t = t.to(torch.int32)
    if not t.is_contiguous():  # JAX arrays have no strides: the values, dense
        t = t.contiguous()
    return jax.dlpack.from_dlpack(t.detach())


def is_array(x: Any) -> bool:
    return isinstance(x, jax.Array)


def is_concrete(x: Any) -> bool:
    """False for a tracer (the call is being traced by jit/vmap/grad: there are no values to check)."""
    return not isinstance(x, jax.core.Tracer)


def to_torch(x: Any, *, index_output: bool = False, copy: bool = True) -> Any:
    """A JAX (or numpy) array as a torch tensor that owns its memory (``copy=False``: a DLPack view); anything
    else is returned as is, for the Oracle to judge (a tuple is a type failure). ``index_output``: int32
    indices (JAX without x64) are widened to int64, exactly."""
    import torch

    if isinstance(x, jax.Array):
        t = torch.from_dlpack(x)
    elif isinstance(x, np.ndarray) and x.dtype.names is None:
        t = from_numpy(x)
    else:
        return x
    return owned(t, copy=copy, index_output=index_output)


def block(x: Any) -> Any:
    """Wait for an asynchronously dispatched result (the shadow timer measures the real call)."""
    return jax.block_until_ready(x)
