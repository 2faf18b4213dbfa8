"""``import gpuemu.hook``: sampled shadow checks of compiled graphs and Triton kernels in a running program.

Importing this module installs the hook once, with settings from the environment and ``gpuemu.yaml``
(see :mod:`gpuemu.hook.settings` for every setting; ``GPUEMU_MODE=off`` installs nothing)::

    import gpuemu.hook                                   # installs (idempotent)
    model = torch.compile(model, backend="gpuemu")       # Inductor + sampled fp64 shadow of each graph

Installed, it:

* registers the ``gpuemu`` torch.compile backend (:mod:`gpuemu.backends`) if that name is free: its
  forward, backward and inference graphs are shadowed by an fp64 eager run of the same graph;
* listens to Triton's compiles (lint on compile, and novelty: a new kernel arms the hook);
* while *armed* (:mod:`gpuemu.hook.arming`: after install, a compile, or a scheduled tick), intercepts
  ``@triton.jit`` launches (:mod:`gpuemu.hook.triton`: kernels bound to an op in the rule pack's
  ``bindings:`` are judged against the op's fp64 reference, others metamorphically), Inductor's
  ``CachingAutotuner.run`` (:mod:`gpuemu.hook.inductor`), compiled graphs and
  ``@gpuemu.hook.shadow(op=...)`` launchers (:mod:`gpuemu.hook.decorator`). While disarmed none of these
  runs any gpuemu code.

``import gpuemu`` and ``gpuemu reproduce`` install nothing; only importing this module does.

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
    ``max_snapshot_bytes``, ``max_store_bytes``, ``max_capture_bytes``, ``max_scratch_bytes``,
    ``snapshots_per_key``, ``seed``.
    Telemetry providers default to OpenTelemetry's global ones.

    >>> rt = install(mode="shadow", sample_rate=0.05)     # doctest: +SKIP
    """
    from ..frameworks import preload_triton
    from ..origin import is_replaying
    from ..telemetry import Telemetry

    if is_replaying():  # a replay is importing the script that installs it: that run is not this one
        return None
    # first of all: registering the backend imports torch._dynamo, which imports Triton, and libtriton loaded after
    # TensorFlow crashes the process unless it is loaded the safe way (import tensorflow; import gpuemu.hook)
    preload_triton()

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
        _register_backend()
        _activate(rt)
        log.debug("gpuemu.hook installed: %s", settings.describe())
        return rt


def uninstall() -> None:
    """Disarm and remove every patch; the backend then passes calls through."""
    with _lock:
        _teardown()


def _activate(rt: Runtime) -> None:
    """Make ``rt`` current: its arming targets, the compile listener and the schedule; armed at once."""
    global _triton_shadow
    _runtime_mod._set_current(rt)
    rt.bindings.update(_extra_bindings)
    _triton_shadow = None
    try:
        from ..frameworks import preload_triton

        preload_triton()  # Triton after TensorFlow would crash the process: loaded the safe way
        import triton  # noqa: F401

        has_triton = True
    except Exception:
        has_triton = False
    if has_triton:
        from ..runners.launches import add_interceptor, remove_interceptor
        from . import lint_on_compile
        from .triton import TritonShadow

        shadow_ = _triton_shadow = TritonShadow(rt)
        rt.arming.add_target(lambda: add_interceptor(shadow_), lambda: remove_interceptor(shadow_))
        lint_on_compile.install(rt)
    from . import inductor

    def arm_inductor() -> None:
        # Inductor's Triton runtime is heavy to import: wrap it only once something loaded it
        if inductor.loaded():
            inductor.install(current)

    rt.arming.add_target(arm_inductor, inductor.uninstall)
    from ..backends import graph as _graph

    rt.arming.add_target(_graph.arm_all, _graph.disarm_all)
    rt.arming.arm("install")
    rt.arming.start()


def _teardown() -> None:
    global _triton_shadow
    rt = _runtime_mod._current
    if rt is not None:
        rt.arming.stop()
    _triton_shadow = None
    from . import lint_on_compile

    lint_on_compile.uninstall()
    from . import inductor

    inductor.uninstall()
    _runtime_mod._set_current(None)
    import sys

    graph_mod = sys.modules.get("gpuemu.backends.graph")
    if graph_mod is not None and hasattr(graph_mod, "disarm_all"):  # not yet (or partly) imported: no graphs
        graph_mod.disarm_all()


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
                _activate(before)


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
            rt.arming.arm("bind")
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


def ensure_inductor_wrapped() -> None:
    """A compile happened: arm (the new graph's kernels and Inductor's runtime, now loaded, get wrapped)."""
    rt = _runtime_mod._current
    if rt is not None:
        rt.arming.arm("compile")


def stats() -> dict:
    """Counters of the installed hook: checks (and by source), divergences, skipped with ``skip_reasons``,
    internal errors, shadow seconds, windows opened (``arms``, by reason)."""
    rt = _runtime_mod._current
    return rt.stats.to_dict() if rt is not None else {}


def _autoinstall() -> None:
    """The import-time install: a bad setting is logged, never raised into the importing program."""
    from .. import _hook_quiet
    from ..errors import GpuemuError

    if _hook_quiet.suppressed():  # imported for its replay code (gpuemu reproduce): install nothing
        return
    try:
        install()
    except GpuemuError as e:
        log.error("gpuemu.hook not installed: %s", e)


__all__ = ["install", "uninstall", "installed", "is_installed", "current", "bind", "shadow", "stats",
           "replay_record", "is_hook_record", "HookReplay", "Runtime", "Divergence", "ShadowDivergence",
           "ShadowError", "HookSettings", "resolve_settings", "MODES"]

_autoinstall()
