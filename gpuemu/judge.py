"""Judging one shadowed output through the one comparison core.

An op-bound call is judged by :meth:`Oracle.compare` against the op's fp64 reference. A graph output or
a metamorphic re-launch has no OpSpec of its own; it is judged by :func:`gpuemu.compare.judge`, the same
comparison core the Oracle hands its reference and bound to, on the given float64 reference and an error
scale that says what the bound is relative to, so every verdict, message and detail reads the same
wherever it came from.

Large outputs are judged on their device (:func:`judge_against`): every element's error against its bound
is computed there, and the ``SKETCH_K`` elements nearest to or over their bound go through the Oracle (the
count over the bound is of all elements). A check then moves kilobytes to the CPU, not the activations:
on the H200 a 614,400-element Inductor kernel output took 1.2–1.6 s to judge on the CPU.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from ..oracle import FAIL, PASS, SKIP, Oracle, Verdict
from ..oracle import _unravel  # one index helper for every mismatch report
from ..tolerance import Tolerance, ToleranceTable

FLOAT_LABELS = ("fp32", "fp16", "bf16")
SKETCH_MIN = 1 << 16  # outputs with more elements are pre-selected on their device
SKETCH_K = 4096


def judge_against(output: Any, reference64: Any, *, dtype: str, tolerances: ToleranceTable, what: str,
                  scale64: Any = None, scale_doc: str = "|ref|", tol: Tolerance | None = None) -> Verdict:
    """Judge ``output`` (fp32/fp16/bf16) against a float64 ``reference64`` of the same shape.

    ``scale64`` (float64, same shape) is the magnitude the bound is relative to:
    ``bound = atol + rtol * max(scale, |ref|) + u * |ref|`` (u: the dtype's unit roundoff, see
    :mod:`gpuemu.tolerance`) with the rule pack's default tolerance for ``dtype``. The reference and scale
    may live on the output's device; an output of more than ``SKETCH_MIN`` elements is judged there.
    """
    import time

    from ..compare import judge

    tol = tol or tolerances.get("default", dtype, device=getattr(output, "device", None))
    if output.numel() > SKETCH_MIN:
        return _judge_sketch(output, reference64, scale64, tol=tol, dtype=dtype, tolerances=tolerances, what=what,
                             scale_doc=scale_doc)
    t = time.perf_counter()
    ref = reference64.detach().to("cpu")
    scale = scale64.to("cpu") if scale64 is not None else ref.abs()
    verdict = judge(output, ref, dtype=dtype, tol=tol, scale=scale, scale_doc=scale_doc, signature=what)
    verdict = dataclasses.replace(verdict, seconds={"reference": 0.0, "compare": time.perf_counter() - t,
                                                    "mpmath": 0.0})
    if verdict.status == PASS and verdict.worst_ratio is None and ref.numel():
        verdict = dataclasses.replace(verdict, worst_ratio=_pass_ratio(output, ref, scale, tol, dtype))
    return verdict


def device_ratio(output: Any, ref64: Any, scale: Any, tol: Tolerance, dtype: str) -> Any:
    """|out - ref| / bound per element, on the output's device (inf where finiteness differs)."""
    import torch

    from ..tolerance import bounds

    out64 = output.detach().to(torch.float64)
    ref64 = ref64.to(out64.device)
    scale = scale.to(out64.device) if scale is not None else ref64.abs()
    err = (out64 - ref64).abs()
    nf = out64.isfinite() != ref64.isfinite()
    err = torch.where(nf, torch.full_like(err, float("inf")), err.nan_to_num(nan=0.0))
    try:
        b = bounds(scale, ref64, tol, dtype)
    except Exception:  # a bound the device pass cannot form: relative error instead
        b = tol.atol + tol.rtol * torch.maximum(scale, ref64.abs())
    return err / b.clamp_min(1e-300)


def _judge_sketch(output: Any, ref64: Any, scale64: Any, *, tol: Tolerance, dtype: str, tolerances: ToleranceTable,
                  what: str, scale_doc: str) -> Verdict:
    """Judge a large output: rank every element by error / bound on its device, judge the worst SKETCH_K."""
    import torch

    flat = output.detach().reshape(-1)
    r = ref64.detach().to(flat.device, torch.float64).reshape(-1)
    sc = scale64.to(flat.device).reshape(-1) if scale64 is not None else r.abs()
    ratio = device_ratio(flat, r, sc, tol, dtype)
    over = int((ratio > 1).sum())
    k = min(SKETCH_K, ratio.numel())
    idx = torch.topk(ratio, k).indices
    v = judge_against(flat[idx], r[idx].cpu(), dtype=dtype, tolerances=tolerances, what=what, scale64=sc[idx].cpu(),
                      tol=tol, scale_doc=scale_doc)
    full = tuple(int(x) for x in _unravel(int(idx[v.index[0]]), tuple(output.shape))) if v.index else None
    note = (f"judged on {output.device}: the {k} of {output.numel()} elements nearest to their bound went through "
            f"the Oracle; {over} of {output.numel()} are over it")
    return dataclasses.replace(v, index=full, numel=output.numel(), mismatched=max(v.mismatched, over),
                               detail=(v.detail + "\n" if v.detail else "") + note)


def _pass_ratio(output: Any, ref: Any, scale: Any, tol: Tolerance, dtype: str) -> float:
    """The worst |out - ref| / bound of a passing output (for the error-ratio histogram)."""
    import torch

    from ..tolerance import bounds

    out = output.detach().to("cpu", torch.float64)
    ok = out.isfinite() & ref.isfinite()
    if not bool(ok.any()):
        return 0.0
    b = bounds(scale, ref, tol, dtype).clamp_min(1e-300)
    return float(((out - ref).abs() / b)[ok].max())


def judge_exact(output: Any, reference: Any, *, what: str) -> Verdict:
    """Integer, bool and fp64 outputs: equal values (fp64 within 1e-12 relative) or a mismatch verdict."""
    import torch

    out = output.detach().to("cpu")
    ref = reference.detach().to("cpu")
    if tuple(out.shape) != tuple(ref.shape):
        return Verdict(FAIL, "shape", f"{what}: shape {list(out.shape)} != {list(ref.shape)}")
    if out.dtype != ref.dtype:
        return Verdict(FAIL, "dtype", f"{what}: dtype {out.dtype} != {ref.dtype}")
    if out.is_floating_point():
        o, r = out.double(), ref.double()
        both_nan = o.isnan() & r.isnan()
        err = torch.where(both_nan | (o == r), torch.zeros_like(o), (o - r).abs())
        bound = 1e-12 * torch.maximum(o.abs(), r.abs()) + 1e-300
        bad = err > bound
    else:
        bad = out != ref
        err = (out.to(torch.float64) - ref.to(torch.float64)).abs() if out.numel() else out.double()
    n = int(bad.sum())
    if n == 0:
        return Verdict(PASS, numel=out.numel(), reference="exact")
    flat = int(torch.where(bad.reshape(-1), err.reshape(-1).nan_to_num(posinf=1e308), -1.0).argmax())
    idx = tuple(int(i) for i in _unravel(flat, out.shape))
    o, r = float(out.reshape(-1)[flat]), float(ref.reshape(-1)[flat])
    e = float(err.reshape(-1)[flat])
    return Verdict(FAIL, "mismatch", f"{what}: got {o:g}, expected {r:g} at {list(idx)} ({n} elements differ)",
                   f"Mismatched elements: {n} / {out.numel()} ({100.0 * n / max(out.numel(), 1):.1f}%)",
                   max_abs_err=e, tol=0.0, index=idx, out_value=o, ref_value=r, mismatched=n,
                   worst_ratio=math.inf, numel=out.numel(), reference="exact")


def judge_pair(output: Any, reference: Any, *, tolerances: ToleranceTable, what: str,
               scale: Callable[[Any, Any], Any] | None = None, scale_doc: str = "|ref|") -> Verdict:
    """Judge ``output`` against ``reference`` of the same dtype: float through the oracle, others exactly."""
    import torch

    from .sampling import dtype_label

    label = dtype_label(output.dtype)
    if label not in FLOAT_LABELS:
        return judge_exact(output, reference, what=what)
    ref64 = reference.detach().to(output.device if output.numel() > SKETCH_MIN else "cpu", torch.float64)
    sc = scale(output, ref64) if scale is not None else None
    return judge_against(output, ref64, dtype=label, tolerances=tolerances, what=what, scale64=sc,
                         scale_doc=scale_doc)


def skipped(reason: str) -> Verdict:
    return Verdict(SKIP, "skipped", reason)


def compare_op(oracle: Oracle, spec: Any, dtype: str, inputs: dict, kwargs: dict, output: Any) -> Verdict:
    """``oracle.compare`` with the fp64 reference computed on the inputs' device (a GPU stays a GPU).

    The oracle gathers float64 inputs on the CPU; on a GPU the reference itself runs on the GPU in
    float64 and only its result comes back for the comparison.
    """
    import dataclasses

    first = next((t for t in inputs.values() if t is not None), None)
    device = getattr(first, "device", None)
    if device is not None and device.type != "cpu":
        base_ref = spec.reference

        def on_device(**kw):
            moved = {k: (v.to(device) if hasattr(v, "to") and hasattr(v, "device") else v) for k, v in kw.items()}
            return base_ref(**moved).cpu()

        spec = dataclasses.replace(spec, reference=on_device)
    return oracle.compare(spec, dtype, inputs, kwargs, output)


def rms_scale(output: Any, ref64: Any) -> Any:
    """max(|ref|, |out|, rms(ref)): the magnitude two correct results differ by a rounding of (reordered sums)."""
    import torch

    out64 = output.detach().to(ref64.device, torch.float64)
    finite = ref64[ref64.isfinite()]
    rms = float(finite.pow(2).mean().sqrt()) if finite.numel() else 0.0
    return torch.maximum(ref64.abs(), out64.abs().nan_to_num(posinf=0.0)).clamp_min(rms)
