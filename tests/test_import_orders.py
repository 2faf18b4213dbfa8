"""No import order of gpuemu's hook, TensorFlow, JAX and torch crashes a process.

libtriton loaded after TensorFlow segfaults (the two ship clashing LLVM symbols; a static initializer of
libtriton frees TensorFlow's DebugCounter). ``import tensorflow; import gpuemu.hook`` did exactly that: the
hook's install registered its torch.compile backend (torch._dynamo imports Triton) and removed a previous
Triton listener (which imported Triton) before loading Triton the safe way. Each order runs in a fresh process,
uses every framework once, and must exit 0.

The 24 orders take 8-15 s each on 2 cores: the order that crashed (TensorFlow right before the hook) runs by
default, all 24 under ``make test-all`` (-m slow).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("tensorflow")
pytest.importorskip("jax")

USE = {
    "gpuemu.hook": "import gpuemu.hook\nassert gpuemu.hook.is_installed()",
    "tensorflow": "import tensorflow as tf\nassert float(tf.reduce_sum(tf.ones([3]))) == 3.0",
    "jax": "import jax, jax.numpy as jnp\nassert float(jnp.ones(3).sum()) == 3.0",
    "torch": "import torch\nassert float(torch.ones(3).sum()) == 3.0",
}
DEFAULT = {("tensorflow", "gpuemu.hook", "jax", "torch")}
ORDERS = [pytest.param(o, id="-".join(m.split(".")[-1] for m in o), marks=() if o in DEFAULT else pytest.mark.slow)
          for o in itertools.permutations(USE)]


@pytest.mark.parametrize("order", ORDERS)
def test_no_import_order_crashes(order):
    code = "\n".join(USE[m] for m in order) + "\nimport triton, torch._dynamo\nprint('ok')\n"
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", GPUEMU_MODE="shadow")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"exit {p.returncode} (-11: segmentation fault)\n{p.stderr[-1500:]}"
    assert p.stdout.strip().endswith("ok")
