"""The example corpus against both oracles: every buggy kernel passes the field-standard allclose check and
fails gpuemu; every correct kernel passes gpuemu. The full-length runs (300 iterations) are marked slow."""

import pytest

import gpuemu
from gpuemu.corpus import allclose_verdict, load_manifest, resolve_target
from gpuemu.target import load

ENTRIES = load_manifest()
BUGGY = [e for e in ENTRIES if not e.correct]
CORRECT = [e for e in ENTRIES if e.correct]


def test_corpus_size():
    assert len(BUGGY) >= 16 and len(CORRECT) >= 16
    names = {e.name for e in ENTRIES}
    assert SLOW_BUGGY <= names and FAST_CORRECT <= names  # a renamed kernel would silently change the default set
    # the default run still fails a buggy launcher of every op that has one, and runs every op of the corpus
    assert {e.op for e in BUGGY if e.name not in SLOW_BUGGY} == {e.op for e in BUGGY}
    fast = {e.op for e in BUGGY if e.name not in SLOW_BUGGY} | {e.op for e in CORRECT if e.name not in SLOW_CORRECT}
    assert fast == {e.op for e in ENTRIES}
    assert len({e.op for e in ENTRIES}) >= 10
    classes = {e.bug for e in BUGGY}
    assert {"tail-mask leak", "accumulator overwrite", "wrong normalisation", "missing online-softmax rescale"} <= classes
    for op in ("softmax", "matmul", "attention", "layernorm", "rmsnorm", "cross_entropy"):
        assert any(e.op == op and e.correct for e in ENTRIES) and any(e.op == op and not e.correct for e in ENTRIES)
    assert any("flash_attention" in e.target and not e.correct for e in ENTRIES)


@pytest.mark.parametrize("entry", BUGGY, ids=lambda e: e.name)
def test_buggy_kernel_passes_allclose_at_a_power_of_two_shape(entry):
    ok, err, shapes = allclose_verdict(entry)
    assert ok, f"{entry.name} should pass allclose at {shapes} (max abs err {err})"
    assert all(s & (s - 1) == 0 for shape in shapes.values() for s in shape)  # powers of two


# The corpus's fuzz runs take 2-2.5 min in all; the default run keeps the kernels that run in under ~2 s here
# (--durations), which still fails a buggy launcher of every op that has one; the rest run under `make test-all`.
SLOW_BUGGY = {"softmax_bf16_path_unlooped", "flash_attention_no_rescale", "cross_entropy_chunked_no_max",
              "flash_attention_causal_off_by_one", "attention_causal_topleft", "matmul_low_precision_acc",
              "attention_scale_bug"}
FAST_CORRECT = {"softmax", "softmax_exp2", "layernorm", "rmsnorm", "rmsnorm_llama_cast", "mean", "sum", "gelu", "add",
                "exp", "add_rows", "eager_attention", "softmax_rows_declared", "softmax_rows_refuses",
                "eager_cross_entropy_fp32", "mixed_precision_layernorm", "hf_llama_rmsnorm", "eager_rope", "eager_geglu",
                "eager_swiglu"}
SLOW_CORRECT = {e.name for e in CORRECT} - FAST_CORRECT


def _split(entries, slow):
    return [pytest.param(e, id=e.name, marks=pytest.mark.slow if e.name in slow else ()) for e in entries]


@pytest.mark.parametrize("entry", _split(BUGGY, SLOW_BUGGY))
def test_gpuemu_fails_every_buggy_kernel_within_100_iterations(entry):
    r = gpuemu.fuzz(load(resolve_target(entry)), op=entry.op, iterations=100, seed=1, save=False, max_failures=1)
    assert not r.ok, f"{entry.name} ({entry.bug}) passed 100 iterations"
    assert r.first_failure_iteration <= 100


@pytest.mark.parametrize("entry", _split(CORRECT, SLOW_CORRECT))
def test_correct_kernel_passes_a_short_run(entry):
    r = gpuemu.fuzz(load(resolve_target(entry)), op=entry.op, iterations=24, seed=2, save=False)
    assert entry.verdict_ok(r), r.report()


@pytest.mark.slow
@pytest.mark.parametrize("entry", CORRECT, ids=lambda e: e.name)
def test_correct_kernel_passes_300_iterations(entry):
    r = gpuemu.fuzz(load(resolve_target(entry)), op=entry.op, iterations=300, seed=20261130, save=False)
    assert entry.verdict_ok(r), r.report()
    assert r.iterations == 300
