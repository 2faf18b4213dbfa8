"""gpuemu lint, the parts that need no compiler: parsers, occupancy, config, rules, baselines, SARIF."""

import functools
import json
import os

import pytest

from gpuemu.errors import GpuemuError, InvalidArgument, RulePackError
from gpuemu.lint import artifacts as A
from gpuemu.lint import baseline as B
from gpuemu.lint import config as C
from gpuemu.lint import sarif
from gpuemu.lint.compile import cuda_signature, demangle_simple
from gpuemu.lint.examples import SourceLocation, parse_dims
from gpuemu.lint.metrics import KernelMetrics
from gpuemu.lint.occupancy import Occupancy, estimate
from gpuemu.lint.rules import RULES, evaluate
from gpuemu.lint.targets import get, parse

DATA = os.path.join(os.path.dirname(__file__), "data")

RES = """
Resource usage:
 Common:
  GLOBAL:0
 Function _k:
  REG:96 STACK:16 SHARED:1024 LOCAL:8 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function other:
  REG:8 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:352 TEXTURE:0 SURFACE:0 SAMPLER:0
"""

PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_k' for 'sm_90a'
ptxas info    : Function properties for _k
    1032 bytes stack frame, 2140 bytes spill stores, 1628 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 560 bytes cmem[0]
"""

PTX = """
.visible .entry _k(
\t.param .u64 _k_param_0
)
{
\t.reg .f64 \t%fd<4>;
\tadd.rn.f64 \t%fd3, %fd1, %fd2;
\tcvt.f32.f64 \t%f1, %fd3;
\tst.local.v4.b32 \t[%rd1], {%r1, %r2, %r3, %r4};
\tld.local.b32 \t%r5, [%rd1];
\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 { %r1 }, { %r2 }, { %r3 }, { %r4 };
\twgmma.fence.sync.aligned;
\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%r1}, %rd2, %rd3, 1, 1, 1, 0, 0;
\tbar.sync \t0;
\t// begin inline asm
\t@%p1 st.global.v4.b32 [ %rd4 + 0 ], { %r1, %r2, %r3, %r4 };
\t// end inline asm
\tst.global.b32 \t[%rd5], %r6;
$L__BB0_2:
\tret;
}
.visible .entry other()
{
\tadd.rn.f64 \t%fd3, %fd1, %fd2;
\tret;
}
"""

SASS = """
\t\tFunction : _k
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   DFMA R2, R4, R6, R8 ;
        /*0020*/                   F2F.F64.F32 R10, R3 ;
        /*0030*/                   STL.64 [R1], R2 ;
        /*0040*/                   LDL.128 R4, [R1] ;
        /*0050*/                   HMMA.16816.F32 R8, R12, R16, R8 ;
        /*0060*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0070*/               @P0 STG.E desc[UR4][R2.64], R5 ;
        /*0080*/                   STG.E.128 desc[UR4][R2.64], R4 ;
        /*0090*/                   NOP ;
        /*00a0*/                   EXIT ;
"""

TTIR = """module {
  tt.func public @_k(%a_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32} loc("a_ptr"(#loc)), %n: i32 loc("n"(#loc)), \
%s: f32 loc("s"(#loc))) attributes {noinline = false} {
    %0 = tt.dot %a, %b, %c, inputPrecision = tf32 : tensor<32x32xf32> * tensor<32x32xf32> -> tensor<32x32xf32> loc(#l)
    %1 = tt.dot %d, %e, %f : tensor<16x16xf16> * tensor<16x16xf16> -> tensor<16x16xf32> loc(#l)
    %2 = tt.dot %g, %h, %i, inputPrecision = ieee : tensor<16x16xf32> * tensor<16x16xf32> -> tensor<16x16xf32> loc(#l)
    tt.return
  }
}
"""


# ------------------------------------------------------------------------------------------- parsers


def test_resource_usage_and_ptxas_log_parse_per_function():
    res = A.parse_resource_usage(RES)
    assert res["_k"] == {"REG": 96, "STACK": 16, "SHARED": 1024, "LOCAL": 8, "CONSTANT[0]": 560, "TEXTURE": 0,
                         "SURFACE": 0, "SAMPLER": 0}
    assert res["other"]["REG"] == 8
    log = A.parse_ptxas_log(PTXAS)["_k"]
    assert log == {"stack_frame": 1032, "spill_store_bytes": 2140, "spill_load_bytes": 1628, "registers": 255,
                   "barriers": 1}


def test_ptx_mix_counts_each_category_of_one_entry():
    m = A.ptx_mix(PTX, "_k")
    assert m.fp64 == 2  # add.rn.f64 and cvt.f32.f64; the .reg declaration is not an instruction
    assert (m.local_stores, m.local_store_bytes, m.local_loads, m.local_load_bytes) == (1, 16, 1, 4)
    assert m.tensor_core == 2  # mma.sync and wgmma.mma_async, not wgmma.fence
    assert m.barriers == 1
    assert (m.global_stores, m.global_stores_predicated, m.global_stores_unpredicated) == (2, 1, 1)
    assert m.opcodes["ret"] == 1 and m.total == sum(m.opcodes.values())
    assert A.ptx_mix(PTX, "other").fp64 == 1


def test_sass_mix_counts_fp64_spill_bytes_tensor_cores_and_predicated_stores():
    fns = A.sass_functions(SASS)
    m = A.sass_mix(fns["_k"])
    assert m.fp64 == 2  # DFMA, F2F.F64.F32
    assert (m.local_stores, m.local_store_bytes, m.local_loads, m.local_load_bytes) == (1, 8, 1, 16)
    assert m.tensor_core == 1 and m.barriers == 1
    assert (m.global_stores, m.global_stores_predicated) == (2, 1)
    assert "NOP" not in m.opcodes and m.total == 10


def test_ttir_dots_and_argument_types():
    dots = A.ttir_dots(TTIR)
    assert [(d.operand, d.precision, d.wants_tensor_cores) for d in dots] == [
        ("f32", "tf32", True), ("f16", "", True), ("f32", "ieee", False)]
    assert A.ttir_arg_types(TTIR, "_k") == ["*fp16", "i32", "fp32"]
    assert A.float_arg_types(["*fp16", "i32", "fp32"]) == {"fp16", "fp32"}


# ----------------------------------------------------------------------------------- targets, occupancy


def test_targets_parse_and_reject_unknown_names():
    assert [t.name for t in parse("sm_80, 90,sm90a,sm_80")] == ["sm_80", "sm_90"]
    assert [t.name for t in parse(None)] == ["sm_80", "sm_86", "sm_89", "sm_90"]
    with pytest.raises(InvalidArgument, match=r"'sm_70' is not a known GPU target; use one of .*sm_90"):
        parse("sm_70")


@pytest.mark.parametrize("target,regs,warps,shared,expected", [
    ("sm_90", 128, 4, 0, (4, 16, 0.25, "registers")),       # 128*32 regs/warp -> 16 warps of 64
    ("sm_90", 32, 4, 0, (16, 64, 1.0, "warps")),            # full occupancy
    ("sm_86", 32, 4, 0, (12, 48, 1.0, "warps")),            # 48 warps per SM on sm_86
    ("sm_80", 40, 4, 41000, (3, 12, 0.1875, "shared")),     # (41000 + 1 KB reserved) * 4 > 164 KB
    ("sm_80", 40, 4, 40960, (4, 16, 0.25, "shared")),       # (40 KB + 1 KB) * 4 == 164 KB: fits exactly
    ("sm_86", 40, 4, 150_000, (0, 0, 0.0, "shared-too-large")),  # > 99 KB per block on sm_86
    ("sm_80", 33, 8, 0, (6, 48, 0.75, "registers")),        # 33 regs round up to 40 per thread (256-reg units)
])
def test_occupancy_matches_the_calculator(target, regs, warps, shared, expected):
    occ = estimate(get(target), registers=regs, num_warps=warps, shared_bytes=shared)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.occupancy, occ.limiter) == expected


# ------------------------------------------------------------------------------------------------ config


def _pack(tmp_path, text):
    p = tmp_path / "pack.yaml"
    p.write_text(text)
    return str(p)


def test_lint_config_layers_override_rule_settings(tmp_path):
    cfg = C.load(rulepacks=[_pack(tmp_path, "lint:\n  fail_on: error\n  rules:\n"
                                            "    register-pressure: {max_registers: 64, level: warning}\n"
                                            "    spills: {enabled: false}\n")], cwd=tmp_path)
    assert cfg.fail_on == "error"
    assert cfg.rules["register-pressure"].params == {"max_registers": 64}
    assert cfg.rules["register-pressure"].level == "warning"
    assert not cfg.rules["spills"].enabled and cfg.rules["spills"].level == "error"
    assert set(cfg.rules) == set(RULES)


@pytest.mark.parametrize("text,match", [
    ("lint:\n  rules:\n    spill: {level: error}\n", r"pack.yaml: lint.rules.spill: unknown rule; did you mean 'spills'"),
    ("lint:\n  rules:\n    spills: {level: fatal}\n", r"lint.rules.spills.level: 'fatal' is not one of note, warning, error"),
    ("lint:\n  rules:\n    spills: {max_bytes: -1}\n", r"lint.rules.spills.max_bytes: expected a number >= 0, got -1"),
    ("lint:\n  rules:\n    spills: {max_registers: 3}\n", r"lint.rules.spills.max_registers: unknown key; allowed: "),
    ("lint:\n  targets: [sm_99]\n", r"lint.targets: target 'sm_99' is not a known GPU target"),
    ("lint:\n  colour: red\n", r"lint.colour: unknown key; allowed: "),
    ("lint:\n  examples:\n    'k.py:f': {dtype: fp16}\n", r"lint.examples.k.py:f: missing 'op'"),
    ("lint:\n  examples:\n    'k.py:f': {op: sofmax}\n", r"lint.examples.k.py:f.op: 'sofmax' is not a known op"),
    ("lint:\n  cuda: {block_size: 100}\n", r"lint.cuda.block_size: expected a multiple of 32"),
])
def test_lint_config_errors_name_file_key_and_reason(tmp_path, text, match):
    with pytest.raises(RulePackError, match=match):
        C.load(rulepacks=[_pack(tmp_path, text)], cwd=tmp_path)


def test_parse_dims():
    assert parse_dims("N=4096, D=128") == {"N": 4096, "D": 128}
    with pytest.raises(InvalidArgument, match="write NAME=INT"):
        parse_dims("N:4")


# ------------------------------------------------------------------------------------------------- rules


def _metrics(**kw) -> KernelMetrics:
    base = dict(name="_k", target="sm_90", registers=40, stack_bytes=0, local_bytes=0, shared_static=0,
                shared_dynamic=0, num_warps=4, num_stages=3, spill_store_bytes=0, spill_load_bytes=0,
                spill_source="ptxas", occupancy=Occupancy(8, 32, 0.5, "registers"),
                ptx=A.InstructionMix(isa="ptx", total=100), arg_types=("*fp16", "*fp16", "i32"))
    base.update(kw)
    return KernelMetrics(**base)


@functools.lru_cache(maxsize=None)
def _builtin_config():
    return C.load()


def _eval(m, *, target="sm_90", hot=True, base=None, cfg=None):
    cfg = cfg or _builtin_config()
    return evaluate(kernel_id="k.py:f>_k", name="_k", target=get(target), metrics=m, error=None,
                    settings=cfg.rules, hot=hot, base=base, location=SourceLocation("k.py", 3, 9))


def test_clean_kernel_has_no_findings():
    assert _eval(_metrics()) == []


def test_spills_are_errors_in_hot_kernels_and_notes_elsewhere():
    m = _metrics(spill_store_bytes=64, spill_load_bytes=32, stack_bytes=64)
    (f,) = _eval(m)
    assert (f.rule, f.level, f.measured, f.allowed, f.unit) == ("spills", "error", 96, 0, "B")
    assert "ptxas -v spill stores + loads" in f.why and f.gates("warning")
    assert [x.level for x in _eval(m, hot=False)] == ["note"]


def test_local_memory_without_spills_and_unknown_spill_source():
    (f,) = _eval(_metrics(stack_bytes=32))
    assert f.rule == "local-memory" and f.measured == 32
    # without ptxas or SASS, the stack frame stands in for spills, under the spills rule
    (g,) = _eval(_metrics(stack_bytes=32, spill_store_bytes=None, spill_load_bytes=None, spill_source="stack"))
    assert g.rule == "spills" and "spill bytes unknown" in g.why


def test_fp64_in_low_precision_kernel_only():
    m = _metrics(ptx=A.InstructionMix(isa="ptx", total=100, fp64=3))
    (f,) = _eval(m)
    assert (f.rule, f.measured) == ("fp64-in-low-precision", 3) and "arguments are fp16" in f.why
    assert _eval(_metrics(ptx=m.ptx, arg_types=("*fp64", "*fp16"))) == []  # an fp64 kernel may use fp64


def test_dot_without_tensor_cores_unless_ieee_fp32():
    fp16_dot = (A.DotInfo("f16", ""),)
    (f,) = _eval(_metrics(dots=fp16_dot))
    assert f.rule == "dot-without-tensor-cores" and "1 tl.dot on f16" in f.why
    assert _eval(_metrics(dots=fp16_dot, ptx=A.InstructionMix(isa="ptx", total=100, tensor_core=4))) == []
    assert _eval(_metrics(dots=(A.DotInfo("f32", "ieee"),))) == []


def test_register_pressure_is_a_note_and_launch_limits_an_error():
    (f,) = _eval(_metrics(registers=200, occupancy=Occupancy(2, 8, 0.125, "registers")))
    assert (f.rule, f.level, f.gates("warning")) == ("register-pressure", "note", False)
    (g,) = _eval(_metrics(shared_dynamic=200_000, occupancy=Occupancy(0, 0, 0.0, "shared-too-large")), target="sm_86")
    assert (g.rule, g.level, g.allowed) == ("launch-limits", "error", get("sm_86").max_shared_per_block)


def test_regressions_against_the_baseline_entry():
    base = {"registers": 40, "spill_bytes": 0, "occupancy": 0.5, "ptx_instructions": 100, "sass_instructions": None}
    assert _eval(_metrics(), base=base) == []
    assert _eval(_metrics(registers=44), base=base) == []  # +4 is within max_increase
    m = _metrics(registers=56, occupancy=Occupancy(6, 24, 0.375, "registers"), ptx=A.InstructionMix(isa="ptx", total=120),
                 spill_store_bytes=8, spill_load_bytes=8, stack_bytes=8)
    rules = {f.rule: f for f in _eval(m, base=base)}
    assert set(rules) == {"spills", "register-regression", "occupancy-drop", "instruction-regression",
                          "spill-regression"}
    assert (rules["register-regression"].measured, rules["register-regression"].allowed) == (56, 44)
    assert rules["instruction-regression"].allowed == 110
    assert rules["occupancy-drop"].measured == 0.375


# ------------------------------------------------------------------------------------------- baseline


class _Report:
    def __init__(self, kid, target, metrics):
        self.kernel_id, self.target, self.metrics = kid, get(target), metrics


def test_baseline_round_trip_diff_and_accepted_findings(tmp_path):
    m = _metrics()
    findings = _eval(_metrics(registers=200))
    doc = B.build([_Report("a>k", "sm_90", m), _Report("b>k", "sm_90", m)], findings)
    path = tmp_path / "base.json"
    B.write(path, doc)
    base = B.load(path)
    assert base.entry("a>k", "sm_90")["registers"] == 40
    assert findings[0].fingerprint in base.accepted
    rows = {(d.kernel, d.status) for d in B.diff(base, [_Report("a>k", "sm_90", _metrics(registers=48)),
                                                         _Report("c>k", "sm_90", m)], prefixes={"a", "b", "c"})}
    assert rows == {("a>k", "changed"), ("c>k", "new"), ("b>k", "missing")}
    # linting one launcher against a whole-project baseline: the others are not 'missing'
    assert {d.status for d in B.diff(base, [_Report("a>k", "sm_90", m)], prefixes={"a"})} == {"unchanged"}
    # updating with a subset keeps the other kernels
    doc2 = B.build([_Report("a>k", "sm_90", _metrics(registers=48))], [], previous=doc)
    assert set(doc2["kernels"]) == {"a>k", "b>k"} and doc2["kernels"]["a>k"]["sm_90"]["registers"] == 48
    # the accepted finding is of kernel 'k.py:f>_k', which this update did not lint: it stays accepted
    assert [a["kernel"] for a in doc2["accepted"]] == ["k.py:f>_k"]


def test_baseline_errors_say_how_to_fix(tmp_path):
    with pytest.raises(B.BaselineError, match="does not exist; create it with .*--update-baseline"):
        B.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "something"}))
    with pytest.raises(B.BaselineError, match="not a gpuemu lint baseline"):
        B.load(bad)
    assert issubclass(B.BaselineError, GpuemuError)


# ------------------------------------------------------------------------------------------------ SARIF


def _schema_validator():
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(DATA, "sarif-schema-2.1.0.json")) as f:
        schema = json.load(f)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def test_sarif_from_findings_validates_and_points_at_kernel_lines(tmp_path):
    src = tmp_path / "kernels" / "k.py"
    src.parent.mkdir()
    src.write_text("x\n" * 20)
    loc = SourceLocation(str(src), 3, 9)
    f = evaluate(kernel_id="kernels/k.py:f>_k", name="_k", target=get("sm_80"),
                 metrics=_metrics(spill_store_bytes=4, spill_load_bytes=4, stack_bytes=8), error=None,
                 settings=_builtin_config().rules, hot=True, base=None, location=loc)[0].with_state("new")
    log = sarif.build([f], root=tmp_path, version="0.1.0", command_line="gpuemu lint kernels/k.py")
    errors = sorted(_schema_validator().iter_errors(log), key=str)
    assert errors == []
    run = log["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rule_ids == list(RULES)
    (res,) = run["results"]
    assert rule_ids[res["ruleIndex"]] == res["ruleId"] == "spills"
    phys = res["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": "kernels/k.py", "uriBaseId": "%SRCROOT%"}
    assert phys["region"] == {"startLine": 3, "endLine": 9}
    assert res["partialFingerprints"]["gpuemuFinding/v1"] == f.fingerprint and res["baselineState"] == "new"


def test_sarif_schema_rejects_a_broken_log():
    """The committed schema really constrains: a result without a message is invalid."""
    log = sarif.build([], version="0.1.0")
    log["runs"][0]["results"].append({"ruleId": "spills", "level": "fatal"})
    assert len(list(_schema_validator().iter_errors(log))) >= 1


# ---------------------------------------------------------------------------------------------- CUDA C


def test_demangle_and_cuda_signature():
    assert demangle_simple("_Z6kernelPf") == "kernel"
    assert demangle_simple("_ZN2ns3addEPKfS1_Pfi") == "add"
    assert demangle_simple("plain_c") == "plain_c"
    src = "#include <x>\n\n__global__ void k(const float* x, double s, int n)\n{\n  if (n) { x[0]; }\n}\n"
    assert cuda_signature(src, "k") == (("*fp32", "fp64", "i32"), 3, 6)
