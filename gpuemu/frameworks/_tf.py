"""torch <-> TensorFlow by DLPack (imported only for a TensorFlow launcher or ``gpuemu.tf.shadow``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ._numpy import from_numpy, owned

_ALIGN = 64  # bytes: TensorFlow's largest (EIGEN_MAX_ALIGN_BYTES) on x86 with AVX-512


def to_native(t: Any) -> Any:
    """A torch tensor as a TensorFlow eager tensor (by DLPack); anything else as is."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    if not t.is_contiguous():  # TF tensors are dense row-major: the values, dense
        t = t.contiguous()
    if t.data_ptr() % _ALIGN:  # TF aborts the process on a misaligned DLPack buffer (a replayed snapshot's
        t = t.clone()  # tensors sit at any offset of the file); a fresh torch allocation is aligned
    return tf.experimental.dlpack.from_dlpack(t.detach().__dlpack__())


def is_array(x: Any) -> bool:
    return isinstance(x, (tf.Tensor, tf.Variable))


def is_concrete(x: Any) -> bool:
    """False inside a tf.function trace (symbolic tensors have no values to check)."""
    if isinstance(x, tf.Tensor):
        return hasattr(x, "numpy") and tf.executing_eagerly()
    return True


def to_torch(x: Any, *, index_output: bool = False, copy: bool = True) -> Any:
    """A TensorFlow tensor (or numpy array) as a torch tensor that owns its memory (``copy=False``: a DLPack
    view); anything else is returned as is, for the Oracle to judge."""
    import torch

    if isinstance(x, tf.Variable):
        x = tf.convert_to_tensor(x)
    if isinstance(x, tf.Tensor):
        if not is_concrete(x):
            return x
        t = torch.from_dlpack(tf.experimental.dlpack.to_dlpack(x))
    elif isinstance(x, np.ndarray) and x.dtype.names is None:
        t = from_numpy(x)
    else:
        return x
    return owned(t, copy=copy, index_output=index_output)


def block(x: Any) -> Any:
    return x  # eager TensorFlow returns computed values
