"""The ``gpuemu`` torch.compile backend: fp64 graph shadow, casts, random graphs, replay, bit-for-bit training."""

import pytest
import torch

import gpuemu.hook as hook
from gpuemu.backends import gpuemu_backend, parse_options
from gpuemu.backends.fp64 import Fp64Mode
from gpuemu.backends.graph_io import graph_from_json, graph_to_json, resolve
from gpuemu.errors import InvalidArgument, SnapshotError
from gpuemu.store import Store

hook.uninstall()


class MLP(torch.nn.Module):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.a = torch.nn.Linear(12, 24)
        self.b = torch.nn.Linear(24, 5)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, x):
        return self.b(self.drop(torch.nn.functional.gelu(self.a(x))))


def _scaled(gm, example_inputs):
    """A 'compiler' with a planted bug: every floating output 0.1% too large."""
    def run(*args):
        out = gm(*args)
        return type(out)(o * 1.001 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)

    return run


def _half_matmul(gm, example_inputs):
    """A 'compiler' that computes an fp32 matmul in fp16."""
    def run(x, w):
        return ((x.half() @ w.half()).float(),)

    return run


@pytest.fixture
def hooked(tmp_path):
    rt = hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0)
    yield rt
    hook.uninstall()


def _train(backend, options, *, steps=3, dropout=0.0):
    torch.manual_seed(0)
    model = MLP(dropout)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, options=options)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x, t = torch.randn(8, 12, generator=g), torch.randint(0, 5, (8,), generator=g)
        loss = torch.nn.functional.cross_entropy(compiled(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_backend_is_registered_by_name_and_by_entry_point():
    from importlib.metadata import entry_points

    import torch._dynamo.backends.registry as registry

    assert "gpuemu" in registry._COMPILER_FNS or "gpuemu" in registry._BACKENDS
    assert "gpuemu" in torch._dynamo.list_backends()
    eps = [e for e in entry_points(group="torch_dynamo_backends") if e.name == "gpuemu"]
    assert eps and eps[0].value == "gpuemu.backends:gpuemu_backend"
    from gpuemu.backends import register

    assert register() is False  # never registered twice (Dynamo asserts on duplicates)


def test_options_are_validated():
    assert parse_options(None) == ("inductor", None)
    assert parse_options({"backend": "aot_eager", "options": {"a": 1}}) == ("aot_eager", {"a": 1})
    with pytest.raises(InvalidArgument, match="unknown option 'backnd'"):
        parse_options({"backnd": "eager"})
    with pytest.raises(InvalidArgument, match="cannot wrap itself"):
        parse_options({"backend": "gpuemu"})
    with pytest.raises(InvalidArgument, match="unexpected argument"):
        gpuemu_backend(None, [], fullgraph=True)


def test_training_losses_are_bit_for_bit_and_the_shadow_passes(hooked):
    plain = _train("aot_eager", None)
    shadowed = _train("gpuemu", {"backend": "aot_eager"})
    assert [x.hex() for x in shadowed] == [x.hex() for x in plain]
    assert hooked.stats.checks >= 1 and hooked.stats.divergences == 0 and hooked.stats.internal_errors == 0


def test_a_wrong_compiler_is_caught_stored_and_replayed(hooked):
    torch._dynamo.reset()
    model = MLP()
    x = torch.randn(8, 12)
    out = torch.compile(model, backend="gpuemu", options={"backend": _scaled})(x)
    assert torch.equal(out, model(x) * 1.001)  # the host gets the compiled result, unchanged
    (d,) = hooked.divergences
    assert d.source == "torch.compile" and "vs fp64 eager (inner backend _scaled)" in d.line
    record, tensors = Store(hooked.settings.store).fetch(d.seed)
    replay = hook.replay_record(record, tensors)
    assert replay.same and replay.recorded.status == "fail"
    gm = graph_from_json(record["hook"]["graph"], {k: v for k, v in tensors.items() if k.startswith(("const.", "attr."))})
    ins = [tensors[f"in.{i}"] for i in range(len([k for k in tensors if k.startswith("in.")]))]
    assert torch.allclose(gm(*ins)[0], model(x), atol=1e-6)  # the stored graph is the model's graph


def test_explicit_casts_run_in_fp64_and_a_precision_drop_is_caught(hooked):
    def casts(x, w):
        return (x.half() @ w.half()).float().sum(-1), x.to(torch.float16).float() @ w

    torch._dynamo.reset()
    torch.compile(casts, backend="gpuemu", options={"backend": "aot_eager"})(torch.randn(4, 64), torch.randn(64, 8))
    assert hooked.stats.passed == 1 and hooked.stats.divergences == 0

    def mm(x, w):
        return x @ w

    torch._dynamo.reset()
    torch.compile(mm, backend="gpuemu", options={"backend": _half_matmul})(torch.randn(16, 256), torch.randn(256, 8))
    assert hooked.stats.divergences == 1


def test_fp64_mode_redirects_every_floating_dtype():
    x = torch.randn(3, dtype=torch.float64)
    with Fp64Mode():
        outs = [x.half(), x.to(torch.float16), x.float(), x.bfloat16(), torch.zeros(2), torch.ones(2, dtype=torch.float16),
                torch.tensor([1.5]), x.type(torch.float16)]
        ints = torch.arange(3)
    assert all(o.dtype == torch.float64 for o in outs) and ints.dtype == torch.int64
    assert torch.equal(outs[0], x)  # no rounding through fp16 happened


def test_graphs_with_random_ops_are_skipped_and_rng_is_untouched(hooked):
    plain = _train("aot_eager", None, dropout=0.5, steps=2)
    shadowed = _train("gpuemu", {"backend": "aot_eager"}, dropout=0.5, steps=2)
    assert [x.hex() for x in shadowed] == [x.hex() for x in plain]
    assert hooked.stats.skipped >= 1 and any("random numbers" in r for r in hooked.stats.skip_reasons)


def test_graph_snapshots_refuse_anything_but_ops():
    for bad in ("builtins.eval", "builtins.open", "torch.load", "torch.hub.load", "os.system", "torch.__class__"):
        with pytest.raises(SnapshotError):
            resolve(bad)
    assert resolve("torch.nn.functional.linear") is torch.nn.functional.linear
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    doc, consts = graph_to_json(gm)
    doc["nodes"][1]["target"] = "builtins.exec"
    with pytest.raises(SnapshotError, match="builtins.exec"):
        graph_from_json(doc, consts)


def test_uninstalled_backend_passes_through(tmp_path):
    hook.uninstall()
    torch._dynamo.reset()
    model = MLP()
    x = torch.randn(2, 12)
    out = torch.compile(model, backend="gpuemu", options={"backend": _scaled})(x)
    assert torch.equal(out, model(x) * 1.001) and hook.current() is None
