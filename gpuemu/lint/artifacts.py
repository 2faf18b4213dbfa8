"""Reading compiled artifacts: resource usage, the ptxas log, PTX/SASS instruction mixes, TTIR facts.

Every function here is a pure parser of text that NVIDIA's or Triton's tools print, so the same numbers come
out whether the artifacts were compiled ahead of time by ``gpuemu lint`` or by Triton in a running process
(:func:`gpuemu.lint.on_compile`). The tool invocations that produce the text live in :mod:`.tools`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------------------- resource usage

_RES_FN = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_RES_KV = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """``cuobjdump --dump-resource-usage`` output -> {function: {"REG": n, "STACK": n, "SHARED": n, ...}}.

    >>> parse_resource_usage(" Function k:\\n  REG:40 STACK:8 SHARED:0 LOCAL:0 CONSTANT[0]:400")["k"]["REG"]
    40
    """
    out: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _RES_FN.match(line)
        if m:
            current = m.group(1)
            out[current] = {}
            continue
        if current is not None and ":" in line and "REG:" in line:
            out[current].update({k: int(v) for k, v in _RES_KV.findall(line)})
    return out


# ------------------------------------------------------------------------------------- ptxas -v log

_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas_log(text: str) -> dict[str, dict[str, int]]:
    """``ptxas -v`` stderr -> {function: {"registers", "stack_frame", "spill_store_bytes", "spill_load_bytes",
    "barriers"}} (keys present only when ptxas printed them)."""
    out: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, {})
            continue
        m2 = re.search(r"Function properties for (\S+)", line)
        if m2:
            current = m2.group(1)
            out.setdefault(current, {})
            continue
        if current is None:
            continue
        if (p := _PTXAS_PROPS.search(line)):
            out[current].update(stack_frame=int(p.group(1)), spill_store_bytes=int(p.group(2)),
                                spill_load_bytes=int(p.group(3)))
        if (u := _PTXAS_USED.search(line)):
            out[current]["registers"] = int(u.group(1))
        if (b := _PTXAS_BARRIERS.search(line)):
            out[current]["barriers"] = int(b.group(1))
    return out


# ------------------------------------------------------------------------------------ instruction mixes


@dataclass(frozen=True)
class InstructionMix:
    """What one kernel's PTX or SASS is made of. ``opcodes`` counts base opcodes (``ld``, ``FFMA``)."""

    isa: str  # "ptx" or "sass"
    total: int = 0
    fp64: int = 0
    local_loads: int = 0
    local_stores: int = 0
    local_load_bytes: int = 0
    local_store_bytes: int = 0
    tensor_core: int = 0
    barriers: int = 0
    global_loads: int = 0
    global_stores: int = 0
    global_stores_predicated: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)

    @property
    def global_stores_unpredicated(self) -> int:
        return self.global_stores - self.global_stores_predicated

    def to_dict(self) -> dict[str, Any]:
        return {"isa": self.isa, "total": self.total, "fp64": self.fp64, "local_loads": self.local_loads,
                "local_stores": self.local_stores, "local_load_bytes": self.local_load_bytes,
                "local_store_bytes": self.local_store_bytes, "tensor_core": self.tensor_core,
                "barriers": self.barriers, "global_loads": self.global_loads, "global_stores": self.global_stores,
                "global_stores_predicated": self.global_stores_predicated,
                "global_stores_unpredicated": self.global_stores_unpredicated, "opcodes": dict(self.opcodes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "InstructionMix":
        keys = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in keys})


_PTX_WIDTH = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
              "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}


def _ptx_bytes(parts: list[str]) -> int:
    vec = 1
    width = 4
    for p in parts:
        if p in ("v2", "v4", "v8"):
            vec = int(p[1:])
        elif p in _PTX_WIDTH:
            width = _PTX_WIDTH[p]
    return vec * width


def ptx_mix(ptx: str, function: str | None = None) -> InstructionMix:
    """Count PTX instructions (of one ``.entry`` when ``function`` is given, else of the whole module).

    Categories: fp64 (any ``.f64`` operation), local loads/stores (``ld.local``/``st.local``), tensor-core
    (``mma``, ``wgmma.mma_async``, ``tcgen05.mma``), CTA barriers (``bar.*``/``barrier.*``), and global
    stores split by whether a predicate guards them (``@%p st.global``).
    """
    text = _ptx_entry(ptx, function) if function else ptx
    ops: Counter[str] = Counter()
    c = Counter()
    for raw in text.splitlines():
        line = raw.split("//", 1)[0]
        for seg in line.split(";"):
            seg = seg.strip().lstrip("{}").strip()
            if not seg or seg.startswith(".") or seg.endswith(":") or seg.startswith(")") or seg.startswith("("):
                continue
            toks = seg.split()
            predicated = toks[0].startswith("@")
            if predicated:
                toks = toks[1:]
                if not toks:
                    continue
            opcode = toks[0]
            if not re.match(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_:]+)*$", opcode):
                continue
            parts = opcode.split(".")
            base = parts[0]
            ops[base] += 1
            c["total"] += 1
            if "f64" in parts[1:] and base not in ("ld", "st", "mov", "cvta"):
                c["fp64"] += 1
            if base == "ld" and "local" in parts:
                c["local_loads"] += 1
                c["local_load_bytes"] += _ptx_bytes(parts)
            elif base == "st" and "local" in parts:
                c["local_stores"] += 1
                c["local_store_bytes"] += _ptx_bytes(parts)
            elif base == "ld" and "global" in parts:
                c["global_loads"] += 1
            elif base == "st" and "global" in parts:
                c["global_stores"] += 1
                c["global_stores_predicated"] += predicated
            if base == "mma" or (base == "wgmma" and "mma_async" in parts) or (base == "tcgen05" and "mma" in parts):
                c["tensor_core"] += 1
            if base in ("bar", "barrier") and "warp" not in parts:
                c["barriers"] += 1
    return InstructionMix(isa="ptx", opcodes=dict(ops.most_common()), **c)


def _ptx_entry(ptx: str, function: str) -> str:
    """The body of ``.entry function`` (up to the next ``.entry``/``.func``), or the whole text if absent."""
    m = re.search(r"\.entry\s+" + re.escape(function) + r"\b", ptx)
    if not m:
        return ptx
    nxt = re.search(r"^\s*(?:\.(?:visible|weak|extern)\s+)?\.(?:entry|func)\s", ptx[m.end():], flags=re.MULTILINE)
    return ptx[m.start(): m.end() + nxt.start()] if nxt else ptx[m.start():]


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
_SASS_FN = re.compile(r"^\s*Function\s*:\s*(\S+)")
_SASS_TENSOR = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "BMMA", "BGMMA", "DMMA", "UTCHMMA", "UTCQMMA",
                "UTCIMMA", "UTCOMMA", "OMMA", "QMMA")
_SASS_FP64 = ("DADD", "DMUL", "DFMA", "DSETP", "DSET", "DMNMX", "DMMA")
_SASS_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def sass_functions(sass: str) -> dict[str, str]:
    """Split ``cuobjdump --dump-sass`` / ``nvdisasm`` output into {function: its text}."""
    out: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        m = _SASS_FN.match(line)
        if m:
            current = m.group(1)
            out[current] = []
            continue
        m2 = re.match(r"^\s*\.text\.(\S+?):\s*$", line)
        if m2:
            current = m2.group(1)
            out[current] = []
            continue
        if current is not None:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def sass_mix(sass: str) -> InstructionMix:
    """Count SASS instructions: fp64 (D* and F64 conversions), local LDL/STL with their bytes (spill traffic),
    tensor-core (HMMA/HGMMA/IMMA/...), barriers (BAR*), global stores (STG) split by predicate."""
    ops: Counter[str] = Counter()
    c = Counter()
    for line in sass.splitlines():
        m = _SASS_LINE.search(line)
        if not m:
            continue
        pred, opcode = m.group(1), m.group(2)
        parts = opcode.split(".")
        base = parts[0]
        if base == "NOP":
            continue
        ops[base] += 1
        c["total"] += 1
        if base in _SASS_FP64 or (base in ("F2F", "I2F", "F2I") and "F64" in parts[1:]):
            c["fp64"] += 1
        width = 4
        for p in parts[1:]:
            width = _SASS_WIDTH.get(p, width)
        if base == "LDL":
            c["local_loads"] += 1
            c["local_load_bytes"] += width
        elif base == "STL":
            c["local_stores"] += 1
            c["local_store_bytes"] += width
        elif base in ("LDG",):
            c["global_loads"] += 1
        elif base in ("STG",):
            c["global_stores"] += 1
            c["global_stores_predicated"] += bool(pred) and "PT" not in pred
        if base in _SASS_TENSOR:
            c["tensor_core"] += 1
        if base == "BAR":
            c["barriers"] += 1
    return InstructionMix(isa="sass", opcodes=dict(ops.most_common()), **c)


# ------------------------------------------------------------------------------------------- TTIR

_TT_DOT = re.compile(r"tt\.dot(?:_scaled)?\s")
_TT_PREC = re.compile(r"inputPrecision\s*=\s*(\w+)")
_TT_OPERAND = re.compile(r":\s*tensor<[0-9x]*x([a-zA-Z0-9]+)")
_TT_FUNC = re.compile(r"tt\.func\s+(?:public\s+|private\s+)?@(\w+)\((.*?)\)\s*(?:attributes|\{|loc)", re.DOTALL)
_TT_ARGTYPE = re.compile(r"%[\w.$-]+:\s*(!tt\.ptr<([a-zA-Z0-9]+)>|[a-zA-Z0-9]+)")


@dataclass(frozen=True)
class DotInfo:
    """One ``tl.dot`` in the kernel: operand element type and the input precision Triton was asked for."""

    operand: str  # "f16", "bf16", "f32", "f8E4M3FN", "i8", "f64"
    precision: str  # "tf32", "ieee", "tf32x3", ... ("" when TTIR does not say)

    @property
    def wants_tensor_cores(self) -> bool:
        """True when the hardware has tensor cores for this dot: fp32 only when not asked for ``ieee``."""
        op = self.operand.lower()
        if op.startswith("f64"):
            return False
        if op == "f32":
            return self.precision not in ("ieee",)
        return True

    def to_dict(self) -> dict[str, Any]:
        return {"operand": self.operand, "precision": self.precision}


def ttir_dots(ttir: str) -> list[DotInfo]:
    """Every ``tt.dot`` in a TTIR module, with its operand type and input precision."""
    out = []
    for line in ttir.splitlines():
        if not _TT_DOT.search(line):
            continue
        prec = _TT_PREC.search(line)
        opnd = _TT_OPERAND.search(line)
        out.append(DotInfo(operand=opnd.group(1) if opnd else "?", precision=prec.group(1) if prec else ""))
    return out


_SSA_DEF = re.compile(r"^\s*(%[\w.$-]+)(?::\d+)?\s*=\s*(?:\"([\w.]+)\"|([\w.]+))(.*)$")
_SSA_USE = re.compile(r"%[\w.$-]+")
_LOC_REF = re.compile(r"loc\((#loc\d*)\)\s*$")
_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_I32 = re.compile(r":\s*(?:i32|tensor<[\dx]*xi32>)\s*(?:loc|$)")
_WIDEN = ("arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp")


def _loc_line(ref: str, locs: dict[str, str], depth: int = 0) -> str | None:
    """``file:line`` of a TTIR location reference (following named and call-site locations)."""
    body = locs.get(ref)
    if body is None or depth > 8:
        return None
    m = re.match(r'"([^"]+)":(\d+):\d+', body)
    if m:
        return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"
    for inner in re.findall(r"#loc\d*", body)[::-1]:  # (a named or call-site location: the innermost one)
        got = _loc_line(inner, locs, depth + 1)
        if got:
            return got
    return None


def ttir_int32_index_products(ttir: str) -> list[str]:
    """Every i32 ``arith.muli`` of a value derived from ``tt.get_program_id`` and one derived from an i32 kernel
    argument (a runtime stride or size) whose result reaches a ``tt.addptr``: an index product that wraps past
    2^31 elements (``row * stride``). Each as ``file:line: %a * %b``; a value widened to i64 first is not one."""
    locs = {}
    for line in ttir.splitlines():
        m = _LOC_DEF.match(line)
        if m:
            locs[m.group(1)] = m.group(2)
    args: set[str] = set()
    for m in _TT_FUNC.finditer(ttir):
        args |= set(re.findall(r"(%[\w.$-]+): i32\b", m.group(2)))
    pid: set[str] = set()
    arg: set[str] = set(args)
    uses: dict[str, list[str]] = {}
    products = []
    for line in ttir.splitlines():
        m = _SSA_DEF.match(line)
        if not m:
            continue
        res, op, rest = m.group(1), m.group(2) or m.group(3), m.group(4)
        operands = [u for u in _SSA_USE.findall(rest.split(" loc(")[0])]
        for u in operands:
            uses.setdefault(u, []).append(res)
        if op == "tt.get_program_id":
            pid.add(res)
            continue
        if op in _WIDEN:
            continue
        if any(u in pid for u in operands):
            pid.add(res)
        if any(u in arg for u in operands):
            arg.add(res)
        if op == "arith.muli" and len(operands) == 2 and _I32.search(rest):
            a, b = operands
            if (a in pid and b in arg and b not in pid) or (b in pid and a in arg and a not in pid):
                ref = _LOC_REF.search(line)
                products.append((res, f"{_loc_line(ref.group(1), locs) if ref else '?'}: {a} * {b}"))
        if op == "tt.addptr":
            uses.setdefault("__addptr__", []).extend(operands[1:2])
    offsets = set(uses.get("__addptr__", []))
    out = []
    for res, text in products:  # (reaches an address: forward through every use)
        seen, todo = set(), [res]
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in offsets:
                out.append(text)
                break
            todo += uses.get(v, [])
    return list(dict.fromkeys(out))


_TT_TO_TRITON = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64", "i1": "i1", "i8": "i8",
                 "i16": "i16", "i32": "i32", "i64": "i64", "f8E4M3FN": "fp8e4nv", "f8E5M2": "fp8e5"}


def ttir_arg_types(ttir: str, function: str | None = None) -> list[str]:
    """Argument types of the kernel's ``tt.func`` in Triton's signature spelling (``*fp16``, ``i32``, ``fp32``)."""
    for m in _TT_FUNC.finditer(ttir):
        if function and m.group(1) != function:
            continue
        types = []
        for full, pointee in _TT_ARGTYPE.findall(m.group(2)):
            if pointee:
                types.append("*" + _TT_TO_TRITON.get(pointee, pointee))
            else:
                types.append(_TT_TO_TRITON.get(full, full))
        return types
    return []


def float_arg_types(types: list[str]) -> set[str]:
    """The floating-point element types among kernel argument types: {"fp16", "fp32"} for ``*fp16, fp32, i32``."""
    out = set()
    for t in types:
        base = t.lstrip("*")
        if base.startswith(("fp", "bf")):
            out.add(base)
    return out
