"""``gpuemu.jax.shadow(op=...)`` / ``gpuemu.tf.shadow(op=...)``: ``@gpuemu.shadow`` for a jitted JAX function
(Pallas included) or a ``tf.function``.

The check is the hook's own (:func:`gpuemu.hook.decorator._slow` through :func:`gpuemu.hook.pipeline.run_check`):
sampled, budgeted, never raising in shadow mode, divergences stored with replay seeds and sent through
OpenTelemetry. What differs is only the hand-over: the launcher's arrays are viewed as torch tensors by
DLPack for capture and judging, and the host gets the launcher's own result, unchanged.

A call made while JAX or TensorFlow is tracing (inside an outer ``jax.jit`` or ``tf.function``) has no
values to check and goes straight to the launcher: decorate the outermost function that runs eagerly.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable


TRACED = {"jax": "jax call traced inside an outer jax.jit (no values): decorate the outermost eager function",
          "tf": "tf call traced inside an outer tf.function (no values): decorate the outermost eager function"}


def make_shadow(framework: str, fn: Callable | None, *, op: str) -> Any:
    from .. import ops

    spec = ops.get(op)  # an unknown op is the caller's mistake: say so at decoration time

    def wrap(launcher: Callable) -> Callable:
        try:
            sig = inspect.signature(launcher)
        except (TypeError, ValueError):
            sig = None
        state: dict = {"framework": framework}
        conv: list = []  # the conversion module, imported on the first sampled call

        @functools.wraps(launcher)
        def shadowed(*args: Any, **kwargs: Any) -> Any:
            from ..hook import runtime

            rt = runtime._current
            if rt is None or not rt.arming.armed:  # between samples: one attribute read, then the launcher
                return launcher(*args, **kwargs)
            try:
                if not conv:
                    from . import backend

                    conv.append(backend(framework))
                c = conv[0]
                if not all(c.is_concrete(a) for a in (*args, *kwargs.values())):
                    # being traced (inside an outer jit / tf.function): no values to check; a sampled call that
                    # went unchecked is counted, as every hook source counts its skips (stats()['skip_reasons'])
                    rt.stats.skip(TRACED[framework])
                    return launcher(*args, **kwargs)
            except Exception as e:
                rt.internal_error("shadow/bind", e)
                return launcher(*args, **kwargs)
            from ..hook.decorator import _slow

            return _slow(rt, spec, launcher, sig, state, args, kwargs,
                         convert=functools.partial(c.to_torch, copy=False))

        shadowed.__gpuemu_shadow__ = {"op": op, "launcher": launcher, "framework": framework}  # type: ignore[attr-defined]
        return shadowed

    return wrap(fn) if fn is not None else wrap
