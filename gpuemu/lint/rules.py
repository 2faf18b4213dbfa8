"""The lint rules: what each checks, its stable id, and the findings it makes.

Rule ids are stable (they are SARIF ``ruleId``s and baseline keys): rename one and every baseline and code
scanning alert that names it breaks. Thresholds and levels come from the rule packs (``rulepacks/lint.yaml``);
the defaults below are only the fallback when a pack does not set a parameter.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from .examples import SourceLocation
from .metrics import KernelMetrics
from .targets import Target

LEVELS = ("note", "warning", "error")  # SARIF's levels, least severe first


@dataclass(frozen=True)
class RuleInfo:
    """A rule's identity and documentation (shown in SARIF and ``docs/lint.md``)."""

    id: str
    name: str  # PascalCase, SARIF's reportingDescriptor.name
    level: str
    title: str
    why: str
    params: dict = field(default_factory=dict)
    needs_baseline: bool = False


RULES: dict[str, RuleInfo] = {r.id: r for r in (
    RuleInfo("compile-error", "CompileError", "error", "The kernel does not compile for this target",
             "a kernel that does not compile for a GPU the project supports fails at its first launch there"),
    RuleInfo("spills", "RegisterSpills", "error", "Registers spill to local memory in a hot kernel",
             "spilled registers live in off-chip local memory: each spill is a memory round trip, usually in "
             "the inner loop; lower the block size or num_warps' register need", {"max_bytes": 0}),
    RuleInfo("local-memory", "LocalMemory", "warning", "The kernel uses local memory (stack) without spilling",
             "local memory is off-chip: a stack frame or per-thread array in a hot kernel costs memory "
             "traffic the same way spills do", {"max_bytes": 0}),
    RuleInfo("register-pressure", "RegisterPressure", "note", "Registers per thread above the threshold",
             "registers per thread bound how many warps an SM keeps resident; past the threshold, latency "
             "hiding drops and the next change spills", {"max_registers": 128}),
    RuleInfo("launch-limits", "LaunchLimits", "error", "The block cannot be resident on this target",
             "a block that needs more shared memory or registers than the SM allows fails to launch "
             "('out of resources') on this GPU"),
    RuleInfo("fp64-in-low-precision", "Fp64InLowPrecisionKernel", "warning",
             "fp64 instructions in a kernel whose arguments are fp32/fp16/bf16",
             "fp64 runs at 1/2 (H100) to 1/64 (consumer GPUs) of fp32 rate; in a low-precision kernel it is "
             "usually an accidental promotion (a Python float, .to(tl.float64), an fp64 constant)",
             {"max_instructions": 0}),
    RuleInfo("dot-without-tensor-cores", "DotWithoutTensorCores", "warning",
             "tl.dot compiled without tensor-core instructions on a target that has them",
             "the dot runs on CUDA cores (FMA) at a fraction of tensor-core throughput: check operand dtypes, "
             "input_precision and that every dot dimension is >= 16"),
    RuleInfo("int32-index-product", "Int32IndexProduct", "note",
             "An address offset multiplies a program id by a runtime stride in int32",
             "tl.program_id and strides that fit are int32, and so is their product: past 2^31 elements it wraps "
             "and the program reads or writes another part of memory; widen first (pid.to(tl.int64) * stride). "
             "A note: the product may stay small for the sizes the kernel serves (gpuemu fuzz --sizes production "
             "runs it at model sizes)"),
    RuleInfo("register-regression", "RegisterRegression", "warning", "Registers per thread grew vs the baseline",
             "more registers per thread lower occupancy and move the kernel toward spilling",
             {"max_increase": 4, "max_increase_pct": 10}, needs_baseline=True),
    RuleInfo("spill-regression", "SpillRegression", "error", "Spill bytes grew vs the baseline",
             "new spills add local-memory traffic to every program instance", {"max_increase_bytes": 0},
             needs_baseline=True),
    RuleInfo("occupancy-drop", "OccupancyDrop", "warning", "Estimated occupancy dropped vs the baseline",
             "fewer resident warps per SM hide less memory latency", {"max_drop": 0.0}, needs_baseline=True),
    RuleInfo("instruction-regression", "InstructionRegression", "warning",
             "Instruction count grew vs the baseline beyond the threshold",
             "more instructions per program instance usually means more time per program instance",
             {"max_increase_pct": 10}, needs_baseline=True),
)}


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on one kernel on one target: measured vs allowed, and why it matters."""

    rule: str
    level: str
    kernel: str  # the kernel id: launcher>kernel, file.py:kernel or file.cu:kernel
    name: str  # the kernel function's name
    target: str
    measured: Any
    allowed: Any
    unit: str
    why: str
    location: SourceLocation | None = None
    baseline_state: str = "none"  # "none" (no baseline given) | "new" | "unchanged" (accepted in the baseline)

    @property
    def fingerprint(self) -> str:
        """Stable across runs and line moves: rule, kernel id and target."""
        return hashlib.sha256(f"{self.rule}|{self.kernel}|{self.target}".encode()).hexdigest()[:32]

    @property
    def message(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        return (f"{self.name} on {self.target}: {RULES[self.rule].title.lower()}: measured {_fmt(self.measured)}{u}, "
                f"allowed {_fmt(self.allowed)}{u} ({self.why})")

    def gates(self, fail_on: str) -> bool:
        """True when this finding makes the run fail: at or above ``fail_on`` and not accepted by a baseline."""
        return self.baseline_state != "unchanged" and LEVELS.index(self.level) >= LEVELS.index(fail_on)

    def with_state(self, state: str) -> "Finding":
        from dataclasses import replace

        return replace(self, baseline_state=state)

    def to_dict(self) -> dict:
        return {"rule": self.rule, "level": self.level, "kernel": self.kernel, "name": self.name,
                "target": self.target, "measured": self.measured, "allowed": self.allowed, "unit": self.unit,
                "why": self.why, "message": self.message, "fingerprint": self.fingerprint,
                "baseline_state": self.baseline_state,
                "location": self.location.to_dict() if self.location else None}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def is_hot(name: str, kernel_id: str, patterns: tuple[str, ...]) -> bool:
    """A kernel is hot when its name or id matches one of the ``hot_kernels`` patterns."""
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(kernel_id, p) for p in patterns)


def evaluate(*, kernel_id: str, name: str, target: Target, metrics: KernelMetrics | None, error: str | None,
             settings: Mapping[str, Any], hot: bool, base: Mapping[str, Any] | None,
             location: SourceLocation | None = None) -> list[Finding]:
    """Every enabled rule's findings for one kernel on one target (``base``: its baseline entry, if any).

    ``settings`` maps rule id -> :class:`gpuemu.lint.config.RuleSetting`.
    """
    out: list[Finding] = []

    def add(rule: str, measured: Any, allowed: Any, unit: str, why: str | None = None, level: str | None = None):
        s = settings[rule]
        out.append(Finding(rule=rule, level=level or s.level, kernel=kernel_id, name=name, target=target.name,
                           measured=measured, allowed=allowed, unit=unit, why=why or RULES[rule].why,
                           location=location))

    def on(rule: str) -> bool:
        return settings[rule].enabled

    def p(rule: str, key: str):
        return settings[rule].params[key]

    if error is not None or metrics is None:
        if on("compile-error"):
            add("compile-error", "fails", "compiles", "", why=(error or "no artifacts")[:300])
        return out
    m = metrics
    spilled = False
    if on("spills") and m.spill_bytes > p("spills", "max_bytes"):
        spilled = True
        src = {"ptxas": "ptxas -v spill stores + loads", "sass": "STL + LDL bytes in SASS",
               "stack": "stack frame; spill bytes unknown"}[m.spill_source]
        add("spills", m.spill_bytes, p("spills", "max_bytes"), "B",
            why=f"{src}, {m.registers} registers; " + RULES["spills"].why,
            level=None if hot else "note")
    local = m.stack_bytes + m.local_bytes
    if on("local-memory") and not spilled and m.spill_bytes == 0 and local > p("local-memory", "max_bytes"):
        add("local-memory", local, p("local-memory", "max_bytes"), "B", level=None if hot else "note")
    if on("register-pressure") and m.registers > p("register-pressure", "max_registers"):
        add("register-pressure", m.registers, p("register-pressure", "max_registers"), "registers",
            why=f"occupancy {m.occupancy.occupancy:.0%} ({m.occupancy.limiter}-limited); "
                + RULES["register-pressure"].why)
    if on("launch-limits") and m.occupancy.blocks_per_sm == 0:
        if m.occupancy.limiter == "registers-too-many":
            add("launch-limits", m.registers, target.max_registers_per_thread, "registers")
        else:
            add("launch-limits", m.shared_bytes, target.max_shared_per_block, "B shared",
                why=f"{target.name} ({target.gpus}) allows {target.max_shared_per_block} B of shared memory per "
                    f"block; lower num_stages or the block size")
    from .artifacts import float_arg_types

    floats = float_arg_types(list(m.arg_types))
    fp64 = m.sass.fp64 if m.sass is not None else m.ptx.fp64
    if on("fp64-in-low-precision") and floats and "fp64" not in floats \
            and fp64 > p("fp64-in-low-precision", "max_instructions"):
        add("fp64-in-low-precision", fp64, p("fp64-in-low-precision", "max_instructions"), "fp64 instructions",
            why=f"arguments are {'/'.join(sorted(floats))}; " + RULES["fp64-in-low-precision"].why)
    tc = m.sass.tensor_core if m.sass is not None else m.ptx.tensor_core
    wanting = [d for d in m.dots if d.wants_tensor_cores]
    if on("dot-without-tensor-cores") and wanting and target.tensor_cores and tc == 0:
        kinds = ", ".join(sorted({f"{d.operand}" + (f" ({d.precision})" if d.precision else "") for d in wanting}))
        add("dot-without-tensor-cores", 0, f">= 1 ({'/'.join(target.tensor_cores)})", "tensor-core instructions",
            why=f"{len(wanting)} tl.dot on {kinds}; " + RULES["dot-without-tensor-cores"].why)
    if on("int32-index-product") and m.int32_index_products:
        add("int32-index-product", len(m.int32_index_products), 0, "int32 products",
            why=f"{'; '.join(m.int32_index_products[:3])}: " + RULES["int32-index-product"].why)
    if base:
        _regressions(m, base, add, on, p)
    return out


def _regressions(m: KernelMetrics, base: Mapping[str, Any], add, on, p) -> None:
    b_regs = int(base.get("registers", 0))
    if on("register-regression") and b_regs:
        allowed = max(p("register-regression", "max_increase"),
                      math.ceil(b_regs * p("register-regression", "max_increase_pct") / 100))
        if m.registers - b_regs > allowed:
            add("register-regression", m.registers, b_regs + allowed, "registers",
                why=f"baseline {b_regs}, +{m.registers - b_regs}; " + RULES["register-regression"].why)
    b_sp = int(base.get("spill_bytes", 0))
    if on("spill-regression") and m.spill_bytes - b_sp > p("spill-regression", "max_increase_bytes"):
        add("spill-regression", m.spill_bytes, b_sp + p("spill-regression", "max_increase_bytes"), "B",
            why=f"baseline {b_sp} B, +{m.spill_bytes - b_sp} B; " + RULES["spill-regression"].why)
    b_occ = base.get("occupancy")
    if on("occupancy-drop") and b_occ is not None \
            and b_occ - m.occupancy.occupancy > p("occupancy-drop", "max_drop") + 1e-9:
        add("occupancy-drop", round(m.occupancy.occupancy, 4), round(b_occ - p("occupancy-drop", "max_drop"), 4),
            "occupancy", why=f"baseline {b_occ:.0%}, now {m.occupancy.occupancy:.0%} "
                             f"({m.occupancy.limiter}-limited); " + RULES["occupancy-drop"].why)
    # compare like with like: SASS counts when both sides have them, else PTX
    if base.get("sass_instructions") is not None and m.sass is not None:
        now, was, isa = m.sass.total, int(base["sass_instructions"]), "SASS"
    else:
        now, was, isa = m.ptx.total, int(base.get("ptx_instructions", 0)), "PTX"
    if on("instruction-regression") and was:
        pct = p("instruction-regression", "max_increase_pct")
        if (now - was) * 100 > was * pct:
            add("instruction-regression", now, math.floor(was * (1 + pct / 100)), f"{isa} instructions",
                why=f"baseline {was}, +{(now - was) / was:.0%}; " + RULES["instruction-regression"].why)
