"""Pallas matmul a[M,K] @ b[K,N], run with interpret=True (CPU) unless PALLAS_INTERPRET=0 (a GPU).

The launcher pads a and b with zeros to whole tiles (the usual JAX way to handle ragged shapes: zeros add
nothing to a dot) and slices the result back. Each program owns one BLOCK_M x BLOCK_N tile and walks K in
BLOCK_K steps with an fp32 accumulator.

matmul_acc_overwrite (buggy): ``acc = dot(...)`` instead of ``acc += dot(...)``: only the last K block
survives, which no test with K <= BLOCK_K can see.
"""

import functools
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

INTERPRET = os.environ.get("PALLAS_INTERPRET", "1") != "0"
BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32


def _matmul_kernel(a_ref, b_ref, o_ref, *, k_blocks, accumulate):
    def body(kb, acc):
        a = a_ref[:, pl.ds(kb * BLOCK_K, BLOCK_K)]
        b = b_ref[pl.ds(kb * BLOCK_K, BLOCK_K), :]
        part = jnp.dot(a, b, preferred_element_type=jnp.float32)
        return acc + part if accumulate else part

    acc = jax.lax.fori_loop(0, k_blocks, body, jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32))
    o_ref[...] = acc.astype(o_ref.dtype)


def _pad_to(x, axis, block):
    extra = -x.shape[axis] % block
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths)


@functools.partial(jax.jit, static_argnames="accumulate")
def _matmul(a, b, accumulate=True):
    m, k = a.shape
    n = b.shape[1]
    ap = _pad_to(_pad_to(a, 0, BLOCK_M), 1, BLOCK_K)
    bp = _pad_to(_pad_to(b, 0, BLOCK_K), 1, BLOCK_N)
    mp, kp = ap.shape
    np_ = bp.shape[1]
    out = pl.pallas_call(
        functools.partial(_matmul_kernel, k_blocks=kp // BLOCK_K, accumulate=accumulate),
        out_shape=jax.ShapeDtypeStruct((mp, np_), a.dtype),
        grid=(mp // BLOCK_M, np_ // BLOCK_N),
        in_specs=[pl.BlockSpec((BLOCK_M, kp), lambda i, j: (i, 0)),
                  pl.BlockSpec((kp, BLOCK_N), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
        interpret=INTERPRET,
    )(ap, bp)
    return out[:m, :n]


def matmul(a, b):
    """Correct: fp32 accumulation over every K block."""
    return _matmul(a, b, accumulate=True)


def matmul_acc_overwrite(a, b):
    """Buggy: the accumulator is overwritten by each K block (acc = instead of acc +=)."""
    return _matmul(a, b, accumulate=False)
