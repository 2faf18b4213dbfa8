"""GPU targets the lint compiles for, and what each one's streaming multiprocessor holds.

The numbers are NVIDIA's published per-compute-capability limits (CUDA C Programming Guide, "Features and
Technical Specifications", and the occupancy calculator's tables): a target is named ``sm_XY`` as in
``--target sm_80,sm_86,sm_89,sm_90``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument


@dataclass(frozen=True)
class Target:
    """One compute capability: its name, example GPUs and the SM limits occupancy depends on."""

    name: str  # "sm_90"
    capability: int  # 90
    gpus: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256  # registers are granted per warp in chunks of this many
    shared_per_sm: int = 0  # bytes usable by blocks (the carve-out maximum)
    max_shared_per_block: int = 0  # bytes, opt-in maximum
    reserved_shared_per_block: int = 1024  # the runtime's per-block reservation (sm_80+)
    tensor_cores: tuple[str, ...] = ("mma",)  # PTX families that drive tensor cores here

    @property
    def arch(self) -> str:
        return self.name

    def to_dict(self) -> dict:
        return {"name": self.name, "capability": self.capability, "gpus": self.gpus,
                "max_warps_per_sm": self.max_warps_per_sm, "max_blocks_per_sm": self.max_blocks_per_sm,
                "registers_per_sm": self.registers_per_sm, "shared_per_sm": self.shared_per_sm,
                "max_shared_per_block": self.max_shared_per_block, "tensor_cores": list(self.tensor_cores)}


_KB = 1024
TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sm_75", 75, "T4, RTX 20xx", max_warps_per_sm=32, max_blocks_per_sm=16,
           shared_per_sm=64 * _KB, max_shared_per_block=64 * _KB, reserved_shared_per_block=0),
    Target("sm_80", 80, "A100, A30", max_warps_per_sm=64, max_blocks_per_sm=32,
           shared_per_sm=164 * _KB, max_shared_per_block=163 * _KB),
    Target("sm_86", 86, "A10, A40, RTX 30xx", max_warps_per_sm=48, max_blocks_per_sm=16,
           shared_per_sm=100 * _KB, max_shared_per_block=99 * _KB),
    Target("sm_87", 87, "Jetson Orin", max_warps_per_sm=48, max_blocks_per_sm=16,
           shared_per_sm=164 * _KB, max_shared_per_block=163 * _KB),
    Target("sm_89", 89, "L4, L40S, RTX 40xx", max_warps_per_sm=48, max_blocks_per_sm=24,
           shared_per_sm=100 * _KB, max_shared_per_block=99 * _KB),
    Target("sm_90", 90, "H100, H200, GH200", max_warps_per_sm=64, max_blocks_per_sm=32,
           shared_per_sm=228 * _KB, max_shared_per_block=227 * _KB, tensor_cores=("mma", "wgmma")),
)}

DEFAULT_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90")


def get(name: str | int) -> Target:
    """The target named ``sm_90`` (also accepted: ``90``, ``sm90``, ``sm_90a``).

    >>> get("sm_90").max_warps_per_sm
    64
    """
    text = str(name).strip().lower().removeprefix("sm_").removeprefix("sm").removesuffix("a")
    key = f"sm_{text}"
    if key not in TARGETS:
        raise InvalidArgument(f"target {name!r} is not a known GPU target; use one of {', '.join(TARGETS)} "
                              f"(e.g. --target sm_80,sm_90)")
    return TARGETS[key]


def parse(spec: str | list[str] | tuple[str, ...] | None) -> list[Target]:
    """``"sm_80,sm_90"`` (or a list of names) -> targets, in order, without duplicates; None -> the defaults."""
    if spec is None:
        names: list[str] = list(DEFAULT_TARGETS)
    elif isinstance(spec, str):
        names = [s for s in spec.replace(" ", "").split(",") if s]
    else:
        names = [str(s) for s in spec]
    if not names:
        raise InvalidArgument("--target is empty; name at least one, e.g. --target sm_90")
    out: list[Target] = []
    for n in names:
        t = get(n)
        if t not in out:
            out.append(t)
    return out
