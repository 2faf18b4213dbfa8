"""The hook on a real (tiny) model on the CPU: forward and backward graphs, Triton custom-op kernels forward
and backward, planted bugs found and replayed; plus the graph shadow's arming and the import rules."""

import subprocess
import sys

import pytest
import torch

import gpuemu.hook as hook
from bench.hook_real_model import RunConfig, run_one
from gpuemu.cli import main as cli
from gpuemu.store import Store

hook.uninstall()
CHECK_ALL = {"mode": "shadow", "budget": 1.0, "sample_rate": 0.0, "seed": 0}


def _cfg(tmp_path, **kw):
    kw.setdefault("steps", 1)
    kw.setdefault("evals", 1)
    return RunConfig(model="llama-tiny", inner="aot_eager", device="cpu", warmup=0, store=str(tmp_path / "store"), **kw)


@pytest.fixture(autouse=True)
def _clean():
    yield
    hook.uninstall()
    hook._extra_bindings.clear()
    from examples import llama_tiny

    llama_tiny.set_bug(None)


@pytest.mark.slow  # ~18 s of training on the CPU; the hook's sources are tested fast in test_hook*.py
def test_llama_tiny_trains_bit_for_bit_and_every_source_is_checked(tmp_path):
    base = run_one(_cfg(tmp_path, backend="inductor"))  # backend = the inner one (aot_eager), no hook
    hooked = run_one(_cfg(tmp_path, backend="gpuemu", hook_settings=CHECK_ALL))
    assert hooked["losses"] == base["losses"] and hooked["eval_fp"] == base["eval_fp"]
    assert hooked["params_fp"] == base["params_fp"]
    st = hooked["stats"]
    by = st["checks_by_source"]
    assert by.get("graph forward", 0) >= 2 and by.get("graph backward", 0) >= 1  # train fw + eval fw, and bw
    assert by.get("triton kernel", 0) >= 4  # RMSNorm and rotary kernels, forward and backward
    names = {h[1] for h in hooked["history"]}
    assert {"_rmsnorm_fwd", "_rmsnorm_bwd", "_rope_fwd", "_rope_bwd"} <= names
    assert st["divergences"] == 0 and st["internal_errors"] == 0, hooked["errors"]


@pytest.mark.parametrize("bug,kernel,how", [("forward", "_rmsnorm_fwd", "vs rmsnorm fp64 reference"),
                                            ("backward", "_rmsnorm_bwd", "changes with BLOCK_N=128 (was 64)")])
def test_planted_rmsnorm_bug_is_found_on_its_first_check_and_replayed(tmp_path, capsys, bug, kernel, how):
    """One eager training step (the kernels' own checks need no compiled graph around them)."""
    from examples import llama_tiny as L

    rt = hook.install(store=tmp_path / "store", **CHECK_ALL)
    hook.bind("_rmsnorm_fwd", "rmsnorm")
    L.set_bug(bug)
    torch.manual_seed(0)
    cfg = L.LlamaConfig.tiny()
    model = L.LlamaTiny(cfg)
    (ids,) = L.batches(cfg, batch=2, seq=11, steps=1, device="cpu")
    L.loss_fn(model, ids).backward()
    first = next(h for h in rt.history if h[1] == kernel)
    assert first[2] == "divergence"
    d = next(d for d in rt.divergences if d.name == kernel)
    assert how in d.line and d.record
    hook.uninstall()
    rc = cli(["reproduce", d.seed, "--store", str(tmp_path / "store"), "--device", "cpu"])
    assert rc == 1 and "reproduced: same verdict" in capsys.readouterr().err


def test_a_wrong_backward_compiler_is_caught_in_the_backward_graph(tmp_path, monkeypatch):
    from torch._dynamo.backends import debugging

    nop = debugging.boxed_nop

    def wrong_on_backward(gm, inputs):
        run = nop(gm, inputs)
        if not any("tangents" in n.name for n in gm.graph.nodes if n.op == "placeholder"):
            return run

        def scaled(args):
            return [o * 1.5 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in run(args)]

        scaled._boxed_call = True
        return scaled

    monkeypatch.setattr(debugging, "boxed_nop", wrong_on_backward)
    rt = hook.install(store=tmp_path / "store", **CHECK_ALL)
    torch._dynamo.reset()
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4)
    f = torch.compile(lambda x: lin(x).tanh().sum(), backend="gpuemu", options={"backend": "aot_eager"})
    f(torch.randn(3, 8)).backward()
    assert rt.stats.checks_by_source == {"graph forward": 1, "graph backward": 1}
    assert rt.stats.divergences_by_source == {"graph backward": 1}
    line = rt.divergences[0].line
    assert "shadow check of compiled graph " in line and " backward output " in line and "vs fp64 eager" in line


def test_an_inductor_graph_runs_its_own_callable_while_disarmed():
    """The Inductor path swaps OutputCode.current_callable; a stand-in OutputCode shows the swap."""
    from gpuemu.backends.graph import AotGraphShadow, graph_copy

    gm = torch.fx.symbolic_trace(lambda x: x * 2.0)

    class OutputCode:
        def __init__(self):
            self.current_callable = self.run

        def run(self, args):
            (x,) = args
            args.clear()  # boxed calling convention: the callee frees its inputs
            return (x * 2.0,)

        def __call__(self, args):
            return self.current_callable(args)

    rt = hook.install(mode="shadow", sample_rate=0.001, budget=1.0, store="/tmp/unused-gpuemu-store")
    rt.arming.stop_schedule()  # this test arms and disarms by hand
    oc = OutputCode()
    original = oc.current_callable
    sh = AotGraphShadow(oc, graph_copy(gm), kind="graph.forward", inner="inductor", label="g")
    assert sh.swappable and oc.current_callable is not original  # installed armed
    assert oc([torch.ones(3)])[0].tolist() == [2.0, 2.0, 2.0]
    assert rt.stats.checks_by_source == {"graph forward": 1}
    rt.arming.disarm()
    assert oc.current_callable is original  # disarmed: Inductor's own callable, no gpuemu frame
    oc([torch.ones(3)])
    assert rt.stats.checks == 1
    rt.arming.arm("schedule", sample=True)
    assert oc.current_callable is not original
    oc([torch.ones(3)])
    assert rt.stats.checks == 2
    hook.uninstall()
    assert oc.current_callable is original


def test_import_gpuemu_and_reproduce_do_not_install_the_hook(tmp_path):
    code = ("import sys, gpuemu, gpuemu.cli\n"
            "from triton.runtime.jit import JITFunction\n"
            "gpuemu.cli.main(['reproduce', '--list', '--store', sys.argv[1]])\n"
            "assert 'gpuemu.hook' not in sys.modules, 'hook imported'\n"
            "assert not hasattr(JITFunction.run, '__gpuemu_wrapped__'), 'launch wrapper installed'\n"
            "import gpuemu.hook\n"
            "assert gpuemu.hook.is_installed()\n")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "store")], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_ops_have_an_fp64_reference_under_fp64_mode(causal):
    """Flash / memory-efficient / cuDNN attention have no fp64 kernels: Fp64Mode computes them by formula."""
    from gpuemu.backends.fp64 import Fp64Mode

    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64) for _ in range(4))
    qr, kr, vr = (t.clone().requires_grad_(True) for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
    dq, dk, dv = torch.autograd.grad(ref, (qr, kr, vr), do)
    aten = torch.ops.aten
    mode = Fp64Mode()
    with mode:
        out, lse, seed, off = aten._scaled_dot_product_efficient_attention.default(q, k, v, None, True, 0.0, causal)
        g_eff = aten._scaled_dot_product_efficient_attention_backward.default(
            do, q, k, v, torch.empty(0), out, lse, seed, off, 0.0, [True, True, True, False], causal)
        f = aten._scaled_dot_product_flash_attention.default(q, k, v, 0.0, causal)
        g_fl = aten._scaled_dot_product_flash_attention_backward.default(do, q, k, v, f[0], f[1], f[2], f[3], f[4],
                                                                         f[5], 0.0, causal, f[6], f[7])
    torch.testing.assert_close(out, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f[0], ref.detach(), rtol=1e-12, atol=1e-12)
    for got in (g_eff[:3], g_fl):
        for a, b in zip(got, (dq, dk, dv)):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert lse.shape == (2, 3, 32) and id(lse) in mode.aux and id(out) not in mode.aux  # 32-aligned rows, not judged
