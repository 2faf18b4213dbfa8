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


def undetermined(op: str, inputs: Mapping[str, Any], device: Any) -> str | None:
    """Why a CUDA GPU's arithmetic leaves this case's result undetermined for ``op`` (None: it is determined)."""
    from .tolerance import device_kind

    if device_kind(device) != "cuda" or op not in SCALED_EXP2_OPS:
        return None
    biggest = 0.0
    for t in inputs.values():
        if t is None or not getattr(t, "is_floating_point", lambda: False)():
            continue
        finite = t.detach().float().abs().nan_to_num(nan=0.0, posinf=0.0)
        if finite.numel():
            biggest = max(biggest, float(finite.max()))
    if biggest < SCALED_EXP2_RANGE or not math.isfinite(biggest):
        return None
    return (f"inputs up to |x| = {biggest:.3g}, past {SCALED_EXP2_RANGE:.3g} = 2^24/log2(e): on a GPU the "
            "FMA-contracted exp2(x*log2e - max) is off by the product's rounding error, at least 1 in the exponent, "
            "so the result is not determined by the inputs here (judged on the CPU instead)")
