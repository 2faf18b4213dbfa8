"""Pallas kernels under ``gpuemu.jax.shadow`` (what a JAX service would deploy with the hook installed)."""

from pathlib import Path

import gpuemu.jax
from gpuemu.target import load  # the neighbour by path: a module named "softmax" may already be imported

_HERE = Path(__file__).resolve().parent

softmax = gpuemu.jax.shadow(load(f"{_HERE / 'softmax.py'}:softmax"), op="softmax")
softmax_no_max = gpuemu.jax.shadow(load(f"{_HERE / 'softmax.py'}:softmax_no_max"), op="softmax")
