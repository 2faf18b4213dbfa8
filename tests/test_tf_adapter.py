"""TensorFlow launchers: detection, the DLPack hand-over (bf16 as tf.bfloat16), fuzzing tf.function ops, the
store and replay, gpuemu.tf.shadow, and Triton sharing the process with TensorFlow. tensorflow-cpu is a dev
dependency: not skipped."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import gpuemu
from gpuemu.cases import generate, materialize, with_dims
from gpuemu.frameworks import adapt, detect
from gpuemu.oracle import Oracle
from gpuemu.target import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TF_DIR = os.path.join(ROOT, "examples", "tf")


@pytest.fixture(scope="module")
def tf():
    """tensorflow, imported when the first TF test runs rather than at collection: the rest of the suite runs
    without TensorFlow's thread pools in the process (a missing tensorflow fails here, it is not skipped)."""
    import tensorflow

    return tensorflow


def _op(name):
    return load(os.path.join(TF_DIR, "ops.py") + ":" + name)


def test_detection(tf):
    assert detect(_op("softmax")) == "tf"  # a tf.function: by its type
    assert detect(_op("layernorm")) == "tf"  # a plain def in a module that imports tensorflow
    assert detect(tf.function(lambda x: x)) == "tf"


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_the_case_bytes_reach_tensorflow_unchanged(tf, dtype):
    inputs, _ = materialize(generate("softmax", 3, dtype=dtype, strategy="fixed"))
    seen = {}

    def launcher(x):
        seen["x"] = x
        return tf.identity(x)

    out = adapt(launcher, "tf")(inputs["x"])
    assert seen["x"].dtype == {"fp32": tf.float32, "fp16": tf.float16, "bf16": tf.bfloat16}[dtype]
    bits = torch.int32 if dtype == "fp32" else torch.int16
    assert torch.equal(out.view(bits), inputs["x"].view(bits)) and out.dtype == inputs["x"].dtype


def test_a_misaligned_buffer_is_copied_not_handed_to_tensorflow(tf):
    """TF aborts the process on a misaligned DLPack buffer; replayed snapshots sit at any offset of a file."""
    t = torch.arange(10, dtype=torch.float32)[1:5]
    assert t.is_contiguous() and t.data_ptr() % 64
    out = adapt(lambda x: tf.exp(x), "tf")(t)
    assert torch.equal(out, torch.exp(t))


def test_buggy_tf_function_caught_correct_twin_passes(tf, tmp_path):
    bad = gpuemu.fuzz(_op("softmax_no_max"), op="softmax", iterations=6, seed=5, store=tmp_path / "store",
                      strategy="adversarial_values")
    assert not bad.ok, bad.report()
    f = bad.failed[0]
    assert "missing max-subtraction" in (f.hint or "") and f.record is not None
    replay = gpuemu.reproduce(f.case.seed, store=tmp_path / "store")  # detected again from the stored target
    assert replay.same, (replay.verdict, replay.stored)
    good = gpuemu.fuzz(_op("softmax"), op="softmax", iterations=30, seed=5, save=False)
    assert good.ok and good.passed == 30, good.report()
    assert "TensorFlow arrays have no strides" in good.summary()


def test_layernorm_twins_on_a_cancellation_case(tf):
    case = with_dims(generate("layernorm", 11, dtype="fp32", strategy="fixed").replace(values="cancellation",
                                                                                        batch=(3,)), {"N": 48})
    oracle = Oracle.default()
    assert oracle.evaluate(adapt(_op("layernorm"), "tf"), case).verdict.status == "pass"
    assert oracle.evaluate(adapt(_op("layernorm_naive_var"), "tf"), case).verdict.status == "fail"


def test_tf_shadow_checks_eager_calls_and_replays(tf, tmp_path):
    import gpuemu.hook as hook
    from gpuemu.store import Store

    from types import SimpleNamespace

    path = os.path.join(TF_DIR, "shadowed.py")
    shadowed = SimpleNamespace(**{n: load(f"{path}:{n}") for n in ("softmax", "softmax_no_max", "layernorm")})
    x = tf.constant(np.random.RandomState(0).randn(4, 33).astype(np.float32) * 100)
    w, b = tf.ones([33]), tf.zeros([33])
    plain = shadowed.softmax_no_max(x)
    rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0)
    try:
        ok = shadowed.softmax(x)
        bad = shadowed.softmax_no_max(x)  # shadow mode: returned, not raised
        shadowed.layernorm(x, w, b)
        tf.function(lambda v: shadowed.softmax_no_max(v))(x)  # symbolic inside a trace: no check
        assert isinstance(ok, tf.Tensor) and np.array_equal(bad.numpy(), plain.numpy(), equal_nan=True)
        assert rt.stats.checks == 3 and rt.stats.internal_errors == 0
        (d,) = rt.divergences
        assert "softmax_no_max vs softmax fp64 reference" in d.line
        record, tensors = Store(rt.settings.store).fetch(d.seed)
        assert record["hook"]["framework"] == "tf"
        assert hook.replay_record(record, tensors).same
    finally:
        hook.uninstall()


def test_triton_after_tensorflow_does_not_crash_the_process():
    """libtriton loaded after TensorFlow segfaults; gpuemu's own imports of Triton go through preload_triton."""
    code = ("import tensorflow as tf, gpuemu, sys\n"
            "sys.path.insert(0, 'examples/tf')\n"
            "import ops\n"
            "r = gpuemu.fuzz(ops.softmax, op='softmax', iterations=2, seed=1, save=False)\n"
            "import triton.language\n"
            "print('ok', r.passed, 'triton' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "ok 2 True"


TF_MODULE = """
import os
import tensorflow as tf

os.write(2, b"a line of the module's own, kept\\n")


@tf.function
def softmax(x):
    return tf.nn.softmax(x, axis=-1)
"""


def test_tensorflows_load_notices_and_retracing_warnings_stay_out_of_the_report(tmp_path):
    (tmp_path / "tfops.py").write_text(TF_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, "-m", "gpuemu", "fuzz", "tfops.py:softmax", "--op", "softmax", "-n", "12",
                        "--seed", "1", "--dtype", "fp32", "--store", "s"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    for noise in ("oneDNN", "absl::InitializeLog", "cpu_feature_guard", "retracing", "To enable the following"):
        assert noise not in p.stderr, noise
    assert p.stderr.count("a line of the module's own, kept") == 1  # only TensorFlow's notices are held back
    assert "Passed: 12/12" in p.stderr


def test_an_overflow_hint_names_max_subtraction_only_where_exp_is_the_cause():
    from gpuemu import ops
    from gpuemu.explain import value_hint

    assert "missing max-subtraction" in value_hint(ops.get("softmax"), "large_spread")
    rms = value_hint(ops.get("rmsnorm"), "large_spread")
    assert "max-subtraction" not in rms and "squares or products of large values" in rms
