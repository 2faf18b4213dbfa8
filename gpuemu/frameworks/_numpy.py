"""Helpers shared by the framework adapters that import neither jax nor tensorflow."""

from __future__ import annotations

import numpy as np


def from_numpy(a: np.ndarray):
    import torch

    if a.dtype.name == "bfloat16":  # ml_dtypes: torch.from_numpy has no bf16; same bits through uint16
        return torch.from_numpy(np.ascontiguousarray(a).view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(a))


def owned(t, *, copy: bool, index_output: bool):
    """``t`` as the Oracle takes it: a copy that owns its memory (unless ``copy`` is False), and int32 indices
    (JAX without x64, TensorFlow's default) widened to int64, exactly."""
    import torch

    if copy:
        t = t.clone()
    if index_output and t.dtype == torch.int32:
        t = t.to(torch.int64)
    return t
