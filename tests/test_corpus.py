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


@pytest.mark.parametrize("entry", BUGGY, ids=lambda e: e.name)
def test_gpuemu_fails_every_buggy_kernel_within_100_iterations(entry):
    r = gpuemu.fuzz(load(resolve_target(entry)), op=entry.op, iterations=100, seed=1, save=False, max_failures=1)
    assert not r.ok, f"{entry.name} ({entry.bug}) passed 100 iterations"
    assert r.first_failure_iteration <= 100


@pytest.mark.parametrize("entry", CORRECT, ids=lambda e: e.name)
def test_correct_kernel_passes_a_short_run(entry):
    r = gpuemu.fuzz(load(resolve_target(entry)), op=entry.op, iterations=24, seed=2, save=False)
    assert entry.verdict_ok(r), r.report()


@pytest.mark.slow
@pytest.mark.parametrize("entry", CORRECT, ids=lambda e: e.name)
def test_correct_kernel_passes_300_iterations(entry):
    r = gpuemu.fuzz(load(resolve_target(entry)), op=entry.op, iterations=300, seed=20261130, save=False)
    assert entry.verdict_ok(r), r.report()
    assert r.iterations == 300
