"""The gpuemu CPU runtime: unmodified @triton.jit kernels on the CPU with GPU semantics.

    >>> import gpuemu.runtime as rt
    >>> rt.activate()            # every CPU Triton launch now runs on the runtime
    >>> rt.active()
    True
    >>> rt.deactivate()

What it adds to Triton's interpreter (docs/runtime.md has the full list and what still differs):
bounds-checked memory (an out-of-bounds access is a ``KernelFinding("oob")`` naming kernel, line, argument,
offset and lane), bf16 as the GPU rounds it, TF32 for fp32 ``tl.dot`` by default, libdevice, enforced
``tl.device_assert``, nested helpers in any process, every autotune config run and compared, Python
``and``/``or``/``not`` on tensors, float arguments as fp32, string constexpr annotations, list grids,
aliased ``tl`` builtins, duck-typed buffers, and a time bound on every launch.

It takes launches over through the interceptor chain of :mod:`gpuemu.runners.launches`; launches whose
tensors live on a GPU are passed on untouched.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from . import autotune
from .executor import KernelError, LaunchResult, Settings
from .partial import partial
from .report import LaunchReport, observe, record

__all__ = ["activate", "deactivate", "active", "settings", "configure", "launch", "observe", "LaunchReport",
           "Settings", "KernelError", "compile_for", "CompiledLaunch", "partial"]

_lock = threading.Lock()
_active = False
_settings = Settings()


def settings() -> Settings:
    """The runtime's current settings."""
    return _settings


def configure(*, dot_precision: str | None = None, timeout_s: float | None = None,
              spin_limit: int | None = None, grid: str | None = None) -> Settings:
    """Change the runtime's settings (None keeps a value); returns the new settings.

    >>> configure(dot_precision="ieee").dot_precision
    'ieee'
    >>> configure(dot_precision="gpu").dot_precision
    'gpu'
    """
    global _settings
    import dataclasses

    changes = {k: v for k, v in {"dot_precision": dot_precision, "timeout_s": timeout_s,
                                 "spin_limit": spin_limit, "grid": grid}.items() if v is not None}
    _settings = dataclasses.replace(_settings, **changes)
    return _settings


def active() -> bool:
    """True while the runtime takes over CPU Triton launches."""
    return _active


def activate(*, dot_precision: str | None = None, timeout_s: float | None = None) -> None:
    """Route every CPU Triton launch through the runtime (idempotent). Options as in :func:`configure`."""
    global _active
    from ..runners.launches import add_interceptor
    from . import _compat, driver

    _compat.check_supported()
    if dot_precision is not None or timeout_s is not None:
        configure(dot_precision=dot_precision, timeout_s=timeout_s)
    with _lock:
        if _active:
            return
        driver.install_if_needed()
        add_interceptor(_intercept)
        _active = True


def deactivate() -> None:
    """Stop routing launches through the runtime (idempotent)."""
    global _active
    from ..runners.launches import remove_interceptor
    from . import driver

    with _lock:
        if not _active:
            return
        remove_interceptor(_intercept)
        driver.uninstall()
        _active = False


def _on_gpu(args: tuple, kwargs: dict) -> bool:
    import torch

    tensor = torch.Tensor
    for v in itertools.chain(args, kwargs.values()):
        if isinstance(v, tensor) and not v.is_cpu:  # (is_cpu: device.type == "cpu", without a device object)
            return True
    return False


def _execute(kernel: Any, args: tuple, kwargs: dict, grid: Any) -> LaunchResult:
    from .executor import execute

    for hook in getattr(kernel, "pre_run_hooks", None) or ():  # (add_pre_run_hook) before each launch, as Triton runs
        hook(*args, **kwargs)
    return execute(kernel, args, kwargs, grid, _settings)


def _intercept(kernel: Any, args: tuple, kwargs: dict, grid: Any, warmup: bool, call_next) -> Any:
    if not _active or _on_gpu(args, kwargs):
        return call_next(args, kwargs, grid, warmup)
    if warmup:  # nothing to compile for on the CPU; compile_for() does AOT on request
        return None
    return launch(kernel, grid, *args, **kwargs)


def launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> LaunchReport:
    """Run ``kernel[grid](*args, **kwargs)`` on the runtime now (whether or not it is active) and return
    its report. Raises ``KernelFinding`` for what the kernel did wrong.

    >>> import torch, triton, triton.language as tl       # doctest: +SKIP
    >>> launch(my_kernel, (4,), x, y, n, BLOCK=128).dot_precision   # doctest: +SKIP
    """
    found = autotune.find_autotuner(kernel)
    summary = None
    if found is not None:
        tuner, t_args, t_kwargs = found
        res, summary = autotune.sweep(tuner, t_args, t_kwargs, kernel, args, kwargs, grid, _execute)
    else:
        res = _execute(kernel, args, kwargs, grid)
    dots = res.dot_precisions
    rep = LaunchReport(kernel=res.kernel, grid=res.grid, constexprs=dict(res.constexprs), programs=res.programs,
                       seconds=res.seconds, dot_precision="+".join(dots) if dots else None, autotune=summary,
                       grid_mode=res.grid_mode, fallback=res.fallback, programs_run=res.programs_run)
    record(rep)
    aot.on_launch(kernel, args, kwargs, rep)
    return rep


from . import aot  # noqa: E402  (aot imports this package's launch helpers)
from .aot import CompiledLaunch, compile_for  # noqa: E402
