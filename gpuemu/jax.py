"""``gpuemu.jax``: shadow checks for JAX launchers (jitted functions, Pallas kernels).

>>> import gpuemu.jax                                        # doctest: +SKIP
>>> @gpuemu.jax.shadow(op="softmax")                         # doctest: +SKIP
... @jax.jit
... def softmax(x):
...     return jax.nn.softmax(x, axis=-1)

With the hook installed (``import gpuemu.hook``, or ``gpuemu.hook.install(mode="shadow")``), a sampled call
is judged against the op's fp64 reference exactly as ``@gpuemu.shadow`` judges a torch launcher; the
caller always gets the function's own result. Fuzzing a JAX launcher needs nothing from here:
``gpuemu.fuzz(fn, op=...)`` and ``gpuemu fuzz file.py:fn --op ...`` detect it (see :mod:`gpuemu.frameworks`).
jax itself is imported on the first sampled call, not by ``import gpuemu.jax``.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["shadow"]


def shadow(fn: Callable | None = None, *, op: str) -> Any:
    """Decorate a JAX launcher that implements ``op`` (its arguments by name or position, returning the
    output array) so the hook checks sampled calls against the op's fp64 reference."""
    from gpuemu.frameworks.shadow import make_shadow

    return make_shadow("jax", fn, op=op)
