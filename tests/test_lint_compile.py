"""gpuemu lint end to end: real ahead-of-time compiles for sm_80/sm_90 on this CPU-only machine."""

import json
import os
import shutil

import pytest

from gpuemu.cli import main
from gpuemu.lint import engine, lint, write_baseline
from gpuemu.lint import examples as E

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "data", "lint_kernels.py")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("lint-cache")


@pytest.fixture
def workdir(tmp_path):
    src = tmp_path / "kernels" / "lint_kernels.py"
    src.parent.mkdir()
    shutil.copy(KERNELS, src)
    return tmp_path, src


def _rules(result, kernel_part):
    return sorted({(f.rule, f.target) for f in result.findings if kernel_part in f.kernel})


@pytest.mark.slow  # 12-30 s of AOT compiles; the baseline compare is tested fast by the CLI test below
def test_planted_regression_is_flagged_against_the_baseline_and_unchanged_kernel_is_not(workdir, cache):
    root, src = workdir
    sources = [f"{src}:scale_rows_example,add_example"]
    first = lint(sources, target="sm_80,sm_90", cache_dir=cache, root=root)
    assert first.findings == () and first.exit_code() == 0
    assert {r.kernel_id for r in first.reports} == {"kernels/lint_kernels.py:scale_rows_example>_scale_rows_kernel",
                                                    "kernels/lint_kernels.py:add_example>_add_kernel"}
    baseline = root / "lint-baseline.json"
    write_baseline(first, baseline)

    # the regression: a larger block keeps 256 fp32 values per thread live (more than 255 registers)
    src.write_text(src.read_text().replace("BLOCK = 1024\n", "BLOCK = 8192\n"))
    second = lint(sources, target="sm_80,sm_90", cache_dir=cache, root=root, baseline=baseline)
    assert second.exit_code() == 1
    flagged = _rules(second, "scale_rows")
    for target in ("sm_80", "sm_90"):
        assert ("spills", target) in flagged and ("spill-regression", target) in flagged
        assert ("register-regression", target) in flagged
    assert _rules(second, "add_example") == []  # the unchanged kernel: nothing, and from the cache
    assert second.timings["cache_hits"] == 2 and second.timings["compiled"] == 2
    status = {(d.kernel.split(">")[-1], d.target): d.status for d in second.diff}
    assert status == {("_scale_rows_kernel", "sm_80"): "changed", ("_scale_rows_kernel", "sm_90"): "changed",
                      ("_add_kernel", "sm_80"): "unchanged", ("_add_kernel", "sm_90"): "unchanged"}
    spill = next(f for f in second.findings if f.rule == "spills" and f.target == "sm_90")
    assert spill.level == "error" and spill.measured > 0 and spill.baseline_state == "new"
    assert spill.location.path.endswith("lint_kernels.py") and spill.location.start_line > 1

    # accepting it: the updated baseline makes the same run pass
    write_baseline(second, baseline)
    third = lint(sources, target="sm_80,sm_90", cache_dir=cache, root=root, baseline=baseline)
    assert third.exit_code() == 0 and third.timings["cache_hits"] == 4
    assert {f.baseline_state for f in third.findings} == {"unchanged"}


def test_fp64_promotion_and_tensor_core_dot(cache):
    result = lint([f"{KERNELS}:fp64_example,dot_example"], target="sm_90", cache_dir=cache, root=HERE)
    by_kernel = {r.name: r.metrics for r in result.reports}
    fp64 = by_kernel["_fp64_sum_kernel"]
    assert fp64.ptx.fp64 > 0 and fp64.arg_types[:2] == ("*fp16", "*fp32")
    dot = by_kernel["_dot_kernel"]
    assert [d.operand for d in dot.dots] == ["f16"] and dot.ptx.tensor_core > 0
    assert _rules(result, "fp64_example") == [("fp64-in-low-precision", "sm_90")]
    assert _rules(result, "dot_example") == []
    assert result.exit_code() == 1


def test_autotuned_kernel_records_every_config_without_running():
    module = E.load_module(KERNELS)
    specimens = E.specimens_from_launches("k", E.record_launches(module.tuned_copy_example))
    assert [s.kernel_id for s in specimens] == ["k>_tuned_copy_kernel[config 0]", "k>_tuned_copy_kernel[config 1]"]
    assert [s.kwargs["BLOCK"] for s in specimens] == [256, 512]
    assert specimens[0].grid == (8,)  # the callable grid, evaluated with the config's BLOCK


def test_declared_kernel_needs_no_launcher(tmp_path, cache):
    pack = tmp_path / "pack.yaml"
    pack.write_text(f"lint:\n  kernels:\n    '{KERNELS}:_add_kernel':\n"
                    "      args: {x_ptr: '*fp16', y_ptr: '*fp16', out_ptr: '*fp16', N: 4096, BLOCK: 1024}\n"
                    "      options: {num_warps: 4}\n")
    result = lint([f"{KERNELS}:_add_kernel"], target="sm_90", cache_dir=cache, rulepacks=[str(pack)], root=HERE)
    (r,) = result.reports
    assert r.kernel_id == "data/lint_kernels.py:_add_kernel" and r.metrics.registers > 0
    assert r.specialization["divisible_by_16"] == ["N", "out_ptr", "x_ptr", "y_ptr"]


def test_cli_exit_codes_json_sarif_and_baseline(tmp_path, cache, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    common = [f"{KERNELS}:add_example,fp64_example", "--target", "sm_90", "--cache", str(cache)]
    out_json, out_sarif = tmp_path / "r.json", tmp_path / "r.sarif"
    assert main(["lint", *common, "--json", str(out_json), "--sarif", str(out_sarif)]) == 1
    doc = json.loads(out_json.read_text())
    assert doc["summary"]["gating"] == 1 and doc["findings"][0]["rule"] == "fp64-in-low-precision"
    assert {k["metrics"]["target"] for k in doc["kernels"]} == {"sm_90"}
    with open(os.path.join(HERE, "data", "sarif-schema-2.1.0.json")) as f:
        schema = json.load(f)
    log = json.loads(out_sarif.read_text())
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)
    (res,) = log["runs"][0]["results"]
    assert res["ruleId"] == "fp64-in-low-precision"
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == _def_line("_fp64_sum_kernel")
    err = capsys.readouterr().err
    assert "fp64-in-low-precision" in err and "FAIL: 1 finding(s)" in err

    assert main(["lint", *common, "--exit-zero", "-q"]) == 0
    base = tmp_path / "base.json"
    assert main(["lint", *common, "--baseline", str(base)]) == 2  # no baseline yet: a usage error
    assert "--update-baseline" in capsys.readouterr().err
    assert main(["lint", *common, "--baseline", str(base), "--update-baseline", "-q"]) == 0
    assert main(["lint", *common, "--baseline", str(base), "-q"]) == 0  # the finding is accepted now


@pytest.mark.parametrize("argv,message", [
    (["lint"], "nothing to lint"),
    (["lint", f"{KERNELS}:add_example", "--target", "sm_61"], "'sm_61' is not a known GPU target"),
    (["lint", f"{KERNELS}:_add_kernel"], "is a @triton.jit kernel, so lint needs its specialisation"),
    (["lint", f"{KERNELS}:nope"], "has no 'nope'"),
    (["lint", "missing.py:f"], "does not exist"),
    (["lint", f"{KERNELS}"], "which kernels? Name them"),
])
def test_cli_usage_errors_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def _def_line(name: str) -> int:
    with open(KERNELS) as f:
        lines = f.read().splitlines()
    idx = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    return idx  # 1-based line of the decorator just above the def


def _compile_with_listener() -> None:
    """The child of the test below: compiles fp64_example's kernel for sm_90 with Triton's compile listener set
    to gpuemu's entry point, and prints what it measured as JSON."""
    import triton
    from triton import knobs
    from triton.compiler import ASTSource

    from gpuemu.lint import from_listener, measure_compiled, on_compile
    from gpuemu.lint.specialize import specialize, triton_target
    from gpuemu.lint.targets import get

    module = E.load_module(KERNELS)
    (sp,) = E.specimens_from_launches("x", E.record_launches(module.fp64_example))
    spec = specialize(sp.fn, sp.args, sp.kwargs, get("sm_90"))
    seen = []
    knobs.compilation.listener = lambda **kw: seen.append(from_listener(**kw))
    ck = triton.compile(ASTSource(sp.fn, spec.signature, spec.constexprs, spec.attrs),
                        target=triton_target(get("sm_90")), options=spec.options)
    knobs.compilation.listener = None
    direct = on_compile(kernel=ck.metadata.name, target="sm_90", cubin=ck.asm["cubin"], ptx=ck.asm["ptx"],
                        ttir=ck.asm["ttir"], metadata=ck.metadata._asdict(), source=sp.fn, kernel_id="k")
    m = measure_compiled(kernel=ck.metadata.name, target=ck.metadata.target, cubin=ck.asm["cubin"],
                         ptx=ck.asm["ptx"], ttir=ck.asm["ttir"], metadata=ck.metadata._asdict())
    print(json.dumps({"seen": [[(f.rule, f.target, f.location.start_line) for f in found] for found in seen],
                      "direct": [f.measured for f in direct],
                      "metrics": [m.registers, m.stack_bytes, m.shared_bytes, m.num_warps], "spill": m.spill_source}))


def test_on_compile_reads_the_artifacts_triton_produced(cache):
    """The hook's entry point on a real compile's artifacts: same numbers as gpuemu lint, same rules. The
    compile runs in a child process without TRITON_INTERPRET: in this one, Triton's own helpers (tl.sum's) are
    InterpretedFunctions, and earlier tests may have left the interpreter's patches on triton.language (see
    gpuemu/lint/isolate.py), either of which breaks a plain triton.compile."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(HERE)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", "import tests.test_lint_compile as t; t._compile_with_listener()"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["seen"] == [[["fp64-in-low-precision", "sm_90", _def_line("_fp64_sum_kernel")]]]
    # the same kernel through gpuemu lint: the same registers and fp64 count
    ref = lint([f"{KERNELS}:fp64_example"], target="sm_90", cache_dir=cache, root=HERE).reports[0].metrics
    assert got["direct"] == [ref.ptx.fp64]
    assert got["metrics"] == [ref.registers, ref.stack_bytes, ref.shared_bytes, ref.num_warps]
    assert got["spill"] == "stack"  # Triton discards the ptxas log; the stack frame stands in


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="CUDA C lint needs nvcc on PATH")
def test_cuda_c_through_nvcc(tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void scale(const float* x, float* y, int n)\n{\n"
                  "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (i < n) y[i] = (float)(sqrt((double)x[i]) * 0.1);\n}\n")
    result = lint([str(cu)], target="sm_80", cache_dir=tmp_path / "c", root=tmp_path)
    (r,) = result.reports
    assert r.kernel_id == "k.cu:scale" and r.metrics.registers > 0 and r.location.start_line == 1
    assert [f.rule for f in result.findings] == ["fp64-in-low-precision"]


def test_corpus_sources_list_every_manifest_launcher():
    from gpuemu import corpus

    assert len(engine.corpus_sources()) == len(corpus.load_manifest())


def test_a_kernel_that_does_not_compile_for_one_target_is_a_finding_there(cache):
    result = lint([f"{KERNELS}:fp8_example"], target="sm_80,sm_90", cache_dir=cache, root=HERE)
    (f,) = result.findings
    assert (f.rule, f.level, f.target) == ("compile-error", "error", "sm_80")
    assert "fp8e4nv not supported in this architecture" in f.why
    assert {r.target.name: r.metrics is not None for r in result.reports} == {"sm_80": False, "sm_90": True}
    again = lint([f"{KERNELS}:fp8_example"], target="sm_80,sm_90", cache_dir=cache, root=HERE)
    assert again.timings["cache_hits"] == 2 and [f.why for f in again.findings] == [f.why]


def test_compiles_in_a_process_that_imported_triton_under_the_interpreter(tmp_path):
    """TRITON_INTERPRET=1 at `import triton` makes tl.sum's combine function an InterpretedFunction; the lint
    must still compile kernels that reduce (and leave the interpreter's objects in place afterwards)."""
    import subprocess
    import sys

    code = (
        "import os; os.environ['TRITON_INTERPRET'] = '1'\n"
        "import triton, triton.language.standard as std\n"
        "from triton.runtime.interpreter import InterpretedFunction\n"
        "assert isinstance(std._sum_combine, InterpretedFunction)\n"
        "from gpuemu.lint import lint\n"
        f"r = lint([{KERNELS!r} + ':fp64_example'], target='sm_90', use_cache=False, workers=1)\n"
        "print([f.rule for f in r.findings])\n"
        "assert isinstance(std._sum_combine, InterpretedFunction)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(HERE)}, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['fp64-in-low-precision']"


def test_compiles_after_the_interpreter_leaked_its_patches(tmp_path):
    """Calling an InterpretedFunction directly leaves triton.language patched for good (Triton 3.6-3.9); the
    lint then compiles in clean spawned processes instead of failing every kernel."""
    import subprocess
    import sys

    code = (
        "import os; os.environ['TRITON_INTERPRET'] = '1'\n"
        "import triton, triton.language.standard as std\n"
        "try:\n    std._sum_combine(1.0, 2.0)\nexcept Exception:\n    pass\n"
        "from gpuemu.lint.isolate import lang_patched\n"
        "assert lang_patched()\n"
        "from gpuemu.lint import lint\n"
        f"r = lint([{KERNELS!r} + ':fp64_example'], target='sm_90', use_cache=False, workers=1)\n"
        "print([f.rule for f in r.findings])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(HERE)}, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['fp64-in-low-precision']"
