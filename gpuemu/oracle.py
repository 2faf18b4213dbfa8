"""The oracle: an op's fp64 reference and bound, its guards, and the launcher hygiene around a run.

Every source of kernel calls (the fuzzer, the hook, reports) ends here, so a divergence found anywhere
reads and replays the same way. :meth:`Oracle.compare` computes the op's reference, error scale and bound
and hands them to the comparison core (:mod:`gpuemu.compare`, where :class:`Verdict` lives), with the mpmath
guards and the framework rule as its hooks; :meth:`Oracle.evaluate` runs a launcher on a case with the
hygiene checks around it (inputs unmodified, outputs poisoned, run twice for determinism, no aliasing) and
then compares."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import ops
from .errors import KernelFinding
from .cases import DTYPES, Case, call_kwargs, materialize, torch_dtype
from .resources import LaunchRefused
from .runners import Launch, run_launcher
from .compare import (ERROR, FAIL, LIMIT, OVERFLOW, PASS, PRECONDITION, REJECTED, SCHEMA_VERSION, SKIP, Verdict,  # noqa: F401
                      bound_line, check_form, compare, compare_index, elementwise_error)
from .compare import fmt as _fmt, unravel as _unravel  # noqa: F401 (one index helper for every report)
from .tolerance import Tolerance, ToleranceTable, bounds

FRAMEWORK_FACTOR = 2.0  # torch's accuracy minifier: a result may be twice as far from fp64 as eager's
MP_CHECKS = 3  # worst elements re-checked with mpmath before a mismatch is final
# fp64's own forward error is taken to be at most this many times its model n * 2^-53 * scale (the model is a
# worst case already; the factor covers libm's few-ulp transcendental functions): a mismatch further from fp64
# than the bound plus that much cannot be an fp64 artefact, so mpmath is not asked about it
FP64_TRUST = 64.0


def _dtype_name(dt) -> str:
    return {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}.get(str(dt), "fp32")


def to_reference_inputs(spec: ops.OpSpec, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs as the fp64 reference takes them: float64 (index args int64) on the CPU."""
    import torch

    out = {}
    for a in spec.args:
        t = inputs.get(a.name)
        if t is None or not isinstance(t, torch.Tensor):
            out[a.name] = t  # (None, or a reference-defined op's scalar)
        elif a.kind == "index" and spec.schema is None:
            out[a.name] = t.detach().to("cpu", torch.int64)
        elif a.kind == "float":
            out[a.name] = t.detach().to("cpu", torch.float64)
        else:  # a reference-defined op's ids, offsets, quantized ints, bools and fp8 stay as the kernel gets them
            out[a.name] = t.detach().to("cpu")
    return out


def reference(spec: ops.OpSpec, inputs64: Mapping[str, Any], kwargs: Mapping[str, Any]):
    """(fp64 reference, error scale) for fp64 inputs."""
    import torch

    full = dict(spec.kwargs, **kwargs)
    with torch.no_grad():
        ref = spec.reference(**inputs64, **full)
        scale = spec.error_scale(inputs64, full, ref) if spec.out_kind == "float" else None
    return ref, scale


TF32_FACTOR = 2.0**14  # unit roundoff of TF32 (10 explicit mantissa bits) over fp32's: 2^-10 / 2^-24


def dot_precision(launches) -> str | None:
    """The tl.dot input precision gpuemu's runtime saw (e.g. "tf32", "ieee"), joined when several differ."""
    seen = sorted({str(lch.options["dot_precision"]) for lch in launches if lch.options.get("dot_precision")})
    return ",".join(seen) or None


def tf32_tolerance(tol: Tolerance) -> Tolerance:
    """An fp32 tolerance for a kernel whose dots ran in TF32 (the sm_80+ default): the same calibrated rtol
    in units of TF32's rounding instead of fp32's."""
    import dataclasses

    return dataclasses.replace(tol, rtol=tol.rtol * TF32_FACTOR, source=f"{tol.source} x2^14 (tf32 dots)")


_WIDER = {"fp16": "fp32", "bf16": "fp32"}


def output_dtype(spec: ops.OpSpec, dtype: str, output) -> str | None:
    """The dtype ``output`` is judged in: the case's, or for an op that accepts a more precise output
    (``OpSpec.wider_output``: an fp32 loss for fp16 logits) fp32; None when the output's dtype is not
    acceptable (a less precise output is always a failure)."""
    import torch

    if spec.out_kind == "index":
        return dtype if output.dtype == torch.int64 else None
    if output.dtype == torch_dtype(dtype):
        return dtype
    wider = _WIDER.get(dtype)
    if spec.wider_output and wider and output.dtype == torch_dtype(wider):
        return wider
    return None


def _storage_view(t):
    """``t``'s whole storage as integers, without a copy (a write into the gaps of a view counts as mutation).
    The widest integer that divides the storage: bitwise equality is the same at any width, and torch.equal on
    uint8 is ~8x slower than on int64 (1.6 ms against 0.2 ms per MiB, one thread)."""
    import torch

    st = t.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8, device=st.device).set_(st)
    for width, dt in ((8, torch.int64), (4, torch.int32), (2, torch.int16)):
        if st.nbytes() % width == 0:
            return raw.view(dt)
    return raw


def _storage_bytes(t):
    """A copy of ``t``'s whole storage as uint8: the bytes before the launch, for :func:`_storage_view` after it."""
    return _storage_view(t).clone()


def _bits(t):
    """A view of ``t``'s values that compares NaNs bitwise."""
    import torch

    t = t.detach().contiguous().cpu()
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(width) if t.is_floating_point() else t


def _overlaps(a, b) -> bool:
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a.device == b.device and a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes() and sa.nbytes() and sb.nbytes()


class Oracle:
    """One oracle for fuzzing, the hook and reports.

    >>> from gpuemu.oracle import Oracle
    >>> o = Oracle.default()
    """

    def __init__(self, tolerances: ToleranceTable, *, framework_factor: float = FRAMEWORK_FACTOR) -> None:
        self.tolerances = tolerances
        self.framework_factor = framework_factor

    @classmethod
    def default(cls) -> "Oracle":
        from . import config

        return cls.from_settings(config.resolve())

    @classmethod
    def from_settings(cls, settings) -> "Oracle":
        """The oracle of resolved settings: their tolerance table and ``oracle.framework_factor``."""
        return cls(settings.tolerance_table(),
                   framework_factor=float(settings.oracle.get("framework_factor", FRAMEWORK_FACTOR)))

    # ------------------------------------------------------------------ compare

    def compare(self, spec: ops.OpSpec, dtype: str, inputs: Mapping[str, Any], kwargs: Mapping[str, Any],
                output: Any, *, tol: Tolerance | None = None) -> Verdict:
        """Judge ``output`` of ``spec`` on ``inputs`` (in ``dtype``) against the fp64 reference."""
        t0 = time.perf_counter()
        inputs64 = to_reference_inputs(spec, inputs)
        ref, scale = reference(spec, inputs64, kwargs)
        t1 = time.perf_counter()
        if tol is None:  # a call without a case (the hook): the tolerance for these inputs' lengths and device
            from .device_arith import case_tolerance, dims_from_inputs

            device = getattr(output, "device", None)
            tol = case_tolerance(self.tolerances.get(spec.name, dtype, device=device), spec,
                                 dims_from_inputs(spec, inputs), device, inputs)
        verdict = self._judge(spec, dtype, inputs, inputs64, kwargs, output, ref, scale, tol)
        t2 = time.perf_counter()
        mp_s = verdict.seconds.get("mpmath", 0.0)
        secs = dict(verdict.seconds, reference=t1 - t0, compare=t2 - t1 - mp_s, mpmath=mp_s)
        return _with(verdict, seconds=secs)

    def _truth(self, spec: ops.OpSpec, inputs: Mapping[str, Any]) -> Any:
        """The reference's float64 outputs on ``inputs``, or a REJECTED verdict where it cannot compute them."""
        from .compare import REJECTED
        from .errors import one_line

        inputs64 = to_reference_inputs(spec, inputs)
        try:
            return spec.reference(*[inputs64[a.name] for a in spec.args])
        except Exception as e:  # noqa: BLE001 - the reference's own domain
            return Verdict(REJECTED, "reference", f"the reference cannot compute this case in float64: {one_line(e)}")

    def compare_on_device(self, spec: ops.OpSpec, dtype: str, inputs: dict, kwargs: dict, output: Any) -> Verdict:
        """:meth:`compare` with the fp64 reference computed on the inputs' device (a GPU stays a GPU).

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
        return self.compare(spec, dtype, inputs, kwargs, output)

    def compare_reference(self, spec: ops.OpSpec, inputs: Mapping[str, Any], output: Any, *,
                          tf32: bool = False, truth: Any = None, moves: list | None = None) -> Verdict:
        """Judge the output(s) of a kernel bound to a user's PyTorch reference (``spec.schema``): the reference in
        float64 is the truth, the same reference in the working dtype the control (:func:`gpuemu.judge.
        judge_reference`). A case the reference itself cannot compute is REJECTED (not the kernel's failure).
        ``moves``: per output, how far a correct kernel's output may move on this device beyond the control's error
        (gpuemu.device_arith.reference_fma_spread), added to the bound."""
        import torch

        from .errors import one_line
        from .judge import judge_reference

        t0 = time.perf_counter()
        args = [inputs.get(a.name) for a in spec.args]
        if truth is None:
            truth = self._truth(spec, inputs)
            if isinstance(truth, Verdict):
                return truth
        note = ""

        def eager(values):
            if tf32:  # the kernel's fp32 dots ran in TF32, as on a GPU: so do the control's matrix products
                from .backends.fp64 import Tf32Mode

                with Tf32Mode():
                    return spec.eager(*values)
            return spec.eager(*values)

        try:
            control = eager(args)
            if tf32:
                note = "the control's fp32 matrix products read TF32 operands, as the kernel's fp32 dots did"
        except Exception as e:  # noqa: BLE001 - e.g. an op with no fp16 kernel on this device
            control = [t.to(o.dtype) if isinstance(o, torch.Tensor) and o.is_floating_point() and t.is_floating_point()
                       else t for t, o in zip(truth, _tensors(output) or truth)]
            note = f"the reference does not run in this dtype ({one_line(e)}): bound from rounding the truth"
        spread = nudge_spread(eager, args, control)
        if moves is not None:  # (the bound adds REFERENCE_MULTIPLIER times the spread: a move enters divided by it)
            from .judge import REFERENCE_MULTIPLIER, dtype_label

            extra = [m / REFERENCE_MULTIPLIER.get(dtype_label(c.dtype), 1.0)
                     if isinstance(m, torch.Tensor) and isinstance(c, torch.Tensor) else None
                     for m, c in zip(moves, control)]
            spread = extra if spread is None else [x if s is None else s if x is None else s + x.to(s.device)
                                                   for s, x in zip(spread, extra)]
        t1 = time.perf_counter()
        v = judge_reference(_tensors(output), [t.detach().cpu() for t in truth],
                            [c.detach() if isinstance(c, torch.Tensor) else c for c in control], self.tolerances,
                            spread=spread, writes=spec.schema.writes if spec.schema is not None else ())
        if note:
            v = _with(v, detail=(v.detail + "\n" if v.detail else "") + note)
        return _with(v, seconds=dict(v.seconds, reference=t1 - t0, compare=time.perf_counter() - t1))

    def reference_on_device(self, v: Verdict, spec: ops.OpSpec, inputs: Mapping[str, Any], output: Any, *,
                            device: Any, tf32: bool = False, truth: Any = None) -> Verdict:
        """A failing verdict of a kernel judged against its reference, in the light of the device's own arithmetic
        (gpuemu.device_arith): past the range a GPU determines, the case is REJECTED as undetermined there; below
        it, judged again with the bound widened by what an FMA-contracted softmax may move the outputs."""
        if v.status != FAIL:
            return v
        from .device_arith import reference_fma_spread, reference_undetermined, softmax_reads
        from .tolerance import device_kind

        if device_kind(device) != "cuda":
            return v
        args = [inputs.get(a.name) for a in spec.args]
        seen = softmax_reads(spec.eager, args)  # (one run of the reference serves both rules)
        why = reference_undetermined(spec.eager, args, device, seen)
        if why:
            return _with(v, status=REJECTED, kind="undetermined", message=why,
                         detail=f"not judged on this device; the comparison said: {v.message}")
        moves, fma_why = reference_fma_spread(spec.eager, args, device, seen)
        if moves is None:
            return v
        again = self.compare_reference(spec, inputs, output, tf32=tf32, truth=truth, moves=moves)
        return _with(again, detail=(again.detail + "\n" if again.detail else "") + fma_why)

    @staticmethod
    def _under_flush_profile(v: Verdict, launcher: Callable, inputs: Mapping[str, Any],
                             judge: Callable[[dict], Verdict]) -> Verdict:
        """A failing verdict judged again as the launcher's framework computes (gpuemu.device_arith.flush_profile:
        subnormal inputs read as zero, subnormal results flushed): PASS, naming the profile, when that is the only
        difference from fp64; else ``v`` as it was."""
        if v.status != FAIL or v.kind not in ("mismatch", "nonfinite"):
            return v
        from .device_arith import flush_profile, flushed_inputs

        profile = flush_profile(launcher)
        flushed = flushed_inputs(inputs) if profile else None
        if flushed is None:
            return v
        again = judge(flushed)
        if again.status != PASS:
            return v
        return _with(again, detail=(again.detail + "\n" if again.detail else "") +
                     f"passed under the flush-to-zero profile: {profile} (judged with subnormal inputs read as 0; "
                     f"against IEEE arithmetic: {v.message})")

    def _judge(self, spec, dtype, inputs, inputs64, kwargs, output, ref, scale, tol) -> Verdict:
        import torch

        base = dict(rtol=tol.rtol, atol=tol.atol, numel=ref.numel())
        want_dtype = torch.int64 if spec.out_kind == "index" else torch_dtype(dtype)
        out_dtype = output_dtype(spec, dtype, output) if isinstance(output, torch.Tensor) else None
        wider = f" (or {_WIDER[dtype]}: {spec.name} may return a more precise result)" \
            if spec.wider_output and dtype in _WIDER else ""
        bad_form = check_form(output, ref, want_dtype=want_dtype, accepted=out_dtype is not None,
                              signature=spec.signature, base=base, wider_note=wider)
        if bad_form is not None:
            return bad_form
        first = next((t for t in inputs.values() if t is not None), None)
        if first is not None and output.device != first.device:
            return Verdict(FAIL, "device", f"output on {output.device}, inputs on {first.device}", **base)
        if ref.numel() == 0:
            return Verdict(PASS, **base)
        if spec.out_kind == "index":
            return compare_index(output, ref, rtol=tol.rtol, atol=tol.atol)
        return self._judge_float(spec, dtype, inputs, inputs64, kwargs, output, ref, scale, tol, out_dtype)

    def _judge_float(self, spec, dtype, inputs, inputs64, kwargs, output, ref, scale, tol, out_dtype) -> Verdict:
        """The op's bound (:func:`gpuemu.tolerance.bounds`) and its guards around the one comparison core: the
        fp64 guard first (where fp64's own error could reach the bound, mpmath recomputes the reference), the
        mpmath re-check of mismatches and the framework rule as :func:`gpuemu.compare.compare`'s hooks."""
        import torch

        out = output.detach().to("cpu", torch.float64)
        rounded = spec.rounded_magnitude(inputs64, kwargs, ref, dtype)
        bound = bounds(scale, ref, tol, dtype, rounded=rounded, out_dtype=out_dtype)
        note = ""
        t_mp = time.perf_counter()
        guarded = spec.mp_element is not None and not spec.exact_reference
        fp64_err = _fp64_error(spec, inputs64, ref, scale) if guarded else None
        if fp64_err is not None:
            ref, note = self._fp64_guard(spec, inputs64, kwargs, ref, fp64_err, bound)
        fp64_guard_s = time.perf_counter() - t_mp

        def recheck(out, ref, bound, bad):
            return self._mpmath_guard(spec, inputs64, kwargs, out, ref, bound, bad, fp64_err)[1:]

        def rescue(worst: float):
            return self._framework_rule(spec, inputs, kwargs, ref, bound, worst)

        v = compare(out, ref, bound, dtype=out_dtype, rtol=tol.rtol, atol=tol.atol, note=note,
                    bound_doc=bound_line(tol, dtype, spec.scale_doc, spec.rounded_doc if spec.rounded else None),
                    recheck=recheck if guarded else None, rescue=rescue)
        # the guards' share of compare (reported apart by compare())
        return _with(v, seconds={"mpmath": v.seconds.get("mpmath", 0.0) + fp64_guard_s})

    def _framework_rule(self, spec, inputs, kwargs, ref, bound, worst: float) -> str | None:
        """"Correct" as the field means it: a case outside the fp64 bound still passes when PyTorch's own eager
        form of the op (``OpSpec.eager``) is outside it too on the same inputs, and the kernel is no further from
        fp64 than ``framework_factor`` times eager, both measured as their worst element's error over its bound.
        Returns the note of such a pass, else None. Eager code that raises rescues nothing."""
        import torch

        if spec.eager is None or self.framework_factor <= 0 or not math.isfinite(worst):
            return None
        try:
            with torch.no_grad():
                eager = spec.eager(*[inputs.get(a.name) for a in spec.args], **kwargs)
            eager_dtype = output_dtype(spec, _dtype_name(eager.dtype), eager)
            err = elementwise_error(eager.detach().to("cpu", torch.float64), ref, eager_dtype or "fp32")
        except Exception:  # the framework cannot compute it: the bound's verdict stands
            return None
        eager_worst = float((err / bound.clamp_min(1e-300)).max())
        # only where the framework itself is outside the bound: where eager is inside it, the bound is what
        # "correct" means, and 2x eager's error there would pass precision bugs (an fp16 running sum passed 1-2
        # of its first cases that way: iterations to its first failure went from 2 to 5)
        if not math.isfinite(eager_worst) or eager_worst <= 1.0 or worst > self.framework_factor * eager_worst:
            return None
        return (f"within {self.framework_factor:g}x of PyTorch eager's error ({spec.eager_doc}): the kernel's worst "
                f"element is {_fmt(worst)}x its fp64 bound, eager's {_fmt(eager_worst)}x")

    def _fp64_guard(self, spec, inputs64, kwargs, ref, fp64_err, bound):
        """Where fp64's own forward error (``fp64_err``, :func:`_fp64_error`) could reach a tenth of the bound, the
        fp64 reference is not trustworthy: recompute the worst such elements with mpmath (50 digits)."""
        import mpmath

        shaky = (fp64_err > 0.1 * bound) & ref.isfinite()
        count = int(shaky.sum())
        if count == 0:
            return ref, ""
        full = dict(spec.kwargs, **kwargs)
        arrays = {k: (None if v is None else v.numpy()) for k, v in inputs64.items()}
        shakiest = (fp64_err / bound.clamp_min(1e-300)).masked_fill(~shaky, -1.0).reshape(-1)
        ref = ref.clone()
        checked = 0
        with mpmath.workdps(50):
            for flat in shakiest.topk(min(MP_CHECKS, count)).indices.tolist():
                try:
                    ref.reshape(-1)[int(flat)] = float(spec.mp_element(arrays, full, _unravel(int(flat), ref.shape)))
                    checked += 1
                except Exception:  # the fp64 value stands where mpmath cannot help
                    continue
        return ref, (f"mpmath: fp64 is not accurate enough for this tolerance at {count} element(s); "
                     f"{checked} recomputed with mpmath")

    def _mpmath_guard(self, spec, inputs64, kwargs, out, ref, bound, bad, fp64_err=None):
        """Re-check the worst mismatches with mpmath: fp64 itself may be wrong on ill-conditioned inputs.

        The cost is bounded: at most MP_CHECKS elements, worst first (their error over their bound), and the
        first one that stays a mismatch ends the check (the verdict is FAIL whatever the rest would say, and the
        worst ratio it reports is that element's). An element is sent to mpmath only where fp64 could be the one
        that is wrong: its output finite, and fp64's error (FP64_TRUST times its model) able to reach both half
        the bound (what the guard requires to overrule fp64) and the mismatch beyond the bound. Unchecked
        elements stay mismatches, so the bound can never hide a bug. Row-wise element checks share each row's
        50-digit value (see ops._defs._row_result): a row costs its N mpmath exps once, not per element."""
        import mpmath
        import torch

        err = (out - ref).abs()
        ratio = torch.where(bad, torch.nan_to_num(err / bound.clamp_min(1e-300), nan=math.inf, posinf=math.inf),
                            torch.full_like(err, -1.0)).reshape(-1)
        could = bad & out.isfinite()
        if fp64_err is not None:
            reach = FP64_TRUST * fp64_err
            could &= ~ref.isfinite() | ((reach > 0.5 * bound) & (err - bound <= reach))
        could = could.reshape(-1)
        full = dict(spec.kwargs, **kwargs)
        arrays = {k: (None if v is None else v.numpy()) for k, v in inputs64.items()}
        fixed = 0
        bad = bad.clone()
        flat_bad, flat_out, flat_ref, flat_bound = bad.reshape(-1), out.reshape(-1), ref.reshape(-1), bound.reshape(-1)
        with mpmath.workdps(50):
            for flat in ratio.topk(min(MP_CHECKS, ratio.numel())).indices.tolist():
                if not bool(flat_bad[flat]) or not bool(could[flat]):
                    break  # no mismatch left, or one mpmath cannot clear: the verdict is settled
                try:
                    exact = float(spec.mp_element(arrays, full, _unravel(flat, ref.shape)))
                except Exception:  # an mpmath failure leaves the fp64 verdict standing
                    break
                b = float(flat_bound[flat])
                if not (abs(exact - float(flat_ref[flat])) > 0.5 * b and abs(float(flat_out[flat]) - exact) <= b):
                    break
                flat_bad[flat] = False
                fixed += 1
        n = int(bad.sum())
        note = f"mpmath: the fp64 reference was off at {fixed} checked element(s); judged against mpmath there" if fixed else ""
        return n, bad, note

    # ------------------------------------------------------------------ evaluate

    def evaluate(self, launcher: Callable, case: Case, *, device: str = "cpu", check_determinism: bool = True,
                 tol: Tolerance | None = None, inputs: Mapping[str, Any] | None = None) -> "Evaluation":
        """Run ``launcher`` on ``case`` with hygiene checks, then compare. Never raises for the launcher.

        ``inputs`` replaces the case's generated tensors (replay of stored snapshot bytes).
        """
        import torch

        spec = case.spec
        if case.shape_kind == "production" and inputs is None and device == "cpu":  # sampled programs over sparse
            from . import production                                                # memory (gpuemu.production)

            return production.evaluate(self, launcher, case, tol=tol)
        t0 = time.perf_counter()
        if inputs is None:
            inputs, kwargs = materialize(case, device)
        else:
            from .cases import scalar_args

            inputs, kwargs = dict(scalar_args(case), **inputs), call_kwargs(case)
        before = {k: _storage_bytes(v) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        args = [inputs[a.name] for a in spec.args]
        t_gen = time.perf_counter() - t0
        truth = None
        if spec.schema is not None:  # a case the user's reference cannot compute is no case: the kernel is not run
            truth = self._truth(spec, inputs)
            if isinstance(truth, Verdict):
                return Evaluation(_with(truth, seconds={"generate": t_gen}), [])
        run1 = run_launcher(launcher, args, kwargs, device=device)
        secs = {"generate": t_gen, "kernel": run1.seconds}

        def done(v: Verdict) -> Evaluation:
            return Evaluation(_with(v, seconds=dict(secs, **v.seconds)), run1.launches)

        if isinstance(run1.error, KernelFinding):  # (an index that wraps into an address is its own class)
            status = OVERFLOW if run1.error.kind == "overflow" else FAIL
            return done(Verdict(status, run1.error.kind, run1.error.message))
        if isinstance(run1.error, LaunchRefused):  # the same words whether predicted on the CPU or raised on CUDA
            return done(Verdict(LIMIT, "out_of_resources", run1.error.message, detail=run1.error.detail))
        if run1.error is not None:
            return done(error_verdict(run1))
        mutated = [k for k, v in inputs.items() if k in before and not torch.equal(_storage_view(v), before[k])]
        if mutated:
            return done(Verdict(FAIL, "mutation", f"the launcher modified its input{'s' if len(mutated) > 1 else ''} "
                                                  f"{', '.join(repr(m) for m in mutated)} (inputs must stay unchanged)"))
        out1 = run1.output
        outs1 = _tensors(out1) if spec.schema is not None else [out1] if isinstance(out1, torch.Tensor) else []
        for o in outs1:
            aliased = [k for k in before if _overlaps(o, inputs[k])]
            if aliased:
                return done(Verdict(FAIL, "alias", f"the output aliases input {aliased[0]!r}: it shares its memory"))
        if check_determinism and outs1:
            first_bits = [_bits(o).clone() for o in outs1]
            run2 = run_launcher(launcher, args, kwargs, device=device)
            secs["kernel"] += run2.seconds
            if run2.error is not None:
                return done(Verdict(ERROR, "exception", f"second call on the same inputs raised {run2.error_text}"))
            outs2 = _tensors(run2.output) if spec.schema is not None else \
                [run2.output] if isinstance(run2.output, torch.Tensor) else []
            for o1, o2, bits in zip(outs1, outs2, first_bits):
                if o2.untyped_storage().data_ptr() == o1.untyped_storage().data_ptr() and o1.numel():
                    return done(Verdict(FAIL, "alias", "the launcher returned the same buffer on two calls "
                                                       "(a cached output): the second call overwrote the first's result"))
                if o2.shape == o1.shape and o2.dtype == o1.dtype and not torch.equal(_bits(o2), bits):
                    diff = int((_bits(o2) != bits).sum())
                    return done(Verdict(FAIL, "nondeterministic", f"two calls on the same inputs differ at {diff} "
                                                                  f"element{'s' if diff != 1 else ''} (non-deterministic)"))
        if spec.schema is not None:  # judged against the user's reference (gpuemu.judge.judge_reference)
            precision = dot_precision(run1.launches)
            tf32 = bool(precision and "tf32" in precision and case.dtype == "fp32")
            v = self.compare_reference(spec, inputs, out1, tf32=tf32, truth=truth)
            v = self._under_flush_profile(v, launcher, inputs, lambda fl: self.compare_reference(
                spec, fl, out1, tf32=tf32))
            v = self.reference_on_device(v, spec, inputs, out1, device=device, tf32=tf32, truth=truth)
            if precision:
                v = _with(v, detail=(v.detail + "\n" if v.detail else "") + f"dot precision: {precision}")
            return done(v)
        tol = tol or self.tolerances.get(spec.name, case.dtype, device=device)
        from .device_arith import case_tolerance

        tol = case_tolerance(tol, spec, case.dims, device, inputs)  # past the calibrated length; CUDA's flush, FMA
        precision = dot_precision(run1.launches)
        if precision and "tf32" in precision and case.dtype == "fp32" and spec.dims_of_role("contracted", "head"):
            tol = tf32_tolerance(tol)
        v = self.compare(spec, case.dtype, inputs, kwargs, out1, tol=tol)
        v = self._under_flush_profile(v, launcher, inputs, lambda fl: self.compare(
            spec, case.dtype, fl, kwargs, out1, tol=dataclasses.replace(tol, flush_subnormals=True)))
        if v.status == FAIL:  # a GPU's own arithmetic may leave the result undetermined (gpuemu.device_arith)
            from .device_arith import undetermined

            why = undetermined(spec.name, inputs, device)
            if why:
                v = _with(v, status=REJECTED, kind="undetermined", message=why,
                          detail=f"not judged on this device; the comparison said: {v.message}")
        if precision:
            source = {str(lch.options.get("dot_precision_source")) for lch in run1.launches
                      if lch.options.get("dot_precision_source")}
            said = f" (read from the {', '.join(sorted(source))}; judged as on the CPU runtime)" if source else ""
            v = _with(v, detail=(v.detail + "\n" if v.detail else "") + f"dot precision: {precision}{said}")
        return done(v)


def error_verdict(run: Any) -> Verdict:
    """The one refusal rule, for a launcher call that raised (``run``: a :class:`gpuemu.runners.RunOutcome`): on
    the host before any kernel launch, whatever the exception's type, the launcher refuses the input (REJECTED,
    kind ``refusal``: xformers' ValueError, flash-attention's bare assert and Liger's view RuntimeError alike); from
    inside a kernel or after one launched, the kernel's ERROR; from gpuemu's own code, an ERROR of kind
    ``internal`` that names gpuemu, not the launcher."""
    from .compare import REJECTED

    if run.internal:
        return Verdict(ERROR, "internal", f"gpuemu failed internally ({run.error_text}): a bug in gpuemu, not in the "
                                          "launcher; please report it with the replay line")
    if not run.launched:
        return Verdict(REJECTED, "refusal", f"refuses the input before any launch: {run.error_text}")
    return Verdict(ERROR, "exception", f"launcher raised {run.error_text}")


NUDGES = 3  # draws of the one-ulp nudge: where rounding decides the result (a near-tie of softmax scores at |s| = 1e8
# in fp32), one draw may miss the rows a kernel's own rounding flips; the spread is the largest move of the three


def nudge_spread(run: Any, args: list, control: list, draws: int = NUDGES) -> list | None:
    """Per fp32 output of ``control`` (``run(args)``), the largest move of ``run`` over ``draws`` one-ulp nudges of
    the floating arguments, None elsewhere (and None in all when nothing is fp32, or ``run`` cannot be nudged): the
    control's own condition, where its error against fp64 happens to be small (a sum that cancels, computed by a
    kernel in another order)."""
    import torch

    if not any(isinstance(c, torch.Tensor) and c.dtype == torch.float32 for c in control):
        return None
    spread = None
    try:
        for draw in range(draws):
            nudged = run(_nudged(args, draw))
            moved = [(n.detach().double() - c.detach().double()).abs()
                     if isinstance(n, torch.Tensor) and isinstance(c, torch.Tensor) and c.dtype == torch.float32
                     and n.shape == c.shape else None for n, c in zip(nudged, control)]
            spread = moved if spread is None else [
                m if s is None else s if m is None else torch.maximum(s, m) for s, m in zip(spread, moved)]
    except Exception:  # noqa: BLE001 - (a control that cannot be nudged leaves its bound as it is, or as the
        pass  # draws before the one that failed left it)
    return spread


def _nudged(args: list, draw: int = 0) -> list:
    """The floating tensor arguments each moved by one ulp, up or down at random (fixed draws, ``draw`` picks one):
    the control's sensitivity to a rounding of its inputs (see gpuemu.judge.judge_reference's spread)."""
    import torch

    g = torch.Generator().manual_seed(0x5EED + draw)
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype in (torch.float32, torch.float16,
                                                                                  torch.bfloat16, torch.float64):
            up = torch.rand(a.shape, generator=g) < 0.5
            inf = torch.full(a.shape, float("inf"), dtype=a.dtype)
            out.append(torch.nextafter(a, torch.where(up, inf, -inf).to(a.device)))
        else:
            out.append(a)
    return out


def _tensors(out: Any) -> list:
    from .schema.calls import flatten_outputs

    return flatten_outputs(out)


@dataclass(frozen=True)
class Evaluation:
    verdict: Verdict
    launches: list[Launch]


def _with(v: Verdict, **changes) -> Verdict:
    import dataclasses

    return dataclasses.replace(v, **changes)


def _fp64_error(spec: ops.OpSpec, inputs64: Mapping[str, Any], ref, scale):
    """Per element, the model of fp64's own forward error: n * 2^-53 * max(scale, |ref|), n the longest sum;
    None where the op has no error scale."""
    import torch

    if scale is None:
        return None
    return _reduction_length(spec, inputs64) * 2.0**-53 * torch.maximum(scale, ref.abs())


def _reduction_length(spec: ops.OpSpec, inputs64: Mapping[str, Any]) -> int:
    """The longest sum in the op (its reduced or contracted dim), read off the inputs' shapes."""
    n = 1
    for a in spec.args:
        t = inputs64.get(a.name)
        if t is None or a.kind != "float":
            continue
        for d, size in zip([x for x in a.shape if x != "..."][::-1], t.shape[::-1]):
            if spec.dims.get(d) in ("reduced", "contracted"):
                n = max(n, int(size))
    return n + 2


__all__ = ["Oracle", "Verdict", "Evaluation", "reference", "to_reference_inputs", "output_dtype", "PASS", "FAIL", "OVERFLOW",
           "ERROR", "SKIP", "PRECONDITION", "REJECTED", "DTYPES"]
