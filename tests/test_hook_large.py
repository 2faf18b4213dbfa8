"""Hook checks of calls too large to copy (gpuemu/hook/large.py, gpuemu/backends/row_local.py): Inductor kernels
re-run on a bounded capture (a transient scratch for outputs over the cap) with sampled rows compared, graphs'
matrix-product outputs checked by Freivalds' algorithm, and graphs' row-local outputs on sampled rows."""

import gc
import weakref

import pytest
import torch
import torch.nn.functional as F

import gpuemu.hook as hook
from gpuemu.hook import pipeline

hook.uninstall()


@pytest.fixture
def small_cap(tmp_path):
    def make(cap, **kw):
        return hook.install(mode="shadow", sample_rate=1.0, budget=1.0, store=tmp_path / "store", seed=0,
                            max_capture_bytes=cap, **kw)

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


class _Recording(_Launcher):
    """Remembers the output buffer of each launch (weakly: the test checks the scratch is freed)."""

    seen: list = []

    def __call__(self, x, y, n, *, stream):
        _Recording.seen.append(weakref.ref(y))
        super().__call__(x, y, n, stream=stream)


def test_outputs_over_the_cap_get_a_transient_scratch(small_cap, monkeypatch):
    """A kernel whose written output (4 KiB) alone exceeds max_capture_bytes (1 KiB) is re-run into a poisoned
    scratch within max_scratch_bytes, freed when the check ends; a wrong re-run is caught."""
    from gpuemu.hook import inductor

    rt = small_cap(1 << 10, max_scratch_bytes=8 << 10)
    monkeypatch.setattr(__name__ + "._Launcher", _Recording)
    x = torch.randn(1024, 256)
    for alt in (1.0, 1.5):
        y = torch.empty(1024)
        inductor._shadowed(rt, _original, _tuner(alt), (x, y, 1024), {"stream": 0})
        assert torch.equal(y, x.sum(-1))
    st = rt.stats
    assert st.checks_by_source.get("inductor kernel (sampled rows)") == 2 and st.passed == 1, st.to_dict()
    assert not st.skip_reasons
    (d,) = rt.divergences
    assert "sampled rows of a call too large to copy" in d.line
    gc.collect()
    scratch = [r for r in _Recording.seen if r() is not y]  # (the real launches wrote y; the re-runs a scratch)
    assert scratch and all(r() is None for r in scratch)


def test_outputs_over_the_scratch_limit_are_a_skip_reason(small_cap):
    from gpuemu.hook import inductor

    rt = small_cap(1 << 10, max_scratch_bytes=2 << 10)
    x = torch.randn(1024, 256)
    inductor._shadowed(rt, _original, _tuner(1.5), (x, torch.empty(1024), 1024), {"stream": 0})
    assert rt.stats.skip_reasons == {"outputs exceed max_capture_bytes and max_scratch_bytes": 1}
    assert not rt.divergences


def test_the_scratch_takes_at_most_a_quarter_of_free_device_memory(small_cap, monkeypatch):
    from gpuemu.hook import large

    rt = small_cap(1 << 10)
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev: (3000, 10_000))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda dev: 5000)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev: 5000)
    assert "a quarter of free device memory" in large.scratch_refused(rt, 1000, cuda, what="outputs")
    assert large.scratch_refused(rt, 1000, torch.device("cpu"), what="outputs") is None
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev: (4000, 10_000))
    assert large.scratch_refused(rt, 1000, cuda, what="outputs") is None
    # what PyTorch's allocator holds unused counts as free: the scratch is served from its cache first
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev: (3000, 10_000))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev: 4000)
    assert large.scratch_refused(rt, 1000, cuda, what="outputs") is None


def test_max_scratch_bytes_is_validated():
    from gpuemu.errors import InvalidArgument
    from gpuemu.hook.settings import resolve_settings

    assert resolve_settings(mode="shadow").max_scratch_bytes == 4 << 30
    with pytest.raises(InvalidArgument, match="max_scratch_bytes"):
        resolve_settings(mode="shadow", max_scratch_bytes=-1)


def _graph_keeper():
    """(the graphs an aot_autograd backend was handed, as (kind, GraphModule), and a compiler factory that keeps them
    and runs each as it is)."""
    from functorch.compile import make_boxed_func

    seen: list = []

    def keep(kind):
        def compile_(gm, example_inputs):
            seen.append((kind, gm))
            return make_boxed_func(gm.forward)

        return compile_

    return seen, keep


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
    # the forward: Freivalds on the logits, sampled rows on the layer norm's per-row outputs saved for the backward;
    # the backward: Freivalds on its t(mm) gradients, and every token in chunks for the weights' gradients (sums
    # over the tokens) and the input's gradient
    assert st.checks_by_source == {"graph (Freivalds + sampled rows)": 1,
                                   "graph (Freivalds + every row, in chunks)": 1}, st.to_dict()
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


# ---------------------------------------------------------------------- graphs: sampled rows
class _LMLoss(torch.nn.Module):
    """An LM head and its cross-entropy loss in two graphs (a graph break between), as GPT-2's training step
    has them: the loss graph's input is the [tokens, vocab] logits, its backward's output their gradient."""

    def __init__(self, vocab=512, hidden=64):
        super().__init__()
        self.head = _Head(vocab, hidden)

    def forward(self, h, targets):
        logits = self.head(h)
        torch._dynamo.graph_break()
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1), ignore_index=-100)


def test_the_loss_graphs_of_an_lm_head_are_checked_on_sampled_rows(small_cap):
    """Forward (log-softmax, saved for the backward) and backward (the logits' gradient) of the loss are
    row-local; the loss itself, a mean over every row, is not compared, and stats() says so."""
    rt = small_cap(32 << 10)
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _LMLoss()
    compiled = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})
    h = torch.randn(4, 128, 64, requires_grad=True)
    t = torch.randint(0, 512, (4, 128))
    t[0, :5] = -100
    loss = compiled(h, t)
    loss.backward()
    h2 = h.detach().clone().requires_grad_(True)
    ref = model(h2, t)
    ref.backward()
    assert torch.allclose(loss, ref) and torch.allclose(h.grad, h2.grad, atol=1e-6)
    st = rt.stats
    assert st.checks_by_source.get("graph (sampled rows)") == 2, st.to_dict()  # the loss's forward and backward
    assert st.checks_by_source.get("graph (Freivalds + sampled rows)") == 1, st.to_dict()  # the head's forward
    assert st.checks_by_source.get("graph (Freivalds + every row, in chunks)") == 1, st.to_dict()  # its backward
    assert not st.skip_reasons and not rt.divergences and not st.internal_errors, st.to_dict()
    # (the loss and its total weight; the head's weight [512, 64] has as many rows as the tokens, 4 x 128, and is
    # taken for row-indexed: its transpose's product and the products in the backward that use it are not compared)
    assert st.outputs_unchecked == {"aten.nll_loss_forward.default reduces over rows": 2,
                                    "aten.mm.default of a [C, rows] matrix is not known to keep it": 1,
                                    "aten.mm.default mixes rows": 3}, st.outputs_unchecked


def _last_row_off(fx_g, example_inputs):
    """An aot_eager compiler with a planted bug: the last row (always sampled) of every 2-D+ float output 1% off."""
    def run(args):
        out = fx_g(*args)
        bad = []
        for o in out:
            if isinstance(o, torch.Tensor) and o.is_floating_point() and o.dim() >= 2:
                o = o.clone()
                o.view(-1, o.shape[-1])[-1] *= 1.01
            bad.append(o)
        return type(out)(bad)

    run._boxed_call = True
    return run


def _loss(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def test_a_wrong_row_of_a_row_local_output_is_a_divergence(small_cap, monkeypatch):
    import torch._dynamo.backends.debugging as debugging

    rt = small_cap(32 << 10)
    monkeypatch.setattr(debugging, "boxed_nop", _last_row_off)
    torch._dynamo.reset()
    compiled = torch.compile(_loss, backend="gpuemu", options={"backend": "aot_eager"})
    logits = torch.randn(4, 256, 512, requires_grad=True)
    compiled(logits, torch.randint(0, 512, (4, 256))).backward()
    st = rt.stats
    assert st.checks_by_source.get("graph (sampled rows)") == 2 and st.divergences == 2, st.to_dict()
    d = rt.divergences[0]
    assert "sampled rows" in d.line and "too large to copy" in d.line


def test_a_graph_not_provably_row_local_stays_a_skip(small_cap):
    """A cumulative sum along the rows, and an op the analysis does not know (flip), are not row-local:
    no output is compared and the skip reason says why."""
    rt = small_cap(32 << 10)
    torch._dynamo.reset()
    for fn, why in ((lambda x: x.cumsum(0) * 2, "aten.cumsum.default works along a row dim"),
                    (lambda x: x.flip(-1) * 2, "aten.flip.default is not known to be row-local")):
        with torch.no_grad():
            out = torch.compile(fn, backend="gpuemu", options={"backend": "aot_eager"})(torch.randn(256, 512))
        assert out.shape == (256, 512)
        assert any(why in r and r.startswith("graph inputs exceed max_capture_bytes") for r in rt.stats.skip_reasons), \
            rt.stats.skip_reasons
    assert "graph (sampled rows)" not in rt.stats.checks_by_source and rt.stats.passed == 0, rt.stats.to_dict()


def test_inductor_decomposed_cross_entropy_is_row_local():
    """The loss graphs as Inductor sees them (decomposed: amax, exp, sum, gather, scatter, full, where):
    the restricted graph on sampled rows gives exactly those rows of the full graph."""
    from functorch.compile import min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    from gpuemu.backends.row_local import plan_rows, take_rows

    seen, keep = _graph_keeper()
    be = aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw"), decompositions=select_decomp_table(),
                      partition_fn=min_cut_rematerialization_partition)
    torch._dynamo.reset()
    logits = torch.randn(2, 96, 50, requires_grad=True)
    t = torch.randint(0, 50, (2, 96))
    t[1, 3] = -100
    torch.compile(lambda x, y: F.cross_entropy(x.float().view(-1, 50), y.view(-1)), backend=be)(logits, t).backward()
    assert [k for k, _ in seen] == ["fw", "bw"]
    g = torch.Generator().manual_seed(0)
    for kind, gm in seen:
        plan = plan_rows(gm, cap_bytes=1 << 30, rows=8)
        assert not isinstance(plan, str), plan
        assert plan.n_rows == 192 and plan.m == 8 and plan.outputs
        args = [torch.randn(p.meta["val"].shape, generator=g) if p.meta["val"].is_floating_point() else
                torch.randint(0, 50, p.meta["val"].shape, generator=g)
                for p in gm.graph.nodes if p.op == "placeholder"]
        full = gm(*args)
        idx = [0, 3, 7, 64, 99, 100, 150, 191]
        rows = plan.gm(*[take_rows(a, k, idx) for a, k in zip(args, plan.inputs)])
        for (i, k), r in zip(plan.outputs.items(), rows):
            torch.testing.assert_close(r, take_rows(full[i], k, idx), rtol=0, atol=0)


_B, _T, _V = 3, 40, 24


def _row_local_ops(x, t, w, b):
    """x [B, T, V] logits-like, t [B, T] indices, w [V, 8] whole, b [1, 1, V] whole, broadcast over rows."""
    y = (x + b).float() * 0.5
    s = y.log_softmax(-1) - y.amax(-1, keepdim=True) + y.logsumexp(-1, keepdim=True) + y.var(-1, keepdim=True)
    g = s.gather(-1, t.unsqueeze(-1).clamp(0, _V - 1))  # [B, T, 1]
    flat = s.reshape(-1, _V)  # [B*T, V]
    z = flat.index_select(1, torch.arange(0, _V, 2)) @ w[::2]  # [B*T, 8]
    sc = torch.zeros_like(flat).scatter(1, t.reshape(-1, 1).clamp(0, _V - 1), 1.0)
    u = s.unsqueeze(-1).permute(0, 1, 3, 2).transpose(2, 3).squeeze(-1)[..., 1:5]  # (non-row dims moved)
    u = u + s.unsqueeze(1).mul(2).reshape(_B, _T, _V)[..., :4]  # (a size-1 dim among the row dims)
    e = g.expand(_B, _T, 5) + torch.full((_B, _T, 5), 2.0)
    return (g, z, sc, u, e, s.mean())  # (the last, a mean over the rows, is not compared)


def test_the_row_rules_are_identities_of_indexing():
    """Each rule (broadcast of a whole operand, reductions, softmax, gather/scatter/index_select, views that
    keep the rows, moves of other dims, expand, constants, mm by a whole matrix): the restricted graph on the
    sampled rows gives exactly those rows of the full graph."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from gpuemu.backends.row_local import plan_rows, take_rows

    g = torch.Generator().manual_seed(0)
    args = (torch.randn(_B, _T, _V, generator=g), torch.randint(-2, _V + 2, (_B, _T), generator=g),
            torch.randn(_V, 8, generator=g), torch.randn(1, 1, _V, generator=g))
    gm = make_fx(_row_local_ops)(*args)
    plan = plan_rows(gm, cap_bytes=1 << 30, rows=7)
    assert not isinstance(plan, str), plan
    assert sorted(plan.outputs) == [0, 1, 2, 3, 4] and list(plan.unchecked.values()) == [
        "aten.mean.default reduces over rows"]
    full = gm(*args)
    idx = [0, 1, 39, 40, 77, 100, 119]
    rows = plan.gm(*[take_rows(a, k, idx) for a, k in zip(args, plan.inputs)])
    for (i, k), r in zip(plan.outputs.items(), rows):
        torch.testing.assert_close(r, take_rows(full[i], k, idx), rtol=0, atol=0)


@pytest.mark.parametrize("fn", [lambda x: x.cumsum(0), lambda x: x.t() * 1, lambda x: x.amax(0),
                                lambda x: x.reshape(-1).cumsum(0), lambda x: x.roll(1, -1),
                                lambda x: x + x.sum(0, keepdim=True)])
def test_what_moves_or_mixes_rows_is_not_row_local(fn):
    from torch.fx.experimental.proxy_tensor import make_fx

    from gpuemu.backends.row_local import plan_rows

    gm = make_fx(fn)(torch.randn(200, 16))
    why = plan_rows(gm, cap_bytes=1 << 30)
    assert isinstance(why, str) and why.startswith("no output is row-local"), why


def _shifted_loss_grad(logits, labels, amax, lse, count, grad):
    """The logits' gradient of a causal LM's mean cross-entropy, as Inductor's backward graph of GPT-2's loss (Hugging
    Face's) computes it: from the labels padded by one ([B, T+1]) and shifted to [B, T] inside the graph, so the
    labels input holds no rows of the logits' [B*T] until it is sliced; the saved row max and log-sum-exp."""
    t = labels[:, 1:].reshape(-1, 1)
    keep = t != -100
    onehot = torch.where(torch.where(keep, t, 0) == torch.arange(logits.shape[-1]).view(1, -1), -1.0, 0.0)
    g = onehot * torch.where(keep, grad / count, 0.0)
    p = (logits.view(-1, logits.shape[-1]) - amax - lse).exp()
    return (g - p * g.sum(1, keepdim=True)).view(logits.shape)


def _loss_grad_args(b, t, v, g):
    logits = torch.randn(b, t, v, generator=g)
    labels = torch.randint(0, v, (b, t + 1), generator=g)
    labels[0, 3] = -100
    flat = logits.view(-1, v)
    amax = flat.amax(1, keepdim=True)
    return [logits, labels, amax, (flat - amax).exp().sum(1, keepdim=True).log(), torch.tensor(b * t - 1.0),
            torch.tensor(1.0)]


def _masked_attention(q, k, v):
    """Attention with its causal mask built as Hugging Face's sdpa_mask does: from aranges, [1, 1, T, T], expanded
    to the batch ([B, 1, T, T]): a value computed whole that spans the batch dim."""
    b, t = q.shape[0], q.shape[2]
    keep = torch.arange(t).view(1, 1, 1, t) <= torch.arange(t).view(1, 1, t, 1)
    mask = torch.where(keep.expand(b, -1, t, t), 0.0, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("case", ["arange", "shifted_loss", "mask"])
def test_whole_values_that_hold_rows_have_their_rows_taken(case):
    """A value computed whole whose leading dims hold the rows (x + arange(N)[:, None]; labels padded then sliced
    to [B, T]; a causal mask expanded to [B, 1, T, T]) meets row-indexed values: the plan computes it whole and takes
    the sampled rows from it by index (RowPlan.takes_rows: one more input, the rows), and the restricted graph gives
    exactly those rows of the full graph; without that, no output of these graphs is row-local."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from gpuemu.backends import row_local
    from gpuemu.backends.row_local import plan_rows, take_rows

    g = torch.Generator().manual_seed(0)
    if case == "arange":
        args = [torch.randn(200, 16, generator=g)]
        graphs = [make_fx(lambda x: x + torch.arange(x.shape[0]).unsqueeze(-1))(*args)]
        n = 200
    elif case == "mask":
        args = [torch.randn(5, 2, 12, 8, generator=g) for _ in range(3)]
        graphs = [make_fx(_masked_attention)(*args)]
        n = 5
    else:
        args = _loss_grad_args(3, 40, 24, g)
        graphs = [make_fx(_shifted_loss_grad)(*args)]
        n = 120
    for gm in graphs:
        names = [p for p in gm.graph.nodes if p.op == "placeholder"]
        plan = plan_rows(gm, cap_bytes=1 << 30, rows=7)
        assert not isinstance(plan, str), plan
        assert plan.takes_rows and plan.n_rows == n and plan.outputs, plan
        idx = sorted({0, 1, n // 2, n - 2, n - 1, 3, n // 3})[:7]
        full = gm(*args)
        full = full if isinstance(full, (list, tuple)) else [full]
        rows = plan.gm(*[take_rows(a, k, idx, n) for a, k in zip(args, plan.inputs)], torch.tensor(idx))
        for (i, k), r in zip(plan.outputs.items(), rows):
            torch.testing.assert_close(r, take_rows(full[i], k, idx, n), rtol=0, atol=0)
        i, k = next((i, k) for i, k in plan.outputs.items() if k)  # (other rows are not those rows: it can fail)
        assert not torch.equal(rows[list(plan.outputs).index(i)], take_rows(full[i], k, idx[::-1], n))
        # (the same graph without promotion: nothing to compare)
        for n_, blocks in row_local._candidates(names):
            why = row_local._plan_for(gm, names, n_, 7, 1 << 30, blocks)
            assert isinstance(why, str) and why.startswith("no output is row-local"), why


def test_a_wrong_row_of_a_shifted_label_loss_gradient_is_a_divergence(small_cap, monkeypatch):
    """The hook on the shifted-label loss's gradient (its labels whole until sliced), too large to copy: checked on
    sampled rows, and a compiler that gets the last row wrong is caught there."""
    import torch._dynamo.backends.debugging as debugging

    args = _loss_grad_args(4, 128, 96, torch.Generator().manual_seed(0))
    for bug in (False, True):
        rt = small_cap(32 << 10)
        if bug:
            monkeypatch.setattr(debugging, "boxed_nop", _last_row_off)
        torch._dynamo.reset()
        with torch.no_grad():
            out = torch.compile(_shifted_loss_grad, backend="gpuemu", options={"backend": "aot_eager"})(*args)
        st = rt.stats
        assert st.checks_by_source == {"graph (sampled rows)": 1} and not st.internal_errors, st.to_dict()
        assert st.divergences == bug and not st.skip_reasons, st.to_dict()
        if bug:
            assert "sampled rows" in rt.divergences[0].line
        else:
            torch.testing.assert_close(out, _shifted_loss_grad(*args))
        hook.uninstall()


def _logits_and_log_probs(h, w):
    logits = h @ w.t()
    return logits, logits.float().log_softmax(-1)


def _output_off(which):
    """An aot_eager compiler with a planted bug in forward output ``which`` only (its last row 1% off)."""
    def compiler(fx_g, example_inputs):
        def run(args):
            out = list(fx_g(*args))
            o = out[which].clone()
            o.view(-1, o.shape[-1])[-1] *= 1.01
            out[which] = o
            return out

        run._boxed_call = True
        return run

    return compiler


@pytest.mark.parametrize("bug", [None, 0, 1])
def test_freivalds_and_sampled_rows_share_a_graph(small_cap, monkeypatch, bug):
    """Logits (a matrix product of the inputs: Freivalds) and their log-softmax (row-local: sampled rows) of one
    inference graph over the cap: one check of both; a wrong row in either output is a divergence."""
    import torch._dynamo.backends.debugging as debugging

    rt = small_cap(32 << 10)
    if bug is not None:
        monkeypatch.setattr(debugging, "boxed_nop", _output_off(bug))
    torch._dynamo.reset()
    compiled = torch.compile(_logits_and_log_probs, backend="gpuemu", options={"backend": "aot_eager"})
    with torch.no_grad():
        compiled(torch.randn(512, 64), torch.randn(256, 64))
    st = rt.stats
    assert st.checks_by_source == {"graph (Freivalds + sampled rows)": 1}, st.to_dict()
    assert st.divergences == (0 if bug is None else 1) and st.passed == (1 if bug is None else 0), st.to_dict()
    if bug is not None:
        assert ("Freivalds" if bug == 0 else "sampled rows") in rt.divergences[0].line


# ---------------------------------------------------------------------- graphs: sampled sequences
class _Block(torch.nn.Module):
    def __init__(self, d, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3) for z in (q, k, v))
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # (GPT-2's eager attention: bmm, a causal mask, softmax over the keys of one sequence)
            att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            a = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class _GPT(torch.nn.Module):
    """GPT-2 in small: token and position embeddings, causal self-attention over [B, H, T, D], MLP, LM head and
    its cross-entropy. Attention mixes the tokens of a sequence, never two sequences: the row unit is B."""

    def __init__(self, vocab=96, d=32, heads=4, layers=2, ctx=64, sdpa=False, mix=None):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.ModuleList(_Block(d, heads, sdpa) for _ in range(layers))
        self.ln, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab, bias=False)
        self.mix = mix

    def forward(self, ids, targets=None):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            x = blk(x)
        if self.mix == "mean":  # every sequence sees the batch's mean: sequences are no longer independent
            x = x - x.mean(0, keepdim=True)
        elif self.mix == "permute":  # the batch dim moved: [T, B, d] mixed along B by a softmax
            x = x.permute(1, 0, 2).softmax(1).permute(1, 0, 2)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def _gpt_step(model, compiled, ids):
    """A training step's loss and gradients, and an eval's logits, compiled and eager (same parameters)."""
    loss = compiled(ids, ids)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(ids, ids)
    ref.backward()
    with torch.no_grad():
        logits, ref_logits = compiled(ids), model(ids)
    assert torch.allclose(loss, ref, atol=1e-5) and torch.allclose(logits, ref_logits, atol=1e-5)
    assert all(torch.allclose(g, p.grad, atol=1e-5) for g, p in zip(grads, model.parameters()))


@pytest.mark.parametrize("sdpa", [False, True])
def test_a_whole_gpt_is_checked_by_sampled_sequences(small_cap, sdpa):
    """The train forward (its saved activations) and the eval forward (the logits) of a whole GPT-2, past the
    cap: row-local in the batch dim, checked on sampled sequences; results unchanged, no divergence."""
    rt = small_cap(16 << 10)
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _GPT(sdpa=sdpa)
    compiled = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})
    _gpt_step(model, compiled, torch.randint(0, 96, (6, 24)))
    st = rt.stats
    # train forward: its saved activations on sampled sequences (and the head's logits by Freivalds); eval forward:
    # the logits on sampled sequences; the backward returns the weights' gradients only, sums over every token:
    # Freivalds' check of those that are products of tensors at hand, and every sequence in chunks for all of them
    assert st.checks_by_source == {"graph (Freivalds + sampled rows)": 1, "graph (sampled rows)": 1,
                                   "graph (Freivalds + every row, in chunks)": 1}, st.to_dict()
    assert st.divergences == 0 and st.passed == 3 and not st.internal_errors and not st.skip_reasons, st.to_dict()
    unchecked = {"aten.nll_loss_forward.default reduces over rows": 2}
    if not sdpa:  # (the backward of bmm attention takes the saved probabilities [B*H, T, T] as an input: one
        # sequence is H of its leading indices, which no input proposes; its plan is by token, where the gradients
        # of the attention's weights transpose the tokens' dim: those are not compared)
        unchecked["aten.transpose.int moves a row dim"] = 18
    assert st.outputs_unchecked == unchecked, st.to_dict()


def _last_sequence_off(fx_g, example_inputs):
    """An aot_eager compiler with a planted bug: in the inference graph's logits [B, T, V], one token of the last
    sequence (always sampled) is 1% off."""
    def run(args):
        out = list(fx_g(*args))
        if out and out[0].dim() == 3 and len(out) == 1:
            o = out[0].clone()
            o[-1, 5] *= 1.01
            out[0] = o
        return out

    run._boxed_call = True
    return run


def test_a_wrong_sequence_of_a_whole_gpt_is_a_divergence(small_cap, monkeypatch):
    import torch._dynamo.backends.debugging as debugging

    rt = small_cap(16 << 10)
    monkeypatch.setattr(debugging, "boxed_nop", _last_sequence_off)
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _GPT()
    compiled = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})
    with torch.no_grad():
        compiled(torch.randint(0, 96, (6, 24)))
    st = rt.stats
    assert st.checks_by_source == {"graph (sampled rows)": 1} and st.divergences == 1, st.to_dict()
    d = rt.divergences[0]
    assert "sampled rows" in d.line and "too large to copy" in d.line, d.line


def _weight_grads_off(fx_g, example_inputs):
    """An aot_eager compiler with a planted bug: every output of 32 elements (in the backward: the layer norms' and
    the biases' gradients of width d = 32, sums over every token) 1% off."""
    def run(args):
        out = list(fx_g(*args))
        for j, o in enumerate(out):
            if isinstance(o, torch.Tensor) and o.is_floating_point() and o.dim() == 1 and o.numel() == 32:
                out[j] = o * 1.01
        return out

    run._boxed_call = True
    return run


@pytest.mark.parametrize("overwritten", [False, True])
def test_a_wrong_weight_gradient_of_a_whole_gpt_is_a_divergence(small_cap, monkeypatch, overwritten):
    """The backward's gradients are sums over every token: evaluated in chunks of sequences and added up, a
    gradient 1% off is a divergence (Freivalds' check covers products only, not a layer norm's weight). Also when
    the compiled backward may overwrite its inputs (Inductor's donated buffers; here every input is declared so)
    and they do not fit max_capture_bytes: the sums are then evaluated before the call."""
    import torch._dynamo.backends.debugging as debugging

    import gpuemu.backends as backends

    rt = small_cap(16 << 10)
    monkeypatch.setattr(debugging, "boxed_nop", _weight_grads_off)
    if overwritten:  # (as Inductor's donation would: every backward input said to be overwritten)
        monkeypatch.setattr(backends, "_donated", lambda kind, inner: frozenset(range(1000))
                            if kind == "graph.backward" else frozenset())
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _GPT(sdpa=True)
    compiled = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})
    compiled(*(torch.randint(0, 96, (6, 24)),) * 2).backward()
    st = rt.stats
    label = "graph (every row, in chunks)" if overwritten else "graph (Freivalds + every row, in chunks)"
    assert st.checks_by_source.get(label) == 1 and st.divergences == 1, st.to_dict()
    d = rt.divergences[0]
    assert "every row of 6 (a sum over the rows" in d.line and "too large to copy" in d.line, d.line


@pytest.mark.parametrize("mix, why", [("mean", "aten.mean.dim reduces over rows"),
                                      ("permute", "aten.permute.default moves a row dim")])
def test_a_gpt_that_mixes_sequences_stays_a_skip(small_cap, mix, why):
    rt = small_cap(16 << 10)
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _GPT(mix=mix)
    compiled = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})
    ids = torch.randint(0, 96, (6, 24))
    with torch.no_grad():
        assert torch.allclose(compiled(ids), model(ids), atol=1e-5)
    st = rt.stats
    assert "graph (sampled rows)" not in st.checks_by_source and st.passed == 0, st.to_dict()
    assert any(r.startswith("graph inputs exceed max_capture_bytes") and why in r for r in st.skip_reasons), \
        st.skip_reasons


@pytest.mark.parametrize("sdpa", [False, True])
def test_the_restricted_gpt_graph_gives_those_sequences(sdpa):
    """The row unit of a whole GPT-2's graphs is the sequence: the restricted graph on sampled sequences gives
    those sequences of the full graph (train forward's activations, eval forward's logits)."""
    from torch._dynamo.backends.common import aot_autograd

    from gpuemu.backends.row_local import plan_rows, take_rows

    seen, keep = _graph_keeper()
    be = aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw"), inference_compiler=keep("inf"))
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _GPT(sdpa=sdpa)
    ids = torch.randint(0, 96, (5, 16))
    torch.compile(model, backend=be)(ids, ids).backward()
    with torch.no_grad():
        torch.compile(model, backend=be)(ids)
    assert [k for k, _ in seen] == ["fw", "bw", "inf"]
    for kind, gm in seen:
        plan = plan_rows(gm, cap_bytes=1 << 30, rows=3)
        args = [p.meta["val"] for p in gm.graph.nodes if p.op == "placeholder"]
        g = torch.Generator().manual_seed(1)
        real = [torch.randn(a.shape, generator=g) if a.is_floating_point() else torch.randint(0, 16, a.shape, generator=g)
                if a.dtype != torch.bool else torch.ones(a.shape, dtype=torch.bool).tril() for a in args]
        with torch.no_grad():
            full = gm(*real)
        if kind == "bw":  # (the weights' gradients: sums over every token)
            _check_sums_in_chunks(gm, plan, real, full, sdpa)
            continue
        assert not isinstance(plan, str), plan
        assert plan.n_rows == 5 and plan.m == 3 and len(plan.outputs) >= (1 if kind == "inf" else 20), plan
        idx = [0, 2, 4]
        with torch.no_grad():
            rows = plan.gm(*[take_rows(a, k, idx, 5) for a, k in zip(real, plan.inputs)])
        for (i, k), r in zip(plan.outputs.items(), rows):
            torch.testing.assert_close(r, take_rows(full[i], k, idx, 5))
        # (a wrong sequence is not those rows: the test can fail)
        i, k = next((i, k) for i, k in plan.outputs.items() if k)
        assert not torch.allclose(rows[list(plan.outputs).index(i)], take_rows(full[i], k, [0, 2, 3], 5))


def _check_sums_in_chunks(gm, plan, real, full, sdpa):
    """A backward graph's plan: its outputs that sum over the rows, added up over chunks of rows that divide
    them, give the full graph's (and its row-local outputs, chunk by chunk, those rows)."""
    from gpuemu.backends.row_local import SUM, plan_rows, take_rows

    assert not isinstance(plan, str), plan
    n = plan.n_rows
    sums = [i for i, k in plan.outputs.items() if k is SUM]
    # every weight's gradient (sdpa: the attention's too; with bmm attention the tokens are the rows, and the
    # attention's weights' gradients, which transpose them, are not compared)
    assert plan.m == n and len(sums) == (len(plan.outputs) if sdpa else 11) and sums, plan
    if sdpa:
        assert n == 5 and not plan.unchecked, plan
    caps = [plan.est_bytes * f // 10 for f in range(9, 0, -1)]  # (fewer rows fit: chunks of a divisor of n)
    small = next(p for p in (plan_rows(gm, cap_bytes=c) for c in caps) if not isinstance(p, str) and p.n_rows == n
                 and p.m < n)
    assert n % small.m == 0 and small.est_bytes < plan.est_bytes, small
    acc: dict = {}
    with torch.no_grad():
        for c in range(0, n, small.m):
            idx = list(range(c, c + small.m))
            part = small.gm(*[take_rows(a, k, idx, n) for a, k in zip(real, small.inputs)])
            for (i, k), r in zip(small.outputs.items(), part):
                if k is SUM:
                    acc[i] = acc.get(i, 0) + r.double()
                else:
                    torch.testing.assert_close(r, take_rows(full[i], k, idx, n))
            if c + small.m == n:  # (the sums of all but the last chunk are not the whole's: the test can fail)
                assert not all(torch.allclose((acc[i] - part[j].double()).float(), full[i], atol=1e-4)
                               for j, i in enumerate(small.outputs) if i in acc)
    for i in sums:
        scale = float(full[i].abs().max())  # (random saved activations: large values, fp32's rounding of them)
        torch.testing.assert_close(acc[i].float(), full[i], rtol=1e-4, atol=1e-5 * scale)


def test_fewer_sequences_are_sampled_when_they_exceed_the_scratch_budget():
    """Long sequences: as many as fit max_scratch_bytes are sampled (the plan's bound stays within it), and the
    restricted graph still gives exactly those sequences."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from gpuemu.backends.row_local import plan_rows, take_rows

    x = torch.randn(40, 32, 16)
    gm = make_fx(lambda x: ((x @ x.transpose(-2, -1)).softmax(-1) @ x).reshape(-1, 16))(x)
    full_plan = plan_rows(gm, cap_bytes=1 << 30)
    assert not isinstance(full_plan, str) and (full_plan.n_rows, full_plan.m) == (40, 40), full_plan
    cap = full_plan.est_bytes // 4
    plan = plan_rows(gm, cap_bytes=cap)
    assert not isinstance(plan, str) and plan.n_rows == 40 and 1 <= plan.m < 40 and plan.est_bytes <= cap, plan
    idx = list(range(0, 40, 40 // plan.m + 1))[:plan.m]
    idx += [i for i in range(40) if i not in idx][:plan.m - len(idx)]
    (r,) = plan.gm(take_rows(x, plan.inputs[0], sorted(idx), 40))
    torch.testing.assert_close(r, take_rows(gm(x), plan.outputs[0], sorted(idx), 40), rtol=0, atol=0)
    assert isinstance(plan_rows(gm, cap_bytes=1000), str)  # (not even one sequence fits)


class _SmallInHugeOut(torch.nn.Module):
    """Inputs of a few KB, an intermediate of MBs: a language model's head and softmax over a large vocabulary."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(8, 2000, bias=False)  # (2000 rows: not a multiple of the 1024 tokens)

    def forward(self, h):
        return torch.softmax(self.head(h), dim=-1)


def test_a_graph_whose_rerun_exceeds_the_scratch_is_judged_as_a_large_call(small_cap):
    """Small inputs do not make a small re-run (measured on an H100: GPT-2's forward at 64 x 256 tokens, 1 GB of
    inputs, peaked at 76 GB re-run in fp64, and the host's next call ran out of memory): a graph whose fp64 re-run
    would hold more than max_scratch_bytes is judged as a call too large to copy, within the scratch."""
    from gpuemu.backends.row_local import whole_peak_bytes

    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _SmallInHugeOut()
    h = torch.randn(16, 64, 8)  # (32 KB of inputs with the weight's 64 KB; 1024 x 2000 probabilities, 16 MB in fp64)
    rt = small_cap(1 << 20, max_scratch_bytes=4 << 20)
    with torch.no_grad():
        out = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})(h)
        assert torch.equal(out, model(h))
    st = rt.stats
    assert st.checks_by_source == {"graph (sampled rows)": 1}, st.to_dict()
    assert st.passed == 1 and not st.skip_reasons and not st.internal_errors, st.to_dict()
    hook.uninstall()
    torch._dynamo.reset()
    rt = small_cap(1 << 20)  # (the default scratch, 4 GiB: the whole graph re-run as before)
    with torch.no_grad():
        torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})(h)
    assert rt.stats.checks_by_source == {"graph forward": 1} and rt.stats.passed == 1, rt.stats.to_dict()
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x, w: torch.softmax(x @ w, -1).t())(torch.randn(4, 3), torch.randn(3, 5))
    # fp64 values from node to last use: the inputs (12 + 15) throughout, mm (20) till softmax (20), whose view t
    # (free) keeps it to the end: at most 67 elements at once, in each of the three runs
    assert whole_peak_bytes(gm) == 3 * 8 * 67


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 256), torch.nn.Linear(256, 32)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x))).square().mean()


@pytest.mark.parametrize("cap, copied", [(64 << 10, False), (2 << 20, True)])
def test_inputs_the_compiled_backward_overwrites_are_copied_or_not_read(small_cap, monkeypatch, cap, copied):
    """Inductor reuses the buffers of the saved activations AOTAutograd donates to a backward, so after the call
    they hold other values (seen here: one of them changed by the real backward). A large call's check reads its
    inputs after the call: it copies those it needs before it when they fit max_capture_bytes; otherwise the rows'
    check evaluates before the call, and the matrix products that read them are left unchecked, with why. Before, Freivalds' check read the reused buffer and a
    correct weight gradient diverged (3,180x its bound in a Llama backward on the CPU)."""
    from gpuemu.backends import graph as G

    changed: list = []
    real_check = pipeline.run_check

    def watch(rt, **kw):  # which inputs the real call changed
        cells = dict(zip(kw["judge"].__code__.co_freevars, [c.cell_contents for c in kw["judge"].__closure__]))
        before = [a.clone() if isinstance(a, torch.Tensor) else None for a in cells["args"]]
        out = real_check(rt, **kw)
        changed.append((kw["kind"], {i for i, (a, b) in enumerate(zip(cells["args"], before))
                                     if b is not None and not torch.equal(a, b)}))
        return out

    monkeypatch.setattr(pipeline, "run_check", watch)
    torch.manual_seed(0)
    torch._dynamo.reset()
    model, x = _Mlp(), torch.randn(512, 32)
    rt = small_cap(cap)
    torch.compile(model, backend="gpuemu")(x).backward()
    backward = next(sh for sh in G._live if sh.kind == "graph.backward" and sh.gm is not None and sh._rt is rt)
    touched = dict(changed)["graph.backward"]
    assert touched and touched <= backward.overwritten, (touched, backward.overwritten)
    st = rt.stats
    assert not rt.divergences and not st.internal_errors, st.to_dict()
    unchecked = [why for why in st.outputs_unchecked if "which the compiled call overwrites" in why]
    if copied:  # (the forward's inputs fit the cap: it is re-run whole)
        assert st.checks_by_source == {"graph forward": 1, "graph (Freivalds + every row, in chunks)": 1}, st.to_dict()
        assert st.passed == 2 and not unchecked, st.to_dict()
    else:  # (the sums evaluated before the call; the products that read the activations not checked)
        assert st.checks_by_source == {"graph (Freivalds + sampled rows)": 1, "graph (every row, in chunks)": 1}, \
            st.to_dict()
        assert st.passed == 2 and unchecked and all(w.startswith("a matrix product that reads") for w in unchecked), \
            st.to_dict()


def test_inputs_a_graph_mutates_are_overwritten():
    from torch.fx.experimental.proxy_tensor import make_fx

    from gpuemu.backends.graph import overwritten_inputs

    def step(p, g, state):
        state.mul_(0.9).add_(g)
        return p.add_(state, alpha=-0.1), g * 2

    gm = make_fx(step)(torch.randn(3), torch.randn(3), torch.randn(3))
    assert overwritten_inputs(gm) == {0, 2}
    assert overwritten_inputs(gm, frozenset({1})) == {0, 1, 2}
