"""Lint on compile: when this process compiles Triton kernels, the lint rules run on the artifacts Triton
already produced (no second compile); findings go to the log and OpenTelemetry (``gpuemu.lint.findings``).

Triton (3.4+) calls ``triton.knobs.compilation.listener(src=, metadata=, metadata_group=, times=,
cache_hit=)`` after every ``triton.compile``, with the paths of the .ptx/.cubin it wrote. That knob holds
one callable, so the hook chains: the listener installed before it keeps being called, first.

A compile is also *novelty*: a kernel (or a new specialization of one) is about to launch for the first
time, so the listener arms the hook (:mod:`gpuemu.hook.arming`) and that launch is checked.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("gpuemu.hook")

_installed: Any = None  # our listener, while installed
_previous: Any = None  # the listener we chained onto


def _knob(load: bool = True):
    """Triton's compilation knobs; None where Triton has none (< 3.4). ``load=False``: only if Triton is already
    imported (removing a listener never needs to load it, and loading libtriton after TensorFlow must go through
    :func:`gpuemu.frameworks.preload_triton`, or the process crashes)."""
    import sys

    if "triton" not in sys.modules:
        if not load:
            return None
        from ..frameworks import preload_triton

        preload_triton()
    try:
        import triton

        return triton.knobs.compilation
    except Exception:  # triton < 3.4 has no knobs: nothing to hook
        return None


def make_listener(rt: Any):
    """The listener for Runtime ``rt``: lint each compile once per (kernel, target), never raise."""
    seen: set = set()

    def listener(**kw: Any) -> None:
        if _previous is not None:
            _previous(**kw)
        try:
            rt.arming.arm("triton compile")
        except Exception as e:
            rt.internal_error("arm on compile", e)
        try:
            from ..lint import from_listener

            findings = from_listener(**kw)
        except Exception as e:  # linting must never break a compile
            rt.internal_error("lint_on_compile", e)
            return
        for f in findings:
            key = (f.name, f.target, f.rule)
            if key in seen:
                continue
            seen.add(key)
            log.warning("gpuemu lint [%s %s]: %s", f.rule, f.level, f.message)
            rt.telemetry.lint_finding({"gpuemu.rule": f.rule, "gpuemu.level": f.level, "gpuemu.kernel": f.name,
                                       "gpuemu.target": str(f.target)})
        rt.lint_findings.extend(f for f in findings if (f.name, f.target, f.rule) in seen)

    return listener


def install(rt: Any) -> bool:
    """Chain the lint listener onto Triton's compilation listener; False where Triton has no such knob."""
    global _installed, _previous
    knob = _knob()
    if knob is None or not hasattr(knob, "listener"):
        return False
    uninstall()
    _previous = knob.listener
    _installed = make_listener(rt)
    knob.listener = _installed
    return True


def uninstall() -> None:
    """Restore the listener that was there before ours (if ours is still the one installed)."""
    global _installed, _previous
    knob = _knob(load=False)
    if knob is not None and _installed is not None and getattr(knob, "listener", None) is _installed:
        knob.listener = _previous
    _installed = _previous = None
