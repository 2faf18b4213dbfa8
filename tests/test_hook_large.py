"""Hook checks of calls too large to copy (gpuemu/hook/large.py): Inductor kernels re-run on a bounded capture
with sampled rows compared, and graphs' matrix-product outputs checked by Freivalds' algorithm."""

import pytest
import torch

import gpuemu.hook as hook

hook.uninstall()


@pytest.fixture
def small_cap(tmp_path):
    def make(cap):
        return hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0,
                            max_capture_bytes=cap)

    yield make
    hook.uninstall()


class _Launcher:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, x, y, n, *, stream):  # a row reduction: reads in_ptr0, writes out_ptr0
        y.copy_(x.sum(-1) * self.scale)


def _tuner(alt_scale):
    class Fn:
        arg_names = ["in_ptr0", "out_ptr0", "xnumel"]

    class Tuner:
        configs = ["XBLOCK=16", "XBLOCK=32"]
        inductor_meta = {"kernel_name": "triton_red_fused_log_softmax_0"}
        fn = Fn()

        def __init__(self):
            self.launchers = [_Launcher(1.0)]

        def _precompile_config(self, cfg):
            class Result:
                def make_launcher(self):
                    return _Launcher(alt_scale)

            return Result()

    return Tuner()


def _original(tuner, *args, stream, **kw):
    return tuner.launchers[0](*args, stream=stream)


def test_an_inductor_kernel_too_large_to_copy_is_rerun_on_its_outputs_only(small_cap):
    from gpuemu.hook import inductor

    rt = small_cap(64 << 10)  # the logits (1 MiB) may not be copied; the per-row output (4 KiB) may
    x = torch.randn(1024, 256)
    for alt in (1.0, 1.5):
        y = torch.empty(1024)
        inductor._shadowed(rt, _original, _tuner(alt), (x, y, 1024), {"stream": 0})
        assert torch.equal(y, x.sum(-1))  # (the host's result untouched)
    st = rt.stats
    assert st.checks_by_source.get("inductor kernel (sampled rows)") == 2 and st.passed == 1
    assert "arguments exceed max_capture_bytes" not in st.skip_reasons
    (d,) = rt.divergences
    assert "sampled rows of a call too large to copy" in d.line


def test_outputs_over_the_cap_are_still_a_skip_reason(small_cap):
    from gpuemu.hook import inductor

    rt = small_cap(1 << 10)
    x = torch.randn(1024, 256)
    inductor._shadowed(rt, _original, _tuner(1.0), (x, torch.empty(1024), 1024), {"stream": 0})
    assert rt.stats.skip_reasons.get("outputs exceed max_capture_bytes") == 1


class _Head(torch.nn.Module):
    def __init__(self, vocab=512, hidden=64):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.head = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, h):
        return self.head(self.norm(h))


def _scaled(gm, example_inputs):
    def run(*args):
        out = gm(*args)
        return type(out)(o * 1.001 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)

    return run


def test_a_graph_too_large_to_copy_gets_freivalds_on_its_matmul_outputs(small_cap):
    """An LM head in training: the forward graph's logits are mm(normed h, w^T), both at hand after the call
    (h is saved for the backward): checked in O(n^2) without copying the graph's inputs."""
    rt = small_cap(32 << 10)
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _Head()
    compiled = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})
    h = torch.randn(4, 128, 64, requires_grad=True)
    out = compiled(h)
    out.float().logsumexp(-1).mean().backward()
    assert torch.allclose(out, model(h), atol=1e-5)
    st = rt.stats
    assert st.checks_by_source.get("graph (Freivalds)", 0) == 2, st.to_dict()  # forward, and backward's t(mm) grads
    assert not st.skip_reasons and not rt.divergences


def test_freivalds_finds_a_scaled_product(small_cap):
    rt = small_cap(32 << 10)
    torch._dynamo.reset()
    model = _Head()
    compiled = torch.compile(model, backend="gpuemu", options={"backend": _scaled})
    with torch.no_grad():
        compiled(torch.randn(4, 128, 64))
    assert rt.stats.checks_by_source.get("graph (Freivalds)") == 1
    (d,) = rt.divergences
    assert "Freivalds" in d.line and "fails Freivalds' check" in d.line
