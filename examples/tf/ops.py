"""TensorFlow ops as tf.function launchers (graph-compiled; jit_compile=True would make them XLA ops).

softmax / layernorm: correct, computed in fp32 for fp16/bf16 inputs.
softmax_no_max (buggy): exp(x) without the row max; overflows to inf/inf = NaN for logits past ~88.
layernorm_naive_var (buggy): one-pass E[x^2] - E[x]^2 variance; cancels for a large mean and small spread.
rmsnorm: correct, x * rsqrt(mean(x^2) + eps) * weight in fp32; rmsnorm_no_eps (buggy): eps left out (NaN rows).
"""

import tensorflow as tf


def _softmax(x, subtract_max):
    x32 = tf.cast(x, tf.float32)
    if subtract_max:
        x32 = x32 - tf.reduce_max(x32, axis=-1, keepdims=True)
    e = tf.exp(x32)
    return tf.cast(e / tf.reduce_sum(e, axis=-1, keepdims=True), x.dtype)


@tf.function(reduce_retracing=True)
def softmax(x):
    """Correct: max-subtracted, fp32 inside."""
    return _softmax(x, True)


@tf.function(reduce_retracing=True)
def softmax_no_max(x):
    """Buggy: no max subtraction."""
    return _softmax(x, False)


def _layernorm(x, weight, bias, eps, two_pass):
    x32 = tf.cast(x, tf.float32)
    mean = tf.reduce_mean(x32, axis=-1, keepdims=True)
    if two_pass:
        var = tf.reduce_mean(tf.square(x32 - mean), axis=-1, keepdims=True)
    else:
        var = tf.reduce_mean(x32 * x32, axis=-1, keepdims=True) - mean * mean
    y = (x32 - mean) * tf.math.rsqrt(var + eps)
    return tf.cast(y * tf.cast(weight, tf.float32) + tf.cast(bias, tf.float32), x.dtype)


@tf.function(reduce_retracing=True)
def _layernorm_fn(x, weight, bias, eps, two_pass):
    return _layernorm(x, weight, bias, eps, two_pass)


def layernorm(x, weight, bias, eps=1e-5):
    """Correct: two-pass variance in fp32."""
    return _layernorm_fn(x, weight, bias, tf.constant(eps, tf.float32), True)


def layernorm_naive_var(x, weight, bias, eps=1e-5):
    """Buggy: one-pass variance."""
    return _layernorm_fn(x, weight, bias, tf.constant(eps, tf.float32), False)


@tf.function(reduce_retracing=True)
def _rmsnorm_fn(x, weight, eps, with_eps):
    x32 = tf.cast(x, tf.float32)
    ms = tf.reduce_mean(x32 * x32, axis=-1, keepdims=True)
    y = x32 * tf.math.rsqrt(ms + eps if with_eps else ms)
    return tf.cast(y * tf.cast(weight, tf.float32), x.dtype)


def rmsnorm(x, weight, eps=1e-6):
    """Correct: fp32 inside."""
    return _rmsnorm_fn(x, weight, tf.constant(eps, tf.float32), True)


def rmsnorm_no_eps(x, weight, eps=1e-6):
    """Buggy: eps left out of the rsqrt."""
    return _rmsnorm_fn(x, weight, tf.constant(eps, tf.float32), False)
