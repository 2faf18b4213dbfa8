"""tf.function ops under ``gpuemu.tf.shadow`` (what a TensorFlow service would deploy with the hook installed)."""

from pathlib import Path

import gpuemu.tf
from gpuemu.target import load  # the neighbour by path: a module named "ops" may already be imported

_HERE = Path(__file__).resolve().parent

softmax = gpuemu.tf.shadow(load(f"{_HERE / 'ops.py'}:softmax"), op="softmax")
softmax_no_max = gpuemu.tf.shadow(load(f"{_HERE / 'ops.py'}:softmax_no_max"), op="softmax")
layernorm = gpuemu.tf.shadow(load(f"{_HERE / 'ops.py'}:layernorm"), op="layernorm")
