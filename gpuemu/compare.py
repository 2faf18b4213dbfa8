"""The comparison core: one output against a float64 reference and a per-element bound, and the Verdict.

Pure functions of tensors, with no op, case or launcher in sight (the shape of
``torch/testing/_comparison.py``): :func:`compare` judges float outputs, :func:`compare_index` index outputs,
:func:`check_form` the type, shape and dtype that come first, and :func:`judge` puts them together for a
caller that has a reference and an error scale but no :class:`~gpuemu.ops.OpSpec` (the hook's graph outputs
and metamorphic re-launches). :class:`gpuemu.oracle.Oracle` computes the reference and the bound for an op
and hands them here, so a verdict reads the same wherever it was reached. The bound's maths is written once,
in :mod:`gpuemu.tolerance`.

>>> import torch
>>> from gpuemu.compare import compare
>>> ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
>>> compare(ref + 1e-9, ref, torch.full_like(ref, 1e-6)).status
'pass'
>>> compare(ref + 1e-3, ref, torch.full_like(ref, 1e-6)).message
'max abs err 0.001 > tol 1e-06'
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

SCHEMA_VERSION = 1
PASS, FAIL, ERROR, SKIP = "pass", "fail", "error", "skip"
# a case that fails only because an input broke a precondition nobody declared (non-contiguous, say), and a
# launcher that refuses such an input with a clear exception: see gpuemu.preconditions
PRECONDITION, REJECTED = "precondition", "rejected"
LIMIT = "limit"  # a launch the target GPU refuses (shared memory, registers, grid): loud, not a wrong answer
# integer index/address arithmetic that wraps (int32 past 2**31) and reaches a pointer: wrong or crashing on a GPU
# at that size, whatever the output showed here (gpuemu.runtime.overflow); fails a run as FAIL does
OVERFLOW = "overflow"


@dataclass(frozen=True)
class Verdict:
    """What the oracle concluded about one call. ``message`` is one line; ``detail`` is the report."""

    status: str
    kind: str = "ok"  # ok | mismatch | nonfinite | shape | dtype | type | mutation | nondeterministic | alias | exception | refusal | out_of_resources | skipped
    message: str = ""
    detail: str = ""
    max_abs_err: float | None = None
    tol: float | None = None
    index: tuple[int, ...] | None = None
    out_value: float | None = None
    ref_value: float | None = None
    mismatched: int = 0
    numel: int = 0
    worst_ratio: float | None = None
    rtol: float | None = None
    atol: float | None = None
    reference: str = "fp64"
    basis: str = "bound"  # bound: within the fp64 bound; framework: no further from fp64 than PyTorch eager
    seconds: Mapping[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status in (PASS, REJECTED)

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION, "status": self.status, "kind": self.kind, "message": self.message,
            "detail": self.detail, "max_abs_err": self.max_abs_err, "tol": self.tol,
            "index": list(self.index) if self.index is not None else None, "out_value": self.out_value,
            "ref_value": self.ref_value, "mismatched": self.mismatched, "numel": self.numel,
            "worst_ratio": self.worst_ratio, "rtol": self.rtol, "atol": self.atol, "reference": self.reference,
            "basis": self.basis, "seconds": dict(self.seconds),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        kw = {k: d.get(k) for k in ("status", "kind", "message", "detail", "max_abs_err", "tol", "out_value",
                                    "ref_value", "worst_ratio", "rtol", "atol")}
        return cls(**{k: v for k, v in kw.items() if v is not None}, index=tuple(d["index"]) if d.get("index") is not None else None,
                   mismatched=int(d.get("mismatched", 0)), numel=int(d.get("numel", 0)),
                   reference=d.get("reference", "fp64"), basis=d.get("basis", "bound"),
                   seconds=dict(d.get("seconds", {})))


# ------------------------------------------------------------------------------------ message builders


def fmt(x: float | None) -> str:
    return "nan" if x is None or x != x else f"{x:.3g}"


def fmt_pair(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest significant digits (3 to 17) that show they differ."""
    for digits in range(3, 18):
        fa, fb = ("nan" if a != a else f"{a:.{digits}g}"), ("nan" if b != b else f"{b:.{digits}g}")
        if fa != fb:
            break
    return fa, fb


def fmt_index(i: tuple[int, ...]) -> str:
    return "[" + ",".join(str(v) for v in i) + "]"


def unravel(flat: int, shape) -> tuple[int, ...]:
    out = []
    for s in reversed(tuple(shape)):
        out.append(flat % s)
        flat //= s
    return tuple(reversed(out))


def bound_line(tol, dtype: str, scale_doc: str, rounded_doc: str | None = None) -> str:
    """The report's "Bound:" line: the formula :func:`gpuemu.tolerance.bounds` applied, with its numbers
    (``rounded_doc``: what the op's stored intermediates are, where it has some; see ``OpSpec.rounded``)."""
    from .tolerance import UNIT_ROUNDOFF

    if tol.scale == "ref":
        return f"Bound: atol + rtol * |ref| with rtol={tol.rtol:g}, atol={tol.atol:g} ({tol.source})"
    rounding = (f" + u * (|ref| + {rounded_doc.rsplit(' (', 1)[0]})" if rounded_doc is not None else " + u * |ref|") \
        if tol.rtol else ""
    u = f", u={UNIT_ROUNDOFF[dtype]:g} ({dtype} rounding)" if tol.rtol else ""
    return (f"Bound: atol + rtol * scale{rounding} with rtol={tol.rtol:g}, atol={tol.atol:g}{u}, "
            f"scale = {scale_doc} ({tol.source})")


def mismatch_detail(n: int, numel: int, *, err: float, bound: float, index, out: float, ref: float,
                    rel: float | None, rel_index, worst_index, worst_ratio: float, nonfinite: int = 0,
                    bound_doc: str = "", note: str = "") -> str:
    """The assert_close-shaped report of a float mismatch (STYLE.md: count, greatest absolute and relative
    differences with their indices, what was allowed there) plus the worst element against its own bound."""
    lines = [
        f"Mismatched elements: {n} / {numel} ({100.0 * n / numel:.1f}%)",
        f"Greatest absolute difference: {fmt(err)} at index {fmt_index(index)} (up to {fmt(bound)} allowed): "
        "got {}, expected {}".format(*fmt_pair(out, ref)),
        (f"Greatest relative difference: {fmt(rel)} at index {fmt_index(rel_index)}" if rel is not None
         else "Greatest relative difference: none finite (every mismatched element is NaN or infinite)"),
        f"Worst element relative to its bound: {fmt_index(worst_index)}, {fmt(worst_ratio)}x the bound",
    ]
    if bound_doc:
        lines.append(bound_doc)
    if nonfinite:
        lines.insert(1, f"Non-finite output where the reference is finite: {nonfinite} elements")
    if note:
        lines.append(note)
    return "\n".join(lines)


def mismatch_message(err: float, bound: float, out: float, ref: float, nonfinite: bool) -> str:
    """The one-line form that follows the seed, dtype and shape in a failure line."""
    return f"non-finite output {fmt(out)} where reference is {fmt(ref)}" if nonfinite \
        else f"max abs err {fmt(err)} > tol {fmt(bound)}"


# ------------------------------------------------------------------------------------ comparison


def elementwise_error(out, ref, dtype: str):
    """|out - ref| per element (float64), with the non-finite rules: both NaN, or the same infinity, is no
    error; a result beyond the dtype's range may round to inf (or saturate at max) with no error; any
    other non-finite output, or a non-finite reference the output misses, is an infinite error."""
    import torch

    from .cases import torch_dtype

    fmax = torch.finfo(torch_dtype(dtype)).max
    err = (out - ref).abs()
    # the common case in three passes: every difference finite (so both sides are), no reference beyond the
    # dtype's range (so no overflow rule applies): the error is |out - ref| as it stands
    if bool(err.isfinite().all()) and (err.numel() == 0 or float(ref.abs().max()) <= fmax):
        return err
    ref_fin, out_fin = ref.isfinite(), out.isfinite()
    overflow_ok = ref_fin & (ref.abs() > fmax) & ((out.isinf() & (out.sign() == ref.sign())) | (out.abs() >= fmax))
    err = torch.where(ref_fin & out_fin, err, torch.full_like(err, math.inf))
    same = overflow_ok | (ref.isnan() & out.isnan()) | (ref.isinf() & (out == ref))
    return torch.where(same, torch.zeros_like(err), err)


def check_form(output: Any, ref: Any, *, want_dtype, accepted: bool, signature: str, base: Mapping[str, Any],
               wider_note: str = "") -> Verdict | None:
    """A FAIL verdict when ``output`` is not a tensor of the reference's shape in an accepted dtype (``accepted``:
    the caller's rule; ``want_dtype`` is the one the message names), else None."""
    import torch

    if not isinstance(output, torch.Tensor):
        return Verdict(FAIL, "type", f"returned {type(output).__name__}, expected a torch.Tensor", **base)
    if tuple(output.shape) != tuple(ref.shape):
        return Verdict(FAIL, "shape", f"output shape {list(output.shape)} != expected {list(ref.shape)} "
                                      f"({signature})", **base)
    if not accepted:
        return Verdict(FAIL, "dtype", f"output dtype {str(output.dtype).replace('torch.', '')} != expected "
                                      f"{str(want_dtype).replace('torch.', '')}{wider_note}", **base)
    return None


def compare_index(output, ref, *, rtol: float | None = None, atol: float | None = None) -> Verdict:
    """Index outputs (argmax): every element must match exactly."""
    base = dict(rtol=rtol, atol=atol, numel=ref.numel())
    out = output.detach().cpu().to(ref.dtype)
    bad = out != ref
    n = int(bad.sum())
    if n == 0:
        return Verdict(PASS, **base)
    flat = int(bad.reshape(-1).nonzero()[0])
    idx = tuple(int(i) for i in unravel(flat, ref.shape))
    o, r = int(out.reshape(-1)[flat]), int(ref.reshape(-1)[flat])
    detail = (f"Mismatched elements: {n} / {ref.numel()} ({100.0 * n / ref.numel():.1f}%)\n"
              f"First mismatch at index {fmt_index(idx)}: got {o}, expected {r} (indices must match exactly)")
    return Verdict(FAIL, "mismatch", f"index mismatch: got {o}, expected {r} at {fmt_index(idx)}", detail,
                   max_abs_err=float(abs(o - r)), tol=0.0, index=idx, out_value=float(o), ref_value=float(r),
                   mismatched=n, worst_ratio=math.inf, **base)


# recheck(out, ref, bound, bad) -> (bad, note): a second opinion on the mismatched elements (the oracle's mpmath
# guard), which may clear some; rescue(worst ratio) -> note or None: a rule that passes the output anyway (the
# oracle's framework rule)
Recheck = Callable[[Any, Any, Any, Any], "tuple[Any, str]"]
Rescue = Callable[[float], "str | None"]


def compare(out, ref, bound, *, dtype: str = "fp32", rtol: float | None = None, atol: float | None = None,
            bound_doc: str = "", note: str = "", recheck: Recheck | None = None, rescue: Rescue | None = None,
            reference: str = "fp64") -> Verdict:
    """Judge float64 ``out`` against float64 ``ref`` element by element: PASS where every error (with the
    non-finite rules of :func:`elementwise_error`, in ``dtype``, the output's dtype) is within ``bound``, else
    FAIL with the mismatch report. ``note`` (and ``recheck``'s) is added to the report, and marks the
    reference ``fp64+mpmath``; ``seconds["mpmath"]`` is the time ``recheck`` took."""
    import torch

    base = dict(rtol=rtol, atol=atol, numel=ref.numel())
    err = elementwise_error(out, ref, dtype)
    bad = err > bound
    n = int(bad.sum())
    mp_s = 0.0
    if n and recheck is not None:
        t = time.perf_counter()
        bad, note2 = recheck(out, ref, bound, bad)
        n = int(bad.sum())
        mp_s = time.perf_counter() - t
        note = "; ".join(x for x in (note, note2) if x)
    reference = f"{reference}+mpmath" if note else reference
    base = dict(base, seconds={"mpmath": mp_s})
    if n == 0:
        return Verdict(PASS, reference=reference, **base)
    ratio = torch.where(bad, err / bound.clamp_min(1e-300), torch.zeros_like(err))
    if rescue is not None:
        why = rescue(float(ratio.max()))
        if why is not None:
            return Verdict(PASS, reference=reference, basis="framework", detail=why, **base)
    ref_fin, out_fin = ref.isfinite(), out.isfinite()
    worst_flat = int(ratio.reshape(-1).argmax())
    bad_err = torch.where(bad, err, torch.full_like(err, -1.0)).reshape(-1)
    maxerr_flat = int(bad_err.argmax())
    idx = tuple(int(i) for i in unravel(maxerr_flat, ref.shape))
    e, b = float(bad_err[maxerr_flat]), float(bound.reshape(-1)[maxerr_flat])
    o, r = float(out.reshape(-1)[maxerr_flat]), float(ref.reshape(-1)[maxerr_flat])
    nonfinite = not math.isfinite(o) and math.isfinite(r)
    finite_bad = bad & ref_fin & out_fin
    rel = torch.where(finite_bad, err / ref.abs().clamp_min(1e-300), torch.zeros_like(err)).reshape(-1)
    rel_flat = int(rel.argmax())
    worst = float(ratio.reshape(-1)[worst_flat])
    detail = mismatch_detail(
        n, ref.numel(), err=e, bound=b, index=idx, out=o, ref=r,
        rel=float(rel[rel_flat]) if bool(finite_bad.any()) else None, rel_index=unravel(rel_flat, ref.shape),
        worst_index=unravel(worst_flat, ref.shape), worst_ratio=worst,
        nonfinite=int((~out_fin & ref_fin).sum()) if nonfinite else 0, bound_doc=bound_doc, note=note)
    return Verdict(FAIL, "nonfinite" if nonfinite else "mismatch", mismatch_message(e, b, o, r, nonfinite), detail,
                   max_abs_err=e, tol=b, index=idx, out_value=o, ref_value=r, mismatched=n, worst_ratio=worst,
                   reference=reference, **base)


def judge(output: Any, ref, *, dtype: str, tol, scale=None, scale_doc: str = "|ref|", signature: str = "output",
          reference: str = "fp64") -> Verdict:
    """Judge ``output`` (a tensor in ``dtype``) against float64 ``ref`` of the same shape with tolerance ``tol``
    on error scale ``scale`` (default |ref|): the bound of :func:`gpuemu.tolerance.bounds` without an op.

    >>> import torch
    >>> from gpuemu.tolerance import Tolerance
    >>> ref = torch.ones(3, dtype=torch.float64)
    >>> judge(torch.ones(3), ref, dtype="fp32", tol=Tolerance(1e-5, 1e-6)).status
    'pass'
    """
    import torch

    from .cases import torch_dtype
    from .tolerance import bounds

    want = torch_dtype(dtype)
    base = dict(rtol=tol.rtol, atol=tol.atol, numel=ref.numel())
    bad_form = check_form(output, ref, want_dtype=want, accepted=getattr(output, "dtype", None) == want,
                          signature=signature, base=base)
    if bad_form is not None:
        return bad_form
    if ref.numel() == 0:
        return Verdict(PASS, **base)
    scale = ref.abs() if scale is None else scale
    bound = bounds(scale, ref, tol, dtype, out_dtype=dtype)
    out = output.detach().to("cpu", torch.float64)
    return compare(out, ref, bound, dtype=dtype, rtol=tol.rtol, atol=tol.atol,
                   bound_doc=bound_line(tol, dtype, scale_doc), reference=reference)


_DTYPE_LABELS = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float64": "fp64",
                 "torch.int64": "int64", "torch.int32": "int32", "torch.int16": "int16", "torch.int8": "int8",
                 "torch.uint8": "uint8", "torch.bool": "bool"}


def dtype_label(dtype) -> str:
    """'fp32' for torch.float32 (the names of the op contract); str(dtype) without 'torch.' otherwise."""
    if dtype is None:
        return "none"
    s = str(dtype)
    return _DTYPE_LABELS.get(s, s.replace("torch.", ""))


__all__ = ["dtype_label", "Verdict", "compare", "compare_index", "check_form", "judge", "elementwise_error", "bound_line",
           "mismatch_detail", "mismatch_message", "PASS", "FAIL", "ERROR", "SKIP", "PRECONDITION", "REJECTED", "LIMIT",
           "OVERFLOW"]
