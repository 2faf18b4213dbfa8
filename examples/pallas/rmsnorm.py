"""Pallas RMSNorm over the last dim, run with interpret=True (CPU) unless PALLAS_INTERPRET=0 (a GPU).

rmsnorm: one program per BLOCK_M rows, the whole row in one block; mean of squares and rsqrt in fp32.
rmsnorm_no_eps (buggy): leaves eps out of the rsqrt, so an all-zero row gives 0 * inf = NaN where the reference
gives 0, and rows of tiny values are scaled far past the reference.
"""

import functools
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

INTERPRET = os.environ.get("PALLAS_INTERPRET", "1") != "0"
BLOCK_M = 8


def _rmsnorm_kernel(x_ref, w_ref, o_ref, *, eps, with_eps):
    x = x_ref[...].astype(jnp.float32)
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    y = x * jax.lax.rsqrt(ms + eps if with_eps else ms)
    o_ref[...] = (y * w_ref[...].astype(jnp.float32)[None, :]).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("eps", "with_eps"))
def _rmsnorm_2d(x, weight, eps=1e-6, with_eps=True):
    m, n = x.shape
    return pl.pallas_call(
        functools.partial(_rmsnorm_kernel, eps=eps, with_eps=with_eps),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(pl.cdiv(m, BLOCK_M),),
        in_specs=[pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)), pl.BlockSpec((n,), lambda i: (0,))],
        out_specs=pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
        interpret=INTERPRET,
    )(x, weight)


def rmsnorm(x, weight, eps=1e-6):
    """Correct: x * rsqrt(mean(x^2) + eps) * weight, in fp32."""
    shape = x.shape
    return _rmsnorm_2d(x.reshape(-1, shape[-1]), weight, eps=float(eps), with_eps=True).reshape(shape)


def rmsnorm_no_eps(x, weight, eps=1e-6):
    """Buggy: eps left out of the rsqrt."""
    shape = x.shape
    return _rmsnorm_2d(x.reshape(-1, shape[-1]), weight, eps=float(eps), with_eps=False).reshape(shape)
