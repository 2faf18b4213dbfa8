"""Helpers shared by the framework adapters that import neither jax nor tensorflow."""

from __future__ import annotations

import numpy as np


def from_numpy(a: np.ndarray):
    import torch

    if a.dtype.name == "bfloat16":  # ml_dtypes: torch.from_numpy has no bf16; same bits through uint16
        return torch.from_numpy(np.ascontiguousarray(a).view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(a))
