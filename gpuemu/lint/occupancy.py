"""Estimated occupancy: how many warps of a kernel one SM of a target keeps resident.

The same arithmetic as NVIDIA's occupancy calculator. Resident blocks per SM are the least of four limits:

    warps      floor(max_warps_per_sm / warps_per_block)
    blocks     max_blocks_per_sm
    registers  floor(floor(registers_per_sm / regs_per_warp) / warps_per_block),
               regs_per_warp = ceil(registers_per_thread * 32 / 256) * 256   (allocated per warp, 256 at a time)
    shared     floor(shared_per_sm / (static + dynamic shared + the runtime's per-block reservation))

occupancy = resident blocks * warps_per_block / max_warps_per_sm. A block that asks for more shared memory
than the target allows per block cannot launch there: 0 resident blocks, limiter ``shared-too-large``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .targets import Target


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM, the fraction of the SM's warp slots they fill, and what limits them."""

    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float
    limiter: str  # "warps" | "blocks" | "registers" | "shared" | "shared-too-large" | "registers-too-many"

    def to_dict(self) -> dict:
        return {"blocks_per_sm": self.blocks_per_sm, "warps_per_sm": self.warps_per_sm,
                "occupancy": round(self.occupancy, 4), "limiter": self.limiter}


def _ceil_to(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def estimate(target: Target, *, registers: int, num_warps: int, shared_bytes: int) -> Occupancy:
    """Occupancy of a block of ``num_warps`` warps using ``registers`` per thread and ``shared_bytes`` of shared
    memory (static + dynamic) on ``target``.

    >>> from gpuemu.lint.targets import get
    >>> estimate(get("sm_90"), registers=128, num_warps=4, shared_bytes=0).limiter
    'registers'
    """
    warps = max(1, int(num_warps))
    if registers > target.max_registers_per_thread:
        return Occupancy(0, 0, 0.0, "registers-too-many")
    limits: dict[str, int] = {"warps": target.max_warps_per_sm // warps, "blocks": target.max_blocks_per_sm}
    if registers > 0:
        per_warp = _ceil_to(registers * 32, target.register_alloc_unit)
        limits["registers"] = (target.registers_per_sm // per_warp) // warps
    if shared_bytes > 0:
        if shared_bytes > target.max_shared_per_block:
            return Occupancy(0, 0, 0.0, "shared-too-large")
        limits["shared"] = target.shared_per_sm // (shared_bytes + target.reserved_shared_per_block)
    # ties go to the first named, so a kernel limited by warps alone reads "warps", not "blocks"
    limiter = min(limits, key=lambda k: limits[k])
    blocks = max(0, limits[limiter])
    return Occupancy(blocks, blocks * warps, blocks * warps / target.max_warps_per_sm, limiter)
