"""Tolerances: per op and dtype, from the rule pack, applied on condition-aware error scales.

At output element i a kernel may differ from the fp64 reference by

    bound_i = atol + rtol * max(scale_i, |ref_i|) + u(out) * |ref_i| + u(dtype) * rounded_i + floor(out)

``scale_i`` is the op's error scale (see ``OpSpec.error_scale``): what a correct kernel's rounding
error inside the computation is proportional to, so one fitted rtol per op and dtype covers it.
``u(out) * |ref_i|`` is the final rounding of the result to the output dtype (at most half an ulp: unit
roundoff fp32 2^-24, fp16 2^-11, bf16 2^-8), which every kernel pays whatever it computes inside; it is
allowed exactly rather than through rtol, because a fitted rtol can be smaller than the unit roundoff
(the scale usually exceeds |ref| by far), and then a case where scale ~ |ref| would fail a correct
kernel on its last rounding alone (measured: the correct attention kernel, fp16, D=1). ``rounded_i`` is
the magnitude of the intermediates that correct code keeps in the input dtype (the framework's eager forms:
``F.silu(a)`` stored before ``* b``, Hugging Face's RMSNorm casting the normalised value back before
``* weight``; attention's P @ |V| in flash kernels; see ``OpSpec.rounded``; 0 for most ops), allowed the same
way (measured: the correct flash-attention kernel,
which casts P to fp16 before P @ V, failed 7 of 1,000 fp16 cases at up to 1.6x an rtol fitted on 200).
Ops whose rtol is 0 are exact (their result is representable) and get no rounding allowance.
``out`` is the output's dtype (``dtype`` unless the op accepts a wider output, an fp32 loss for fp16
logits: see ``OpSpec.wider_output``). ``floor(out)`` is the spacing of the dtype's subnormals (fp16 2^-24, bf16 2^-133, fp32 2^-149):
rounding a result into the subnormal range costs that much in absolute terms, however correct the
kernel. When every reference element is so small that atol alone would cover it, atol is dropped: such
a case would otherwise pass a kernel that writes zeros.

A tolerance with ``flush_subnormals`` (set for outputs on CUDA, ``device_arith.case_tolerance``) also allows an
element whose reference lies below the smallest normal fp32 (2^-126) to be flushed to zero, as the GPU's
approximate instructions do: there the bound gains |ref_i|.
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
    flush_subnormals: bool = False  # results below 2^-126 may be flushed to zero (a GPU's approximate math)

    def to_dict(self) -> dict:
        d = {"rtol": self.rtol, "atol": self.atol, "source": self.source, "scale": self.scale}
        if self.flush_subnormals:
            d["flush_subnormals"] = True
        return d


class ToleranceTable:
    """``table.get(op, dtype)``: the op's entry for the dtype, else the default entry. ``by_device`` holds the
    entries of devices whose arithmetic differs from the CPU interpreter's (``device_tolerances`` of a rule
    pack, e.g. the built-in ``calibrated-cuda.yaml``): ``get(op, dtype, device="cuda")`` takes the device's
    entry for the op where there is one, else the table's own."""

    def __init__(self, entries: Mapping[str, Mapping[str, Mapping[str, float]]], source: str = "rulepack",
                 by_device: Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]] | None = None,
                 device_sources: Mapping[str, str] | None = None) -> None:
        self._entries = entries
        self._source = source
        self._by_device = dict(by_device or {})
        self._device_sources = dict(device_sources or {})  # the files a device's entries came from

    def get(self, op: str, dtype: str, device: str | None = None) -> Tolerance:
        kind = device_kind(device)
        own = self._by_device.get(kind, {}) if kind else {}
        dev_source = self._device_sources.get(kind or "", self._source)
        for table, where, source in ((own, f"{kind}.", dev_source), (self._entries, "", self._source)):
            entry = table.get(op, {}).get(dtype)
            if entry is not None:
                return Tolerance(float(entry["rtol"]), float(entry["atol"]), f"{source}:{where}{op}.{dtype}")
        for table, where, source in ((own, f"{kind}.", dev_source), (self._entries, "", self._source)):
            entry = table.get("default", {}).get(dtype)
            if entry is not None:
                return Tolerance(float(entry["rtol"]), float(entry["atol"]), f"{source}:{where}default.{dtype}")
        raise RulePackError(f"rule pack has no tolerance for op {op!r}, dtype {dtype} (nor a default); "
                            f"add tolerances.default.{dtype}: {{rtol: ..., atol: ...}}")

    def to_dict(self) -> dict:
        return {k: {d: dict(v) for d, v in e.items()} for k, e in self._entries.items()}


def device_kind(device) -> str | None:
    """'cuda' for a CUDA device ('cuda', 'cuda:1', a torch.device, a tensor on it), None for the CPU."""
    if device is None:
        return None
    dev = getattr(device, "device", device)
    text = str(getattr(dev, "type", dev))
    return "cuda" if text.startswith("cuda") else None


SUBNORMAL_SPACING = {"fp32": 2.0**-149, "fp16": 2.0**-24, "bf16": 2.0**-133}
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}


def rounding_allowance(ref, dtype: str, *, exact: bool = False, rounded=None, out_dtype: str | None = None):
    """What any correct kernel may lose beyond rtol * scale: the final rounding of the result to its output
    dtype (``out_dtype``, default ``dtype``: an op may return a wider dtype, see ``OpSpec.wider_output``), and
    of the op's intermediates that correct code stores in the input ``dtype`` (``rounded``, see
    ``OpSpec.rounded``), each at its dtype's unit roundoff (none for an exact op), plus the output dtype's
    subnormal spacing. Per element, float64."""
    import torch

    out_dtype = out_dtype or dtype
    floor = SUBNORMAL_SPACING.get(out_dtype, 0.0)
    if exact:
        return torch.full_like(ref, floor)
    allowance = UNIT_ROUNDOFF.get(out_dtype, 0.0) * torch.nan_to_num(ref.abs(), nan=0.0, posinf=0.0) + floor
    if rounded is not None:
        allowance = allowance + UNIT_ROUNDOFF.get(dtype, 0.0) * torch.nan_to_num(rounded, nan=0.0, posinf=0.0)
    return allowance


FLT_MIN = 2.0**-126  # the smallest normal fp32 (and bf16) magnitude


def flush_allowance(ref):
    """Per element, what flushing a subnormal result to zero costs: |ref| where |ref| < 2^-126, else 0."""
    import torch

    mag = torch.nan_to_num(ref.abs(), nan=0.0, posinf=0.0)
    return torch.where(mag < FLT_MIN, mag, torch.zeros_like(mag))


def bounds(scale, ref, tol: Tolerance, dtype: str = "fp32", *, rounded=None, out_dtype: str | None = None):
    """Per-element bound (float64 tensor); see the module docstring for the formula."""
    import torch

    ref_abs = ref.abs()  # once: three uses below
    if tol.scale == "ref" or scale is None:
        return tol.atol + tol.rtol * torch.nan_to_num(ref_abs, nan=0.0)
    s = torch.maximum(scale, ref_abs)
    s = torch.nan_to_num(s, nan=0.0, posinf=float("inf"))
    allowance = rounding_allowance(ref, dtype, exact=tol.rtol == 0, rounded=rounded, out_dtype=out_dtype)
    if tol.flush_subnormals:
        allowance = allowance + flush_allowance(ref)
    if tol.atol > 0 and bool((ref_abs <= tol.atol).all()):
        return tol.rtol * s + allowance  # all-near-zero output: never pass on atol alone
    return tol.atol + tol.rtol * s + allowance
