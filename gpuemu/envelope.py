"""The launchable envelope: which sizes the target GPU launches a kernel at, learnt from the refusals of a run.

A launch the GPU refuses (more shared memory or registers than the chip has, a grid past its limits; predicted
on the CPU from the AOT compile, raised by Triton on a GPU) is loud: no silent wrong answer ships from it. Such a
case is a LIMIT verdict, not a failure (``--limits fail`` makes it one, for a team that declares the shape
supported). After a refusal the fuzzer stays inside the envelope: each dim of the refused case larger than any
size seen launching is capped at the largest that launched or half the refused size, the larger, so the run
spends its cases on launches that exist; the summary states the envelope (``launches on sm_90 for D <= 128``).

What a team declares supported (:func:`parse_supports`: ``all``, or the largest size per dim, ``D<=256``) makes a
refusal inside it fatal (:func:`covers`): the kernel was meant to launch there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass
class Envelope:
    launched: dict[str, int] = field(default_factory=dict)  # dim -> largest size seen launching
    blocks: dict[str, int] = field(default_factory=dict)  # block constexpr -> largest value seen launching
    caps: dict[str, int] = field(default_factory=dict)  # dim -> largest size drawn from now on
    refused: int = 0
    first: str = ""  # the first refusal's message
    since: float = 0.0  # time.monotonic() of its first refusal (DtypeEnvelopes names the run's first)

    def launched_at(self, dims: Mapping[str, int], launches: Any = ()) -> None:
        for d, v in dims.items():
            if v > self.launched.get(d, 0):
                self.launched[d] = v
        for name, v in _blocks(launches).items():
            if v > self.blocks.get(name, 0):
                self.blocks[name] = v

    def refused_at(self, dims: Mapping[str, int], message: str, lows: Mapping[str, int], launches: Any = ()) -> None:
        """A refusal at ``dims``. The dims to cap: those whose next power of two is a block size the refused launch
        has and no launched one had (BLOCK_D = next_power_of_2(D), the usual way a block follows a dim; where several
        dims round to it, the one the block is named after: BLOCK_K, K); else
        every dim past the largest size seen launching, one below its refused size (later refusals go on). A culprit
        is capped at the larger of the largest size seen launching and half the refused size."""
        self.refused += 1
        if not self.first:
            self.since = time.monotonic()
        self.first = self.first or message
        culprits: list[str] = []
        for name, size in _blocks(launches).items():
            if size <= self.blocks.get(name, 0):
                continue
            fits = [d for d, v in dims.items() if v > self.launched.get(d, 0) and _pow2(v) == size]
            named = [d for d in fits if name.upper().endswith("_" + d.upper())]  # BLOCK_K follows K, not M or N
            culprits += [d for d in (named or fits) if d not in culprits]
        for d in culprits or [d for d, v in dims.items() if v > self.launched.get(d, 0)]:
            v, seen = dims[d], self.launched.get(d, 0)
            cap = max(seen, v // 2, 1) if culprits else max(seen, v - 1)  # halving: refusals converge on the edge
            self.caps[d] = max(lows.get(d, 1), min(self.caps.get(d, cap), cap))

    def describe(self) -> str:
        """``launches on sm_90 for D <= 128, N <= 512 (needs 294,912 B shared memory on sm_90, limit 232,448)``."""
        where = _target_of(self.first)
        caps = ", ".join(f"{d} <= {c}" for d, c in sorted(self.caps.items()))
        reason = self.first.split(";")[0]
        return f"launches{' on ' + where if where else ''} for {caps or 'smaller sizes'} ({reason})"

    def to_dict(self) -> dict[str, Any]:
        return {"refused": self.refused, "caps": dict(self.caps), "first": self.first or None,
                "text": self.describe() if self.refused else None}


WIDTH_LABELS = {4: "fp32", 2: "fp16/bf16", 1: "fp8", 8: "fp64"}


class DtypeEnvelopes:
    """The run's envelopes: one per element width of the case's dtype for shared-memory refusals (a kernel's shared
    memory grows with the width of what it tiles, so a refusal of fp32 blocks at D = 64 says nothing of fp16 blocks
    of D = 64, and the run keeps drawing those), and one for every dtype for the other refusals (threads per block,
    a grid past its limits). ``text`` names the width where refusals came from more than one envelope."""

    ALL = 0  # the key of the envelope every dtype shares

    def __init__(self) -> None:
        self.by_width: dict[int, Envelope] = {}

    def refused_at(self, dtype: str, dims: Mapping[str, int], message: str, lows: Mapping[str, int],
                   launches: Any = ()) -> None:
        key = _width(dtype) if "shared memory" in message else self.ALL
        self.by_width.setdefault(key, Envelope()).refused_at(dims, message, lows, launches)

    def launched_at(self, dtype: str, dims: Mapping[str, int], launches: Any = ()) -> None:
        for key in (_width(dtype), self.ALL):
            self.by_width.setdefault(key, Envelope()).launched_at(dims, launches)

    def caps_for(self, dtype: str) -> dict[str, int]:
        caps: dict[str, int] = {}
        for key in (_width(dtype), self.ALL):
            for d, c in getattr(self.by_width.get(key), "caps", {}).items():
                caps[d] = min(c, caps.get(d, c))
        return caps

    def to_dict(self) -> dict[str, Any]:
        refused = {w: e for w, e in self.by_width.items() if e.refused}
        if not refused:
            return {"refused": 0, "caps": {}, "first": None, "text": None}
        if len(refused) == 1:
            return next(iter(refused.values())).to_dict()
        first = min(refused.values(), key=lambda e: e.since)
        label = {**WIDTH_LABELS, self.ALL: "every dtype"}
        ordered = sorted(refused.items(), reverse=True)
        return {"refused": sum(e.refused for e in refused.values()),
                "caps": {label.get(w, f"{w}-byte"): dict(e.caps) for w, e in ordered},
                "first": first.first,
                "text": "; ".join(f"{label.get(w, f'{w}-byte')}: {e.describe()}" for w, e in ordered)}


def _width(dtype: str) -> int:
    return {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8}.get(str(dtype), 1 if "8" in str(dtype) else 4)


def _pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def _blocks(launches: Any) -> dict[str, int]:
    """The power-of-two int constexprs of the launches (the block sizes)."""
    out: dict[str, int] = {}
    for lch in launches or ():
        for name, v in getattr(lch, "constexprs", {}).items():
            if type(v) is int and v >= 2 and not v & (v - 1):
                out[name] = max(out.get(name, 0), v)
    return out


def _target_of(message: str) -> str:
    import re

    m = re.search(r"\bon (sm_\d+\w*|cuda[:\w]*|[A-Z][\w ]*H\d+)", message)
    return m.group(1) if m else ""


def parse_supports(value: Any) -> dict[str, int] | None:
    """What a launcher declares supported: None (nothing: a refusal is a LIMIT line), ``{}`` (``"all"``: every
    size drawn) or ``{dim: largest size}`` from ``"D<=256,N<=4096"`` or a mapping ``{D: 256}``. Raises ValueError
    saying what is wrong."""
    if value is None or value is False or value == "none":
        return None
    if value is True or value == "all":
        return {}
    if isinstance(value, str):
        out: dict[str, int] = {}
        for part in value.split(","):
            dim, sep, size = part.strip().partition("<=")
            if not sep or not dim.strip() or not size.strip().isdigit():
                raise ValueError(f"{part.strip()!r} is not DIM<=SIZE (e.g. D<=256); or use all")
            out[dim.strip()] = int(size)
        return out
    if isinstance(value, Mapping):
        for dim, size in value.items():
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"{dim}: {size!r} is not a size (an int >= 1)")
        return {str(k): int(v) for k, v in value.items()}
    raise ValueError(f"{value!r}: use all, or the largest supported size per dim (D<=256 or {{D: 256}})")


def covers(supports: Mapping[str, int] | None, dims: Mapping[str, int]) -> bool:
    """True when a case at ``dims`` lies inside what is declared supported (a refusal there is a failure)."""
    if supports is None:
        return False
    return all(dims.get(d, 0) <= size for d, size in supports.items())
