"""A CUDA GPU's fp32 arithmetic, where it differs from the CPU interpreter's and changes a verdict.

Measured on an H200 (``bench/gpu_arith_probe.py``, 2^22 inputs per form, error in ulps of the exact result;
table in ``bench/gpu_arith_h200.md``): Triton lowers ``tl.exp2`` to ``ex2.approx.f32`` (max 2.05 ulp, the
interpreter's numpy exp2 0.5), ``tl.exp`` to ``ex2.approx`` of ``x * log2e`` (2.35 ulp for |x| <= 1, 63 ulp at
|x| <= 87: the product's rounding, which the op error scales already carry as ``|x|`` ulps), ``tl.rsqrt`` to
``rsqrt.approx`` (1.50 ulp), ``tl.sin``/``tl.cos`` to ``sin/cos.approx`` (1.46 ulp), and fp32 ``/`` and ``tl.sqrt``
are within 0.98 ulp. Each is a few fp32 ulps, modelled per op by the GPU's own fit: ``gpuemu calibrate --device
cuda`` on the H200 (``rulepacks/calibrated-cuda.yaml``, taken for outputs on CUDA) measured more error than the
CPU's fit exactly for the ops built on them (gelu_tanh, sigmoid, silu, softplus, tanh), and raised their rtol.

One GPU behaviour does change verdicts: **FMA contraction of the scaled exponent.** Triton compiles with
``enable_fp_fusion`` on, and LLVM fuses ``x * log2e - m`` into ``fma(x, log2e, -m)``. Where ``m`` is the row
maximum of the rounded products ``round(x * log2e)``, the maximum's own term is no longer ``exp2(0) = 1`` but
``exp2(rounding error of the product)``. For |x| <= 100 that is more accurate than the interpreter (26 vs 111 ulp,
measured); but past ``|x| * log2e >= 2^24`` the product's rounding error is at least 1 in the exponent, and past
~1e37 it is ~1e30: ``exp2`` gives inf or 0, the row sum inf or 0, and the row NaN. The exp2 softmax form is then
not determined by its inputs on a GPU (the interpreter, without FMA, still gives 1 for the maximum). A case whose
logits reach that range is therefore not judged on CUDA for the ops computed this way (:func:`undetermined`): it
is REJECTED with the reason, not failed, and the same case is still judged on the CPU.

Below that range the result is determined, only looser: the maximum's term is ``exp2(d)`` with ``|d|`` at most half
an ulp of ``|x| * log2e``, so each output may be off by ``2^d - 1`` (a probability) or ``d * ln 2`` (a log-domain
result): :func:`fma_exponent_allowance`, added to the case's atol on CUDA. And so that the cases a correct kernel
handles on CUDA are drawn there, the value envelope (:func:`value_cap`) keeps these ops' largest inputs below the
range on CUDA: a ``near_max`` case of bf16 logits there lies in [0.5, 1] x 2^24/log2(e), past fp16's 65,504, so a
kernel that narrows bf16 to fp16 inside overflows on both devices, where a blanket rejection hid it on the GPU.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

LOG2E = 1.4426950408889634
# |x| past which round(x * log2e) differs from x * log2e by at least 1 (half an ulp of 2^24 is 1)
SCALED_EXP2_RANGE = 2.0 ** 24 / LOG2E
# ops over logits that kernels compute as exp2(x * log2e - m): softmax and its relatives
SCALED_EXP2_OPS = frozenset({"softmax", "log_softmax", "logsumexp", "cross_entropy"})
# max ulp of the exact result, fp32, H200 (sm_90), triton 3.6 (bench/gpu_arith_h200.md)
MEASURED_MAX_ULP = {"ex2.approx (tl.exp2)": 2.05, "tl.exp, |x| <= 1": 2.35, "lg2.approx (tl.log2)": 0.88,
                    "tl.log": 0.86, "tl.sqrt": 0.94, "rsqrt.approx (tl.rsqrt)": 1.50, "fp32 division": 0.97,
                    "sin.approx (tl.sin)": 1.46, "cos.approx (tl.cos)": 1.43}


def value_cap(op: str, device: Any) -> float | None:
    """The largest input magnitude drawn for ``op`` on ``device`` (None: the dtype's own limits): on CUDA the
    scaled-exp2 ops stay below :data:`SCALED_EXP2_RANGE`, where the GPU's result is determined."""
    from .tolerance import device_kind

    if device_kind(device) == "cuda" and op in SCALED_EXP2_OPS:
        return SCALED_EXP2_RANGE * 0.999
    return None


def fma_exponent_allowance(op: str, inputs: Mapping[str, Any], device: Any) -> tuple[float, str]:
    """(an absolute error a correct kernel may add on CUDA by contracting x*log2e - m into an FMA, why) for this
    case's largest input; (0, "") off CUDA, for other ops, or while it is below the calibrated fit's own rounding."""
    from .tolerance import device_kind

    if device_kind(device) != "cuda" or op not in SCALED_EXP2_OPS:
        return 0.0, ""
    biggest = _largest(inputs)
    if not 0 < biggest < SCALED_EXP2_RANGE:
        return 0.0, ""
    d = 2.0 ** (math.floor(math.log2(biggest * LOG2E)) - 24)  # half an fp32 ulp of the product
    allowance = 2.0 * ((2.0 ** d - 1.0) if op == "softmax" else d * math.log(2.0))
    if allowance < 1e-6:
        return 0.0, ""
    return allowance, (f"inputs up to |x| = {biggest:.3g}: an FMA-contracted exp2(x*log2e - max) may be off by "
                       f"2^{d:.3g} in the maximum's term on a GPU (+{allowance:.3g} atol)")


def _largest(inputs: Mapping[str, Any]) -> float:
    biggest = 0.0
    for t in inputs.values():
        if t is None or not getattr(t, "is_floating_point", lambda: False)():
            continue
        finite = t.detach().float().abs().nan_to_num(nan=0.0, posinf=0.0)
        if finite.numel():
            biggest = max(biggest, float(finite.max()))
    return biggest


def undetermined(op: str, inputs: Mapping[str, Any], device: Any) -> str | None:
    """Why a CUDA GPU's arithmetic leaves this case's result undetermined for ``op`` (None: it is determined)."""
    from .tolerance import device_kind

    if device_kind(device) != "cuda" or op not in SCALED_EXP2_OPS:
        return None
    biggest = _largest(inputs)
    if biggest < SCALED_EXP2_RANGE or not math.isfinite(biggest):
        return None
    return (f"inputs up to |x| = {biggest:.3g}, past {SCALED_EXP2_RANGE:.3g} = 2^24/log2(e): on a GPU the "
            "FMA-contracted exp2(x*log2e - max) is off by the product's rounding error, at least 1 in the exponent, "
            "so the result is not determined by the inputs here (judged on the CPU instead)")


def reference_undetermined(reference: Any, args: list, device: Any, seen: list | None = None) -> str | None:
    """Why a CUDA GPU leaves a case undetermined for a kernel judged against its PyTorch ``reference`` (None: it is
    determined). The reference is run once more under a mode that notes the inputs of its softmax-like calls
    (softmax, log_softmax, logsumexp, cross_entropy): a kernel computes those as ``exp2(x * log2e - m)``, and past
    :data:`SCALED_EXP2_RANGE` the GPU's FMA-contracted form is not determined by the inputs (see the module
    docstring). Attention's scores, a linear layer's logits: the magnitudes that matter are the reference's
    intermediates, not its inputs (measured on an H100: a correct paged-decode kernel with scores near 1.4e8 returned
    8.9e10 for one element where the truth is 1e4; the CPU passes the same bytes)."""
    from .tolerance import device_kind

    if device_kind(device) != "cuda":
        return None
    seen = softmax_reads(reference, args) if seen is None else seen
    if not seen:
        return None
    biggest, name = max(seen)
    if biggest < SCALED_EXP2_RANGE or not math.isfinite(biggest):
        return None
    return (f"the reference's {name} reads values up to |x| = {biggest:.3g}, past {SCALED_EXP2_RANGE:.3g} = "
            "2^24/log2(e): on a GPU a kernel's FMA-contracted exp2(x*log2e - max) is off by the product's rounding "
            "error there, at least 1 in the exponent, so the result is not determined by the inputs (judged on the "
            "CPU instead)")


def _watched() -> dict:
    """The softmax-like calls a kernel computes as ``exp2(x * log2e - m)``: function -> True when its result is in
    the log domain (log_softmax, logsumexp, cross_entropy), False for probabilities (softmax)."""
    import torch

    probs = [torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax, torch.special.softmax]
    logs = [torch.log_softmax, torch.logsumexp, torch.nn.functional.log_softmax, torch.nn.functional.cross_entropy,
            torch.Tensor.log_softmax, torch.Tensor.logsumexp, torch.special.logsumexp, torch.special.log_softmax]
    return {**{f: False for f in probs}, **{f: True for f in logs}}


def softmax_reads(reference: Any, args: list) -> list[tuple[float, str]]:
    """(largest |x| read, name) of each softmax-like call the reference makes on ``args``; [] if it cannot run.
    :func:`reference_undetermined` and :func:`reference_fma_spread` take it as ``seen`` (one run serves both)."""
    import torch
    from torch.overrides import TorchFunctionMode

    watched = _watched()
    seen: list[tuple[float, str]] = []

    class _Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in watched and args and isinstance(args[0], torch.Tensor):
                seen.append((_largest({"x": args[0]}), getattr(func, "__name__", str(func))))
            return func(*args, **(kwargs or {}))

    try:
        with torch.no_grad(), _Watch():
            reference(*args)
    except Exception:  # noqa: BLE001 - a reference that cannot run again: nothing learnt, the verdict stands
        return []
    return seen


FMA_PATTERNS = 3  # sign patterns of the FMA move: every term up (a dominant term: the output scaled), two random


def reference_fma_spread(reference: Any, args: list, device: Any,
                         seen: list | None = None) -> tuple[list | None, str]:
    """On CUDA, per output of a kernel judged against its PyTorch ``reference`` (run in the working dtype): how far
    the output moves when each softmax-like call's terms are off as a kernel's FMA-contracted
    ``exp(x - m)`` may leave them below :data:`SCALED_EXP2_RANGE` (a probability by a factor ``e^d``, a
    log-domain result by ``d``, ``d`` one ulp of the largest score read (:func:`score_exponent_error`), doubled as
    :func:`fma_exponent_allowance` does for the registry's ops); and why. (None, "") off CUDA, without such calls,
    past the range (:func:`reference_undetermined`) or while the move is below fp32's rounding.

    Measured on an H100 (bench/gpu_session_i.md): a correct paged-decode kernel returned ``v * (1 + 2^-10)`` where
    the truth is ``v`` (a one-hot softmax, exact in fp32) in a row whose top score is -1.4e4, one fp32 ulp of which is
    2^-10: the score rounded for the row max and its FMA-contracted copy in the exponent differ by that ulp, so the
    maximum's term is ``e^(2^-10)``, not 1, in the accumulator while the row sum holds 1. Every layout and num_warps
    gave the same; eager PyTorch, computing the softmax in one piece, is exact there, so the eager-relative bound
    alone failed the kernel by 79x."""
    from .tolerance import device_kind

    if device_kind(device) != "cuda":
        return None, ""
    seen = softmax_reads(reference, args) if seen is None else seen
    if not seen:
        return None, ""
    biggest, name = max(seen)
    if not 0 < biggest < SCALED_EXP2_RANGE:
        return None, ""
    shift = score_exponent_error(biggest)
    rel, log_shift = 2.0 * math.expm1(shift), 2.0 * shift
    if rel < 1e-6:
        return None, ""
    import torch
    from torch.overrides import TorchFunctionMode

    watched = _watched()
    base = _flat_tensors(_run(reference, args))
    moved: list | None = None
    for pattern in range(FMA_PATTERNS):
        gen = torch.Generator().manual_seed(pattern)

        class _Off(TorchFunctionMode):
            def __torch_function__(self, func, types, a=(), kwargs=None):
                out = func(*a, **(kwargs or {}))
                if func in watched and isinstance(out, torch.Tensor) and out.is_floating_point():
                    sign = torch.ones(out.shape) if pattern == 0 else \
                        torch.randint(0, 2, out.shape, generator=gen).mul(2).sub(1)
                    sign = sign.to(out.device, out.dtype)
                    out = out + sign * log_shift if watched[func] else out * (1 + sign * rel)
                return out

        with _Off():
            off = _flat_tensors(_run(reference, args))
        diffs = [(o.detach().double() - b.detach().double()).abs().nan_to_num(nan=0.0, posinf=0.0)
                 if isinstance(o, torch.Tensor) and isinstance(b, torch.Tensor) and b.is_floating_point()
                 and o.shape == b.shape else None for o, b in zip(off, base)]
        moved = diffs if moved is None else [x if m is None else m if x is None else torch.maximum(m, x)
                                             for m, x in zip(moved, diffs)]
    return moved, (f"the reference's {name} reads values up to |x| = {biggest:.3g}: on a GPU an FMA-contracted "
                   f"exp(x - max) may leave its terms off by e^{shift:.3g} (one ulp of the score; the bound allows "
                   f"x{1 + rel:.6g}, what that moves the outputs)")


def score_exponent_error(biggest: float) -> float:
    """How far (natural-log units) a kernel's exponent ``x - max`` may be from the rounded scores' on a GPU for
    scores up to ``biggest``: one fp32 ulp of the score, or of ``score * log2e`` for the exp2 form (times ln 2),
    whichever is larger. Measured twice, both one ulp of the top score (bench/gpu_session_i.md: 2^-10 at -1.4e4;
    bench/gpu_session_l.md: 2^-5 at 2.7e5, a one-hot row returned as v * e^(2^-5)): the kernel's max reads the
    rounded score, its exponent an FMA-contracted ``fma(dot, scale, -max)`` of a score computed a second time, so
    the two differ by more than the half ulp a single contraction gives."""
    ulp_score = 2.0 ** (math.floor(math.log2(biggest)) - 23)
    ulp_scaled = math.log(2.0) * 2.0 ** (math.floor(math.log2(biggest * LOG2E)) - 23)
    return max(ulp_score, ulp_scaled)


def _run(reference: Any, args: list) -> Any:
    import torch

    with torch.no_grad():
        return reference(*args)


def _flat_tensors(out: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat_tensors(o)]
    return [out]


# ---------------------------------------------------------------- subnormal results (flush to zero)
# The smallest normal fp32 (and bf16) magnitude. Triton's approximate instructions flush subnormal results to zero
# on NVIDIA GPUs: measured on the H200, the corpus's exp2-based exp returned 0 for a bf16 result of 4.97e-40
# (case 0x46566ed9a02404a4 of `gpuemu fuzz examples/kernels/exp.py:exp_exp2 --device cuda -n 900 --seed 1`), and
# bench/gpu_arith_probe.py measures which instructions flush (bench/gpu_arith_h200.md). fp16's subnormals start at
# 6.1e-5 and are kept (the fp32 -> fp16 conversion rounds, it does not flush), so the floor is fp32's.
from .tolerance import FLT_MIN  # noqa: E402  (re-exported: the flush's threshold)


# ---------------------------------------------------------------- flush-to-zero arithmetic profiles
# Frameworks whose kernels flush subnormal fp32 inputs and results to zero (DAZ/FTZ): XLA's CPU and GPU code (JAX,
# Pallas in interpret mode, which runs XLA ops) and TensorFlow's kernels set the flush mode. Measured here: correct
# JAX and TF rmsnorm kernels returned -0 for x = -1.6e-38 * rsqrt(1e-6) where fp64 gives -1.6e-35 (2 of 60 fp32
# cases failed before these profiles).
FLUSH_PROFILES = {"jax": "XLA (JAX) flushes subnormal inputs and results to zero",
                  "tf": "TensorFlow flushes subnormal inputs and results to zero"}


def flush_profile(launcher: Any) -> str | None:
    """The flush-to-zero profile a launcher's arithmetic follows (its words), None for plain IEEE arithmetic."""
    return FLUSH_PROFILES.get(getattr(launcher, "__gpuemu_framework__", None) or "")


def flushed_inputs(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``inputs`` with every floating value of magnitude below the smallest normal fp32 set to (signed) zero, as a
    flushing device reads them; None when no input holds such a value (the profile changes nothing)."""
    import torch

    out, changed = dict(inputs), False
    for k, t in inputs.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            tiny = (t.abs() < FLT_MIN) & (t != 0)
            if bool(tiny.any()):
                out[k] = torch.where(tiny, t * 0, t)
                changed = True
    return out if changed else None


def accumulation_factor(spec: Any, dims: Mapping[str, int]) -> tuple[float, str]:
    """How far past the calibrated range this case's longest accumulation runs, as a factor >= 1 on rtol, and the
    words that say so ('' when it is within the range).

    A calibrated rtol was fitted on cases whose reduced and contracted dims stay within the generator's regular
    caps (``cases.dim_limits``: 1100 for a reduced row, 200 for matmul's K); the default strategy also draws rows
    of several blocks, far past them (up to 64k). A correct kernel that accumulates in fp32 sums such a row in
    steps the fit never saw: its rounding error grows with the number of sequential additions, at most linearly
    (the classic bound gamma_n = n * u), and a GPU's sequential per-thread accumulation (Triton's fp32 `tl.dot` on
    the FMA path, a loop over blocks) reaches it: measured on the H200, the corpus's correct fp32 matmul erred
    14x its calibrated bound at K = 7755, softmax 2x at N = 8832, Welford layernorm 1.3x at N = 14406. So past the
    calibrated length the rtol grows with the length, linearly (the worst-case rate), never below the fit: a
    precision bug (an fp16 or bf16 accumulator, 2^13 times fp32's unit roundoff) stays far outside it, and
    structural bugs (an overwritten accumulator, a missing max) are O(1) errors."""
    from .cases import dim_limits

    worst, why = 1.0, ""
    for d, kind in spec.dims.items():
        if kind not in ("reduced", "contracted") or d not in dims:
            continue
        cap = dim_limits(spec, d)[1]
        if dims[d] > cap and dims[d] / cap > worst:
            worst, why = dims[d] / cap, f"{d}={dims[d]} past the calibrated {cap}"
    return worst, why


def case_tolerance(tol: Any, spec: Any, dims: Mapping[str, int], device: Any,
                   inputs: Mapping[str, Any] | None = None) -> Any:
    """``tol`` (a calibrated Tolerance) for one case on ``device``: rtol scaled by :func:`accumulation_factor`
    (on every device: the CPU runtime accumulates across blocks in the kernel's own order too), and on CUDA
    ``flush_subnormals``: a result below the smallest normal fp32 may be flushed to zero there."""
    import dataclasses

    from .tolerance import device_kind

    factor, why = accumulation_factor(spec, dims)
    if factor > 1.0:
        tol = dataclasses.replace(tol, rtol=tol.rtol * factor, source=f"{tol.source} x{factor:.3g} ({why})")
    if device_kind(device) == "cuda" and not tol.flush_subnormals:
        tol = dataclasses.replace(tol, flush_subnormals=True, source=f"{tol.source}, subnormal results may flush "
                                                                      "to zero (CUDA)")
    extra, fma_why = fma_exponent_allowance(spec.name, inputs or {}, device)
    if extra > tol.atol:
        tol = dataclasses.replace(tol, atol=tol.atol + extra, source=f"{tol.source}, {fma_why}")
    return tol


def dims_from_inputs(spec: Any, inputs: Mapping[str, Any]) -> dict[str, int]:
    """The op's named dims as the inputs' shapes give them (matched from the right: ``...`` is the leading batch),
    for a call that comes with no Case (the hook's production calls)."""
    dims: dict[str, int] = {}
    for arg in spec.args:
        t = inputs.get(arg.name)
        shape = getattr(t, "shape", None)
        if shape is None:
            continue
        names = [n for n in arg.shape if n != "..."]
        for name, size in zip(reversed(names), reversed(tuple(shape))):
            if "/" not in name and name in spec.dims:
                dims.setdefault(name, int(size))
    return dims
