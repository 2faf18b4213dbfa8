"""tf.function ops under ``gpuemu.tf.shadow`` (what a TensorFlow service would deploy with the hook installed)."""

import gpuemu.tf

import ops as _ops

softmax = gpuemu.tf.shadow(_ops.softmax, op="softmax")
softmax_no_max = gpuemu.tf.shadow(_ops.softmax_no_max, op="softmax")
layernorm = gpuemu.tf.shadow(_ops.layernorm, op="layernorm")
