"""Autotuned kernels on the CPU runtime: every config runs, and configs that disagree are a finding.

On a GPU the autotuner benchmarks each config and keeps the fastest; which one wins depends on the GPU, so a
config with a bug (a tail mask that is only right for one BLOCK, a missing ``reset_to_zero``) may be the
one a user gets. When a launch comes from ``Autotuner.run`` the runtime

1. runs every (pruned) config from the same memory state and records each result,
2. runs the config the autotuner chose, which is the result the caller sees,
3. if the autotuner would benchmark (more than one config), runs the chosen config once more on top of its
   own output, as the benchmark's repeated launches do, after the tuner's ``pre_hook`` (``reset_to_zero`` /
   ``restore_value``); a different result means benchmarking corrupts the output,
4. compares: any config whose result differs beyond rounding is a ``KernelFinding("config", ...)``.

The chosen config is reported in the launch report. Comparison tolerance (relative to the largest
magnitude of the chosen result): 1e-4 fp32, 1e-2 fp16, 4e-2 bf16, 1e-10 fp64; integers exact; NaN
positions must match. These absorb the reordering of sums a different BLOCK causes, not a lost tile.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from ..errors import KernelFinding

_RTOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2, "float64": 1e-10}


def find_autotuner(kernel: Any, depth: int = 16):
    """(autotuner, args, kwargs) of the ``Autotuner.run`` frame that launched ``kernel``, or None (also
    None inside the autotuner's own benchmark calls)."""
    Autotuner, own = _classes()
    f = sys._getframe(2)
    for _ in range(depth):
        if f is None:
            return None
        code = f.f_code
        if code.co_name == "_bench":
            return None
        if code.co_name == "run" and code is not own:  # (not the launch wrapper every launch passes through)
            tuner = f.f_locals.get("self")
            if isinstance(tuner, Autotuner) and _leads_to(tuner, kernel):
                return tuner, f.f_locals.get("args", ()), dict(f.f_locals.get("kwargs", {}))
        f = f.f_back
    return None


@functools.lru_cache(maxsize=1)
def _classes() -> tuple:
    """(Triton's Autotuner, the code of gpuemu's launch wrapper, a ``run`` that is never an autotuner's)."""
    from triton.runtime.autotuner import Autotuner

    from ..runners.launches import _wrap

    return Autotuner, _wrap(print).__code__


def _leads_to(obj: Any, kernel: Any) -> bool:
    for _ in range(8):
        if obj is kernel:
            return True
        obj = getattr(obj, "fn", None)
        if obj is None:
            return False
    return False


def run_chain(obj: Any, args: tuple, kwargs: dict, grid: Any, execute: Callable) -> Any:
    """Run ``obj`` (Autotuner / Heuristics / JIT function) like its ``run`` would, ending in ``execute``
    instead of a launch (heuristics recompute from the new config)."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    kwargs = dict(kwargs)
    while True:
        if isinstance(obj, Heuristics):
            for v, heur in obj.values.items():
                kwargs[v] = heur({**dict(zip(obj.arg_names, args)), **kwargs})
            obj = obj.fn
        elif isinstance(obj, Autotuner):
            obj = obj.fn
        else:
            return execute(obj, args, kwargs, grid)


def _tensors(tuner: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    import torch

    named = {**dict(zip(tuner.arg_names, args)), **kwargs}
    return {k: v for k, v in named.items() if isinstance(v, torch.Tensor)}


def _snap(tensors: dict[str, Any]) -> dict[str, Any]:
    return {k: t.detach().clone() for k, t in tensors.items()}


def _restore(tensors: dict[str, Any], snap: dict[str, Any]) -> None:
    for k, t in tensors.items():
        t.detach().copy_(snap[k])


def _differs(a, b) -> str | None:
    """A one-line description of how ``b`` differs from ``a`` beyond rounding, or None."""
    import torch

    if a.dtype.is_floating_point:
        a64, b64 = a.detach().double(), b.detach().double()
        nan_a, nan_b = a64.isnan(), b64.isnan()
        if not torch.equal(nan_a, nan_b):
            i = int((nan_a != nan_b).reshape(-1).nonzero()[0])
            return f"NaN at flat index {i} in one result only"
        fin = ~nan_a
        if not fin.any():
            return None
        from ..cases import DTYPES

        name = str(a.dtype).replace("torch.", "")
        label = {v: k for k, v in DTYPES.items()}.get(name)
        if label is not None and b.dtype == a.dtype and b.shape == a.shape:
            return _judged(a64, b, label)
        diff = (a64 - b64).abs().masked_fill(~fin, 0.0)
        scale = float(a64.abs().masked_fill(~fin, 0.0).max())
        tol = _RTOL.get(name, 1e-4) * max(scale, 1e-30)
        worst = float(diff.max())
        if worst > tol or (torch.isinf(a64) != torch.isinf(b64)).any():
            i = int(diff.reshape(-1).argmax())
            return (f"max abs difference {worst:.3g} at flat index {i} "
                    f"({float(a64.reshape(-1)[i]):.6g} vs {float(b64.reshape(-1)[i]):.6g}; allowed {tol:.3g})")
        return None
    if not torch.equal(a, b):
        i = int((a != b).reshape(-1).nonzero()[0])
        return f"differs at flat index {i} ({a.reshape(-1)[i].item()} vs {b.reshape(-1)[i].item()})"
    return None


def _judged(ref, b, label: str) -> str | None:
    """``b`` against the chosen config's result ``ref`` (float64) through gpuemu's one comparison
    (:func:`gpuemu.compare.judge`): rtol of :data:`_RTOL` on the scale max |chosen result|, plus one rounding of |ref|."""
    import torch

    from ..cases import DTYPES
    from ..compare import PASS, judge
    from ..tolerance import Tolerance

    top = float(ref.abs().masked_fill(~ref.isfinite(), 0.0).max()) if ref.numel() else 0.0
    v = judge(b, ref, dtype=label, tol=Tolerance(_RTOL[DTYPES[label]], 0.0, "autotune"), scale=torch.full_like(ref, top),
              scale_doc="max |chosen result|", signature="config result", reference="the chosen config's result")
    return None if v.status == PASS else f"{v.message} at {list(v.index or ())}"


def _cfg_text(cfg: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.all_kwargs().items())


def sweep(tuner: Any, t_args: tuple, t_kwargs: dict, kernel: Any, args: tuple, kwargs: dict, grid: Any,
          execute: Callable) -> tuple[Any, dict[str, Any]]:
    """Run every config of ``tuner`` and the chosen one; returns (result of the chosen launch, summary)."""
    chosen = tuner.best_config
    try:
        configs = list(tuner.prune_configs(dict(t_kwargs)))
    except Exception:  # pruning needs state we do not have: fall back to all configs
        configs = list(tuner.configs)
    base_kwargs = {k: v for k, v in t_kwargs.items() if k not in ("grid", "warmup")}
    tensors = _tensors(tuner, t_args, base_kwargs)
    start = _snap(tensors)
    results: list[tuple[Any, dict[str, Any]]] = []
    for cfg in configs:
        if cfg is chosen or cfg == chosen:
            continue
        _restore(tensors, start)
        full = {**dict(zip(tuner.arg_names, t_args)), **base_kwargs, **cfg.all_kwargs()}
        if cfg.pre_hook:
            cfg.pre_hook(full)
        run_chain(tuner.fn, t_args, {**base_kwargs, **cfg.all_kwargs()}, grid, execute)
        results.append((cfg, _snap(tensors)))
    _restore(tensors, start)
    out = execute(kernel, args, kwargs, grid)
    final = _snap(tensors)
    summary = {"chosen": dict(chosen.all_kwargs()), "configs_run": len(results) + 1, "agree": True}
    problems: list[str] = []
    if len(configs) > 1:  # the GPU autotuner benchmarks: the chosen config runs again on its own output
        full = {**dict(zip(tuner.arg_names, t_args)), **base_kwargs, **chosen.all_kwargs()}
        tuner.pre_hook(full)
        execute(kernel, args, kwargs, grid)
        tuner.post_hook(full, exception=None)
        for name, t in tensors.items():
            why = _differs(final[name], t)
            if why is not None:
                problems.append(f"re-running the chosen config ({_cfg_text(chosen)}) on its own output changes "
                                f"'{name}': {why}; the autotuner's benchmark launches would corrupt it (declare "
                                f"reset_to_zero=[...] or restore_value=[...] in @triton.autotune)")
                break
        _restore(tensors, final)
    for cfg, res in results:
        for name in tensors:
            if torch_equal(start[name], final[name]) and torch_equal(start[name], res[name]):
                continue  # an input neither config wrote
            why = _differs(final[name], res[name])
            if why is not None:
                problems.append(f"config ({_cfg_text(cfg)}) and the chosen config ({_cfg_text(chosen)}) disagree "
                                f"on '{name}': {why}")
                break
    if problems:
        summary["agree"] = False
        raise KernelFinding("config", f"autotuned kernel {getattr(getattr(kernel, 'fn', kernel), '__name__', '?')}: "
                                      + problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
                            autotune=summary, problems=problems)
    return out, summary


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b)) if not a.dtype.is_floating_point else bool(
        torch.equal(a.view(_int_view(a)), b.view(_int_view(b))))


def _int_view(t):
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
