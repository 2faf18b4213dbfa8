"""The fuzz loop on pure-torch launchers (fast) with planted bugs; Triton corpus runs are in test_corpus.py."""

import json
from pathlib import Path

import pytest
import torch

import gpuemu
from gpuemu.explain import attribute_blocks
from gpuemu.runners import Launch
from gpuemu import ops


def good_softmax(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def padded_softmax(x, block=32):
    """Softmax whose padding lanes (to a multiple of 32) enter the denominator as zeros: a tail-mask leak."""
    n = x.shape[-1]
    pad = (-n) % block
    xp = torch.nn.functional.pad(x.float(), (0, pad), value=0.0)
    m = x.float().amax(-1, keepdim=True)
    e = torch.exp(xp - m)
    return (e / e.sum(-1, keepdim=True))[..., :n].to(x.dtype)


def test_correct_launcher_passes(store):
    r = gpuemu.fuzz(good_softmax, op="softmax", iterations=40, seed=3, store=store)
    assert r.ok and r.passed == 40 and r.iterations == 40
    assert r.summary() == "Passed: 40/40"
    r.raise_for_failures()  # no exception


def test_buggy_launcher_fails_and_is_shrunk(store):
    r = gpuemu.fuzz(padded_softmax, op="softmax", iterations=40, seed=3, store=store)
    assert not r.ok
    first = r.failures[0]
    assert first.line().startswith(f"FAIL seed=0x{first.case.seed:x} dtype=")
    assert "max abs err" in first.line() and "> tol" in first.line()
    assert first.replay == f"gpuemu reproduce 0x{first.case.seed:x}"
    assert first.case.batch == () and first.case.is_contiguous()  # shrunk to the simplest shape
    assert first.case.dims["N"] < 32
    with pytest.raises(AssertionError, match="is not a correct softmax"):
        r.raise_for_failures()
    json.dumps(r.to_dict())  # serialisable
    assert r.stored == r.failed_cases


def test_same_seed_same_cases(store):
    seen_a, seen_b = [], []
    gpuemu.fuzz(good_softmax, op="softmax", iterations=10, seed=11, save=False, on_case=lambda i, c, v: seen_a.append(c))
    gpuemu.fuzz(good_softmax, op="softmax", iterations=10, seed=11, save=False, on_case=lambda i, c, v: seen_b.append(c))
    assert seen_a == seen_b


def test_stride_hint_only_with_evidence():
    def ignores_strides(x):
        """Reads x's memory as if it were contiguous (a kernel that never looks at strides)."""
        contiguous_strides = torch.empty(x.shape).stride()
        flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), x.storage_offset(), x.shape,
                                                   contiguous_strides)
        return good_softmax(flat)

    r = gpuemu.fuzz(ignores_strides, op="softmax", iterations=60, seed=5, save=False)
    assert not r.ok
    assert "stride bug suspected: fails only for non-contiguous inputs" in (r.failures[0].hint or "")


def test_precision_hint_for_fp16_accumulation():
    def fp16_cumsum(x):
        if x.dtype == torch.float32:
            return torch.cumsum(x, -1)
        out = torch.empty_like(x)
        acc = torch.zeros(x.shape[:-1], dtype=x.dtype)
        for j in range(x.shape[-1]):  # accumulate in the storage dtype: loses bits in fp16
            acc = acc + x[..., j]
            out[..., j] = acc
        return out

    r = gpuemu.fuzz(fp16_cumsum, op="cumsum", iterations=60, seed=2, dtypes="fp16", save=False)
    assert not r.ok
    assert "precision suspected: fails only for fp16" in (r.failures[0].hint or "")


def test_precision_hint_for_an_error_only_fp32_can_see():
    def short_log2e_exp(x):
        return torch.exp2(x.float() * 1.4427).to(x.dtype)  # log2(e) to 5 digits: 3.4e-6 * |x| relative

    r = gpuemu.fuzz(short_log2e_exp, op="exp", iterations=30, seed=2, save=False)
    assert not r.ok and r.failures[0].case.dtype == "fp32"
    assert "precision suspected: fails only in fp32, passes in fp16" in (r.failures[0].hint or "")


def test_no_hint_without_evidence():
    def always_off(x):
        return good_softmax(x) * 1.5

    r = gpuemu.fuzz(always_off, op="softmax", iterations=5, seed=1, save=False)
    assert not r.ok and r.failures[0].hint is None


def test_tail_hint_from_observed_blocks():
    spec = ops.get("softmax")
    blocks = attribute_blocks(spec, [Launch("k", {"BLOCK_N": 64, "num_warps": 4, "FLAG": True})])
    assert blocks == {"N": [("BLOCK_N", 64)]}
    attn = attribute_blocks(ops.get("attention"), [Launch("k", {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_D": 32})])
    assert attn["Nq"] == [("BLOCK_M", 16)] and attn["Nk"] == [("BLOCK_N", 64)] and attn["D"] == [("BLOCK_D", 32)]


def test_launcher_refusing_some_inputs_keeps_fuzzing():
    def sometimes(x):
        if x.shape[-1] == 1:
            raise ValueError("N=1 unsupported")  # on the host, before any launch: a refusal of that input
        return good_softmax(x)

    r = gpuemu.fuzz(sometimes, op="softmax", iterations=60, seed=4, save=False)
    assert r.iterations == 60 and r.ok and 0 < r.refused < 60
    assert "ValueError: N=1 unsupported" in r.rejected_reason


def test_bad_arguments():
    with pytest.raises(KeyError, match="not a known op"):
        gpuemu.fuzz(good_softmax, op="sofmax")
    with pytest.raises(TypeError, match="iterations"):
        gpuemu.fuzz(good_softmax, op="softmax", iterations=0)
    with pytest.raises(TypeError, match="dtype"):
        gpuemu.fuzz(good_softmax, op="softmax", dtypes="fp8")


def test_reproduce_api_round_trip(store):
    r = gpuemu.fuzz(padded_softmax, op="softmax", iterations=20, seed=3, store=store, target="tests.test_fuzz:padded_softmax")
    seed = r.failures[0].case.seed
    rp = gpuemu.reproduce(seed, store=store, fn=padded_softmax)
    assert rp.same and rp.verdict.max_abs_err == r.failures[0].verdict.max_abs_err
    rp2 = gpuemu.reproduce(f"0x{seed:x}"[:8], store=store, fn=good_softmax)  # prefix; fixed kernel passes
    assert rp2.verdict.status == "pass" and not rp2.same


def test_bf16_keeps_being_tested_after_a_raising_bf16_case():
    from gpuemu.target import load

    fn = load(str(Path(__file__).resolve().parent / "bf16_after_raise.py") + ":add_bf16_wrong")
    r = gpuemu.fuzz(fn, op="add", iterations=60, seed=2, save=False, shrink_failures=False)
    assert "bf16" not in r.skipped, r.skipped
    kinds = {(f.case.dtype, f.verdict.kind) for f in r.failures}
    assert any(dt == "bf16" and k in ("mismatch", "nonfinite") for dt, k in kinds), kinds
    assert all(dt == "bf16" for dt, _ in kinds)


def test_cases_run_with_one_torch_thread_and_the_setting_comes_back(tmp_path):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        gpuemu.fuzz(good_softmax, op="softmax", iterations=3, seed=1, save=False,
                    on_case=lambda i, c, v: seen.append(torch.get_num_threads()))
        assert seen == [1, 1, 1]
        assert torch.get_num_threads() == 2

        def raises(x):
            raise KeyboardInterrupt  # Ctrl-C in the middle of a case: the setting still comes back

        with pytest.raises(KeyboardInterrupt):
            gpuemu.fuzz(raises, op="softmax", iterations=3, seed=1, save=False)
        assert torch.get_num_threads() == 2
        pack = tmp_path / "threads.yaml"
        pack.write_text("schema_version: 1\nfuzz:\n  torch_threads: 0\n")  # 0: torch's own setting stands
        seen.clear()
        gpuemu.fuzz(good_softmax, op="softmax", iterations=2, seed=1, save=False, rulepack=[str(pack)],
                    on_case=lambda i, c, v: seen.append(torch.get_num_threads()))
        assert seen == [2, 2]
    finally:
        torch.set_num_threads(before)
