"""Shadowing @triton.jit launches, through the launch interceptor chain of :mod:`gpuemu.runners.launches`.

While the hook is armed (:mod:`gpuemu.hook.arming`), every ``kernel[grid](...)`` reaches
:class:`TritonShadow` (``JITFunction.run`` and, under the interpreter, ``InterpretedFunction.run``,
autotuner and heuristics included); while it is disarmed the interceptor is not in the chain and
``JITFunction.run`` is Triton's own. A sampled launch goes through the one check procedure
(:func:`gpuemu.hook.pipeline.run_check`), checked one of two ways:

* **op** — the kernel is bound to an op (a rule pack's ``bindings:``, see :mod:`.bindings`): its input
  tensors are copied before the launch (kernels write in place), and the output parameter, after the
  launch, is judged by the Oracle against the op's fp64 reference (computed on the launch's device);
  an input the kernel modified is a divergence too.
* **metamorphic** — otherwise, when the grid is a callable of the meta-parameters and the kernel has a
  block-size constexpr (``BLOCK*``, ``TILE*``, ``CHUNK*``, a power of two): the kernel is launched again
  with that block size doubled on copies of the pre-launch arguments, and every tensor either launch
  wrote is compared. A correct kernel's result does not depend on its tiling beyond reordered rounding.
  With a tuple grid the re-launch would be wrong (the grid was computed for the old block size), so
  the check is skipped and says so.

Launches made while Triton's autotuner benchmarks configs, and launches with ``warmup=True``, pass
straight through.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from ..oracle import FAIL, Verdict
from .capture import capture, clone_group, is_tensor, same_bits, storage_bytes
from ..judge import judge_pair, rms_scale
from .pipeline import run_check
from .runtime import Check, Runtime
from .sampling import busy, dtype_label

_BENCH_FRAMES = {"_bench", "bench", "do_bench", "do_bench_cudagraph", "benchmark_all_configs", "_do_bench"}
_BLOCK_WORDS = ("BLOCK", "TILE", "CHUNK")
MAX_BLOCK = 4096


@dataclass
class KernelPlan:
    """What is known about a kernel once: its name, parameters, block constexprs and binding."""

    name: str
    target: str
    signature: inspect.Signature | None
    params: list[str]
    constexprs: list[str]
    blocks: list[str]
    binding: Any = None
    spec: Any = None
    file: str | None = None
    notes: list[str] = field(default_factory=list)


def _kernel_fn(kernel: Any) -> Callable | None:
    return getattr(kernel, "fn", None)


def _constexpr_names(kernel: Any, sig: inspect.Signature | None) -> list[str]:
    params = getattr(kernel, "params", None)
    if params:
        try:
            return [p.name for p in params if p.is_constexpr]
        except AttributeError:
            pass
    out = []
    for name, p in (sig.parameters.items() if sig else ()):
        ann = p.annotation
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
        if str(text).split(".")[-1] == "constexpr":
            out.append(name)
    return out


def _in_autotune_benchmark() -> bool:
    f = sys._getframe(2)
    for _ in range(12):
        if f is None:
            return False
        if f.f_code.co_name in _BENCH_FRAMES and "triton" in f.f_code.co_filename:
            return True
        f = f.f_back
    return False


def bind_launch(plan: KernelPlan, args: tuple, kwargs: dict) -> tuple[dict, dict]:
    """(parameter -> value incl. defaults, compile options) of one launch."""
    params = set(plan.params)
    call_kw = {k: v for k, v in kwargs.items() if k in params}
    options = {k: v for k, v in kwargs.items() if k not in params}
    if plan.signature is None:
        return dict(zip(plan.params, args), **call_kw), options
    bound = plan.signature.bind(*args, **call_kw)
    bound.apply_defaults()
    return dict(bound.arguments), options


def resolve_grid(grid: Any, bound: dict, options: dict) -> list[int] | None:
    g = grid(dict(bound, **options)) if callable(grid) else grid
    if g is None:
        return None
    return [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, bool, str)) or v is None


def launch_record(plan: KernelPlan, bound: dict, options: dict, grid: list[int] | None) -> dict:
    """JSON for a replay: every parameter (tensors by snapshot name), the options and the resolved grid."""
    params: dict[str, Any] = {}
    for k, v in bound.items():
        if is_tensor(v):
            params[k] = {"tensor": f"arg.{k}"}
        elif _plain(v):
            params[k] = {"value": v}
        else:
            params[k] = {"repr": repr(v)}
    return {"kernel": plan.target, "file": plan.file, "name": plan.name, "params": params,
            "options": {k: v for k, v in options.items() if _plain(v)}, "grid": grid,
            "constexprs": {k: bound.get(k) for k in plan.constexprs if _plain(bound.get(k))}}


class TritonShadow:
    """The launch interceptor: ``fn(kernel, args, kwargs, grid, warmup, call_next)``."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.sites: dict[int, Any] = {}

    def __call__(self, kernel, args, kwargs, grid, warmup, call_next):
        return self._slow(kernel, args, kwargs, grid, warmup, call_next)

    # ------------------------------------------------------------------ slow path

    def _site(self, kernel, args):
        site = self.sites.get(id(kernel))
        if site is None:
            plan = self._plan(kernel)
            site = self.rt.site(("triton", id(kernel)), plan.name, "triton kernel")
            site.plan = plan
            site.extra["kernel"] = kernel  # keeps id(kernel) valid while the site exists
            site.sig = next((i for i, a in enumerate(args) if is_tensor(a)), None)
            self.sites[id(kernel)] = site
        return site

    def _plan(self, kernel) -> KernelPlan:
        from .capture import source_file, target_of

        fn = _kernel_fn(kernel)
        name = getattr(fn, "__name__", type(kernel).__name__)
        try:
            sig = inspect.signature(fn) if fn is not None else None
        except (TypeError, ValueError):
            sig = None
        params = list(sig.parameters) if sig else list(getattr(kernel, "arg_names", []))
        cexpr = _constexpr_names(kernel, sig)
        blocks = [c for c in cexpr if any(w in c.upper() for w in _BLOCK_WORDS)]
        try:
            target = target_of(fn) if fn is not None else name
        except Exception:
            target = name
        plan = KernelPlan(name, target, sig, params, cexpr, blocks)
        plan.file = source_file(fn) if fn is not None else None
        b = self.rt.bindings.get(name)
        if b is not None:
            try:
                from .. import ops

                plan.binding = b.resolve(params)
                plan.spec = ops.get(plan.binding.op)
            except Exception as e:
                self.rt.internal_error(f"binding {name}", e)
        return plan

    def _slow(self, kernel, args, kwargs, grid, warmup, call_next):
        if warmup or busy() or _in_autotune_benchmark():
            return call_next(args, kwargs, grid, warmup)
        rt = self.rt
        try:
            site = self._site(kernel, args)
            i = site.sig
            sig_t = args[i] if i is not None and i < len(args) and is_tensor(args[i]) else None
            sample, key = rt.decide(site, sig_t)
        except Exception as e:
            rt.internal_error("triton/sample", e)
            return call_next(args, kwargs, grid, warmup)
        if not sample:
            return call_next(args, kwargs, grid, warmup)
        plan: KernelPlan = site.plan
        if plan.binding is not None:
            return self._op_check(plan, key, args, kwargs, grid, warmup, call_next)
        return self._metamorphic_check(plan, key, args, kwargs, grid, warmup, call_next)

    # ------------------------------------------------------------------ (a) against the op's reference

    def _op_check(self, plan, key, args, kwargs, grid, warmup, call_next):
        rt, rb, spec = self.rt, plan.binding, plan.spec
        try:
            bound, options = bind_launch(plan, args, kwargs)
            first_in = next((bound[p] for a, p in rb.inputs.items() if p and is_tensor(bound.get(p))), None)
            dtype = dtype_label(first_in.dtype if first_in is not None else None)
        except Exception as e:
            rt.internal_error("triton/bind", e)
            return call_next(args, kwargs, grid, warmup)
        tensors = {p: v for p, v in bound.items() if is_tensor(v)}

        def capture_(chk):
            if dtype not in ("fp32", "fp16", "bf16"):
                chk.skip(f"dtype {dtype} has no fp64 reference check")
            elif storage_bytes(tensors.values()) > rt.settings.max_capture_bytes:
                chk.skip("arguments exceed max_capture_bytes")
            else:
                return capture(tensors)
            return None

        return run_check(rt, source="triton", name=plan.name, kind="op", op=rb.op, dtype=dtype, bucket=key[1],
                         capture=capture_, call=lambda: call_next(args, kwargs, grid, warmup),
                         judge=lambda chk, pre, _r: self._judge_op(chk, plan, bound, options, grid, pre))

    def _judge_op(self, chk: Check, plan: KernelPlan, bound: dict, options: dict, grid, pre: dict) -> None:
        rt, rb, spec = self.rt, plan.binding, plan.spec
        out_t = bound[rb.output]
        inputs = {a: (pre[p] if p is not None else None) for a, p in rb.inputs.items()}
        op_kwargs = {k: bound[p] for k, p in rb.kwargs.items()}
        from ..oracle import Oracle

        verdict = Oracle(rt.tolerances).compare_on_device(spec, chk.dtype, inputs, op_kwargs, out_t)
        mutated = [a for a, p in rb.inputs.items()
                   if p is not None and p != rb.output and not same_bits(pre[p], bound[p])]
        if verdict.passed and mutated:
            verdict = Verdict(FAIL, "mutation", f"the kernel modified its input{'s' if len(mutated) > 1 else ''} "
                                                f"{', '.join(repr(m) for m in mutated)} (inputs must stay unchanged)",
                              numel=out_t.numel())
        chk.verdict = verdict
        if verdict.status != FAIL:
            return
        record = {"hook": {"launch": launch_record(plan, bound, options, resolve_grid(grid, bound, options)),
                           "binding": rb.to_dict(), "device": str(out_t.device)}}
        tensors = {f"arg.{p}": v for p, v in pre.items()}
        tensors["out"] = out_t
        rt.diverged(chk, verdict, what=f"Triton kernel {plan.name} vs {rb.op} fp64 reference", shape=list(out_t.shape),
                    record=record, tensors=tensors)

    # ------------------------------------------------------------------ (b) metamorphic re-launch

    def _metamorphic_check(self, plan, key, args, kwargs, grid, warmup, call_next):
        rt = self.rt
        try:
            bound, options = bind_launch(plan, args, kwargs)
            tensors = {p: v for p, v in bound.items() if is_tensor(v)}
            first = next(iter(tensors.values()), None)
            dtype = dtype_label(first.dtype if first is not None else None)
        except Exception as e:
            rt.internal_error("triton/bind", e)
            return call_next(args, kwargs, grid, warmup)
        alt_box: list = []

        def capture_(chk):
            alt = _alternative_block(plan, bound)
            if not callable(grid):
                chk.skip("tuple grid: a re-launch with another block size needs a grid computed from the meta-parameters")
            elif alt is None:
                chk.skip("no block-size constexpr to vary and no op binding")
            elif storage_bytes(tensors.values()) * 2 > rt.settings.max_capture_bytes:
                chk.skip("arguments exceed max_capture_bytes")
            else:
                alt_box.append(alt)
                return capture(tensors)
            return None

        return run_check(rt, source="triton", name=plan.name, kind="metamorphic", op=None, dtype=dtype,
                         bucket=key[1], capture=capture_, call=lambda: call_next(args, kwargs, grid, warmup),
                         judge=lambda chk, pre, _r: self._relaunch_and_compare(chk, plan, args, kwargs, grid, call_next,
                                                                               bound, options, pre, alt_box[0]))

    def _relaunch_and_compare(self, chk, plan, args, kwargs, grid, call_next, bound, options, pre, alt) -> None:
        import torch

        rt = self.rt
        name, value = alt
        scratch = clone_group(pre)
        alt_args, alt_kwargs = _substitute(plan, args, kwargs, scratch, {name: value})
        try:
            with torch.no_grad():
                call_next(alt_args, alt_kwargs, grid, False)
        except Exception as e:  # the other tiling may not compile (shared memory, static asserts)
            chk.skip(f"re-launch with {name}={value} failed ({type(e).__name__}); no metamorphic check")
            return
        worst: Verdict | None = None
        worst_p = None
        for p, real in bound.items():
            if not is_tensor(real) or p not in scratch:
                continue
            if same_bits(real, pre[p]) and same_bits(scratch[p], pre[p]):
                continue  # neither launch wrote it
            v = judge_pair(real, scratch[p], tolerances=rt.tolerances, what="metamorphic", scale=rms_scale,
                           scale_doc=f"max(|out|, |out with {name}={value}|, rms)")
            if worst is None or (v.status == FAIL and (worst.status != FAIL or (v.worst_ratio or 0) > (worst.worst_ratio or 0))):
                worst, worst_p = v, p
        if worst is None:
            chk.skip("the kernel wrote no tensor argument")
            return
        chk.verdict = worst
        if worst.status != FAIL:
            return
        bound_alt = dict(bound, **{name: value})
        record = {"hook": {"launch": launch_record(plan, bound, options, resolve_grid(grid, bound, options)),
                           "alternative": {name: value, "grid": resolve_grid(grid, bound_alt, options)},
                           "output": worst_p, "device": str(bound[worst_p].device)}}
        tensors = {f"arg.{p}": v for p, v in pre.items()}
        tensors["real"] = bound[worst_p]
        tensors["alt"] = scratch[worst_p]
        rt.diverged(chk, worst, what=f"Triton kernel {plan.name} output {worst_p} changes with {name}={value} "
                                     f"(was {bound[name]}): tiling-dependent result",
                    shape=list(bound[worst_p].shape), record=record, tensors=tensors)


def _alternative_block(plan: KernelPlan, bound: dict) -> tuple[str, int] | None:
    for b in plan.blocks:
        v = bound.get(b)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
            continue
        if v * 2 <= MAX_BLOCK:
            return b, v * 2
        if v >= 2:
            return b, v // 2
    return None


def _substitute(plan: KernelPlan, args: tuple, kwargs: dict, tensors: dict, changes: dict) -> tuple[tuple, dict]:
    """The launch's args and kwargs with tensors replaced by ``tensors`` (by parameter) and ``changes`` applied."""
    new_args = list(args)
    new_kwargs = dict(kwargs)
    for i, p in enumerate(plan.params[:len(args)]):
        if p in tensors:
            new_args[i] = tensors[p]
        if p in changes:
            new_args[i] = changes[p]
    for k in list(new_kwargs):
        if k in tensors:
            new_kwargs[k] = tensors[k]
    for k, v in changes.items():
        if k not in plan.params[:len(args)]:
            new_kwargs[k] = v
    return tuple(new_args), new_kwargs
