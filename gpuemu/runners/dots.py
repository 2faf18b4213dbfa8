"""Which precision a compiled kernel's ``tl.dot`` ops run in, read from its Triton IR.

On a GPU, ``JITFunction.run`` returns the ``CompiledKernel`` it launched; its ``asm["ttir"]`` holds every
``tt.dot`` with its operand types and input precision, e.g.::

    %c = tt.dot %a, %b, %acc, inputPrecision = tf32 : tensor<16x16xf32> * tensor<16x16xf32> -> tensor<16x16xf32>

The frontend bakes the precision into each op (an explicit ``input_precision=``, else the options'
``default_dot_input_precision``, "tf32" unless changed), so the IR is what ran. MLIR's printer leaves out
an attribute equal to the op's default, and that default changed between Triton versions: measured, an fp32
dot with no ``inputPrecision`` is TF32 on Triton 3.6 (H200) and IEEE on Triton 3.8. :func:`elided_precision`
finds out which for the installed Triton by compiling a one-dot kernel with ``input_precision="ieee"`` once.

The labels are the CPU runtime's (``gpuemu.runtime.report.LaunchReport.dot_precision``): "tf32", "tf32x3",
"ieee" (fp32 operands), "fp16", "bf16", or the element type, distinct ones joined by "+", so the oracle
judges a CUDA launch in TF32 units exactly as it judges the same kernel on the CPU runtime.
"""

from __future__ import annotations

import re
import threading
from typing import Any

_DOT = re.compile(r"\btt\.dot\s+(?P<operands>[^:]*?)\s*:\s*tensor<(?P<a>[^>]*)>")
_PRECISION = re.compile(r"inputPrecision\s*=\s*(\w+)")
_ELEMENT = {"f32": None, "f16": "fp16", "bf16": "bf16", "f64": "fp64"}

_lock = threading.Lock()
_by_hash: dict[str, str | None] = {}
_elided: list[str] = []  # the installed Triton's default input precision (left out when printed), once known


def dot_ops(ttir: str) -> list[tuple[str, str | None]]:
    """(operand element type, printed inputPrecision or None) of every ``tt.dot`` in ``ttir``, in order.

    >>> dot_ops("%c = tt.dot %a, %b, %z, inputPrecision = tf32 : tensor<16x16xf32> * tensor<16x16xf32> -> t")
    [('f32', 'tf32')]
    """
    out = []
    for m in _DOT.finditer(ttir):
        elem = m.group("a").split(",")[0].split("x")[-1].strip()
        p = _PRECISION.search(m.group("operands"))
        out.append((elem, p.group(1).lower() if p else None))
    return out


def precision_from_ttir(ttir: str, *, elided: str | None = None) -> str | None:
    """The runtime-style dot precision label of a kernel's TTIR; None when it has no ``tt.dot``.

    ``elided``: what an fp32 dot without an ``inputPrecision`` attribute runs in (default: found out for the
    installed Triton by :func:`elided_precision`).

    >>> precision_from_ttir("tt.dot %a, %b, %z : tensor<16x16xf32> * tensor<16x16xf32> -> x", elided="tf32")
    'tf32'
    """
    seen: list[str] = []
    for elem, printed in dot_ops(ttir):
        if elem in _ELEMENT and _ELEMENT[elem] is None:
            label = printed or (elided if elided is not None else elided_precision())
        else:
            label = _ELEMENT.get(elem, elem)
        if label not in seen:
            seen.append(label)
    return "+".join(seen) or None


def compiled_dot_precision(compiled: Any) -> str | None:
    """The dot precision label of a ``CompiledKernel`` (or anything with ``asm["ttir"]``); cached per
    kernel hash. None when it has no dot or no TTIR, and never raises (it runs on every observed launch)."""
    try:
        key = str(getattr(compiled, "hash", "") or "")
        if key and key in _by_hash:
            return _by_hash[key]
        asm = getattr(compiled, "asm", None) or {}
        ttir = asm.get("ttir") if hasattr(asm, "get") else None
        if isinstance(ttir, bytes):
            ttir = ttir.decode("utf-8", "replace")
        if not ttir:
            return None
        label = precision_from_ttir(str(ttir))
        if key:
            with _lock:
                _by_hash[key] = label
        return label
    except Exception:  # reading the IR must never break a launch
        return None


def elided_precision() -> str:
    """What a printed fp32 ``tt.dot`` without ``inputPrecision`` means in the installed Triton: "ieee" when a
    kernel that asks for "ieee" prints no attribute (Triton 3.8), else "tf32" (Triton 3.6). Found once per
    process by compiling a one-dot kernel for sm_90 (no GPU needed; Triton's disk cache keeps it)."""
    if _elided:
        return _elided[0]
    with _lock:
        if not _elided:
            _elided.append(_probe_elided())
    return _elided[0]


def _probe_elided() -> str:
    try:
        import torch

        from ..runtime.aot import compile_launch, parse_target

        a = torch.zeros(256, dtype=torch.float32)
        compiled = compile_launch(_probe_kernel(), (a, a), {}, parse_target("sm_90"), cache=True)
        if compiled.error is None:
            ops = [p for elem, p in dot_ops(str(compiled.asm.get("ttir", ""))) if elem == "f32"]
            if ops:
                return "ieee" if ops[0] is None else "tf32"
    except Exception:  # pragma: no cover - no compiler: assume the older default
        pass
    return "tf32"


def _probe_kernel():
    from ._dot_probe import gpuemu_dot_probe

    return gpuemu_dot_probe


__all__ = ["dot_ops", "precision_from_ttir", "compiled_dot_precision", "elided_precision"]
