"""``@shadow(op=...)`` / ``@shadow(reference=...)``: bind a launcher to the op's fp64 reference, or to its own PyTorch
reference (the kernel's definition: judged as ``gpuemu fuzz --reference`` judges it, by :func:`gpuemu.judge.
judge_reference`: the reference run in float64 is the truth, the same reference in the call's dtype the control).

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
from .pipeline import run_check
from .sampling import busy, dtype_label

F = TypeVar("F", bound=Callable[..., Any])


def shadow(fn: F | None = None, *, op: str | None = None, reference: Callable | None = None) -> Any:
    """Decorate a launcher that implements ``op`` so the hook checks it against the op's fp64 reference, or one
    whose meaning is the PyTorch function ``reference`` (called with the launcher's own arguments).

    ``op`` must be a known op (``gpuemu ops``); the launcher takes the op's arguments by name or position
    and returns the output tensor. With ``reference``, the launcher returns what the reference returns (a tensor
    or a tuple of them).
    """
    from .. import ops
    from ..errors import InvalidArgument

    if (op is None) == (reference is None):
        raise InvalidArgument("shadow needs op= (an op of the registry) or reference= (the launcher's PyTorch "
                              "reference), one of the two")
    if reference is not None:
        if not callable(reference):
            raise InvalidArgument(f"shadow(reference={reference!r}): give the reference function itself")
        return _shadow_reference(fn, reference)
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

            chk.verdict = Oracle(rt.tolerances).compare_on_device(spec, dtype, pre, op_kwargs, result)
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


def _shadow_reference(fn: Any, reference: Callable) -> Any:
    def wrap(launcher: Any) -> Any:
        @functools.wraps(launcher)
        def shadowed(*args: Any, **kwargs: Any) -> Any:
            from . import runtime

            rt = runtime._current
            if rt is None or not rt.arming.armed:  # between samples: one attribute read, then the launcher
                return launcher(*args, **kwargs)
            return _slow_reference(rt, reference, launcher, state, args, kwargs)

        state: dict = {}
        shadowed.__gpuemu_shadow__ = {"reference": reference, "launcher": launcher}  # type: ignore[attr-defined]
        return shadowed

    return wrap(fn) if fn is not None else wrap


def reference_judgment(reference: Callable, args: tuple, kwargs: dict, result: Any, tolerances: Any,
                       after: list | None = None) -> tuple[Verdict, list, tuple[int, ...]]:
    """(verdict, the kernel's outputs judged, the positions of the arguments the reference writes in place):
    ``result`` of a call ``(*args, **kwargs)`` against ``reference``'s on the same (captured) arguments: fp64 truth
    under gpuemu's fp64 mode, the reference in the call's dtype as the control (gpuemu.judge), each on copies.
    Where the reference writes arguments in place, those are outputs too, after what it returns: the kernel's are
    ``after`` (the call's arguments, positional then keyword, as the launcher left them), or already in ``result``
    when ``after`` is None (a stored divergence's outputs)."""
    import torch

    from ..backends.fp64 import Fp64Mode
    from ..judge import judge_reference
    from ..schema.calls import call_noting_writes, flatten_outputs, outputs_beside

    def up(v: Any) -> Any:
        return v.detach().to("cpu", torch.float64) if is_tensor(v) and v.is_floating_point() else v

    keywords, flat = list(kwargs), list(args) + list(kwargs.values())
    with torch.no_grad():
        with Fp64Mode():
            _, truth, writes = call_noting_writes(reference, [up(a) for a in flat], keywords)
        _, control, _ = call_noting_writes(reference, flat, keywords)
    got = outputs_beside(result, [after[i] for i in writes]) if writes and after is not None \
        else flatten_outputs(result)
    written = [f"arg{i}" if i < len(args) else f"kw.{keywords[i - len(args)]}" for i in writes]
    return judge_reference(got, [t.detach().cpu() for t in truth], control, tolerances, writes=written), got, writes


def _slow_reference(rt, reference, launcher, state, args, kwargs):
    from .capture import source_file, target_of

    if busy():
        return launcher(*args, **kwargs)
    name = getattr(launcher, "__qualname__", getattr(launcher, "__name__", "launcher"))
    try:
        site = state.get("site")
        if site is None or state.get("rt") is not rt:  # a new install starts afresh
            site = state["site"] = rt.site(("shadow", id(launcher)), name, "@shadow")
            state["rt"] = rt
        values = list(args) + list(kwargs.values())
        first = next((v for v in values if is_tensor(v) and v.is_floating_point()), None)
        sample, key = rt.decide(site, first)
    except Exception as e:
        rt.internal_error("shadow/reference", e)
        return launcher(*args, **kwargs)
    if not sample:
        return launcher(*args, **kwargs)
    dtype = dtype_label(first.dtype if first is not None else None)
    names = [f"arg{i}" for i in range(len(args))] + [f"kw.{k}" for k in kwargs]
    tensors = {n: v for n, v in zip(names, values) if is_tensor(v)}

    def capture_(chk):
        if dtype not in ("fp32", "fp16", "bf16") and not dtype.startswith("float8"):  # fp8 operands: the reference
            chk.skip(f"dtype {dtype} has no fp64 reference check")  # reads them in fp64 as gpuemu.fuzz does
        elif storage_bytes(tensors.values()) > rt.settings.max_capture_bytes:
            chk.skip("arguments exceed max_capture_bytes")
        else:
            return capture(tensors)
        return None

    def judge(chk, pre, result):
        got = dict(zip(names, values))
        got.update(pre)
        c_args = [got[n] for n in names[:len(args)]]
        c_kwargs = {k: got[f"kw.{k}"] for k in kwargs}
        chk.verdict, outs, writes = reference_judgment(reference, c_args, c_kwargs, result, rt.tolerances,
                                                       after=values)
        written = {names[i] for i in writes}  # (an in-place reference: the kernel writes them too, judged above)
        mutated = [k for k, v in tensors.items() if k not in written and not same_bits(pre[k], v)]
        if chk.verdict.passed and mutated:
            chk.verdict = Verdict(FAIL, "mutation", f"the launcher modified its input"
                                                    f"{'s' if len(mutated) > 1 else ''} {', '.join(mutated)} "
                                                    "(inputs must stay unchanged)")
        if chk.verdict.status != FAIL:
            return
        try:
            target, ref_target = target_of(launcher), target_of(reference)
        except Exception:
            target, ref_target = name, getattr(reference, "__qualname__", "reference")
        scalars = {n: v for n, v in zip(names, values) if not is_tensor(v)}
        record = {"target": target, "hook": {"launcher": target, "reference": ref_target,
                                             "file": source_file(launcher), "args": names[:len(args)],
                                             "kwargs": list(kwargs), "scalars": _jsonable(scalars),
                                             "device": str(first.device) if first is not None else "cpu"}}
        snap = {f"in.{k}": v for k, v in pre.items() if is_tensor(v)}
        for i, o in enumerate(outs):
            snap[f"out.{i}"] = o
        rt.diverged(chk, chk.verdict, what=f"@shadow launcher {name} vs its reference {ref_target}",
                    shape=list(outs[0].shape) if outs else [], record=record, tensors=snap)

    return run_check(rt, source="shadow", name=name, kind="reference", op=None, dtype=dtype, bucket=key[1],
                     capture=capture_, call=lambda: launcher(*args, **kwargs), judge=judge)
