"""Calibrated tolerances: fit rtol per op and dtype from correct control implementations.

For each case a control's error ratio is

    ratio = max_i  max(0, |out_i - ref_i| - u * (|ref_i| + rounded_i) - floor) / max(scale_i, |ref_i|)

(the rtol that case needs; ``scale`` is the op's condition-aware error scale, ``u * |ref_i|`` the final
rounding to the dtype, ``u * rounded_i`` that of an intermediate kernels keep in the dtype (attention's
P @ |V|) and ``floor`` the subnormal spacing, which every bound allows on top of rtol, see
:mod:`gpuemu.tolerance`). Each control's error is its worst case over the samples; the fitted tolerance
is ``rtol = p95(control errors) * HEADROOM`` (2.0, see below; never below fp32's unit roundoff, and
exactly 0 where no control ever differs from the reference) per op and dtype. The p95 is taken over the
correct controls, not over single cases, because a per-case p95 leaves 1-3% of a correct control's own
cases above the fit (measured: softmax bf16 p95 1.9e-3, max 3.5e-3), and every one of those is a false
positive in a long fuzz run. ``gpuemu calibrate`` writes the fit as a rule pack with its
provenance; ``make calibrate`` regenerates the built-in ``rulepacks/calibrated.yaml`` this way.

When no controls are named, the control is the framework's own op: the op's formula evaluated by torch
with fp16/bf16 inputs upcast to fp32 (the accumulation real kernels use) and the result rounded back to the
dtype once (``torch:OP``). The op as PyTorch eager code writes it in the dtype (``torch-eager:OP``:
``F.silu(a) * b`` in fp16, Hugging Face's RMSNorm; ``OpSpec.eager``) runs beside it as *evidence*: its error
ratios on the bound alone are reported in the pack (``evidence``) but do not move rtol. The intermediates eager
code stores in the dtype are allowed exactly (``OpSpec.rounded``), and a case an eager form still fails is
passed, for every kernel at least half as accurate, by the oracle's 2x-eager rule; fitting rtol to it would
loosen the bound for everyone (measured: eager attention in bf16, scores ~2.5e3 stored in bf16, needs
rtol 2.2e-4, 3,700x the fit of the other controls).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from . import __version__, ops
from .cases import canonical_dtype, generate, materialize, to_device
from .rng import derive_seed

P = 95
# The seed's recipe is p95 x 1.5. Measured here (README, "Calibrated tolerances"): with x 1.5 one correct
# corpus kernel (attention, fp32, one-hot spikes) failed 1 of 300 fuzz cases at 1.09x its bound; x 2
# gave no false positive on any correct kernel or framework control, and catches the same bugs.
HEADROOM = 2.0
# An op whose controls never differ from the fp64 reference is exact: rtol 0, and its bound has no rounding
# allowance either (see gpuemu.tolerance). Any other op is computed in fp32 with at least one rounding of its
# scale, whatever the dtype, so its rtol is never below fp32's unit roundoff: a fit of ~0 (add: the final
# rounding, allowed separately, is all its error) must not leave a double-rounding kernel without slack.
# For the same reason an fp16/bf16 rtol is never below the op's fp32 fit (when fp32 is calibrated in the same
# run): those kernels do their arithmetic in fp32, and in fp16/bf16 that internal error is usually hidden by the
# final rounding, so 200 samples rarely see the cases (a result near a rounding midpoint) where it shows.
MIN_RTOL = 5.96e-8  # 2^-24
DEFAULT_ATOL = {"fp32": 1.0e-37, "fp16": 1.2e-7, "bf16": 1.0e-37}


def framework_control(op: str) -> Callable:
    """torch's own computation of ``op``: fp32 math, result in the input dtype."""
    import torch

    spec = ops.get(op)

    def control(*args, **kwargs):
        dtype = next(a.dtype for a, s in zip(args, spec.args) if a is not None and s.kind == "float")
        up = [a.float() if (a is not None and s.kind == "float") else a for a, s in zip(args, spec.args)]
        named = {s.name: a for s, a in zip(spec.args, up)}
        with torch.no_grad():
            out = spec.reference(**named, **dict(spec.kwargs, **kwargs))
        return out if spec.out_kind == "index" else out.to(dtype)

    control.__qualname__ = control.__name__ = f"torch_{op}"
    return control


def eager_control(op: str) -> Callable:
    """The op as PyTorch eager code writes it, in the input dtype (``OpSpec.eager``)."""
    import torch

    spec = ops.get(op)

    def control(*args, **kwargs):
        with torch.no_grad():
            return spec.eager(*args, **kwargs)

    control.__qualname__ = control.__name__ = f"torch_eager_{op}"
    return control


def framework_controls(op: str) -> list[tuple[str, Callable]]:
    """Both framework forms of ``op`` (fp32 rounded once, and eager in the dtype), named as calibrate, the
    ablation and the soak name them."""
    out = [(f"torch:{op}", framework_control(op))]
    if ops.get(op).eager is not None:
        out.append((f"torch-eager:{op}", eager_control(op)))
    return out


def error_ratio(spec: ops.OpSpec, dtype: str, inputs: dict, kwargs: dict, output) -> float:
    """The rtol this output needs (see the module docstring); inf for a non-finite miss."""
    return _case_error(spec, dtype, inputs, kwargs, output)[0]


def _case_error(spec: ops.OpSpec, dtype: str, inputs: dict, kwargs: dict, output) -> tuple[float, bool]:
    """(error ratio, whether the output differs from the reference at all). On CUDA a result the GPU flushed to
    zero (below the smallest normal fp32) is allowed by the oracle there (``Tolerance.flush_subnormals``), so it is
    not fitted into rtol."""
    import torch

    from .tolerance import device_kind, flush_allowance

    from .oracle import elementwise_error, output_dtype, reference, to_reference_inputs
    from .tolerance import rounding_allowance

    x64 = to_reference_inputs(spec, inputs)
    ref, scale = reference(spec, x64, kwargs)
    if spec.out_kind == "index":
        return (0.0, False) if torch.equal(output.cpu(), ref) else (math.inf, True)
    out_dtype = output_dtype(spec, dtype, output)
    if out_dtype is None or tuple(output.shape) != tuple(ref.shape):
        return math.inf, True  # a wrong dtype or shape: the oracle fails it whatever the rtol
    err = elementwise_error(output.detach().to("cpu", torch.float64), ref, out_dtype)
    s = torch.maximum(scale, ref.abs())
    rounded = spec.rounded_magnitude(x64, kwargs, ref, dtype)
    excess = err - rounding_allowance(ref, dtype, rounded=rounded, out_dtype=out_dtype)
    if device_kind(output) == "cuda":
        excess = excess - flush_allowance(ref)
    excess = excess.clamp_min(0.0)
    ratio = torch.where(excess > 0, excess / s.clamp_min(1e-300), torch.zeros_like(excess))
    return (float(ratio.max()) if ratio.numel() else 0.0), bool((err > 0).any())


def _percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (no interpolation: the value of a real case)."""
    if not values:
        return 0.0
    v = sorted(values)
    k = max(0, math.ceil(p / 100 * len(v)) - 1)
    return v[k]


@dataclass
class Fit:
    op: str
    dtype: str
    rtol: float
    atol: float
    samples: int
    p50: float
    p95: float
    max: float
    above_fit: int
    controls: list[str] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)  # name -> {cases, max, cases_above_fit}: run, not fitted

    def to_dict(self) -> dict:
        return {"rtol": self.rtol, "atol": self.atol, "samples": self.samples, "p50": self.p50, "p95": self.p95,
                "max": self.max, "cases_above_fit": self.above_fit, "controls": list(self.controls),
                "evidence": dict(self.evidence)}


def calibrate(op: str, *, controls: Iterable[tuple[str, Callable]] | None = None, dtypes: Iterable[str] = ("fp32", "fp16", "bf16"),
              samples: int = 200, seed: int = 0, on_case: Callable[[str, str, int], None] | None = None,
              evidence: Iterable[tuple[str, Callable]] | None = None, device: str = "cpu") -> list[Fit]:
    """Fit rtol = p95 over controls of their worst error ratio, x HEADROOM, for ``op``, per dtype. ``evidence``
    controls (default: the op's PyTorch eager form) run on the same cases and are reported against the fit.
    ``device``: where the controls run (``cuda``: the GPU's own arithmetic, approximate transcendentals and
    FMA contraction included; the reference is computed on the CPU from the same bytes).

    >>> fits = calibrate("relu", samples=5)
    >>> fits[0].rtol
    0.0
    """
    from .device_arith import undetermined
    from .oracle import dot_precision
    from .preconditions import declared
    from .runners import bf16_unfaithful, run_launcher

    spec = ops.get(op)
    ctrl = list(controls) if controls is not None else framework_controls(op)[:1]
    if evidence is None:
        evidence = framework_controls(op)[1:]
    names = {name for name, _ in ctrl}
    ctrl += [(name, fn) for name, fn in evidence if name not in names]
    seen = {name for name, _ in evidence if name not in names}
    fits = []
    # fp32 first: its fit is the floor of the fp16/bf16 ones (see MIN_RTOL's comment)
    order = sorted(dict.fromkeys(canonical_dtype(d) for d in dtypes), key=lambda d: d != "fp32")
    fp32_rtol = MIN_RTOL
    for dt in order:
        ratios: list[float] = []
        worst: list[float] = []
        used = []
        exact = True
        shown: dict[str, list[float]] = {}
        for name, fn in ctrl:
            ran_any = False
            mine: list[float] = []
            req = declared(fn)  # a control is judged on the cases its callers can give it
            for i in range(samples):
                # within the generator's regular caps: past them the oracle scales rtol with the length
                # (device_arith.accumulation_factor), so a fit must not absorb long rows' growth
                case = req.apply(generate(op, derive_seed(seed, i), dtype=dt, long_rows=False, caps=req.max_dims))
                inputs, kwargs = materialize(case)  # the reference is the CPU's fp64, from these bytes
                there = {k: to_device(v, device) for k, v in inputs.items()}  # the same geometry on the device
                run = run_launcher(fn, [there[a.name] for a in spec.args], kwargs, device=device)
                if bf16_unfaithful(dt, run.launches):
                    break  # the plain interpreter cannot run bf16 kernels faithfully: no evidence either way
                if run.error is not None or run.output is None:
                    continue  # a control that raises on a case gives no error ratio for it
                if undetermined(op, there, device) or (dt == "fp32" and "tf32" in (dot_precision(run.launches) or "")):
                    continue  # judged by their own models (device_arith, the TF32 bound), not by this op's rtol
                ratio, differs = _case_error(spec, dt, inputs, kwargs, run.output)
                mine.append(ratio)
                if name not in seen:
                    exact = exact and not differs
                ran_any = True
                if on_case:
                    on_case(name, dt, i)
            if name in seen:  # evidence: reported against the fit below, not fitted
                shown[name] = mine
            elif ran_any:
                used.append(name)
                ratios += mine
                finite_mine = [r for r in mine if math.isfinite(r)]
                if finite_mine:
                    worst.append(max(finite_mine))
        finite = [r for r in ratios if math.isfinite(r)]
        p95 = _percentile(worst, P)
        rtol = 0.0 if exact else max(float(f"{p95 * HEADROOM:.3g}"), fp32_rtol)
        if dt == "fp32" and not exact:
            fp32_rtol = rtol
        report = {name: {"cases": len(v), "max": max(v, default=0.0), "cases_above_fit": sum(r > rtol for r in v)}
                  for name, v in shown.items()}
        fits.append(Fit(op=op, dtype=dt, rtol=rtol, atol=DEFAULT_ATOL[dt], samples=len(ratios),
                        p50=_percentile(finite, 50), p95=_percentile(finite, P), max=max(finite, default=0.0),
                        above_fit=sum(1 for r in ratios if r > rtol), controls=used, evidence=report))
    return fits


def device_provenance(device: str) -> dict[str, Any]:
    """What a fit on ``device`` depends on: the GPU, its capability, driver, CUDA, torch and Triton."""
    import torch

    out: dict[str, Any] = {"device": device, "torch": str(torch.__version__)}
    try:
        import triton

        out["triton"] = str(triton.__version__)
    except Exception:  # pragma: no cover
        out["triton"] = None
    if device.startswith("cuda"):
        major, minor = torch.cuda.get_device_capability()
        out.update(gpu=torch.cuda.get_device_name(), capability=f"sm_{major}{minor}", cuda=torch.version.cuda,
                   driver=_driver_version())
    return out


def _driver_version() -> str | None:
    import subprocess

    try:
        got = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return got.stdout.strip().splitlines()[0] if got.returncode == 0 and got.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def rulepack_yaml(fits: list[Fit], *, command: str, seed: int, samples: int, device: str = "cpu") -> str:
    """A rule pack with the fitted tolerances and their provenance (controls, samples, seed, version). A fit on
    a GPU is written under ``device_tolerances.cuda``: it applies where the kernel's output is on CUDA, and the
    CPU interpreter keeps its own."""
    import yaml

    from .tolerance import device_kind

    tolerances: dict[str, dict[str, dict[str, float]]] = {}
    stats: dict[str, dict[str, Any]] = {}
    for f in fits:
        if f.samples == 0:
            continue
        tolerances.setdefault(f.op, {})[f.dtype] = {"rtol": f.rtol, "atol": f.atol}
        stats.setdefault(f.op, {})[f.dtype] = f.to_dict()
    kind = device_kind(device)
    doc = {
        "schema_version": 1,
        "name": "gpuemu-calibrated" + (f"-{kind}" if kind else ""),
        "provenance": {"command": command, "gpuemu": __version__, **device_provenance(device),
                       "seed": seed, "samples_per_control": samples,
                       "statistic": f"rtol = p{P} over controls of each control's worst per-case error ratio, "
                                    f"x {HEADROOM}; at least {MIN_RTOL} (fp32 unit roundoff) and, for fp16/bf16, the "
                                    "op's fp32 fit; 0 where no control ever differs from the reference",
                       "generated": time.strftime("%Y-%m-%d", time.gmtime()), "stats": stats},
    }
    if kind:
        doc["device_tolerances"] = {kind: tolerances}
    else:
        doc["tolerances"] = tolerances
    header = ("# Generated by gpuemu calibrate; do not edit by hand (rerun provenance.command to regenerate).\n"
              "# rtol per op and dtype = p95 over correct controls of their worst error ratio, x 2 (HEADROOM),\n"
              "# on the op's condition-aware error scale, beyond the final rounding (see gpuemu/calibrate.py).\n")
    return header + yaml.safe_dump(doc, sort_keys=False, width=120)
