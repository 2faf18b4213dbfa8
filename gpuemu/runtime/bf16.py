"""bfloat16 as the GPU rounds it: bit patterns (uint16) in, round-to-nearest-even out.

Triton's interpreter keeps bf16 values as their uint16 bit patterns and truncates fp32 -> bf16; the GPU
rounds to nearest even (``cvt.rn.bf16.f32``). These helpers convert between bit patterns and floats with
the GPU's rounding, so arithmetic can run in fp32 and be rounded back where the GPU rounds.
"""

from __future__ import annotations

import numpy as np

_QNAN = np.uint16(0x7FC0)


def to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns -> float32 (exact).

    >>> to_f32(np.array([0x3F80], dtype=np.uint16)).tolist()
    [1.0]
    """
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def from_f32(x: np.ndarray, *, rtz: bool = False) -> np.ndarray:
    """float32 -> bf16 bit patterns, round-to-nearest-even (or toward zero with ``rtz``); NaN stays NaN.

    >>> from_f32(np.array([1.00390625], dtype=np.float32)).tolist()  # halfway: ties to even (1.0)
    [16256]
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    if rtz:
        out = (u >> np.uint32(16)).astype(np.uint16)
    else:
        with np.errstate(over="ignore"):
            out = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, (u >> np.uint32(16)).astype(np.uint16) | _QNAN, out)
    return out


def from_f64(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bit patterns with one rounding (round-to-odd to fp32 first, then nearest-even).

    >>> from_f64(np.array([1.0 + 2.0**-8 + 2.0**-40])).tolist()  # just above the tie: rounds up
    [16257]
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        back = f.astype(np.float64)
        finite = np.isfinite(f) & np.isfinite(x)
        inexact = finite & (back != x)
        toward_zero = inexact & (np.abs(back) > np.abs(x))
        f = np.where(toward_zero, np.nextafter(f, np.float32(0)), f).astype(np.float32)
        u = f.view(np.uint32) | np.where(inexact, np.uint32(1), np.uint32(0))
    return from_f32(u.view(np.float32))


def from_any(x: np.ndarray, *, rtz: bool = False) -> np.ndarray:
    """Any numeric numpy array -> bf16 bit patterns with a single GPU-style rounding."""
    x = np.asarray(x)
    if x.dtype == np.float64 and not rtz:
        return from_f64(x)
    if x.dtype.kind in "iu" and x.dtype.itemsize >= 4:
        return from_f64(x.astype(np.float64))
    return from_f32(x.astype(np.float32), rtz=rtz)
