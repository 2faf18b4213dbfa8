"""Shadowing Inductor's generated Triton kernels, which never pass through ``JITFunction.run``.

Inductor compiles with ``triton.compile`` and launches through ``CachingAutotuner.run(*args, stream=...)``
(torch >= 2.3, ``torch._inductor.runtime.triton_heuristics``). That method is wrapped at class level
only while the hook is armed (:mod:`gpuemu.hook.arming`) and is Inductor's own otherwise. Autotune benchmarking never reaches the wrapper's
checks: calls with ``benchmark_run=True`` pass through, and the autotuner's own benchmark launches call
launchers directly, not ``run``.

A sampled launch copies the tensor arguments before the kernel runs, then launches the kernel again on
the copies: with another of the kernel's configs when it has more than one (metamorphic), else with the
same launcher (a re-run: races, reads of its own output, non-determinism beyond rounding). Every tensor
either launch wrote is compared. The generated kernels' correctness against fp64 is the job of the
``gpuemu`` torch.compile backend, which checks whole graphs.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from ..oracle import FAIL, Verdict
from .capture import capture, clone_group, is_tensor, same_bits, storage_bytes
from ..scope import Scope
from ..judge import judge_pair, rms_scale
from .pipeline import run_check
from .runtime import Runtime
from .sampling import busy, dtype_label

_alt_launchers: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
_scope = Scope()


def available() -> bool:
    """True when torch's Inductor runtime (and so Triton) can be imported."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner  # noqa: F401
    except Exception:
        return False
    return True


def loaded() -> bool:
    """True when Inductor's Triton runtime is already imported (importing it only to wrap it is slow)."""
    return "torch._inductor.runtime.triton_heuristics" in sys.modules


def install(get_runtime) -> bool:
    """Wrap ``CachingAutotuner.run`` (idempotent); ``get_runtime()`` returns the current Runtime or None."""
    if len(_scope):
        return True
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except Exception:
        return False
    original = CachingAutotuner.run

    def run(self, *args, **kwargs):
        rt = get_runtime()
        if rt is None or kwargs.get("benchmark_run") or busy():
            return original(self, *args, **kwargs)
        return _shadowed(rt, original, self, args, kwargs)

    run.__gpuemu_wrapped__ = original  # type: ignore[attr-defined]
    run.__wrapped__ = original  # type: ignore[attr-defined]
    _scope.set(CachingAutotuner, "run", run)
    return True


def uninstall() -> None:
    """Restore Inductor's own ``CachingAutotuner.run``."""
    _scope.undo()


def is_wrapped() -> bool:
    return bool(len(_scope))


def _name(tuner: Any) -> str:
    meta = getattr(tuner, "inductor_meta", None) or {}
    fn = getattr(tuner, "fn", None)
    return str(meta.get("kernel_name") or getattr(fn, "__name__", None) or type(tuner).__name__)


def _arg_names(tuner: Any, n: int) -> list[str]:
    fn = getattr(tuner, "fn", None)
    names = list(getattr(fn, "arg_names", []) or [])
    if len(names) < n:
        names += [f"arg{i}" for i in range(len(names), n)]
    return names[:n]


def _shadowed(rt: Runtime, original, tuner, args, kwargs):
    try:
        site = rt.sites.get(("inductor", id(tuner)))
        if site is None:
            site = rt.site(("inductor", id(tuner)), _name(tuner), "inductor kernel")
            site.extra["tuner"] = weakref.ref(tuner)
        sig = args[0] if args and is_tensor(args[0]) else next((a for a in args if is_tensor(a)), None)
        sample, key = rt.decide(site, sig)
    except Exception as e:
        rt.internal_error("inductor/sample", e)
        return original(tuner, *args, **kwargs)
    if not sample:
        return original(tuner, *args, **kwargs)
    names = _arg_names(tuner, len(args))
    tensors = {n: a for n, a in zip(names, args) if is_tensor(a)}
    first = next(iter(tensors.values()), None)
    dtype = dtype_label(first.dtype if first is not None else None)
    kind = "metamorphic" if len(getattr(tuner, "configs", []) or []) > 1 else "rerun"

    def capture_(chk):
        if storage_bytes(tensors.values()) * 2 > rt.settings.max_capture_bytes:  # read-only inputs uncopied, sampled
            from .large import inductor_capture                                   # rows compared (gpuemu/hook/large.py)

            return inductor_capture(rt, chk, tensors)
        return capture(tensors)

    return run_check(rt, source="inductor", name=site.name, kind=kind, op=None, dtype=dtype, bucket=key[1],
                     capture=capture_, call=lambda: original(tuner, *args, **kwargs),
                     judge=lambda chk, pre, _r: _relaunch(rt, chk, tuner, names, args, kwargs, tensors, pre))


ALT_COMPILE_S = 5.0  # budget headroom wanted before compiling another config for a metamorphic re-launch


def _alternative(tuner: Any, headroom: float = float("inf")) -> tuple[Any, str]:
    """(launcher, description) for the shadow launch: another config's when possible, else the same.

    Another config must be compiled (a second or so): only when the budget has room for that, otherwise
    the check re-runs the same launcher now and tries the other config on a later check.
    """
    launchers = list(getattr(tuner, "launchers", []) or [])
    current = launchers[0] if launchers else None
    cur_cfg = getattr(current, "config", None)
    cached = _alt_launchers.get(tuner)
    if cached is not None:
        return cached
    if headroom < ALT_COMPILE_S:
        return current, f"same config {cur_cfg}"
    for cfg in getattr(tuner, "configs", []) or []:
        if cur_cfg is not None and str(cfg) == str(cur_cfg):
            continue
        try:  # torch 2.6+: _precompile_config(cfg) -> compile result with make_launcher()
            launcher = tuner._precompile_config(cfg).make_launcher()
        except Exception:
            continue
        _alt_launchers[tuner] = (launcher, f"config {cfg}")
        return launcher, f"config {cfg}"
    res = (current, f"same config {cur_cfg}")
    _alt_launchers[tuner] = res
    return res


def _relaunch(rt: Runtime, chk, tuner, names, args, kwargs, tensors, pre) -> None:
    import torch

    launcher, how = _alternative(tuner, rt.budget.headroom())
    if launcher is None:
        chk.skip("no compiled launcher to re-run")
        return
    if isinstance(pre, dict) and pre.get("__sampled__"):  # a call too large to copy (gpuemu/hook/large.py)
        from .large import inductor_judge

        inductor_judge(rt, chk, launcher, how, names, args, kwargs, tensors, pre)
        return
    if chk.kind == "metamorphic" and how.startswith("same"):
        from ..telemetry import ATTR_CHECK

        chk.kind = chk.attrs[ATTR_CHECK] = "rerun"
    scratch = clone_group(pre)
    new_args = tuple(scratch.get(n, a) if is_tensor(a) else a for n, a in zip(names, args))
    launch_kw = {k: v for k, v in kwargs.items() if k != "benchmark_run"}
    with torch.no_grad():
        launcher(*new_args, **launch_kw)
    worst = worst_n = None
    for n, real in tensors.items():
        if same_bits(real, pre[n]) and same_bits(scratch[n], pre[n]):
            continue
        v = judge_pair(real, scratch[n], tolerances=rt.tolerances, what="inductor", scale=rms_scale,
                       scale_doc=f"max(|out|, |out of {how}|, rms)")
        if worst is None or (v.status == FAIL and (worst.status != FAIL or (v.worst_ratio or 0) > (worst.worst_ratio or 0))):
            worst, worst_n = v, n
    if worst is None:
        chk.skip("the kernel wrote no tensor argument")
        return
    chk.verdict = worst
    if worst.status == FAIL:
        snap = {f"arg.{n}": t for n, t in pre.items()}
        snap["real"], snap["alt"] = tensors[worst_n], scratch[worst_n]
        rt.diverged(chk, worst, what=f"Inductor kernel {chk.name} output {worst_n} differs when re-run with {how}",
                    shape=list(tensors[worst_n].shape),
                    record={"hook": {"inductor": {"kernel": chk.name, "output": worst_n, "how": how,
                                                  "source_file": getattr(tuner, "filename", None)}}},
                    tensors=snap)


__all__ = ["install", "uninstall", "available", "loaded", "is_wrapped"]
