"""Pallas layernorm over the last dim, run with interpret=True (CPU) unless PALLAS_INTERPRET=0 (a GPU).

layernorm: one program per BLOCK_M rows, the whole row in one block; two-pass variance in fp32.
layernorm_naive_var (buggy): var = E[x^2] - E[x]^2 in fp32, which cancels catastrophically for rows with a
large mean and a small spread (and can go negative: rsqrt of a negative number is NaN).
"""

import functools
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

INTERPRET = os.environ.get("PALLAS_INTERPRET", "1") != "0"
BLOCK_M = 8


def _layernorm_kernel(x_ref, w_ref, b_ref, o_ref, *, eps, two_pass):
    x = x_ref[...].astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    if two_pass:
        var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    else:
        var = jnp.mean(x * x, axis=-1, keepdims=True) - mean * mean
    y = (x - mean) * jax.lax.rsqrt(var + eps)
    w = w_ref[...].astype(jnp.float32)
    b = b_ref[...].astype(jnp.float32)
    o_ref[...] = (y * w[None, :] + b[None, :]).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("eps", "two_pass"))
def _layernorm_2d(x, weight, bias, eps=1e-5, two_pass=True):
    m, n = x.shape
    return pl.pallas_call(
        functools.partial(_layernorm_kernel, eps=eps, two_pass=two_pass),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(pl.cdiv(m, BLOCK_M),),
        in_specs=[pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
                  pl.BlockSpec((n,), lambda i: (0,)),
                  pl.BlockSpec((n,), lambda i: (0,))],
        out_specs=pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
        interpret=INTERPRET,
    )(x, weight, bias)


def layernorm(x, weight, bias, eps=1e-5):
    """Correct: two-pass variance in fp32."""
    shape = x.shape
    return _layernorm_2d(x.reshape(-1, shape[-1]), weight, bias, eps=float(eps), two_pass=True).reshape(shape)


def layernorm_naive_var(x, weight, bias, eps=1e-5):
    """Buggy: one-pass E[x^2] - E[x]^2 variance (catastrophic cancellation)."""
    shape = x.shape
    return _layernorm_2d(x.reshape(-1, shape[-1]), weight, bias, eps=float(eps), two_pass=False).reshape(shape)
