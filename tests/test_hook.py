"""The hook's install, settings, sampling, Triton launch checks, @shadow, replay and survival rules."""

import errno
import logging
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

import gpuemu.hook as hook
from gpuemu.errors import InvalidArgument, RulePackError, UnknownOp
from gpuemu.hook.bindings import parse_bindings
from gpuemu.hook.sampling import BUDGET, Budget, Sampler, Site, shape_bucket
from gpuemu.oracle import Oracle
from gpuemu.hook.settings import resolve_settings
from gpuemu.store import Store

hook.uninstall()  # importing installed it from the environment: tests install explicitly
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------------------------------ kernels


@triton.jit
def _rms_ok(x_ptr, w_ptr, y_ptr, N, eps, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * stride + offs, x * rstd * tl.load(w_ptr + offs, mask=m, other=0.0), mask=m)


@triton.jit
def _rms_bug(x_ptr, w_ptr, y_ptr, N, eps, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / BLOCK_N + eps)  # BUG: padded block, not N
    tl.store(y_ptr + row * stride + offs, x * rstd * tl.load(w_ptr + offs, mask=m, other=0.0), mask=m)


@triton.jit
def _rms_scribbles(x_ptr, w_ptr, y_ptr, N, eps, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * stride + offs, x * rstd * tl.load(w_ptr + offs, mask=m, other=0.0), mask=m)
    tl.store(x_ptr + row * stride + offs, x * 0.5, mask=m)  # mutates its input


@triton.jit
def _rowsum_bug(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, N - BLOCK + 1, BLOCK):  # BUG: drops the tail when N % BLOCK != 0
        offs = s + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + offs)
    tl.store(y_ptr + row, tl.sum(acc, 0))


@triton.jit
def _rowsum_ok(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, N, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + offs, mask=offs < N, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, 0))


def rms(kernel, x, w, eps=1e-6, callable_grid=False):
    y = torch.empty_like(x)
    m, n = x.shape
    grid = (lambda meta: (m,)) if callable_grid else (m,)
    kernel[grid](x, w, y, n, eps, x.stride(0), BLOCK_N=triton.next_power_of_2(n))
    return y


def rowsum(kernel, x, block=16, callable_grid=True):
    y = torch.empty(x.shape[0])
    grid = (lambda meta: (x.shape[0],)) if callable_grid else (x.shape[0],)
    kernel[grid](x, y, x.shape[1], BLOCK=block)
    return y


BINDINGS = {name: "rmsnorm" for name in ("_rms_ok", "_rms_bug", "_rms_scribbles")}


@pytest.fixture
def hooked(tmp_path):
    def make(**kw):
        kw.setdefault("mode", "shadow")
        kw.setdefault("sample_rate", 1.0)
        kw.setdefault("budget", 1.0)
        kw.setdefault("store", tmp_path / "store")
        kw.setdefault("seed", 0)
        rt = hook.install(**kw)
        for k, op in BINDINGS.items():
            hook.bind(k, op)
        return rt

    yield make
    hook.uninstall()
    hook._extra_bindings.clear()


def _x(m=4, n=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, n, generator=g), torch.randn(n, generator=g)


# ------------------------------------------------------------------------------------------ install and settings


def test_import_installs_once_from_the_environment(tmp_path):
    code = ("import gpuemu.hook, gpuemu.hook as h2, importlib; import gpuemu.runners.launches as L; "
            "rt = gpuemu.hook.current(); s = rt.settings; "
            "import torch._dynamo.backends.registry as r; "
            "print(s.mode, s.sample_rate, s.budget, s.store.name, sum(1 for i in L._interceptors "
            "if type(i).__name__ == 'TritonShadow'), 'gpuemu' in r._COMPILER_FNS)")
    env = dict(os.environ, GPUEMU_MODE="strict", GPUEMU_SAMPLE_RATE="0.25", GPUEMU_BUDGET="0.1",
               GPUEMU_STORE=str(tmp_path / "envstore"), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["strict", "0.25", "0.1", "envstore", "1", "True"]


def test_autoinstall_with_a_bad_setting_logs_and_does_not_raise(monkeypatch, caplog):
    monkeypatch.setenv("GPUEMU_MODE", "sahdow")
    with caplog.at_level(logging.ERROR, logger="gpuemu.hook"):
        hook._autoinstall()
    assert not hook.is_installed()
    assert "GPUEMU_MODE" in caplog.text and "sahdow" in caplog.text
    with pytest.raises(RulePackError, match="environment: GPUEMU_MODE"):
        hook.install()


def test_mode_off_installs_nothing_and_install_is_idempotent(tmp_path):
    from gpuemu.runners import launches

    assert hook.install(mode="off", store=tmp_path) is None and not hook.is_installed()
    hook.install(mode="shadow", store=tmp_path)
    hook.install(mode="shadow", store=tmp_path)
    try:
        assert sum(type(i).__name__ == "TritonShadow" for i in launches._interceptors) == 1
    finally:
        hook.uninstall()
    assert not any(type(i).__name__ == "TritonShadow" for i in launches._interceptors)


def test_installed_context_restores_the_previous_state(tmp_path):
    with hook.installed(store=tmp_path, sample_rate=0.5) as rt:
        assert hook.current() is rt and rt.settings.sample_rate == 0.5
    assert not hook.is_installed()


def test_settings_precedence_argument_env_project_rulepack(tmp_path):
    (tmp_path / "gpuemu.yaml").write_text("schema_version: 1\nhook: {sample_rate: 0.5, budget: 0.2}\n")
    s = resolve_settings(env={}, cwd=tmp_path)
    assert (s.mode, s.sample_rate, s.budget) == ("shadow", 0.5, 0.2)  # mode from rulepacks/hook.yaml
    s = resolve_settings(env={"GPUEMU_SAMPLE_RATE": "0.3"}, cwd=tmp_path)
    assert s.sample_rate == 0.3 and s.budget == 0.2
    s = resolve_settings(sample_rate=0.7, env={"GPUEMU_SAMPLE_RATE": "0.3"}, cwd=tmp_path)
    assert s.sample_rate == 0.7 and s.sources["sample_rate"] == "argument"


@pytest.mark.parametrize("kw, match", [({"mode": "loud"}, "mode='loud'"), ({"sample_rate": 1.5}, "probability"),
                                       ({"budget": 0.0}, "fraction of wall time")])
def test_bad_arguments_name_the_setting(kw, match, tmp_path):
    with pytest.raises(InvalidArgument, match=match):
        resolve_settings(env={}, cwd=tmp_path, **kw)


def test_bindings_are_validated():
    assert parse_bindings({"k": "rmsnorm"})["k"].op == "rmsnorm"
    with pytest.raises(RulePackError, match="bindings.k.op: 'rmsnrom' is not a known op"):
        parse_bindings({"k": "rmsnrom"}, source="x.yaml")
    with pytest.raises(RulePackError, match="bindings.k.outputs: unknown key"):
        parse_bindings({"k": {"op": "rmsnorm", "outputs": "y"}})
    b = parse_bindings({"k": {"op": "rmsnorm", "inputs": {"x": "X"}, "output": "Y"}})["k"]
    r = b.resolve(["X", "W", "Y", "N", "eps"])
    assert (r.inputs["x"], r.inputs["weight"], r.output, r.kwargs) == ("X", "W", "Y", {"eps": "eps"})
    with pytest.raises(RulePackError, match="no output parameter"):
        parse_bindings({"k": "rmsnorm"})["k"].resolve(["x_ptr", "w_ptr", "dst"])


# ------------------------------------------------------------------------------------------ sampling


def test_first_call_of_each_key_then_the_rate():
    s = Sampler(0.0, Budget(1.0), seed=1)
    site = Site("k")
    a, b = torch.zeros(4, 8), torch.zeros(4, 9)
    assert s.decide(site, a)[0] is True
    assert s.decide(site, a)[0] is False
    assert s.decide(site, torch.zeros(3, 7))[0] is False  # same bucket 4x8
    assert s.decide(site, b)[0] is True and s.decide(site, b.half())[0] is True
    assert shape_bucket((8, 257, 64)) == "8x512x64" and shape_bucket(()) == "scalar"


def test_sampling_rate_is_respected():
    s = Sampler(0.1, Budget(1.0), seed=3)
    gaps = [s.gap() for _ in range(4000)]
    rate = len(gaps) / sum(gaps)
    assert 0.09 < rate < 0.11
    assert Sampler(1.0, Budget(1.0)).gap() == 1


def test_budget_caps_shadow_time_and_defers_first_calls():
    now = [0.0]
    bud = Budget(0.1, clock=lambda: now[0], window=10.0)
    assert bud.allows()
    bud.charge(1.0)  # the initial allowance: 0.1 * 10 s
    assert not bud.allows()
    now[0] = 11.0
    assert bud.allows()
    s = Sampler(1.0, bud, seed=0)
    bud.charge(5.0)
    site = Site("k")
    sample, key, reason = s.decide(site, torch.zeros(2))
    assert sample is False and reason == BUDGET  # over budget: not checked, and the reason is given...
    assert key not in site.seen  # ...and the key stays new: it is tried again on a later call
    now[0] = 100.0
    assert s.decide(site, torch.zeros(2))[0] is True


def test_the_allowance_is_shared_fairly_between_sources():
    now = [0.0]
    bud = Budget(0.1, clock=lambda: now[0], window=10.0)  # allowance 1 s
    s = Sampler(0.0, bud, seed=0)
    fwd, bwd, kern = Site("g fwd", "graph forward"), Site("g bwd", "graph backward"), Site("k", "triton kernel")
    assert s.decide(fwd, torch.zeros(2))[0] is True
    bud.charge(1.5, "graph forward")  # the first forward check took one and a half times the allowance
    assert s.decide(fwd, torch.zeros(9))[2] == BUDGET  # the forward source used its share and more
    assert s.decide(bwd, torch.zeros(2))[0] is True  # a site's first check: under twice the allowance
    bud.charge(0.4, "graph backward")
    assert s.decide(kern, torch.zeros(2))[0] is True
    bud.charge(0.2, "triton kernel")  # 2.1 s spent: first checks of sites no longer get extra room
    assert s.decide(Site("k2", "triton kernel"), torch.zeros(2))[0] is True  # 0.2 s < 1 s / 3 sources
    assert s.decide(bwd, torch.zeros(9))[2] == BUDGET  # 0.4 s > 1 s / 3
    assert s.decide(kern, torch.zeros(9))[0] is True  # 0.2 s < 1 s / 3
    bud.charge(0.2, "triton kernel")
    assert s.decide(kern, torch.zeros(99))[2] == BUDGET
    assert s.decide(Site("g2", "graph forward"), torch.zeros(2))[2] == BUDGET  # forward over its share
    forced = s.decide(kern, torch.zeros(2), force=True)  # a random sample of a seen key: the budget itself
    assert forced[0] is False and forced[2] == BUDGET
    now[0] = 45.0  # wall time caught up: 0.1 * 45 s > 2.3 s spent
    assert s.decide(fwd, torch.zeros(9))[0] is True


def test_a_large_output_is_judged_on_its_device_by_its_worst_elements():
    from gpuemu.judge import SKETCH_K, SKETCH_MIN, judge_pair, rms_scale

    tols = resolve_settings(mode="shadow").tolerances
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(3, SKETCH_MIN, generator=g)
    ok = judge_pair(ref.clone(), ref, tolerances=tols, what="t", scale=rms_scale)
    assert ok.status == "pass" and ok.numel == ref.numel() and f"the {SKETCH_K} of" in ok.detail
    bad = ref.clone()
    bad[2, -3:] += 0.5  # a tail: three elements of 196,608
    v = judge_pair(bad, ref, tolerances=tols, what="t", scale=rms_scale)
    assert v.status == "fail" and v.index[0] == 2 and v.index[1] >= SKETCH_MIN - 3
    assert v.mismatched == 3 and "3 of 196608 are over it" in v.detail


# ------------------------------------------------------------------------------------------ Triton launches


def test_bound_kernel_divergence_is_caught_stored_and_replayed(hooked, caplog):
    rt = hooked()
    x, w = _x()
    x0, w0 = x.clone(), w.clone()
    with caplog.at_level(logging.WARNING, logger="gpuemu.hook"):
        y_ok = rms(_rms_ok, x, w)
        y_bug = rms(_rms_bug, x, w)
    assert rt.stats.checks == 2 and rt.stats.passed == 1 and rt.stats.divergences == 1
    assert torch.equal(x, x0) and torch.equal(w, w0)  # user tensors untouched
    hook.uninstall()
    assert torch.equal(rms(_rms_bug, x, w), y_bug) and torch.equal(rms(_rms_ok, x, w), y_ok)  # results unchanged
    d = rt.divergences[0]
    assert d.line.startswith(f"FAIL seed={d.seed} dtype=fp32 shape=[4,48] max abs err")
    assert "kernel _rms_bug vs rmsnorm fp64 reference" in d.line and f"replay: gpuemu reproduce {d.seed}" in caplog.text
    record, tensors = Store(rt.settings.store).fetch(d.seed)
    assert hook.is_hook_record(record) and record["source"] == "triton"
    replay = hook.replay_record(record, tensors)
    assert replay.same and replay.rerun.status == "fail" and "launched on cpu" in replay.how
    assert replay.recorded.max_abs_err == d.verdict.max_abs_err


def test_unbound_kernel_is_checked_metamorphically_with_a_callable_grid(hooked):
    rt = hooked()
    x = torch.randn(3, 50)
    rowsum(_rowsum_ok, x)
    rowsum(_rowsum_bug, x)
    assert [d.name for d in rt.divergences] == ["_rowsum_bug"]
    assert "changes with BLOCK=32 (was 16)" in rt.divergences[0].line
    record, tensors = Store(rt.settings.store).fetch(rt.divergences[0].seed)
    assert hook.replay_record(record, tensors).same
    rowsum(_rowsum_bug, torch.randn(3, 70), callable_grid=False)  # tuple grid: not sound to re-launch
    assert rt.stats.skipped == 1 and any("tuple grid" in r for r in rt.stats.skip_reasons)


def test_unsampled_calls_take_the_fast_path_and_new_shapes_are_checked(hooked):
    rt = hooked(sample_rate=0.0)
    x, w = _x()
    for _ in range(3):
        rms(_rms_ok, x, w)
    assert rt.stats.checks == 1
    rms(_rms_ok, *_x(m=2, n=100))
    assert rt.stats.checks == 2


def test_disarmed_launches_run_tritons_own_code(hooked):
    """Between samples no gpuemu code runs: JITFunction.run is Triton's own and the interceptor is out."""
    from gpuemu.runners import launches

    cls = type(_rms_ok)
    rt = hooked(sample_rate=0.0)
    rt.arming.stop_schedule()  # no timer tick in the middle of this test: it arms by hand below
    rt.arming.quiet_calls = rt.arming.window = 4
    x, w = _x()
    assert rt.arming.armed and hook._triton_shadow in launches._interceptors  # armed at install
    for _ in range(6):
        rms(_rms_ok, x, w)
    assert rt.stats.checks == 1  # the first call of the key; then 4 quiet calls closed the window
    assert not rt.arming.armed and hook._triton_shadow not in launches._interceptors
    assert not hasattr(cls.run, "__gpuemu_wrapped__")  # Triton's own run, no wrapper
    y = rms(_rms_ok, torch.zeros(3, 100), w[:1].expand(100).contiguous())
    assert rt.stats.checks == 1 and y.shape == (3, 100)  # disarmed: a new shape is not seen...
    rt.arming.arm("schedule", sample=True)  # ...until the next window, which checks it
    assert hasattr(cls.run, "__gpuemu_wrapped__")
    rms(_rms_ok, torch.randn(3, 100), torch.randn(100))
    assert rt.stats.checks == 2 and rt.stats.arms["schedule"] == 1


def test_a_scheduled_tick_takes_one_random_sample_of_a_seen_key(hooked):
    rt = hooked(sample_rate=0.001)
    rt.arming.stop_schedule()
    x, w = _x()
    rms(_rms_ok, x, w)
    rms(_rms_ok, x, w)
    assert rt.stats.checks == 1
    rt.arming.arm("schedule", sample=True)
    rms(_rms_ok, x, w)
    rms(_rms_ok, x, w)
    assert rt.stats.checks == 2  # the call after the tick, and only that one


def test_a_new_key_over_budget_is_counted_under_its_reason(hooked):
    rt = hooked(budget=1e-9)
    rt.budget.charge(1.0, "triton kernel")  # this source used its share (and the whole budget)
    x, w = _x()
    rms(_rms_ok, x, w)
    assert rt.stats.checks == 0 and rt.stats.skipped == 1
    assert list(rt.stats.skip_reasons) == [BUDGET]


def test_compile_listener_arms_the_hook(hooked):
    from gpuemu.hook import lint_on_compile

    rt = hooked(sample_rate=0.0)
    rt.arming.stop_schedule()
    rt.arming.disarm()
    assert not rt.arming.armed
    if lint_on_compile._installed is None:
        pytest.skip("this Triton has no compilation listener")
    lint_on_compile._installed(src=None, metadata=None, metadata_group={}, times=None, cache_hit=True)
    assert rt.arming.armed and rt.stats.arms.get("triton compile") == 1


def test_checks_are_counted_by_source(hooked):
    rt = hooked()
    x, w = _x()
    rms(_rms_ok, x, w)
    rms_launcher_ok(x, w)
    assert rt.stats.checks_by_source == {"triton kernel": 1, "@shadow": 1}
    assert hook.stats()["checks_by_source"] == {"triton kernel": 1, "@shadow": 1}


def test_shadow_mode_survives_a_check_that_raises(hooked, monkeypatch, caplog):
    rt = hooked()
    import gpuemu.hook.triton as ht

    def boom(*a, **k):
        raise RuntimeError("shadow exploded")

    monkeypatch.setattr(Oracle, "compare_on_device", boom)
    x, w = _x()
    with caplog.at_level(logging.WARNING, logger="gpuemu.hook"):
        y1 = rms(_rms_ok, x, w)
        y2 = rms(_rms_ok, *_x(m=2, n=100))
    assert rt.stats.internal_errors == 2 and rt.stats.divergences == 0
    assert caplog.text.count("shadow exploded") == 1  # logged once
    hook.uninstall()
    assert torch.equal(y1, rms(_rms_ok, x, w)) and y2.shape == (2, 100)


def test_strict_mode_raises_after_the_real_result(hooked, monkeypatch):
    hooked(mode="strict")
    x, w = _x()
    with pytest.raises(hook.ShadowDivergence, match="kernel _rms_bug"):
        rms(_rms_bug, x, w)
    import gpuemu.hook.triton as ht

    monkeypatch.setattr(Oracle, "compare_on_device", lambda *a, **k: 1 / 0)
    with pytest.raises(hook.ShadowError, match="ZeroDivisionError"):
        rms(_rms_ok, x, w)


def test_shadow_mode_survives_a_kernel_that_mutates_its_inputs(hooked):
    x, w = _x()
    x_plain = x.clone()
    y_plain = rms(_rms_scribbles, x_plain, w)  # without the hook
    rt = hooked()
    y = rms(_rms_scribbles, x, w)
    assert torch.equal(y, y_plain) and torch.equal(x, x_plain)  # the host sees exactly what it would
    (d,) = rt.divergences
    assert d.verdict.kind == "mutation" and "modified its input 'x'" in d.line
    record, tensors = Store(rt.settings.store).fetch(d.seed)
    assert torch.equal(tensors["arg.x_ptr"], _x()[0])  # the snapshot holds the inputs before the launch


def test_shadow_mode_survives_a_full_disk(hooked, monkeypatch):
    import gpuemu.store as store_mod

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod, "_atomic_write", full)
    rt = hooked()
    x, w = _x()
    y = rms(_rms_bug, x, w)
    (d,) = rt.divergences
    assert d.record is None and "No space left on device" in d.store_error and rt.stats.store_errors == 1
    hook.uninstall()
    assert torch.equal(y, rms(_rms_bug, x, w))


def test_snapshot_and_store_caps(hooked, tmp_path):
    rt = hooked(max_snapshot_bytes=64, snapshots_per_key=1)
    x, w = _x()
    rms(_rms_bug, x, w)
    record, tensors = Store(rt.settings.store).fetch(rt.divergences[0].seed)
    assert "exceed max_snapshot_bytes=64" in record["snapshot_omitted"] and list(tensors) == ["snapshot_omitted"]
    rms(_rms_bug, x, w)  # same key: counted, not stored again
    assert rt.stats.divergences == 2 and rt.stats.snapshots == 1
    rt2 = hooked(store=tmp_path / "tiny", max_store_bytes=100)
    rms(_rms_bug, x, w)
    assert rt2.divergences[0].record is None and "size cap" in rt2.divergences[0].store_error


def test_budget_limits_checks(hooked):
    rt = hooked(budget=1e-9)
    x, w = _x()
    rt.budget.charge(1.0, "triton kernel")
    rms(_rms_bug, x, w)
    assert rt.stats.checks == 0


# ------------------------------------------------------------------------------------------ @shadow launchers


@hook.shadow(op="rmsnorm")
def rms_launcher(x, weight, eps=1e-6):
    return rms(_rms_bug, x, weight, eps)


@hook.shadow(op="rmsnorm")
def rms_launcher_ok(x, weight, eps=1e-6):
    return rms(_rms_ok, x, weight, eps)


def test_shadow_decorator_checks_the_launcher_not_its_kernels_again(hooked):
    x, w = _x()
    plain = rms_launcher(x, w)  # not installed: the launcher alone
    rt = hooked()
    out = rms_launcher(x, w)
    rms_launcher_ok(x, w)
    assert torch.equal(out, plain)
    assert rt.stats.checks == 2 and [d.source for d in rt.divergences] == ["shadow"]  # kernels not re-checked
    assert "launcher rms_launcher vs rmsnorm fp64 reference" in rt.divergences[0].line
    record, tensors = Store(rt.settings.store).fetch(rt.divergences[0].seed)
    assert hook.replay_record(record, tensors).same
    with pytest.raises(UnknownOp, match="did you mean 'rmsnorm'"):
        hook.shadow(op="rmsnrom")


def test_inductor_wrapper_logic_with_a_stand_in_autotuner(hooked):
    """CachingAutotuner needs a GPU; the wrapper's logic runs here against an object of the same shape."""
    from gpuemu.hook import inductor

    class Launcher:
        def __init__(self, scale, config):
            self.scale, self.config = scale, config

        def __call__(self, x, y, n, *, stream):
            y.copy_(x.sum(-1) * self.scale)

    class Tuner:
        configs = ["XBLOCK=16", "XBLOCK=32"]
        inductor_meta = {"kernel_name": "triton_red_fused_sum_0"}

        def __init__(self, alt_scale):
            self.launchers = [Launcher(1.0, "XBLOCK=16")]
            self.alt_scale = alt_scale

        def _precompile_config(self, cfg):
            tuner = self

            class Result:
                def make_launcher(self):
                    return Launcher(tuner.alt_scale, cfg)

            return Result()

    def original(tuner, *args, stream, **kw):
        return tuner.launchers[0](*args, stream=stream)

    rt = hooked()
    x = torch.randn(4, 8)
    for alt_scale in (1.0, 1.5):
        y = torch.empty(4)
        inductor._shadowed(rt, original, Tuner(alt_scale), (x, y, 8), {"stream": 0})
        assert torch.allclose(y, x.sum(-1))
    assert rt.stats.checks == 2 and rt.stats.passed == 1
    (d,) = rt.divergences
    assert d.source == "inductor" and "differs when re-run with config XBLOCK=32" in d.line
