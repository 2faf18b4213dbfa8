"""``@shadow(op=...)``: bind a launcher (a Python function with the op's signature) to the op's fp64 reference.

>>> import gpuemu.hook
>>> @gpuemu.hook.shadow(op="rmsnorm")                     # doctest: +SKIP
... def rmsnorm(x, weight, eps=1e-6):
...     y = torch.empty_like(x); _rmsnorm_kernel[(x.shape[0],)](x, weight, y, ...); return y

While the hook is installed, a sampled call copies the op's input tensors before the launcher runs,
calls it (its own Triton launches are not shadowed again), and judges the returned tensor with the
Oracle against the op's reference; an input the launcher modified is a divergence too. Calls while
the hook is disarmed (:mod:`gpuemu.hook.arming`) or not installed go straight to the launcher.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from ..oracle import FAIL, Verdict
from .capture import capture, is_tensor, same_bits, storage_bytes
from ..judge import compare_op
from .pipeline import run_check
from .sampling import busy, dtype_label

F = TypeVar("F", bound=Callable[..., Any])


def shadow(fn: F | None = None, *, op: str) -> Any:
    """Decorate a launcher that implements ``op`` so the hook checks it against the op's fp64 reference.

    ``op`` must be a known op (``gpuemu ops``); the launcher takes the op's arguments by name or position
    and returns the output tensor.
    """
    from .. import ops

    spec = ops.get(op)  # an unknown op is the caller's mistake: say so at decoration time

    def wrap(launcher: F) -> F:
        try:
            sig = inspect.signature(launcher)
        except (TypeError, ValueError):
            sig = None

        @functools.wraps(launcher)
        def shadowed(*args: Any, **kwargs: Any) -> Any:
            from . import runtime

            rt = runtime._current
            if rt is None or not rt.arming.armed:  # between samples: one attribute read, then the launcher
                return launcher(*args, **kwargs)
            return _slow(rt, spec, launcher, sig, state, args, kwargs)

        state: dict = {}
        shadowed.__gpuemu_shadow__ = {"op": op, "launcher": launcher}  # type: ignore[attr-defined]
        return shadowed  # type: ignore[return-value]

    return wrap(fn) if fn is not None else wrap


def _slow(rt, spec, launcher, sig, state, args, kwargs, convert=None):
    """``convert``: the launcher's arrays as torch tensors (a JAX or TensorFlow launcher, see
    :mod:`gpuemu.frameworks.shadow`); its arguments and result are judged through it, and the host still gets
    the launcher's own result."""
    from .capture import source_file, target_of

    if busy():
        return launcher(*args, **kwargs)
    name = getattr(launcher, "__qualname__", getattr(launcher, "__name__", "launcher"))
    try:
        site = state.get("site")
        if site is None or state.get("rt") is not rt:  # a new install starts afresh
            site = state["site"] = rt.site(("shadow", id(launcher)), name, "@shadow")
            state["rt"] = rt
        bound = sig.bind(*args, **kwargs) if sig is not None else None
        if bound is None:
            raise TypeError("launcher signature cannot be inspected")
        bound.apply_defaults()
        values = dict(bound.arguments)
        inputs = {a.name: values.get(a.name) for a in spec.args}
        if convert is not None:
            inputs = {k: convert(v) for k, v in inputs.items()}
        first = next((inputs[a.name] for a in spec.args if a.kind == "float" and is_tensor(inputs[a.name])), None)
        sample, key = rt.decide(site, args[0] if args and is_tensor(args[0]) else first)
    except Exception as e:
        rt.internal_error("shadow/bind", e)
        return launcher(*args, **kwargs)
    if not sample:
        return launcher(*args, **kwargs)
    dtype = dtype_label(first.dtype if first is not None else None)
    tensors = {k: v for k, v in inputs.items() if is_tensor(v)}

    def capture_(chk):
        if dtype not in ("fp32", "fp16", "bf16"):
            chk.skip(f"dtype {dtype} has no fp64 reference check")
        elif storage_bytes(tensors.values()) > rt.settings.max_capture_bytes:
            chk.skip("arguments exceed max_capture_bytes")
        else:
            return dict(inputs, **capture(tensors))
        return None

    def judge(chk, pre, result):
        if convert is not None:
            result = convert(result)
        op_kwargs = {k: values[k] for k in spec.kwargs if k in values}
        if not is_tensor(result):
            chk.verdict = Verdict(FAIL, "type", f"returned {type(result).__name__}, expected a torch.Tensor")
        else:
            from ..oracle import Oracle

            chk.verdict = compare_op(Oracle(rt.tolerances), spec, dtype, pre, op_kwargs, result)
        mutated = [k for k, v in tensors.items() if not same_bits(pre[k], v)]
        if chk.verdict.passed and mutated:
            chk.verdict = Verdict(FAIL, "mutation", f"the launcher modified its input"
                                                    f"{'s' if len(mutated) > 1 else ''} "
                                                    f"{', '.join(repr(m) for m in mutated)} "
                                                    "(inputs must stay unchanged)")
        if chk.verdict.status != FAIL:
            return
        try:
            target = target_of(launcher)
        except Exception:
            target = name
        record = {"target": target, "hook": {"launcher": target, "file": source_file(launcher),
                                             "kwargs": _jsonable(op_kwargs),
                                             "device": str(first.device) if first is not None else "cpu",
                                             **({"framework": state["framework"]} if "framework" in state else {})}}
        snap = {f"in.{k}": v for k, v in pre.items() if is_tensor(v)}
        if is_tensor(result):
            snap["out"] = result
        shape = list(result.shape) if is_tensor(result) else []
        rt.diverged(chk, chk.verdict, what=f"@shadow launcher {name} vs {spec.name} fp64 reference", shape=shape,
                    record=record, tensors=snap)

    return run_check(rt, source="shadow", name=name, kind="op", op=spec.name, dtype=dtype, bucket=key[1],
                     capture=capture_, call=lambda: launcher(*args, **kwargs), judge=judge)


def _jsonable(d: dict) -> dict:
    return {k: v for k, v in d.items() if isinstance(v, (int, float, bool, str)) or v is None}
