"""``gpuemu.tf``: shadow checks for TensorFlow launchers (``tf.function``, XLA-compiled or not).

>>> import gpuemu.tf                                         # doctest: +SKIP
>>> @gpuemu.tf.shadow(op="softmax")                          # doctest: +SKIP
... @tf.function
... def softmax(x):
...     return tf.nn.softmax(x, axis=-1)

With the hook installed (``import gpuemu.hook``, or ``gpuemu.hook.install(mode="shadow")``), a sampled eager
call is judged against the op's fp64 reference exactly as ``@gpuemu.shadow`` judges a torch launcher; the
caller always gets the function's own result. Fuzzing a TensorFlow launcher needs nothing from here
(see :mod:`gpuemu.frameworks`). tensorflow itself is imported on the first sampled call.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["shadow"]


def shadow(fn: Callable | None = None, *, op: str) -> Any:
    """Decorate a TensorFlow launcher that implements ``op`` (its arguments by name or position, returning
    the output tensor) so the hook checks sampled eager calls against the op's fp64 reference."""
    from gpuemu.frameworks import preload_triton
    from gpuemu.frameworks.shadow import make_shadow

    preload_triton()  # the hook imports Triton; after TensorFlow that needs care (see preload_triton)
    return make_shadow("tf", fn, op=op)
