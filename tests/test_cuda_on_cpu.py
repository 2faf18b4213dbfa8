"""Host code written for a GPU on a machine without one (gpuemu.runners.cuda_on_cpu): its CUDA requests answered
on the CPU inside gpuemu's runs, and everything as it was outside them."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton

from gpuemu.runners.cuda_on_cpu import cuda_on_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is real here: the scope changes nothing")


def _raises_outside() -> bool:
    try:
        torch.cuda.synchronize()
    except (AssertionError, RuntimeError):
        return True
    return False


def test_cuda_requests_are_answered_on_the_cpu_inside_the_scope_and_raise_again_outside():
    assert _raises_outside()
    with cuda_on_cpu():
        x = torch.randn(4, 8, device="cuda")
        assert x.device.type == "cpu" and x.is_cuda
        assert x.cuda() is x and x.to("cuda").device.type == "cpu"
        assert x.to(device=torch.device("cuda", 0), dtype=torch.float16).dtype == torch.float16
        assert torch.empty_like(x, device="cuda:0").device.type == "cpu"
        assert torch.zeros(2, device=torch.cuda.current_device()).device.type == "cpu" and x.to(0).device.type == "cpu"
        assert x.to(torch.float16).dtype == torch.float16 and x.to(x).device.type == "cpu"
        assert torch.nn.Linear(8, 2).cuda().weight.device.type == "cpu"
        torch.cuda.synchronize()
        with torch.cuda.device(x.device), torch.cuda.stream(torch.cuda.Stream()):
            torch.cuda.current_stream().synchronize()
        assert torch.cuda.get_device_properties(0).multi_processor_count == 132
        assert torch.cuda.get_device_capability() == (9, 0)
        assert triton.runtime.driver.active.get_active_torch_device() == torch.device("cpu")
        with cuda_on_cpu():  # nested: the outer scope holds
            assert torch.zeros(1, device="cuda").is_cuda
        assert torch.zeros(1, device="cuda").is_cuda
        assert not torch.cuda.is_available()  # (gpuemu's own choice of device reads it)
    assert _raises_outside() and not torch.zeros(1).is_cuda
    with pytest.raises(RuntimeError):
        triton.runtime.driver.active  # noqa: B018 - the stand-in is gone with the scope
    with cuda_on_cpu(active=False):
        assert _raises_outside()


GPU_STYLE = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    DEVICE = triton.runtime.driver.active.get_active_torch_device()  # (Triton's tutorials: at import)
    NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count


    @triton.jit
    def _scale_rows(x_ptr, y_ptr, rows, cols, stride, scale, BLOCK: tl.constexpr, TAIL: tl.constexpr):
        for row in range(tl.program_id(0), rows, tl.num_programs(0)):  # persistent: one program per SM
            offs = tl.arange(0, BLOCK)
            m = offs < cols if TAIL else offs < BLOCK
            x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0)
            tl.store(y_ptr + row * cols + offs, x * scale, mask=m)


    def _launch(x, scale, tail):
        assert x.is_cuda, "x must be on the GPU"
        x = x.contiguous()
        with torch.cuda.device(x.device):
            y = torch.empty(x.shape, device="cuda", dtype=x.dtype)
            grid = (min(NUM_SMS, x.shape[0]),)
            _scale_rows[grid](x, y, x.shape[0], x.shape[1], x.stride(0), scale,
                              BLOCK=triton.next_power_of_2(x.shape[1]), TAIL=tail)
            torch.cuda.synchronize()
        return y


    def scale_rows(x, scale):
        return _launch(x, scale, True)


    def scale_rows_no_tail(x, scale):  # the example's rows are a power of two: allclose passes
        return _launch(x, scale, False)


    def reference(x, scale):
        return x * scale


    def get_inputs():
        return [torch.randn(64, 256, device=DEVICE), 0.5]
''')


def test_a_kernel_written_for_a_gpu_is_fuzzed_on_the_cpu_as_written(tmp_path):
    """Triton's tutorial idioms and CUDA literals everywhere (the module's DEVICE from the driver, device="cuda",
    assert x.is_cuda, torch.cuda.device, synchronize, the SM count for a persistent grid, get_inputs on DEVICE):
    with exactly the CLI's --reference/--inputs, the correct launcher passes and the tail bug is caught."""
    (tmp_path / "k.py").write_text(GPU_STYLE)
    env = dict(os.environ, PYTHONPATH=ROOT)

    def fuzz(name):
        return subprocess.run([sys.executable, "-m", "gpuemu", "fuzz", f"k.py:{name}", "--reference", "k.py:reference",
                               "--inputs", "k.py:get_inputs", "-n", "30", "--seed", "1", "--store", "s"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    ok, bad = fuzz("scale_rows"), fuzz("scale_rows_no_tail")
    assert ok.returncode == 0 and "Passed: 30/30" in ok.stdout + ok.stderr, ok.stdout + ok.stderr
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1 and "out-of-bounds read of 'x_ptr'" in out and "Traceback" not in out, out
