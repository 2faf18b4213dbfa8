"""Launches a GPU refuses (shared memory, threads per block) are refused on the CPU too, with the figure
Triton's launcher checks, and a real OutOfResources on CUDA gives the same verdict word for word."""

from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl

from gpuemu.cases import Case
from gpuemu.errors import InvalidArgument
from gpuemu.oracle import ERROR, LIMIT, PASS, Oracle
from gpuemu.resources import (LaunchRefused, Refusal, check_compiled, max_threads_for, parse_targets,
                              predicting)
from gpuemu.runners import run_launcher
from gpuemu.runtime import aot


@triton.jit
def _one_tile_mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, BK: tl.constexpr):
    """c = a @ b for M, N <= 16 with all of K in one tile: its shared memory grows with BK."""
    om = tl.arange(0, 16)
    ok = tl.arange(0, BK)
    a = tl.load(a_ptr + om[:, None] * sam + ok[None, :] * sak, mask=(om[:, None] < M) & (ok[None, :] < K), other=0.0)
    b = tl.load(b_ptr + ok[:, None] * sbk + om[None, :] * sbn, mask=(ok[:, None] < K) & (om[None, :] < N), other=0.0)
    c = tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + om[:, None] * scm + om[None, :] * scn, c, mask=(om[:, None] < M) & (om[None, :] < N))


def one_tile_mm(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    _one_tile_mm[(1,)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BK=max(16, triton.next_power_of_2(K)))
    return c


def _case(K: int) -> Case:
    return Case(op="matmul", dtype="fp32", dims={"M": 16, "N": 16, "K": K}, seed=3)


# BK=2048 fp32: a 16x2048 and a 2048x16 tile, 131,072 B each: 262,144 B > 232,448 (sm_90) and 166,912 (sm_80)
EXPECTED = "_one_tile_mm needs 262,144 B shared memory on sm_90, limit 232,448"


def test_refusal_message_names_the_resource_the_figure_and_the_limit():
    r = Refusal("_attn_kernel", "sm_90", "shared memory", 294912, 232448)
    assert r.message() == "_attn_kernel needs 294,912 B shared memory on sm_90, limit 232,448"
    t = Refusal("k", "sm_80", "threads", 2048, 1024)
    assert t.message() == "k needs 2,048 threads per block on sm_80, limit 1,024"


def _compiled(shared: int, num_warps: int = 4):
    return SimpleNamespace(kernel="k", metadata={"shared": shared, "num_warps": num_warps, "num_stages": 3}, asm={})


def test_limits_are_the_ones_the_gpus_report():
    # cudaDevAttrMaxSharedMemoryPerBlockOptin: H100/H200 232,448 B; A100 166,912 B
    assert check_compiled(_compiled(232448), "sm_90") == []
    [r] = check_compiled(_compiled(232449), "sm_90")
    assert (r.resource, r.required, r.limit, r.options["num_stages"]) == ("shared memory", 232449, 232448, 3)
    [r] = check_compiled(_compiled(200000), "sm_80")
    assert r.limit == 166912 and check_compiled(_compiled(200000), "sm_90") == []
    [r] = check_compiled(_compiled(0, num_warps=64), "sm_90")  # 2,048 threads: Triton's "threads" check
    assert (r.resource, r.required, r.limit) == ("threads", 2048, 1024)
    assert check_compiled(_compiled(0, num_warps=32), "sm_90") == []  # 1,024 threads: allowed (no cubin to read)


def test_max_threads_follows_the_registers():
    assert max_threads_for(32) == 1024
    assert max_threads_for(64) == 1024
    assert max_threads_for(65) == 896  # 65*32 -> 2,304 registers per warp: 28 warps in 64K
    assert max_threads_for(255) == 256


def test_targets_parse_like_lint_and_reject_unknown_ones():
    assert parse_targets(None) == ("sm_80", "sm_90")
    assert parse_targets("sm_90a,sm_90,80") == ("sm_90", "sm_80")
    assert parse_targets("none") == () and parse_targets("") == ()
    with pytest.raises(InvalidArgument, match="sm_99"):
        parse_targets("sm_99")


def test_cpu_run_refuses_before_running_and_the_verdict_names_the_figure():
    o = Oracle.default()
    with predicting("sm_90"):
        ev = o.evaluate(one_tile_mm, _case(2048))
    v = ev.verdict
    assert (v.status, v.kind, v.message) == (LIMIT, "out_of_resources", EXPECTED)
    assert "predicted without a GPU" in v.detail and "num_warps=4, num_stages=3" in v.detail
    with predicting("sm_80,sm_90"):
        v2 = o.evaluate(one_tile_mm, _case(2048)).verdict
    assert v2.message == "_one_tile_mm needs 262,144 B shared memory on sm_80, limit 166,912; " + EXPECTED
    with predicting("none"):  # prediction off: the CPU runs it, and it is correct
        assert o.evaluate(one_tile_mm, _case(2048)).verdict.status == PASS


def test_a_launch_that_fits_runs_and_each_specialisation_compiles_once():
    o = Oracle.default()
    with predicting("sm_90"):
        before = aot.cache_stats()
        v = o.evaluate(one_tile_mm, _case(40)).verdict  # BK=64: 8 KB
        mid = aot.cache_stats()
        v2 = o.evaluate(one_tile_mm, _case(40).replace(seed=4)).verdict
        after = aot.cache_stats()
    assert v.status == PASS and v2.status == PASS, (v.message, v2.message)
    assert mid["partial"] - before["partial"] == 1  # the determinism check's second call hit the cache
    assert after["partial"] == mid["partial"] and after["hits"] > mid["hits"]


def _mm_args(K: int):
    a, b, c = torch.zeros(16, K), torch.zeros(K, 16), torch.zeros(16, 16)
    return (a, b, c, 16, 16, K, *a.stride(), *b.stride(), *c.stride())


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_limits_only_gives_the_figure_of_a_full_compile(target):
    """The shared memory of a compile stopped at LLVM IR is the one the full compile (and the GPU) reports;
    a second asking reads it back from beside Triton's cache."""
    args, kw, t = _mm_args(1000), {"BK": 1024, "num_warps": 8, "num_stages": 2}, aot.parse_target(target)
    before = aot.cache_stats()["partial"]
    part = aot.compile_launch(_one_tile_mm, args, kw, t, limits_only=True)
    assert aot.cache_stats()["partial"] == before + 1  # compiled only as far as LLVM IR
    full = aot.compile_launch(_one_tile_mm, args, kw, t)
    assert full.error is None and part.error is None, (full.error, part.error)
    assert part.asm == {} and part.metadata["shared"] == full.metadata["shared"] > 0
    assert (part.metadata["num_warps"], part.metadata["num_stages"]) == (8, 2)


def test_cuda_out_of_resources_gives_the_same_verdict(monkeypatch):
    """A real launch's triton OutOfResources (stood in for here: no GPU) becomes the same ERROR verdict."""
    from triton.runtime.errors import OutOfResources

    import gpuemu.resources as resources
    import gpuemu.runners as runners

    def refused_on_gpu(a, b):
        one_tile_mm(a[:, :16], b[:16])  # a launch is seen first, as on a GPU (the interpreter runs it here)
        raise OutOfResources(262144, 232448, "shared memory")

    monkeypatch.setattr(resources, "cuda_target_name", lambda device=None: "sm_90")
    monkeypatch.setattr(runners, "_sync", lambda device: None)
    case = _case(2048)
    from gpuemu.cases import materialize

    inputs, _ = materialize(case)
    run = run_launcher(refused_on_gpu, [inputs["a"], inputs["b"]], {}, device="cuda")
    assert isinstance(run.error, LaunchRefused) and not run.error.predicted
    assert run.error.message == EXPECTED
    v = Oracle.default().evaluate(refused_on_gpu, case, device="cuda", inputs=inputs).verdict
    assert (v.status, v.kind, v.message) == (LIMIT, "out_of_resources", EXPECTED)
    assert "raised by the CUDA launch" in v.detail and "Hardware limit: 232448" in v.detail


def test_fuzz_cli_takes_gpu_targets_and_rejects_unknown_ones(capsys):
    from gpuemu.cli import main

    rc = main(["fuzz", "tests/test_launch_resources.py:one_tile_mm", "--op", "matmul", "--target", "sm_99",
               "--iterations", "1"])
    assert rc == 2
    assert "sm_99" in capsys.readouterr().err


def test_a_huge_kernel_is_judged_from_its_ttgir_with_a_lower_bound():
    """Lowering a kernel with 8192x16 tiles to LLVM IR took 290 s here; its TTGIR already shows it cannot fit."""
    from gpuemu.resources import _early_judge, shared_lower_bound

    def ttgir(rows: int) -> str:
        t = f"tensor<{rows}x16xf32, #b>"
        return (f"%k = ttg.local_alloc %x : ({t}) -> !ttg.memdesc<{rows}x16xf32, #s, #smem>\n"
                f"%v = ttg.local_alloc %y : ({t}) -> !ttg.memdesc<{rows}x16xf32, #s, #smem>\n"
                f"%a = ttg.local_load %k : !ttg.memdesc<{rows}x16xf32, #s, #smem> -> {t}\n"
                f"%b = ttg.local_load %v : !ttg.memdesc<{rows}x16xf32, #s, #smem> -> {t}\n")

    assert shared_lower_bound(ttgir(8192)) == (2 * 8192 * 16 * 4, 8192 * 16)
    assert _early_judge(232448)(ttgir(8192)) == {"shared": 1048576, "shared_is_lower_bound": True}
    assert _early_judge(232448)(ttgir(1024)) is None  # fits: nothing to judge early
    assert _early_judge(100000)(ttgir(1024)) is None  # small tiles: the exact figure is cheap, compile on
    r = check_compiled(SimpleNamespace(kernel="k", asm={}, metadata={"shared": 1048576, "num_warps": 4,
                                                                       "shared_is_lower_bound": True}), "sm_90")
    assert r[0].message() == "k needs at least 1,048,576 B shared memory on sm_90, limit 232,448"


@pytest.mark.slow  # every corpus launch compiled, ~5 s; the allocation passes are tested alone above
def test_limits_from_the_allocation_passes_equal_make_llirs_on_corpus_launches(tmp_path, monkeypatch):
    """aot._allocate (the passes of make_llir up to shared memory allocation) gives the figures of the full
    make_llir stage on the corpus's launches (dots, online softmax, Welford, scans, reductions, both targets)."""
    from pathlib import Path

    import gpuemu
    from gpuemu.target import load

    corpus = Path(__file__).resolve().parents[1] / "examples" / "kernels"
    calls, real = [], aot.compile_launch

    def spy(kernel, args, kwargs, target, **kw):
        out = real(kernel, args, kwargs, target, **kw)
        if kw.get("limits_only"):
            calls.append((kernel, args, dict(kwargs), target, kw.get("target_name"), out))
        return out

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "allocated"))
    monkeypatch.setattr(aot, "compile_launch", spy)
    monkeypatch.setattr(aot, "ALLOCATION_ONLY", True)
    aot._compiled.clear()
    before = aot.cache_stats()["allocated"]
    for target, op in (("flash_attention.py:flash_attention", "attention"), ("matmul.py:matmul", "matmul"),
                       ("layernorm.py:layernorm_welford", "layernorm"), ("cumsum.py:cumsum", "cumsum"),
                       ("argmax.py:argmax", "argmax")):
        gpuemu.fuzz(load(f"{corpus / target}"), op=op, iterations=3, dtypes=["fp16"], seed=1, save=False,
                    check_determinism=False)
    assert aot.cache_stats()["allocated"] - before >= 20 and len(calls) >= 20
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "lowered"))
    monkeypatch.setattr(aot, "ALLOCATION_ONLY", False)
    aot._compiled.clear()
    for kernel, args, kwargs, target, name, got in calls:
        want = real(kernel, args, kwargs, target, target_name=name, limits_only=True)
        assert got.error is None and want.error is None, (got.error, want.error)
        assert {k: got.metadata.get(k) for k in ("shared", "num_warps", "tmem_size")} == \
            {k: want.metadata.get(k) for k in ("shared", "num_warps", "tmem_size")}, (name, got.kernel)
    assert any(c[5].metadata["shared"] > 0 for c in calls)
    aot._compiled.clear()


def test_a_refusal_caps_the_sizes_of_its_own_element_width_only():
    # shared memory grows with the width of what a kernel tiles: an fp32 refusal at D = 64 leaves fp16/bf16 at D = 64
    from gpuemu.envelope import DtypeEnvelopes

    env = DtypeEnvelopes()
    env.launched_at("fp32", {"D": 32})
    env.refused_at("fp32", {"D": 64}, "k needs 180,480 B shared memory on sm_80, limit 166,912", {"D": 1})
    assert env.caps_for("fp32") == {"D": 63} and env.caps_for("fp16") == {} and env.caps_for("bf16") == {}
    assert env.to_dict()["text"].startswith("launches on sm_80 for D <= 63")
    env.refused_at("bf16", {"D": 256}, "k needs 300,000 B shared memory on sm_80, limit 166,912", {"D": 1})
    assert env.caps_for("fp16") == {"D": 255}
    assert env.to_dict()["text"].startswith("fp32: launches on sm_80 for D <= 63") and "fp16/bf16: " in env.to_dict()["text"]
    # a refusal that is not about shared memory (threads per block) holds for every dtype
    env.refused_at("fp16", {"N": 4096}, "k needs 2,048 threads per block on sm_90, limit 1,024", {"N": 1})
    assert env.caps_for("fp32")["N"] == env.caps_for("bf16")["N"] < 4096


def test_a_refusal_caps_the_dim_its_grown_block_is_named_after_when_several_round_to_it():
    # a whole-K matmul refused at BLOCK_K = 1024: M = 728 and N = 591 also round up to 1024, but only K sizes the tile
    from types import SimpleNamespace

    from gpuemu.envelope import Envelope

    env = Envelope()
    env.launched_at({"M": 4, "N": 128, "K": 129}, [SimpleNamespace(constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 256})])
    env.refused_at({"M": 728, "N": 591, "K": 1024}, "k needs 524,288 B shared memory on sm_90, limit 232,448",
                   {"M": 1, "N": 1, "K": 1}, [SimpleNamespace(constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 1024})])
    assert env.caps == {"K": 512}
    assert env.describe().startswith("launches on sm_90 for K <= 512 (")
    # a block named after none of them: every dim that rounds to it is capped (halved)
    other = Envelope()
    other.refused_at({"M": 728, "K": 1024}, "k needs 524,288 B shared memory on sm_90, limit 232,448", {},
                     [SimpleNamespace(constexprs={"TILE": 1024})])
    assert other.caps == {"M": 364, "K": 512}


@triton.jit
def _tile_softmax_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    c = tl.arange(0, BLOCK_N)
    m = (r[:, None] < M) & (c[None, :] < N)
    x = tl.load(x_ptr + r[:, None] * N + c[None, :], mask=m, other=float("-inf")).to(tl.float32)
    e = tl.where(m, tl.exp(x - tl.max(x, axis=1)[:, None]), 0.0)
    tl.store(y_ptr + r[:, None] * N + c[None, :], (e / tl.sum(e, axis=1)[:, None]).to(y_ptr.dtype.element_ty), mask=m)


def tile_softmax(x):  # 64 rows x next_power_of_2(N) per program: past N = 16,384 a block of 2^21 elements
    N = x.shape[-1]
    x2 = x.reshape(-1, N).contiguous()
    y = torch.empty_like(x2)
    _tile_softmax_kernel[(triton.cdiv(x2.shape[0], 64),)](x2, y, x2.shape[0], N, BLOCK_M=64,
                                                           BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape)


def test_a_block_past_tritons_largest_is_a_refusal_not_the_kernels_error():
    # Triton's compiler refuses a block of more than 2^20 elements, loudly, on a GPU as on the CPU runtime
    import gpuemu
    from gpuemu.resources import LaunchRefused
    from gpuemu.runners import run_launcher

    run = run_launcher(tile_softmax, [torch.randn(2, 20000)], {})
    assert isinstance(run.error, LaunchRefused) and not run.internal
    assert run.error.message == "_tile_softmax_kernel needs 2,097,152 elements in one block on Triton, limit 1,048,576"
    assert "refused by Triton's compiler, on any target" in run.error.detail
    assert run_launcher(tile_softmax, [torch.randn(2, 300)], {}).error is None
    r = gpuemu.fuzz(tile_softmax, op="softmax", iterations=30, seed=1, save=False)
    assert r.ok and "elements in one block on Triton" in r.summary(), r.report()
