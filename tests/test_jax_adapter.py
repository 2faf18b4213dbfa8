"""JAX and Pallas launchers: detection, the DLPack hand-over, fuzzing the Pallas corpus (interpret=True on the
CPU), the store and a replay in a new process, and gpuemu.jax.shadow. jax is a dev dependency: not skipped."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import gpuemu
from gpuemu.cases import Case, generate, materialize, with_dims
from gpuemu.errors import InvalidArgument, UnknownOp
from gpuemu.frameworks import adapt, canonical, detect
from gpuemu.oracle import Oracle
from gpuemu.target import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PALLAS = os.path.join(ROOT, "examples", "pallas")


def _pallas(name):
    return load(os.path.join(PALLAS, name.split(":")[0] + ".py") + ":" + name.split(":")[1])


# ------------------------------------------------------------------------------------ detection, hand-over


def test_detection_from_the_function_and_its_module():
    assert detect(jax.jit(lambda x: x)) == "jax"
    assert detect(_pallas("softmax:softmax")) == "jax"  # a plain def in a module that imports jax
    assert detect(lambda x: x) == "torch"  # this module imports torch: torch, as before
    assert canonical("Pallas") == "jax" and canonical("tensorflow") == "tf" and canonical(None) is None
    with pytest.raises(InvalidArgument, match="framework 'mxnet' is not known"):
        canonical("mxnet")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_the_case_bytes_reach_jax_unchanged_and_without_a_copy(dtype):
    case = generate("layernorm", 7, dtype=dtype, strategy="fixed")
    inputs, _ = materialize(case)
    seen = {}

    def launcher(x, weight, bias, eps=1e-5):
        seen.update(x=x, weight=weight)
        return x

    out = adapt(launcher, "jax")(inputs["x"], inputs["weight"], inputs["bias"])
    x = seen["x"]
    assert isinstance(x, jax.Array) and x.dtype == {"fp32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}[dtype]
    assert x.unsafe_buffer_pointer() == inputs["x"].data_ptr()  # DLPack: the torch buffer itself
    assert torch.equal(out.view(torch.int16 if dtype != "fp32" else torch.int32),
                       inputs["x"].view(torch.int16 if dtype != "fp32" else torch.int32))
    assert out.data_ptr() != inputs["x"].data_ptr()  # the output owns its memory (no alias verdicts)


def test_index_outputs_widen_from_int32_and_pass_the_oracle():
    assert not jax.config.read("jax_enable_x64")
    r = gpuemu.fuzz(lambda x: jnp.argmax(x, axis=-1), op="argmax", iterations=6, seed=3, save=False,
                    dtypes="fp32", framework="jax")
    assert r.ok and r.passed == 6, r.report()


def test_a_non_array_result_is_the_oracles_type_verdict():
    r = gpuemu.fuzz(lambda x: (x, x), op="relu", iterations=1, seed=1, save=False, framework="jax",
                    shrink_failures=False)
    assert r.failures and r.failures[0].verdict.kind == "type"


# ------------------------------------------------------------------------------------ the Pallas corpus


def test_pallas_softmax_buggy_caught_correct_passes():
    bad = gpuemu.fuzz(_pallas("softmax:softmax_no_max"), op="softmax", iterations=6, seed=5, save=False,
                      strategy="adversarial_values", shrink_failures=False)  # shrunk and explained: the CLI test
    assert not bad.ok and bad.failed[0].verdict.kind in ("nonfinite", "mismatch"), bad.report()
    good = gpuemu.fuzz(_pallas("softmax:softmax"), op="softmax", iterations=8, seed=5, save=False)
    assert good.ok and good.passed == 8, good.report()
    assert "non-contiguous layouts" in good.skipped and "JAX arrays have no strides" in good.summary()
    assert good.iterations == 8  # the flattened cases still ran: only the layout was dropped


def _case(op, dtype, dims, values="normal", **kw):
    case = generate(op, 11, dtype=dtype, strategy="fixed").replace(values=values, **kw)
    return with_dims(case, dims)


@pytest.mark.parametrize("target, op, case", [
    ("matmul:matmul", "matmul", _case("matmul", "fp16", {"M": 5, "K": 80, "N": 7})),  # K spans 3 K blocks
    ("layernorm:layernorm", "layernorm", _case("layernorm", "fp32", {"N": 48}, values="cancellation", batch=(3,))),
    ("attention:attention", "attention",
     _case("attention", "bf16", {"B": 1, "H": 2, "Nq": 9, "Nk": 40, "D": 16}, kwargs={"causal": True})),
], ids=["matmul", "layernorm", "attention"])
def test_pallas_twins_on_the_case_that_separates_them(target, op, case):
    """The buggy twin fails and the correct one passes on one case chosen to trigger the bug (fuzzing finds
    it too, at ~1-3 s per case under interpret=True; the 300-case runs are in the README)."""
    module, name = target.split(":")
    oracle = Oracle.default()
    good = oracle.evaluate(adapt(_pallas(target), "jax"), case)
    assert good.verdict.status == "pass", good.verdict.message
    buggy = {"matmul": "matmul_acc_overwrite", "layernorm": "layernorm_naive_var",
             "attention": "attention_no_rescale"}[name]
    bad = oracle.evaluate(adapt(_pallas(f"{module}:{buggy}"), "jax"), case)
    assert bad.verdict.status == "fail", bad.verdict.message


# ------------------------------------------------------------------------------------ CLI, store, replay


def _cli(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "gpuemu", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_cli_catches_a_pallas_kernel_and_a_new_process_replays_it_bit_for_bit(tmp_path, capsys, monkeypatch):
    from gpuemu.cli import main

    monkeypatch.chdir(ROOT)
    store = str(tmp_path / "store")
    rc = main(["fuzz", "examples/pallas/softmax.py:softmax_no_max", "--op", "softmax", "-n", "6", "--seed", "5",
               "--strategy", "adversarial_values", "--store", store, "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 1, err[-2000:]
    assert "jax launcher" in err and "missing max-subtraction" in err
    result = json.loads((tmp_path / "r.json").read_text())
    failure = result["failures"][0]
    assert failure["stored"] and failure["case"]["layouts"] == {"x": "contiguous"}
    record = json.loads(open(failure["record"]).read())
    assert record["framework"] == "jax"
    seed = failure["case"]["seed"]
    rp = _cli("reproduce", hex(seed), "--store", store, "--json", "-")  # a new process: only the stored bytes
    assert rp.returncode == 1, rp.stderr[-2000:]
    out = json.loads(rp.stdout)
    assert out["same"] is True and "bit for bit" in rp.stderr
    assert out["verdict"]["max_abs_err"] == failure["verdict"]["max_abs_err"]


def test_cli_framework_flag_is_checked():
    bad = _cli("fuzz", "examples/pallas/softmax.py:softmax", "--op", "softmax", "--framework", "mxnet")
    assert bad.returncode == 2 and "invalid choice: 'mxnet'" in bad.stderr


# ------------------------------------------------------------------------------------ gpuemu.jax.shadow


@pytest.fixture
def otel_hook(tmp_path):
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs import export as log_export
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    import gpuemu.hook as hook

    reader = InMemoryMetricReader()
    logs = (getattr(log_export, "InMemoryLogRecordExporter", None) or log_export.InMemoryLogExporter)()
    lp = LoggerProvider()
    lp.add_log_record_processor(log_export.SimpleLogRecordProcessor(logs))

    def make(**kw):
        kw.setdefault("mode", "shadow")
        return hook.install(sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0,
                            meter_provider=MeterProvider(metric_readers=[reader]), logger_provider=lp, **kw)

    yield make, reader, logs
    hook.uninstall()


def _shadowed():
    from types import SimpleNamespace

    path = os.path.join(PALLAS, "shadowed.py")
    return SimpleNamespace(softmax=load(f"{path}:softmax"), softmax_no_max=load(f"{path}:softmax_no_max"))


def _logits():
    return jnp.asarray(np.random.RandomState(0).randn(4, 33).astype(np.float32) * 100)  # past exp's overflow


def test_jax_shadow_checks_sampled_calls_and_stores_a_replayable_divergence(otel_hook):
    import gpuemu.hook as hook
    from gpuemu import telemetry
    from gpuemu.store import Store

    make, reader, logs = otel_hook
    sh = _shadowed()
    x = _logits()
    plain_ok, plain_bad = sh.softmax(x), sh.softmax_no_max(x)  # no hook: the launcher alone
    rt = make()
    ok, bad = sh.softmax(x), sh.softmax_no_max(x)  # shadow mode: a divergence never raises
    assert isinstance(ok, jax.Array) and np.array_equal(np.asarray(ok), np.asarray(plain_ok))
    assert np.array_equal(np.asarray(bad), np.asarray(plain_bad), equal_nan=True)  # the host's result, unchanged
    assert rt.stats.checks == 2 and [d.source for d in rt.divergences] == ["shadow"]
    d = rt.divergences[0]
    assert "softmax_no_max vs softmax fp64 reference" in d.line
    jax.jit(lambda v: sh.softmax_no_max(v))(x)  # traced inside an outer jit: no values, no check, but counted
    assert rt.stats.checks == 2 and rt.stats.internal_errors == 0
    assert rt.stats.skip_reasons == {"jax call traced inside an outer jax.jit (no values): decorate the outermost "
                                     "eager function": 1}
    record, tensors = Store(rt.settings.store).fetch(d.seed)
    assert record["hook"]["framework"] == "jax"
    replay = hook.replay_record(record, tensors)  # re-runs the Pallas launcher on the stored bytes
    assert replay.same and replay.rerun is not None
    points = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                points[m.name] = sum(p.value for p in m.data.data_points if hasattr(p, "value"))
    assert points[telemetry.CHECKS] == 2 and points[telemetry.DIVERGENCES] == 1
    (rec,) = logs.get_finished_logs()
    assert getattr(rec, "log_record", rec).attributes["gpuemu.replay.seed"] == d.seed


def test_jax_shadow_strict_mode_raises_after_the_call(otel_hook):
    from gpuemu.hook.runtime import ShadowDivergence

    make, _, _ = otel_hook
    sh = _shadowed()
    make(mode="strict")
    sh.softmax(_logits())
    with pytest.raises(ShadowDivergence, match="softmax_no_max"):
        sh.softmax_no_max(_logits())


def test_jax_shadow_rejects_an_unknown_op_at_decoration():
    import gpuemu.jax as gj

    with pytest.raises(UnknownOp, match="did you mean 'softmax'"):
        gj.shadow(op="sofmax")


def test_import_gpuemu_and_its_decorators_load_neither_framework():
    code = ("import sys, gpuemu, gpuemu.jax, gpuemu.tf\n"
            "gpuemu.jax.shadow(op='softmax')(lambda x: x); gpuemu.tf.shadow(op='softmax')(lambda x: x)\n"
            "gpuemu.frameworks.detect(lambda x: x)\n"
            "print(sorted(m for m in ('jax', 'tensorflow') if m in sys.modules))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stderr[-2000:]


# ------------------------------------------------------------------------------------ what a JAX user meets first

PALLAS_NOT_INTERPRETED = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


def softmax(x):
    x2 = x.reshape(-1, x.shape[-1])
    m, n = x2.shape
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m,),
                          in_specs=[pl.BlockSpec((1, n), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((1, n), lambda i: (i, 0)), interpret=False)(x2).reshape(x.shape)
"""

MIXED = """
import torch  # the project uses torch elsewhere
import jax.numpy as jnp


def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)
"""


def test_a_pallas_kernel_that_cannot_run_here_says_why_at_the_users_line(tmp_path, monkeypatch, capsys):
    from gpuemu.cli import main

    (tmp_path / "pk.py").write_text(PALLAS_NOT_INTERPRETED)
    monkeypatch.chdir(tmp_path)
    assert main(["fuzz", "pk.py:softmax", "--op", "softmax", "-n", "3", "--seed", "1", "--dtype", "fp32",
                 "--store", "s", "--no-shrink"]) == 1
    err = capsys.readouterr().err
    assert "Refused: 3/3, each on the host before any launch (refuses the input before any launch: ValueError: Only "\
           "interpret mode is supported on CPU backend. (a Pallas kernel with interpret=False runs only on a GPU or TPU; on this CPU pass " \
           "interpret=True to pl.pallas_call" in err
    # the location is the user's pallas_call line, not a frame inside jax/_src
    assert f"({tmp_path / 'pk.py'}:16)" in err and "jax/_src" not in err


def test_a_jax_launcher_in_a_module_that_imports_torch_gets_a_framework_hint(tmp_path, monkeypatch, capsys):
    from gpuemu.cli import main

    (tmp_path / "mixed.py").write_text(MIXED)
    monkeypatch.chdir(tmp_path)
    assert main(["fuzz", "mixed.py:softmax", "--op", "softmax", "-n", "3", "--seed", "1", "--dtype", "fp32",
                 "--store", "s", "--no-shrink"]) == 1
    err = capsys.readouterr().err
    assert "hint: its module imports JAX as well as torch, so it ran as a torch launcher: if it takes JAX arrays, " \
           "pass --framework jax" in err
    capsys.readouterr()
    assert main(["fuzz", "mixed.py:softmax", "--op", "softmax", "-n", "3", "--seed", "1", "--dtype", "fp32",
                 "--store", "s", "--framework", "jax"]) == 0
