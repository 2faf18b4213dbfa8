"""The hook on a CUDA GPU: skipped cleanly without one (bench/hook_h200.py is the full GPU run)."""

import os

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
    reason="needs a CUDA GPU and TRITON_INTERPRET=0")]


@pytest.fixture
def hooked(tmp_path):
    import gpuemu.hook as hook

    rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0)
    yield rt
    hook.uninstall()
    hook._extra_bindings.clear()


def test_bound_kernel_on_the_gpu_is_judged_against_an_fp64_reference_on_the_gpu(hooked):
    import gpuemu.hook as hook
    from bench.hook_h200 import _rmsnorm_gpu_bug, _rmsnorm_gpu_ok, rmsnorm

    hook.bind("_rmsnorm_gpu_bug", "rmsnorm")
    hook.bind("_rmsnorm_gpu_ok", "rmsnorm")
    x, w = torch.randn(16, 1000, device="cuda"), torch.randn(1000, device="cuda")
    x0 = x.clone()
    rmsnorm(_rmsnorm_gpu_ok, x, w)
    y = rmsnorm(_rmsnorm_gpu_bug, x, w)
    assert torch.equal(x, x0) and y.is_cuda
    names = [d.name for d in hooked.divergences]
    assert "_rmsnorm_gpu_bug" in names and hooked.stats.checks == 2


def test_compiled_graph_over_inductor_on_the_gpu_passes_its_shadow(hooked):
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
    x = torch.randn(32, 64, device="cuda")
    out = torch.compile(model, backend="gpuemu")(x)
    assert out.is_cuda and hooked.stats.passed >= 1 and hooked.stats.divergences == 0
