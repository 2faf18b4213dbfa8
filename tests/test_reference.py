"""Kernels judged against their PyTorch reference (gpuemu.schema): schema inference from an example call, the one
judge, fuzzing, replay, the CLI, KernelBench modules, manifests and the pytest marker."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl

import gpuemu
from gpuemu.schema import bind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- a fused kernel and its reference
def add_scale(x, bias, scale):
    return (x + bias) * scale


def example_add_scale():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(8, 64, generator=g), torch.randn(64, generator=g), 0.5]


@triton.jit
def _add_scale_kernel(x_ptr, b_ptr, y_ptr, n, sxr, sxc, sb, sy, scale, BLOCK: tl.constexpr, MASK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n if MASK else cols < BLOCK
    x = tl.load(x_ptr + row * sxr + cols * sxc, mask=m, other=0.0)
    b = tl.load(b_ptr + cols * sb, mask=m, other=0.0)
    tl.store(y_ptr + row * sy + cols, (x + b) * scale, mask=m)


def _add_scale(x, bias, scale, mask):
    y = torch.empty(x.shape, dtype=x.dtype)
    _add_scale_kernel[(x.shape[0],)](x, bias, y, x.shape[1], x.stride(0), x.stride(1), bias.stride(0), y.stride(0),
                                     scale, BLOCK=triton.next_power_of_2(x.shape[1]), MASK=mask)
    return y


def add_scale_kernel(x, bias, scale):
    return _add_scale(x, bias, scale, True)


def add_scale_kernel_tail(x, bias, scale):  # LLM-style: assumes the row is a whole block (true in the example)
    return _add_scale(x, bias, scale, False)


def test_the_schema_says_what_the_example_and_probing_show():
    b = bind(add_scale_kernel, reference=add_scale, inputs=example_add_scale)
    s = b.schema
    assert [(a.name, a.kind, a.shape) for a in s.args] == [("x", "float", ("x.0", "x.1")),
                                                            ("bias", "float", ("x.1",)),
                                                            ("scale", "const", ())]
    assert s.dims["x.0"].role == "tiled" and s.dims["x.1"].role == "tiled"
    assert s.dims["x.1"].example == 64 and s.dims["x.1"].hi == 256  # drawn up to 4x the example
    assert s.dtypes == ("fp32", "fp16", "bf16") and s.primary == "fp32"
    assert "x.1" in s.describe() and "shared by x.1, bias.0" in s.describe()


def test_coinciding_sizes_split_into_the_dims_the_reference_takes_apart():
    """A square matmul's example (M = N = K) still gives three dims; rope's cos table is half the head dim;
    offsets of E groups have E + 1 entries; ids point into the table; int8 keeps its range."""
    def gemm(a, b):
        return a @ b

    s = bind(gemm, reference=gemm, inputs=lambda: [torch.randn(32, 32), torch.randn(32, 32)]).schema
    assert len(s.dims) == 3 and s.args[0].shape[1] == s.args[1].shape[0] and s.args[0].shape[0] != s.args[1].shape[1]
    assert {d.role for d in s.dims.values()} == {"tiled", "contracted"}

    def rope(x, cos, sin):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    s = bind(rope, reference=rope, inputs=lambda: [torch.randn(4, 16), torch.randn(4, 8), torch.randn(4, 8)]).schema
    assert s.args[0].shape[1] == "2*" + s.args[1].shape[1]

    def grouped(x, w, offsets, ids, q):
        out = torch.empty(x.shape[0], w.shape[2])
        for e in range(w.shape[0]):
            out[offsets[e]:offsets[e + 1]] = x[offsets[e]:offsets[e + 1]] @ w[e]
        return out + q.float().sum() * 0 + x[ids].sum() * 0

    q = torch.tensor([-100, 5, 0, 127, -3, 9, 1], dtype=torch.int8)
    ex = lambda: [torch.randn(10, 4), torch.randn(3, 4, 5), torch.tensor([0, 3, 3, 10]), torch.tensor([1, 9, 2]), q]
    s = bind(grouped, reference=grouped, inputs=ex).schema
    kinds = {a.name: a for a in s.args}
    assert kinds["offsets"].kind == "offsets" and kinds["offsets"].shape[0].endswith("+1")
    assert kinds["offsets"].index_of == kinds["x"].shape[0]  # ends at the token count
    assert kinds["ids"].kind == "index" and kinds["ids"].index_of == kinds["x"].shape[0]
    assert kinds["q"].kind == "int" and (kinds["q"].lo, kinds["q"].hi) == (-100, 127)


def test_a_declaration_corrects_the_schema_and_names_what_it_does_not_know():
    b = bind(add_scale_kernel, reference=add_scale, inputs=example_add_scale,
             schema={"dims": {"x.1": 64, "x.0": {"max": 4}}, "dtypes": ["fp16"]})
    assert b.schema.dims["x.1"].fixed and b.schema.dims["x.0"].hi == 4 and b.schema.dtypes == ("fp16",)
    with pytest.raises(gpuemu.errors.InvalidArgument, match="dim 'N' is not a dim of this call; its dims: x.0, x.1"):
        bind(add_scale_kernel, reference=add_scale, inputs=example_add_scale, schema={"dims": {"N": 3}})
    with pytest.raises(gpuemu.errors.InvalidArgument, match="unknown key 'dim'"):
        bind(add_scale_kernel, reference=add_scale, inputs=example_add_scale, schema={"dim": {}})


def test_a_declared_max_bounds_long_rows_too():
    """Long rows go past any kernel's largest block (a reduced or contracted dim far beyond the example's range);
    past a declared max they are not drawn: the declaration is the kernel's contract (gqa_attention: D <= 256)."""
    from gpuemu.cases import Blocks, generate

    fam = "examples/families/gqa_attention.py"
    from gpuemu.target import load

    ref, inputs = load(f"{fam}:reference"), load(f"{fam}:get_inputs")

    def plain(q, k, v, causal):  # (the same reference without its file's GPUEMU_SCHEMA)
        return ref(q, k, v, causal)

    widest = {}
    for declared in (None, {"dims": {"q.3": {"max": 256}}}):
        b = bind(load(f"{fam}:gqa_attention"), reference=plain, inputs=inputs, schema=declared)
        assert "v.3" not in b.schema.dims  # (declared or not, q.3 stays one dim with v.3: the kernel takes no other)
        cases = [generate(b.op, seed, dtype="fp16", blocks=Blocks()) for seed in range(300)]
        assert any(c.shape_kind == "long_row" for c in cases)
        widest[bool(declared)] = max(c.dims["q.3"] for c in cases)
    assert widest[True] == 256 < widest[False], widest


def test_a_given_declaration_goes_on_top_of_the_reference_files_own_entry_by_entry(tmp_path, monkeypatch):
    import types

    from gpuemu.schema.declare import load_declaration

    mod = types.ModuleType("ref_with_schema")
    exec("def reference(x):\n    return x\n", mod.__dict__)
    mod.GPUEMU_SCHEMA = {"dims": {"N": {"max": 64}, "M": 8}, "dtypes": ["fp16", "bf16"], "requires": {"contiguous": True}}
    monkeypatch.setitem(sys.modules, "ref_with_schema", mod)
    assert load_declaration(None, mod.reference) == mod.GPUEMU_SCHEMA
    given = tmp_path / "s.yaml"
    given.write_text("dims:\n  N: {max: 128}\ndtypes: [fp32]\n")
    merged = load_declaration(str(given), mod.reference)
    assert merged == {"dims": {"N": {"max": 128}, "M": 8}, "dtypes": ["fp32"], "requires": {"contiguous": True}}
    mod.GPUEMU_SCHEMA = {"dim": {}}
    with pytest.raises(gpuemu.errors.InvalidArgument, match="GPUEMU_SCHEMA of ref_with_schema: unknown key 'dim'"):
        load_declaration(None, mod.reference)


def test_a_tail_bug_that_passes_allclose_on_the_example_is_caught_and_the_correct_kernel_passes(tmp_path):
    args = example_add_scale()
    assert torch.allclose(add_scale_kernel_tail(*args), add_scale(*args))  # what the field checks
    bad = gpuemu.fuzz(add_scale_kernel_tail, reference=add_scale, inputs=example_add_scale, iterations=30, seed=1,
                      store=tmp_path / "s")
    assert not bad.ok and bad.failures[0].verdict.status in ("fail", "error")
    first = bad.failures[0]
    assert first.case.dims["x.1"] & (first.case.dims["x.1"] - 1)  # shrunk to a row that is not a power of two
    good = gpuemu.fuzz(add_scale_kernel, reference=add_scale, inputs=example_add_scale, iterations=30, seed=1,
                       store=tmp_path / "s")
    assert good.ok, good.report()


def test_the_judge_leaves_out_what_the_reference_itself_overflows_and_judges_ints_exactly():
    from gpuemu.judge import judge_reference
    from gpuemu.tolerance import ToleranceTable

    tol = ToleranceTable({"default": {"fp16": {"rtol": 2e-3, "atol": 1e-7}, "fp32": {"rtol": 1e-5, "atol": 1e-37}}})
    truth = [torch.tensor([1.0, 70000.0], dtype=torch.float64)]
    control = [torch.tensor([1.0, float("inf")], dtype=torch.float16)]
    v = judge_reference([torch.tensor([1.0, 0.0], dtype=torch.float16)], truth, control, tol)
    assert v.status == "pass" and "not judged" in v.detail
    v = judge_reference([torch.tensor([3.0, 0.0], dtype=torch.float16)], truth, control, tol)
    assert v.status == "fail"
    v = judge_reference([torch.tensor([1, 2])], [torch.tensor([1, 3])], [torch.tensor([1, 3])], tol)
    assert v.status == "fail" and v.kind == "mismatch"
    v = judge_reference([torch.ones(2)], [torch.ones(2, dtype=torch.float64)] * 2, [torch.ones(2)] * 2, tol)
    assert v.status == "fail" and v.kind == "outputs"


def test_an_ill_conditioned_case_passes_a_kernel_no_less_accurate_than_the_reference_and_no_more():
    """A softmax whose argmax rounding decides: the control flips 12 rows of one-hot outputs, a correct kernel
    flips a row the control got right (passes); a kernel wrong in more rows than the control, or next to a
    control wrong at fewer elements than the rule needs, fails."""
    from gpuemu.judge import judge_reference
    from gpuemu.tolerance import ToleranceTable

    tol = ToleranceTable({"default": {"fp32": {"rtol": 1e-5, "atol": 1e-37}}})
    truth = torch.zeros(256, 64, dtype=torch.float64)
    truth[:, 0] = 1.0

    def flipped(rows):
        t = truth.clone().float()
        for r in rows:
            t[r, 0], t[r, 1] = 0.0, 1.0
        return t

    control = flipped(range(12))
    assert judge_reference([flipped([20])], [truth], [control], tol).status == "pass"
    assert judge_reference([flipped(range(13, 33))], [truth], [control], tol).status == "fail"
    assert judge_reference([flipped([20])], [truth], [flipped(range(2))], tol).status == "fail"


def test_a_stored_failure_replays_from_its_record_in_a_fresh_process(tmp_path):
    mod = tmp_path / "kern.py"
    mod.write_text(textwrap.dedent('''
        import torch, triton, triton.language as tl
        def reference(x):
            return x * 2.0
        def get_inputs():
            return [torch.randn(4, 32)]
        @triton.jit
        def _k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            cols = tl.arange(0, BLOCK)
            row = tl.program_id(0)
            tl.store(y_ptr + row * BLOCK + cols, tl.load(x_ptr + row * BLOCK + cols) * 2.0)
        def double(x):
            y = torch.empty_like(x)
            _k[(x.shape[0],)](x, y, BLOCK=triton.next_power_of_2(x.shape[1]))
            return y
    '''))
    env = dict(os.environ, PYTHONPATH=ROOT, TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, "-m", "gpuemu", "fuzz", f"{mod}:double", "--reference", f"{mod}:reference",
                          "-n", "20", "--seed", "3", "--store", str(tmp_path / "st"), "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "schema (inferred from the example call of" in run.stderr
    seed = hex(json.loads((tmp_path / "r.json").read_text())["failures"][0]["case"]["seed"])
    rep = subprocess.run([sys.executable, "-m", "gpuemu", "reproduce", seed, "--store", str(tmp_path / "st")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert rep.returncode == 1 and "reproduced: same verdict" in rep.stderr, rep.stderr[-2000:]
    show = subprocess.run([sys.executable, "-m", "gpuemu", "fuzz", f"{mod}:double", "--reference", f"{mod}:reference",
                           "--show-schema"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert show.returncode == 0 and "x.1" in show.stdout and "dtypes swept" in show.stdout
    bad = subprocess.run([sys.executable, "-m", "gpuemu", "fuzz", f"{mod}:double", "--op", "softmax", "--reference",
                          f"{mod}:reference"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_a_kernelbench_problem_binds_modules_with_the_same_parameters_and_sizes():
    """ModelNew gets Model's parameters by name, the constructor's sizes follow the dims they equal."""
    d = os.path.join(ROOT, "examples/kernelbench/14_linear_relu_scale")
    b = bind(gpuemu.target.load(f"{d}/solution.py:ModelNew"), reference=f"{d}/problem.py:Model")
    s = b.schema
    assert s.call == "module" and set(s.dims) == {"batch_size", "in_features", "out_features"}
    args = {a.name: a for a in s.args}
    assert args["init.in_features"].kind == "dim" and args["init.in_features"].index_of == "in_features"
    assert args["param.linear.weight"].shape == ("out_features", "in_features")
    assert args["init.scale"].kind == "const"


def test_the_hook_judges_a_launcher_against_its_reference_with_the_same_judge(tmp_path):
    """@shadow(reference=...) in production: a sampled call judged as the fuzzer judges it; a wrong one diverges,
    stores its arguments and outputs, and replays."""
    import gpuemu.hook as hook
    from gpuemu.store import Store

    def ref(x, bias, scale):
        return add_scale(x, bias, scale)

    def off_by_one(x, bias, scale):  # (in bounds: the host program's own launch is not bounds-checked)
        y = add_scale_kernel(x, bias, scale)
        y[:, -1] += 1.0
        return y

    good = hook.shadow(reference=ref)(add_scale_kernel)
    bad = hook.shadow(reference=ref)(off_by_one)
    with hook.installed(mode="shadow", sample_rate=1.0, budget=1.0, store=str(tmp_path / "st")):
        x, b = torch.randn(5, 40), torch.randn(40)
        assert torch.equal(good(x, b, 0.5), add_scale_kernel(x, b, 0.5))
        bad(x, b, 0.5)
        stats = hook.stats()
    assert stats["checks_by_source"]["@shadow"] == 2 and stats["divergences_by_source"] == {"@shadow": 1}
    assert stats["internal_errors"] == 0
    (rec,) = [f.record for f in Store(tmp_path / "st").list()]
    assert rec["hook"]["reference"].endswith(":test_the_hook_judges_a_launcher_against_its_reference_with_the_same_judge.<locals>.ref") \
        or "ref" in rec["hook"]["reference"]
    with pytest.raises(gpuemu.errors.InvalidArgument, match="op= .* or reference="):
        hook.shadow(op="softmax", reference=ref)


# ---------------------------------------------------------------- in place: vLLM-style fused add + RMSNorm
INPLACE = os.path.join(ROOT, "examples", "inplace", "fused_add_rms_norm.py")


def _inplace(name):
    from gpuemu.target import load

    return load(f"{INPLACE}:{name}")


def fused_add_rms_norm_out_of_place(x, residual, weight, eps):  # returns new tensors, writes neither argument
    h = x + residual
    return h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + eps).to(h.dtype) * weight, h


def test_an_in_place_kernel_is_judged_by_what_it_writes_against_an_in_place_reference(tmp_path):
    """A reference that returns nothing and writes its arguments (vLLM's fused_add_rms_norm convention): the
    arguments it writes (seen by their version counters on the example call) are the outputs, and the kernel's
    writes into copies of them are judged; the caller's tensors stay as they were. A kernel that leaves one of them
    stale fails on that output, named; one that returns new tensors instead writes nothing, and fails too."""
    import copy

    ref, example_fn = _inplace("reference"), _inplace("get_inputs")
    fused_add_rms_norm, stale = _inplace("fused_add_rms_norm"), _inplace("fused_add_rms_norm_stale_residual")
    example = example_fn()
    before = copy.deepcopy(example)
    b = bind(fused_add_rms_norm, reference=ref, inputs=lambda: example)
    assert b.schema.writes == ("x", "residual") and len(b.schema.outputs) == 2
    assert "written in place: x, residual" in b.schema.describe()
    assert all(torch.equal(a, c) for a, c in zip(example[:3], before[:3]))  # inference ran on copies
    ok = gpuemu.fuzz(fused_add_rms_norm, reference=ref, inputs=example_fn, iterations=30, seed=1,
                     store=str(tmp_path / "s"))
    assert ok.ok and ok.passed == 30, ok.summary()
    bad = gpuemu.fuzz(stale, reference=ref, inputs=example_fn, iterations=10, seed=1, store=str(tmp_path / "s"))
    assert not bad.ok and "output 1 (residual, written in place)" in bad.failures[0].verdict.message
    seed = bad.failures[0].case.seed
    again = gpuemu.reproduce(seed, store=str(tmp_path / "s"), fn=stale)
    assert again.verdict.status == "fail" and "residual, written in place" in again.verdict.message
    none = gpuemu.fuzz(fused_add_rms_norm_out_of_place, reference=ref, inputs=example_fn, iterations=5, seed=1,
                       save=False)
    assert not none.ok and none.failures[0].verdict.kind == "outputs"  # 2 returned + 2 copies it left as they were


def test_the_hook_judges_an_in_place_launcher_by_its_writes_and_leaves_the_host_result_alone(tmp_path):
    """@shadow(reference=...) of an in-place launcher: the host's tensors are written once, by the launcher (the
    reference runs on copies); a launcher that leaves the residual stale diverges, on that output."""
    import gpuemu.hook as hook

    ref, fused_add_rms_norm = _inplace("reference"), _inplace("fused_add_rms_norm")
    good = hook.shadow(reference=ref)(fused_add_rms_norm)
    bad = hook.shadow(reference=ref)(_inplace("fused_add_rms_norm_stale_residual"))
    x, r, w, eps = _inplace("get_inputs")()
    want_x, want_r = x.clone(), r.clone()
    fused_add_rms_norm(want_x, want_r, w, eps)  # (unhooked: what the host program computes)
    with hook.installed(mode="shadow", sample_rate=1.0, budget=1.0, store=str(tmp_path / "st")):
        gx, gr = x.clone(), r.clone()
        assert good(gx, gr, w, eps) is None
        bad(x.clone(), r.clone(), w, eps)
        stats = hook.stats()
    assert torch.equal(gx, want_x) and torch.equal(gr, want_r)
    assert stats["checks_by_source"]["@shadow"] == 2 and stats["divergences_by_source"] == {"@shadow": 1}
    assert stats["internal_errors"] == 0
    from gpuemu.store import Store

    (rec,) = [f.record for f in Store(tmp_path / "st").list()]
    assert "arg1, written in place" in rec["verdict"]["message"]


# ---------------------------------------------------------------- a tuple of sizes: F.layer_norm's normalized_shape
def layer_norm_ref(x, normalized_shape, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)


def example_layer_norm():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(4, 32, 256, generator=g), (256,), torch.randn(256, generator=g), torch.randn(256, generator=g)]


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr, MEAN_OVER: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, 0) / MEAN_OVER if MEAN_OVER > 0 else tl.sum(x, 0) / n
    d = tl.where(m, x - mean, 0.0)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n + cols, d * tl.rsqrt(tl.sum(d * d, 0) / n + eps) * w + b, mask=m)


def _layer_norm(x, normalized_shape, weight, bias, eps, buggy):
    x = x.contiguous()
    n = x.shape[-1]
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    _layer_norm_kernel[(x.numel() // n,)](x, weight.contiguous(), bias.contiguous(), y, n, eps, BLOCK=block,
                                          MEAN_OVER=block if buggy else 0)
    return y


def layer_norm_kernel(x, normalized_shape, weight, bias, eps=1e-5):
    return _layer_norm(x, normalized_shape, weight, bias, eps, False)


def layer_norm_kernel_block_mean(x, normalized_shape, weight, bias, eps=1e-5):  # the mean over the padded block
    return _layer_norm(x, normalized_shape, weight, bias, eps, True)


def test_a_tuple_of_sizes_follows_the_dims_it_names_so_the_row_length_is_fuzzed(tmp_path):
    """F.layer_norm(x, (256,), w, b): the 256 in normalized_shape names x's last dim, so the tuple is drawn with it
    (before, it pinned the row at the example's power of two, where a mean over the padded block is right)."""
    b = bind(layer_norm_kernel, reference=layer_norm_ref, inputs=example_layer_norm)
    arg = next(a for a in b.schema.args if a.name == "normalized_shape")
    last = b.schema.args[0].shape[-1]
    assert arg.kind == "dim" and arg.shape == (last,) and not b.schema.dims[last].fixed
    assert "normalized_shape sizes (x.2,)" in b.schema.describe()
    ok = gpuemu.fuzz(layer_norm_kernel, reference=layer_norm_ref, inputs=example_layer_norm, iterations=30, seed=1,
                     save=False)
    assert ok.ok, ok.summary()
    bad = gpuemu.fuzz(layer_norm_kernel_block_mean, reference=layer_norm_ref, inputs=example_layer_norm,
                      iterations=30, seed=1, store=str(tmp_path / "s"))
    assert not bad.ok and bad.failures[0].case.dims[last] not in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    again = gpuemu.reproduce(bad.failures[0].case.seed, store=str(tmp_path / "s"), fn=layer_norm_kernel_block_mean)
    assert again.verdict.status == "fail"

    def view_rows(x, shape):  # (-1, 4): not sizes (a -1), kept as given
        return x.reshape(shape) * 2

    s = bind(view_rows, reference=view_rows, inputs=lambda: [torch.randn(8, 4), (-1, 4)]).schema
    assert next(a for a in s.args if a.name == "shape").kind == "const"


# ---------------------------------------------------------------- integers computed from floats: a quantizer
def quantize(x, scale):
    return torch.round(x / scale).clamp(-128, 127).to(torch.int8)


def example_quantize():
    g = torch.Generator().manual_seed(1)
    return [torch.randn(16, 64, generator=g), 0.02]


def quantize_in_working_dtype(x, scale):  # the reference itself, run in the input's dtype (fp16 rounds x / scale)
    return torch.round(x / scale).clamp(-128, 127).to(torch.int8)


def quantize_truncating(x, scale):  # bug: truncates instead of rounding
    return (x / scale).clamp(-128, 127).to(torch.int8)


def test_an_integer_output_may_land_on_either_side_of_a_rounding_boundary_but_truncation_fails(tmp_path):
    ok = gpuemu.fuzz(quantize_in_working_dtype, reference=quantize, inputs=example_quantize, iterations=30, seed=3,
                     store=tmp_path / "s")
    assert ok.passed == ok.iterations, ok.summary
    bad = gpuemu.fuzz(quantize_truncating, reference=quantize, inputs=example_quantize, iterations=30, seed=3,
                      store=tmp_path / "s")
    assert bad.failures, bad.summary


def quantize_fp8(x, scale):
    return (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn)


def quantize_fp8_kernel(x, scale):  # multiplies by the reciprocal, in fp32: fp8 results within the format's rounding
    return (x.float() * (1.0 / scale)).clamp(-448, 448).to(torch.float8_e4m3fn)


def quantize_fp8_unscaled(x, scale):  # bug: forgets the scale
    return x.float().clamp(-448, 448).to(torch.float8_e4m3fn)


def test_fp8_outputs_are_judged(tmp_path):
    ok = gpuemu.fuzz(quantize_fp8_kernel, reference=quantize_fp8, inputs=example_quantize, iterations=30, seed=2,
                     store=tmp_path / "s")
    assert ok.passed == ok.iterations, [f.line for f in ok.failures]
    bad = gpuemu.fuzz(quantize_fp8_unscaled, reference=quantize_fp8, inputs=example_quantize, iterations=10, seed=2,
                      store=tmp_path / "s")
    assert bad.failures and bad.failures[0].case.dtype in ("fp32", "fp16", "bf16")


# ---------------------------------------------------------------- a float constant the kernel must honour
def leaky(x, slope):
    return torch.where(x > 0, x, x * slope)


def example_leaky():
    return [torch.randn(4, 32, generator=torch.Generator().manual_seed(2)), 0.01]


def leaky_kernel(x, slope):
    return torch.where(x > 0, x, x * slope)


def leaky_hard_coded(x, slope):  # the LLM-style bug: the example's slope written into the kernel
    return torch.where(x > 0, x, x * 0.01)


def test_a_float_constant_is_drawn_and_a_hard_coded_one_is_caught_with_its_hint(tmp_path):
    ok = gpuemu.fuzz(leaky_kernel, reference=leaky, inputs=example_leaky, iterations=40, seed=1, store=tmp_path / "s")
    assert ok.passed == ok.iterations
    bad = gpuemu.fuzz(leaky_hard_coded, reference=leaky, inputs=example_leaky, iterations=40, seed=1,
                      store=tmp_path / "s")
    assert bad.failures
    f = bad.failures[0]
    assert "slope" in f.case.kwargs and f.case.kwargs["slope"] != 0.01
    assert "hard-coded constant suspected" in (f.hint or "")


def test_the_hook_judges_a_launcher_with_fp8_operands_against_its_reference(tmp_path):
    import gpuemu.hook as hook

    def ref(a, b, scale):  # an fp8 GEMM with a per-tensor scale
        return (a.float() @ b.float()) * scale

    def kernel(a, b, scale):
        return (a.to(torch.float32) @ b.to(torch.float32)) * scale

    def wrong_scale(a, b, scale):
        return (a.to(torch.float32) @ b.to(torch.float32)) * (scale * 2)

    good, bad = hook.shadow(reference=ref)(kernel), hook.shadow(reference=ref)(wrong_scale)
    with hook.installed(mode="shadow", sample_rate=1.0, budget=1.0, store=str(tmp_path / "st")):
        a = torch.randn(8, 16).to(torch.float8_e4m3fn)
        b = torch.randn(16, 4).to(torch.float8_e4m3fn)
        good(a, b, 0.5)
        bad(a, b, 0.5)
        stats = hook.stats()
    assert stats["checks_by_source"]["@shadow"] == 2 and stats["divergences_by_source"] == {"@shadow": 1}
    assert stats["internal_errors"] == 0


def quantize_rows(x):  # per-row absmax int8 quantization, as LLM int8 kernels do
    scale = x.abs().amax(dim=-1, keepdim=True) / 127
    return torch.round(x / scale).clamp(-127, 127).to(torch.int8)


def example_quantize_rows():
    return [torch.randn(32, 256, generator=torch.Generator().manual_seed(4))]


def quantize_rows_fp32(x):  # in fp32 whatever x's dtype: a code one off where x / scale is within rounding of a half
    scale = x.float().abs().amax(dim=-1, keepdim=True) / 127
    return torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8)


def quantize_rows_truncating(x):
    scale = x.float().abs().amax(dim=-1, keepdim=True) / 127
    return (x.float() / scale).clamp(-127, 127).to(torch.int8)


def test_a_quantizer_in_its_own_arithmetic_passes_and_truncation_fails(tmp_path):
    ok = gpuemu.fuzz(quantize_rows_fp32, reference=quantize_rows, inputs=example_quantize_rows, iterations=60,
                     seed=5, store=tmp_path / "s")
    assert ok.passed == ok.iterations, [f.line for f in ok.failures]
    bad = gpuemu.fuzz(quantize_rows_truncating, reference=quantize_rows, inputs=example_quantize_rows,
                      iterations=20, seed=5, store=tmp_path / "s")
    assert bad.failures
