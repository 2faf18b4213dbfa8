"""KernelMetrics: everything the rules read about one kernel compiled for one target.

:func:`measure` builds it from artifacts (cubin, PTX, TTIR, Triton's metadata, optionally the ptxas log and
SASS), whoever produced them: the lint's own AOT compile or Triton in a running process.

Spills: ``ptxas -v`` prints the bytes of spill stores and loads; when its log is not at hand (lint on compile
reuses Triton's artifacts, and Triton discards the log) they come from the SASS (``STL``/``LDL`` bytes) when it
was disassembled, else only the stack frame is known (``spill_source`` says which). Triton's own
``n_spills`` on a GPU is the stack frame (``CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES``) divided by 4.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from . import artifacts as A
from .occupancy import Occupancy, estimate
from .targets import Target

METRICS_VERSION = 2  # bump when a parser changes what it counts: cached metrics are then recomputed


@dataclass(frozen=True)
class KernelMetrics:
    """Resource use, occupancy and instruction mix of one kernel on one target."""

    name: str
    target: str
    registers: int
    stack_bytes: int
    local_bytes: int
    shared_static: int
    shared_dynamic: int
    num_warps: int
    num_stages: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    spill_source: str  # "ptxas" | "sass" | "stack"
    occupancy: Occupancy
    ptx: A.InstructionMix
    sass: A.InstructionMix | None = None
    dots: tuple[A.DotInfo, ...] = ()
    arg_types: tuple[str, ...] = ()
    tools: dict = field(default_factory=dict)
    int32_index_products: tuple[str, ...] = ()  # TTIR: i32 program id x runtime argument products reaching addptr

    @property
    def spill_bytes(self) -> int:
        """Spill stores + loads in bytes; the stack frame when neither ptxas nor SASS said."""
        if self.spill_store_bytes is None or self.spill_load_bytes is None:
            return self.stack_bytes
        return self.spill_store_bytes + self.spill_load_bytes

    @property
    def triton_n_spills(self) -> int:
        """What Triton reports as ``n_spills`` on a GPU for this kernel (local memory per thread / 4)."""
        return (self.stack_bytes + self.local_bytes) // 4

    @property
    def shared_bytes(self) -> int:
        return self.shared_static + self.shared_dynamic

    @property
    def instructions(self) -> int:
        """SASS instruction count when disassembled, else PTX's."""
        return self.sass.total if self.sass is not None else self.ptx.total

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "registers": self.registers,
                "stack_bytes": self.stack_bytes, "local_bytes": self.local_bytes,
                "shared_static": self.shared_static, "shared_dynamic": self.shared_dynamic,
                "num_warps": self.num_warps, "num_stages": self.num_stages,
                "spill_store_bytes": self.spill_store_bytes, "spill_load_bytes": self.spill_load_bytes,
                "spill_source": self.spill_source, "spill_bytes": self.spill_bytes,
                "triton_n_spills": self.triton_n_spills, "occupancy": self.occupancy.to_dict(),
                "ptx": self.ptx.to_dict(), "sass": self.sass.to_dict() if self.sass is not None else None,
                "dots": [d.to_dict() for d in self.dots], "arg_types": list(self.arg_types),
                "tools": dict(self.tools), "int32_index_products": list(self.int32_index_products),
                "metrics_version": METRICS_VERSION}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KernelMetrics":
        occ = d["occupancy"]
        return cls(name=d["name"], target=d["target"], registers=d["registers"], stack_bytes=d["stack_bytes"],
                   local_bytes=d["local_bytes"], shared_static=d["shared_static"],
                   shared_dynamic=d["shared_dynamic"], num_warps=d["num_warps"], num_stages=d.get("num_stages"),
                   spill_store_bytes=d.get("spill_store_bytes"), spill_load_bytes=d.get("spill_load_bytes"),
                   spill_source=d.get("spill_source", "stack"),
                   occupancy=Occupancy(occ["blocks_per_sm"], occ["warps_per_sm"], occ["occupancy"], occ["limiter"]),
                   ptx=A.InstructionMix.from_dict(d["ptx"]),
                   sass=A.InstructionMix.from_dict(d["sass"]) if d.get("sass") else None,
                   dots=tuple(A.DotInfo(**x) for x in d.get("dots", [])), arg_types=tuple(d.get("arg_types", [])),
                   tools=dict(d.get("tools", {})),
                   int32_index_products=tuple(d.get("int32_index_products", ())))


def measure(*, name: str, target: Target, cubin_resources: str, ptx: str, ttir: str = "",
            num_warps: int = 4, num_stages: int | None = None, shared_dynamic: int = 0,
            ptxas_log: str | None = None, sass: str | None = None, arg_types: tuple[str, ...] | None = None,
            tools: Mapping[str, str] | None = None) -> KernelMetrics:
    """Combine the parsed artifacts of kernel ``name`` into :class:`KernelMetrics`.

    ``cubin_resources`` is ``cuobjdump --dump-resource-usage`` output; ``shared_dynamic`` is Triton's
    ``metadata["shared"]`` (the dynamic shared memory a launch asks for).
    """
    res_all = A.parse_resource_usage(cubin_resources)
    res = res_all.get(name) or (next(iter(res_all.values())) if len(res_all) == 1 else None)
    if res is None:
        from .tools import ToolError

        raise ToolError(f"the cubin has no function {name!r} (it has {', '.join(res_all) or 'none'})")
    spill_store = spill_load = None
    source = "stack"
    if ptxas_log:
        log = A.parse_ptxas_log(ptxas_log)
        entry = log.get(name) or (next(iter(log.values())) if len(log) == 1 else {})
        if "spill_store_bytes" in entry:
            spill_store, spill_load, source = entry["spill_store_bytes"], entry["spill_load_bytes"], "ptxas"
    sass_mix = None
    if sass:
        fns = A.sass_functions(sass)
        sass_mix = A.sass_mix(fns.get(name, sass))
        if source == "stack":
            spill_store, spill_load, source = sass_mix.local_store_bytes, sass_mix.local_load_bytes, "sass"
    regs = res.get("REG", 0)
    shared_static = res.get("SHARED", 0)
    occ = estimate(target, registers=regs, num_warps=num_warps, shared_bytes=shared_static + shared_dynamic)
    types = tuple(arg_types) if arg_types is not None else tuple(A.ttir_arg_types(ttir, name))
    return KernelMetrics(name=name, target=target.name, registers=regs, stack_bytes=res.get("STACK", 0),
                         local_bytes=res.get("LOCAL", 0), shared_static=shared_static, shared_dynamic=shared_dynamic,
                         num_warps=num_warps, num_stages=num_stages, spill_store_bytes=spill_store,
                         spill_load_bytes=spill_load, spill_source=source, occupancy=occ,
                         ptx=A.ptx_mix(ptx, name), sass=sass_mix, dots=tuple(A.ttir_dots(ttir)), arg_types=types,
                         tools=dict(tools or {}), int32_index_products=tuple(A.ttir_int32_index_products(ttir)))
