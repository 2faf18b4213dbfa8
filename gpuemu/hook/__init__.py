"""``import gpuemu.hook``: sampled shadow checks of compiled graphs and Triton kernels in a running program.

Importing this module installs the hook once, with settings from the environment and ``gpuemu.yaml``
(see :mod:`gpuemu.hook.settings` for every setting; ``GPUEMU_MODE=off`` installs nothing)::

    import gpuemu.hook                                   # installs (idempotent)
    model = torch.compile(model, backend="gpuemu")       # Inductor + sampled fp64 shadow of each graph

Installed, it:

* registers the ``gpuemu`` torch.compile backend (:mod:`gpuemu.backends`) if that name is free;
* adds a launch interceptor for every ``@triton.jit`` launch (:mod:`gpuemu.hook.triton`): kernels bound
  to an op (rule pack ``bindings:``) are judged against the op's fp64 reference, others metamorphically;
* wraps Inductor's ``CachingAutotuner.run`` when Inductor's Triton runtime is present
  (:mod:`gpuemu.hook.inductor`);
* activates ``@gpuemu.hook.shadow(op=...)`` launchers (:mod:`gpuemu.hook.decorator`).

In code: :func:`install` / :func:`uninstall`, and :func:`installed` as a context manager. Divergences are
logged (``gpuemu.hook`` logger), stored with a snapshot for ``gpuemu reproduce SEED`` and reported through
OpenTelemetry (:mod:`gpuemu.telemetry`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any, Iterator

from . import runtime as _runtime_mod
from .bindings import Binding
from .decorator import shadow
from .replay import HookReplay, is_hook_record, replay_record
from .runtime import Divergence, Runtime, ShadowDivergence, ShadowError
from .settings import MODES, HookSettings, resolve_settings

log = logging.getLogger("gpuemu.hook")
_lock = threading.RLock()
_triton_shadow: Any = None


def install(*, mode: str | None = None, sample_rate: float | None = None, budget: float | None = None,
            store: str | os.PathLike | None = None, rulepack: tuple[str, ...] | list[str] | str = (),
            meter_provider: Any = None, tracer_provider: Any = None, logger_provider: Any = None,
            **limits: Any) -> Runtime | None:
    """Install (or re-install with new settings) the hook; returns the Runtime, or None when mode is off.

    Arguments override the environment, which overrides ``gpuemu.yaml`` and the rule packs. ``limits``:
    ``max_snapshot_bytes``, ``max_store_bytes``, ``max_capture_bytes``, ``snapshots_per_key``, ``seed``.
    Telemetry providers default to OpenTelemetry's global ones.

    >>> rt = install(mode="shadow", sample_rate=0.05)     # doctest: +SKIP
    """
    from ..telemetry import Telemetry

    settings = resolve_settings(mode=mode, sample_rate=sample_rate, budget=budget, store=store,
                                rulepack=rulepack, **limits)
    telemetry = Telemetry(meter_provider=meter_provider, tracer_provider=tracer_provider,
                          logger_provider=logger_provider)
    with _lock:
        _teardown()
        if not settings.active:
            _register_backend()
            return None
        rt = Runtime(settings, telemetry)
        _runtime_mod._set_current(rt)
        _register_backend()
        _install_triton(rt)
        _install_inductor()
        log.debug("gpuemu.hook installed: %s", settings.describe())
        return rt


def uninstall() -> None:
    """Remove the launch interceptor and the Inductor wrapper; the backend then passes calls through."""
    with _lock:
        _teardown()


def _teardown() -> None:
    global _triton_shadow
    from ..runners.launches import remove_interceptor

    if _triton_shadow is not None:
        remove_interceptor(_triton_shadow)
        _triton_shadow = None
    from . import lint_on_compile

    lint_on_compile.uninstall()
    from . import inductor

    inductor.uninstall()
    _runtime_mod._set_current(None)


def is_installed() -> bool:
    """True while the hook is installed and active (mode shadow or strict)."""
    return _runtime_mod._current is not None


def current() -> Runtime | None:
    """The installed Runtime (settings, stats, divergences), or None."""
    return _runtime_mod._current


@contextlib.contextmanager
def installed(**kwargs: Any) -> Iterator[Runtime | None]:
    """Install with ``kwargs`` for the block, then restore whatever was installed before.

    >>> with installed(mode="shadow", sample_rate=1.0, store="/tmp/gpuemu-store") as rt:  # doctest: +SKIP
    ...     model(x)
    """
    with _lock:
        before = _runtime_mod._current
    rt = install(**kwargs)
    try:
        yield rt
    finally:
        with _lock:
            _teardown()
            if before is not None:
                _runtime_mod._set_current(before)
                _install_triton(before)
                _install_inductor()


def bind(kernel: str, op: str, *, inputs: dict | None = None, output: str | None = None,
         kwargs: dict | None = None) -> None:
    """Bind a Triton kernel (by function name) to an op in code, like a rule pack's ``bindings:`` entry."""
    from .. import ops

    ops.get(op)
    rt = _runtime_mod._current
    b = Binding(kernel, op, dict(inputs or {}), output, dict(kwargs or {}))
    _extra_bindings[kernel] = b
    if rt is not None:
        rt.bindings[kernel] = b
        if _triton_shadow is not None:  # re-plan the kernel on its next launch
            for key, site in list(_triton_shadow.sites.items()):
                if site.name == kernel:
                    del _triton_shadow.sites[key]
                    rt.sites.pop(("triton", key), None)


_extra_bindings: dict = {}


def _register_backend() -> None:
    try:
        from ..backends import register

        register()
    except Exception as e:  # registering is a convenience; torch.compile(backend=gpuemu_backend) still works
        log.debug("gpuemu backend not registered: %s", e)


def _install_triton(rt: Runtime) -> None:
    global _triton_shadow
    rt.bindings.update(_extra_bindings)
    try:
        import triton  # noqa: F401
    except Exception:
        return
    from ..runners.launches import add_interceptor
    from .triton import TritonShadow

    _triton_shadow = TritonShadow(rt)
    add_interceptor(_triton_shadow)
    from . import lint_on_compile

    lint_on_compile.install(rt)


def _install_inductor() -> None:
    import sys

    from . import inductor

    # Inductor's Triton runtime is heavy to import: wrap it now only where it can launch GPU kernels or is
    # already loaded; the gpuemu backend wraps it before an Inductor compile otherwise.
    if "torch._inductor.runtime.triton_heuristics" in sys.modules or _cuda_available():
        inductor.install(current)


def ensure_inductor_wrapped() -> None:
    """Wrap CachingAutotuner.run if the hook is installed (called before an Inductor compile)."""
    if _runtime_mod._current is not None:
        from . import inductor

        inductor.install(current)


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def stats() -> dict:
    """Counters of the installed hook (checks, divergences, skipped, internal errors, shadow seconds)."""
    rt = _runtime_mod._current
    return rt.stats.to_dict() if rt is not None else {}


def _autoinstall() -> None:
    """The import-time install: a bad setting is logged, never raised into the importing program."""
    from ..errors import GpuemuError

    try:
        install()
    except GpuemuError as e:
        log.error("gpuemu.hook not installed: %s", e)


__all__ = ["install", "uninstall", "installed", "is_installed", "current", "bind", "shadow", "stats",
           "replay_record", "is_hook_record", "HookReplay", "Runtime", "Divergence", "ShadowDivergence",
           "ShadowError", "HookSettings", "resolve_settings", "MODES"]

_autoinstall()
