"""Tolerances: per op and dtype, from the rule pack, applied on condition-aware error scales.

At output element i a kernel may differ from the fp64 reference by

    bound_i = atol + rtol * max(scale_i, |ref_i|) + floor(dtype)

``scale_i`` is the op's error scale (see ``OpSpec.error_scale``): what a correct kernel's rounding
error is proportional to. ``|ref_i|`` is always included because the final rounding to the output dtype
alone costs up to one half-ulp of the result. ``floor(dtype)`` is the spacing of the dtype's subnormals
(fp16 2^-24, bf16 2^-133, fp32 2^-149): rounding a result into the subnormal range costs that much in
absolute terms, however correct the kernel. When every reference element is so small that atol alone
would cover it, atol is dropped: such a case would otherwise pass a kernel that writes zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .errors import RulePackError


@dataclass(frozen=True)
class Tolerance:
    """rtol and atol travel together. ``scale`` picks what rtol multiplies: ``condition`` (the op's
    error scale, gpuemu's default) or ``ref`` (|ref| alone: the classic allclose rule, kept to measure
    the regimes side by side)."""

    rtol: float
    atol: float
    source: str = "rulepack"
    scale: str = "condition"

    def to_dict(self) -> dict:
        return {"rtol": self.rtol, "atol": self.atol, "source": self.source, "scale": self.scale}


class ToleranceTable:
    """``table.get(op, dtype)``: the op's entry for the dtype, else the default entry."""

    def __init__(self, entries: Mapping[str, Mapping[str, Mapping[str, float]]], source: str = "rulepack") -> None:
        self._entries = entries
        self._source = source

    def get(self, op: str, dtype: str) -> Tolerance:
        for key in (op, "default"):
            entry = self._entries.get(key, {}).get(dtype)
            if entry is not None:
                return Tolerance(float(entry["rtol"]), float(entry["atol"]), f"{self._source}:{key}.{dtype}")
        raise RulePackError(f"rule pack has no tolerance for op {op!r}, dtype {dtype} (nor a default); "
                            f"add tolerances.default.{dtype}: {{rtol: ..., atol: ...}}")

    def to_dict(self) -> dict:
        return {k: {d: dict(v) for d, v in e.items()} for k, e in self._entries.items()}


SUBNORMAL_SPACING = {"fp32": 2.0**-149, "fp16": 2.0**-24, "bf16": 2.0**-133}


def bounds(scale, ref, tol: Tolerance, dtype: str = "fp32"):
    """Per-element bound (float64 tensor); see the module docstring for the formula."""
    import torch

    if tol.scale == "ref" or scale is None:
        return tol.atol + tol.rtol * torch.nan_to_num(ref.abs(), nan=0.0)
    s = torch.maximum(scale, ref.abs())
    s = torch.nan_to_num(s, nan=0.0, posinf=float("inf"))
    floor = SUBNORMAL_SPACING.get(dtype, 0.0)
    if tol.atol > 0 and bool((ref.abs() <= tol.atol).all()):
        return tol.rtol * s + floor  # all-near-zero output: never pass on atol alone
    return tol.atol + tol.rtol * s + floor
