"""Pallas flash attention (online softmax), run with interpret=True (CPU) unless PALLAS_INTERPRET=0 (a GPU).

q[B,H,Nq,D], k/v[B,H,Nk,D], causal=False -> [B,H,Nq,D]. The launcher pads Nq and Nk to whole blocks; one
program per (batch*head, BLOCK_Q queries) walks the keys in BLOCK_K steps, masking padded keys and, when
causal, keys past the query's diagonal (query i sees keys j <= i + Nk - Nq).

attention_no_rescale (buggy): the running sum and accumulator are not rescaled by exp(m_old - m_new) when
a later key block raises the row max; right whenever all keys fit one block (Nk <= BLOCK_K).
"""

import functools
import math
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

INTERPRET = os.environ.get("PALLAS_INTERPRET", "1") != "0"
BLOCK_Q, BLOCK_K = 16, 16
_NEG = -1e30  # finite: a row whose first key block is all masked must not produce inf - inf


def _attention_kernel(q_ref, k_ref, v_ref, o_ref, *, nq, nk, k_blocks, causal, rescale):
    d = q_ref.shape[-1]
    q = q_ref[0].astype(jnp.float32) * (1.0 / math.sqrt(d))
    rows = pl.program_id(1) * BLOCK_Q + jax.lax.broadcasted_iota(jnp.int32, (BLOCK_Q, BLOCK_K), 0)

    def body(j, carry):
        m, l, acc = carry
        k = k_ref[0, pl.ds(j * BLOCK_K, BLOCK_K), :].astype(jnp.float32)
        v = v_ref[0, pl.ds(j * BLOCK_K, BLOCK_K), :].astype(jnp.float32)
        s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
        cols = j * BLOCK_K + jax.lax.broadcasted_iota(jnp.int32, (BLOCK_Q, BLOCK_K), 1)
        keep = cols < nk
        if causal:
            keep = keep & (cols <= rows + (nk - nq))
        s = jnp.where(keep, s, -jnp.inf)
        m_new = jnp.maximum(m, jnp.max(s, axis=-1))
        p = jnp.exp(s - m_new[:, None])
        alpha = jnp.exp(m - m_new) if rescale else jnp.ones_like(m)
        l = alpha * l + jnp.sum(p, axis=-1)
        acc = alpha[:, None] * acc + jnp.dot(p, v, preferred_element_type=jnp.float32)
        return m_new, l, acc

    init = (jnp.full((BLOCK_Q,), _NEG, jnp.float32), jnp.zeros((BLOCK_Q,), jnp.float32),
            jnp.zeros((BLOCK_Q, d), jnp.float32))
    _, l, acc = jax.lax.fori_loop(0, k_blocks, body, init)
    o_ref[0] = (acc / l[:, None]).astype(o_ref.dtype)


def _pad_rows(x, block):
    extra = -x.shape[1] % block
    return jnp.pad(x, ((0, 0), (0, extra), (0, 0))) if extra else x


@functools.partial(jax.jit, static_argnames=("causal", "rescale"))
def _attention(q, k, v, causal=False, rescale=True):
    b, h, nq, d = q.shape
    nk = k.shape[2]
    qf = _pad_rows(q.reshape(b * h, nq, d), BLOCK_Q)
    kf = _pad_rows(k.reshape(b * h, nk, d), BLOCK_K)
    vf = _pad_rows(v.reshape(b * h, nk, d), BLOCK_K)
    nq_p, nk_p = qf.shape[1], kf.shape[1]
    out = pl.pallas_call(
        functools.partial(_attention_kernel, nq=nq, nk=nk, k_blocks=nk_p // BLOCK_K, causal=causal,
                          rescale=rescale),
        out_shape=jax.ShapeDtypeStruct((b * h, nq_p, d), q.dtype),
        grid=(b * h, nq_p // BLOCK_Q),
        in_specs=[pl.BlockSpec((1, BLOCK_Q, d), lambda i, j: (i, j, 0)),
                  pl.BlockSpec((1, nk_p, d), lambda i, j: (i, 0, 0)),
                  pl.BlockSpec((1, nk_p, d), lambda i, j: (i, 0, 0))],
        out_specs=pl.BlockSpec((1, BLOCK_Q, d), lambda i, j: (i, j, 0)),
        interpret=INTERPRET,
    )(qf, kf, vf)
    return out[:, :nq, :].reshape(b, h, nq, d)


def attention(q, k, v, causal=False):
    """Correct: online softmax with the exp(m_old - m_new) rescale."""
    return _attention(q, k, v, causal=bool(causal), rescale=True)


def attention_no_rescale(q, k, v, causal=False):
    """Buggy: no rescale when a later key block raises the row max."""
    return _attention(q, k, v, causal=bool(causal), rescale=False)
