"""Pallas kernels under ``gpuemu.jax.shadow`` (what a JAX service would deploy with the hook installed)."""

import gpuemu.jax

import softmax as _softmax


@gpuemu.jax.shadow(op="softmax")
def softmax(x):
    return _softmax.softmax(x)


@gpuemu.jax.shadow(op="softmax")
def softmax_no_max(x):
    return _softmax.softmax_no_max(x)
