"""The one judge: an output against its float64 truth, with a bound that says what a correct result may differ by.

Three callers, one procedure. An op of the registry is judged by :meth:`Oracle.compare` against the op's fp64
reference and calibrated bound. A graph output (the hook's torch.compile shadow), a metamorphic re-launch and a
kernel judged against a user's PyTorch reference (``gpuemu fuzz --reference``) have no calibrated op: they are
judged by :func:`judge_outputs`, each output against the reference run in float64 (the truth) with a bound
relative to how far the same reference in the working dtype (the control: what eager code gives) is from it::

    allowed_i = atol + rtol * max(|ref_i|, rms(ref)) + M * (|eager_i - ref_i| + rms(eager - ref))

(rtol, atol: the rule pack's default tolerance for the output's dtype; M = :data:`MULTIPLIER`, torch's accuracy
minifier's 2, 3 for fp16/bf16), through the same comparison core (:func:`gpuemu.compare.judge`), so every verdict,
message and detail reads the same wherever it came from. Integer and bool outputs are judged exactly
(:func:`judge_exact`).

Large outputs are judged on their device (:func:`judge_against`): every element's error against its bound
is computed there, and the ``SKETCH_K`` elements nearest to or over their bound go through the Oracle (the
count over the bound is of all elements). A check then moves kilobytes to the CPU, not the activations:
on the H200 a 614,400-element Inductor kernel output took 1.2–1.6 s to judge on the CPU.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

from .compare import dtype_label  # noqa: F401 (the labels the judge keys tolerances by)
from .compare import FAIL, PASS, SKIP, Verdict
from .compare import unravel as _unravel  # one index helper for every mismatch report
from .tolerance import Tolerance, ToleranceTable

FLOAT_LABELS = ("fp32", "fp16", "bf16")
QUANT_ONE_OFF_PER = 1000  # int8/uint8 outputs: one code in this many may be one off the fp64 reference's
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

    from .compare import judge

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

    from .tolerance import bounds

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

    from .tolerance import bounds

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

    label = dtype_label(output.dtype)
    if label not in FLOAT_LABELS:
        return judge_exact(output, reference, what=what)
    ref64 = reference.detach().to(output.device if output.numel() > SKETCH_MIN else "cpu", torch.float64)
    sc = scale(output, ref64) if scale is not None else None
    return judge_against(output, ref64, dtype=label, tolerances=tolerances, what=what, scale64=sc,
                         scale_doc=scale_doc)


def skipped(reason: str) -> Verdict:
    return Verdict(SKIP, "skipped", reason)


def rms_scale(output: Any, ref64: Any) -> Any:
    """max(|ref|, |out|, rms(ref)): the magnitude two correct results differ by a rounding of (reordered sums)."""
    import torch

    out64 = output.detach().to(ref64.device, torch.float64)
    finite = ref64[ref64.isfinite()]
    rms = float(finite.pow(2).mean().sqrt()) if finite.numel() else 0.0
    return torch.maximum(ref64.abs(), out64.abs().nan_to_num(posinf=0.0)).clamp_min(rms)


# ------------------------------------------------------------------------------------ eager-relative judgment
# (the graph shadow's, and every kernel judged against a user's reference: see judge_outputs)
MULTIPLIER = {"fp32": 2.0, "fp16": 3.0, "bf16": 3.0}
# A kernel judged against a user's reference (judge_reference) is often a reordering of it that eager code is not (an
# online softmax against torch's two passes, a K loop in tiles): in fp32 the correct shipped kernels reached 7x the
# eager reference's own error on spiked inputs (bench/reference_calibration.md), where an fp16 intermediate in an
# fp32 kernel is ~1000x off. fp16/bf16 results are dominated by their own rounding (u * |ref| is in the bound).
REFERENCE_MULTIPLIER = {"fp32": 16.0, "fp16": 3.0, "bf16": 3.0}


def graph_scale(ref64: Any, eager: Any, rtol: float, multiplier: float, spread: Any = None) -> Any:
    """The per-element scale whose ``rtol`` multiple is the bound of the module docstring. ``spread``: how far the
    eager result moves when its inputs move by one ulp (the condition of the computation where eager itself happens
    to be exact), added to eager's error."""
    import torch

    e = eager.detach().to(ref64.device, torch.float64)
    finite = ref64.isfinite()
    rms = float(ref64[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 0.0
    eerr = (e - ref64).abs().nan_to_num(nan=0.0, posinf=0.0)
    if spread is not None:
        eerr = eerr + spread.to(eerr.device, torch.float64).nan_to_num(nan=0.0, posinf=0.0)
    eerr_rms = float(eerr.pow(2).mean().sqrt()) if eerr.numel() else 0.0
    if spread is not None and eerr.numel():  # heavy tails: where rounding flips a near-tie (an argmax, a softmax
        # peak) the control's error is 0 almost everywhere and large at a few elements; a kernel rounding otherwise
        # flips others. A quarter of the largest error stands in for the rms there (for well-conditioned outputs the
        # largest is a few rms, and this changes nothing)
        eerr_rms = max(eerr_rms, 0.25 * float(eerr.max()))
    base = ref64.abs().nan_to_num(posinf=0.0).clamp_min(rms)
    if rtol <= 0:
        return base
    return base + multiplier * (eerr + eerr_rms) / rtol


def judge_outputs(compiled: list[Any], ref: list[Any], eager: list[Any], tolerances: Any,
                  skip: set | None = None, multiplier: dict | None = None,
                  spread: list | None = None) -> tuple[Any, int | None, dict]:
    """(worst verdict, index of the output it is about, per-output notes) over the floating outputs.

    Every output's error / bound is first computed on its device; the Oracle then judges the outputs that
    come within PREFILTER of their bound, and the nearest one in any case (a training graph has a hundred
    saved activations; each Oracle call costs milliseconds, the device pass microseconds).
    """
    import torch

    notes: dict = {"eager_max_abs_err": [], "judged": [], "sketched": [], "prefiltered": 0}
    cands = []  # (device ratio, i, c, ref64, scale, tol, label)
    shape_fail = None
    for i, (c, r, e) in enumerate(zip(compiled, ref, eager)):
        if not isinstance(c, torch.Tensor) or not isinstance(r, torch.Tensor) or not isinstance(e, torch.Tensor):
            continue
        label = dtype_label(c.dtype)
        if label not in (multiplier or MULTIPLIER) or (skip and id(r) in skip):
            continue
        dev = c.device if c.device.type != "meta" else torch.device("cpu")
        ref64 = r.detach().to(dev, torch.float64)
        notes["judged"].append(i)
        if tuple(ref64.shape) != tuple(c.shape):
            if shape_fail is None:
                shape_fail = (Verdict(FAIL, "shape", f"output {i}: compiled shape {list(c.shape)} != eager "
                                                     f"{list(ref64.shape)}"), i)
            continue
        tol = tolerances.get("default", label, device=dev)
        scale = graph_scale(ref64, e, tol.rtol, (multiplier or MULTIPLIER)[label],
                            spread[i] if spread is not None and spread[i] is not None else None)
        eerr = (e.detach().to(dev, torch.float64) - ref64).abs()
        notes["eager_max_abs_err"].append(float(eerr.nan_to_num(nan=0.0).max()) if eerr.numel() else 0.0)
        cands.append((_device_ratio(c, ref64, scale, tol, label), i, c, ref64, scale, tol, label))
    if shape_fail is not None:
        return shape_fail[0], shape_fail[1], notes
    if not cands:
        return None, None, notes
    top = max(cands, key=lambda x: x[0])
    chosen = [x for x in cands if x[0] > PREFILTER or x is top]
    notes["prefiltered"] = len(cands) - len(chosen)
    worst = None
    worst_i = None
    for _, i, c, ref64, scale, tol, label in chosen:
        doc = (f"max(|ref|, rms(ref)) + {(multiplier or MULTIPLIER)[label]:g} * (|eager - ref| + rms(eager - ref)) / rtol: "
               "eager's own error against fp64")
        if c.numel() > SKETCH_MIN:
            notes["sketched"].append(i)
        v = judge_against(c, ref64, dtype=label, tolerances=tolerances, what="graph", scale64=scale, tol=tol,
                          scale_doc=doc)
        better = worst is None or (v.status == FAIL and (worst.status != FAIL or (v.worst_ratio or 0) > (worst.worst_ratio or 0))) \
            or (v.status == PASS and worst.status == PASS and (v.worst_ratio or 0) > (worst.worst_ratio or 0))
        if better:
            worst, worst_i = v, i
    return worst, worst_i, notes


PREFILTER = 0.25  # outputs whose device-side error / bound stays below this pass without an Oracle call


def _device_ratio(c: Any, ref64: Any, scale: Any, tol: Any, label: str) -> float:
    """max |out - ref| / bound over the output, on its device (inf where finiteness differs)."""
    if c.numel() == 0:
        return 0.0
    return float(device_ratio(c, ref64, scale, tol, label).max())


def judge_reference(outputs: list, truth: list, control: list, tolerances: Any, *,
                    spread: list | None = None, writes: Sequence[str] = ()) -> Verdict:
    """A kernel's outputs against its PyTorch reference: ``truth`` (the reference run in float64) and ``control``
    (the same reference in the working dtype), one list entry per output tensor, in order.

    Floating outputs are judged by :func:`judge_outputs` (the bound relative to the control's own error); integer
    and bool ones exactly against the truth. Elements where the control itself is not finite while the truth is
    (the reference overflows in the working dtype) tell nothing about the kernel and are not judged; a case with
    nothing left to judge is REJECTED as undetermined. (A kernel whose fp32 dots ran in TF32 gets a control that did
    too: :meth:`gpuemu.oracle.Oracle.compare_reference`.) ``spread``: per output, how far the control moves when its
    floating inputs move by one ulp (None where not measured), added to its error: in fp32 a correct kernel that
    rounds an intermediate at the inputs' magnitude (x - (max + log(sum)) at |x| = 1e4) is that far from fp64 while
    eager code, exact there, is not. ``writes``: the arguments the reference writes in place, the last outputs (named
    in messages)."""
    import torch

    from .compare import REJECTED

    first_written = len(truth) - len(writes)

    def label(i: int) -> str:
        return f"output {i}" if i < first_written else f"output {i} ({writes[i - first_written]}, written in place)"

    if len(outputs) != len(truth):
        return Verdict(FAIL, "outputs", f"the kernel returned {len(outputs)} tensor{'s' if len(outputs) != 1 else ''}, "
                                        f"the reference {len(truth)}")
    floats_k, floats_t, floats_c, floats_s, where = [], [], [], [], []
    unjudged = total = 0
    for i, (o, t, c) in enumerate(zip(outputs, truth, control)):
        if not isinstance(o, torch.Tensor):
            return Verdict(FAIL, "type", f"{label(i)}: the kernel returned {type(o).__name__}, not a tensor")
        if not t.is_floating_point():
            if o.is_floating_point() or o.dtype == torch.bool and t.dtype != torch.bool:
                return Verdict(FAIL, "dtype", f"{label(i)}: dtype {o.dtype}, the reference's is {t.dtype}")
            o = (o.to(t.dtype) if o.dtype != t.dtype else o).detach().cpu()
            if isinstance(c, torch.Tensor) and tuple(c.shape) == tuple(t.shape) == tuple(o.shape) \
                    and not c.is_floating_point():
                # integers computed from floats (a quantizer's round(x / scale), an argmax): where the reference in
                # the working dtype lands on another integer than in fp64, a rounding boundary lies between the
                # two, and the kernel may land on either
                t = torch.where(o == c.detach().to("cpu", t.dtype), o, t)
            if o.dtype in (torch.int8, torch.uint8) and o.numel():  # quantized codes: a kernel rounding x / scale
                # in its own arithmetic (x * (1 / scale), a scale from an fp32 absmax) lands one code off where
                # x / scale is within rounding of a half; a few such codes are that, many are a bug (truncation)
                off = (o.to(torch.int16) - t.to(torch.int16)).abs()
                if bool((off <= 1).all()) and int((off == 1).sum()) <= max(1, o.numel() // QUANT_ONE_OFF_PER):
                    t = o
            v = judge_exact(o, t, what=label(i))
            if v.status != PASS:
                return v
            continue
        if not o.is_floating_point():
            return Verdict(FAIL, "dtype", f"{label(i)}: dtype {o.dtype}, the reference's is {c.dtype}")
        if o.element_size() < c.element_size() and dtype_label(o.dtype) in FLOAT_LABELS:
            return Verdict(FAIL, "dtype", f"{label(i)}: dtype {o.dtype} is less precise than the reference's "
                                          f"{c.dtype}")
        if o.element_size() == 1:  # fp8 (e4m3, e5m2): torch computes little on it; its values are exact in fp32, and
            o = o.float()  # the control, fp8 too when the reference returns fp8, carries the format's rounding
        if isinstance(c, torch.Tensor) and c.is_floating_point() and c.element_size() == 1:
            c = c.float()
        if tuple(o.shape) == tuple(t.shape) == tuple(c.shape):
            t64 = t.detach().to(torch.float64)
            lost = c.detach().to(t64.device).isfinite().logical_not() & t64.isfinite()
            n = int(lost.sum())
            if n:  # the reference overflows there in the working dtype: not judged (0 in all three, so that
                unjudged += n  # neither its error nor its magnitude, through rms(ref), enters the other bounds)
                o = o.masked_fill(lost.to(o.device), 0)
                c = c.masked_fill(lost.to(c.device), 0)
                t = t64.masked_fill(lost, 0)
            total += o.numel()
        floats_k.append(o)
        floats_t.append(t)
        floats_c.append(c)
        floats_s.append(spread[i] if spread is not None and i < len(spread) else None)
        where.append(i)
    if floats_k and total and unjudged == total:
        return Verdict(REJECTED, "undetermined", "the reference itself overflows in this dtype at every output "
                                                 "element: nothing to judge here")
    worst, at, _ = judge_outputs(floats_k, floats_t, floats_c, tolerances, multiplier=REFERENCE_MULTIPLIER,
                                 spread=floats_s)
    if worst is None:
        return Verdict(PASS)
    if worst.status == FAIL and at is not None and worst.kind == "mismatch":
        held = _no_worse_than_control(floats_k[at], floats_t[at], floats_c[at], floats_s[at], tolerances)
        if held:
            return dataclasses.replace(worst, status=PASS, message="", detail=(
                (worst.detail + "\n" if worst.detail else "") + held))
    if at is not None and worst.status != PASS and (len(outputs) > 1 or writes):
        worst = dataclasses.replace(worst, message=f"{label(where[at])}: {worst.message}")
    if unjudged:
        worst = dataclasses.replace(worst, detail=(worst.detail + "\n" if worst.detail else "") +
                                    f"{unjudged} element(s) not judged: the reference overflows there in the working "
                                    "dtype")
    return worst


CONTROL_DOMINANCE_MIN = 8  # the control must miss the plain bound at this many elements before it licenses misses


def _no_worse_than_control(out: Any, truth: Any, control: Any, spread: Any, tolerances: Any) -> str:
    """A note when the kernel's output is no less accurate than the control's in an ill-conditioned case, else "".

    The per-element bound follows the control's error where it happens: a softmax of fp32 logits at |z| = 1e4
    whose top two logits are within rounding of each other has its argmax decided by rounding, and the control
    may pick the wrong one in 25 of 31 rows while a correct kernel, rounding otherwise, picks it in a row the
    control got right. Such a kernel passes when the control misses the plain bound (no eager term) at
    CONTROL_DOMINANCE_MIN elements or more and the kernel misses it at no more elements, by no more than the
    control's largest miss (plus its one-ulp spread)."""
    import torch

    from .tolerance import bounds

    label = dtype_label(out.dtype)
    if label not in FLOAT_LABELS or tuple(out.shape) != tuple(truth.shape) or tuple(control.shape) != tuple(truth.shape):
        return ""
    t = truth.detach().to("cpu", torch.float64)
    o = out.detach().to("cpu", torch.float64)
    c = control.detach().to("cpu", torch.float64)
    if not bool(o.isfinite().eq(t.isfinite()).all()):
        return ""
    tol = tolerances.get("default", label)
    finite = t.isfinite()
    rms = float(t[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 0.0
    plain = bounds(t.abs().nan_to_num(posinf=0.0).clamp_min(rms), t, tol, label)
    e_out = (o - t).abs().nan_to_num(nan=0.0)
    e_ctl = (c - t).abs().nan_to_num(nan=0.0)
    if spread is not None:
        e_ctl = e_ctl + spread.detach().to("cpu", torch.float64).nan_to_num(nan=0.0, posinf=0.0)
    miss_out = int((e_out > plain).sum())
    miss_ctl = int((e_ctl > plain).sum())
    if miss_ctl < CONTROL_DOMINANCE_MIN or miss_out > miss_ctl or float(e_out.max()) > float(e_ctl.max()):
        return ""
    return (f"ill-conditioned here: the control (the reference in {label}) misses the plain bound at {miss_ctl} "
            f"element(s), by up to {float(e_ctl.max()):.3g}; the kernel at {miss_out}, by up to "
            f"{float(e_out.max()):.3g}: no less accurate than the reference itself")
