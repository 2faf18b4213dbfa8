"""What the runtime tells about each launch it ran: kernel, grid, constexprs, dot precision, autotune.

A ``LaunchReport`` per launch, in launch order, collected by :func:`observe` on the current thread. The
fuzzer's runner merges them into its ``Launch`` records (``Launch.options``), so a verdict can say which
dot precision the kernel used and which autotune config was chosen.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

_state = threading.local()


@dataclass(frozen=True)
class LaunchReport:
    kernel: str
    grid: tuple[int, int, int]
    constexprs: dict[str, Any] = field(default_factory=dict)
    programs: int = 0
    seconds: float = 0.0
    dot_precision: str | None = None  # "tf32", "ieee", "tf32x3", "bf16", "fp16", ... (None: no tl.dot)
    autotune: dict[str, Any] | None = None  # {"chosen": {...}, "configs_run": n, "agree": bool}
    grid_mode: str = "sequential"  # "batched (N passes)", or "sequential" and why (gpuemu.runtime.batched)
    # why the runtime handed this launch to Triton's own interpreter (a construct it cannot run yet), else None
    fallback: str | None = None
    programs_run: int | None = None  # a partial launch (gpuemu.runtime.partial): how many programs it ran

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "grid": list(self.grid), "constexprs": _plain(self.constexprs),
                "programs": self.programs, "seconds": self.seconds, "dot_precision": self.dot_precision,
                "autotune": self.autotune, "grid_mode": self.grid_mode,
                "fallback": self.fallback, "programs_run": self.programs_run}

    def launch_options(self) -> dict[str, Any]:
        """The fields a ``Launch.options`` dict carries (plain values only)."""
        out: dict[str, Any] = {}
        if self.dot_precision is not None:
            out["dot_precision"] = self.dot_precision
        if self.autotune is not None:
            out["autotune_config"] = ", ".join(f"{k}={v}" for k, v in self.autotune["chosen"].items())
            out["autotune_configs_run"] = self.autotune["configs_run"]
        if self.fallback is not None:
            out["runtime_fallback"] = self.fallback
        if self.programs_run is not None:
            out["programs_run"] = self.programs_run
        return out


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if isinstance(v, (int, float, bool, str)) or v is None else str(v)) for k, v in d.items()}


def record(report: LaunchReport) -> None:
    for obs in getattr(_state, "observers", ()):
        obs.append(report)


@contextlib.contextmanager
def observe() -> Iterator[list[LaunchReport]]:
    """Collect the runtime's launch reports made on this thread inside the block.

    >>> with observe() as reports:
    ...     pass
    >>> reports
    []
    """
    obs = getattr(_state, "observers", None)
    if obs is None:
        obs = _state.observers = []
    seen: list[LaunchReport] = []
    obs.append(seen)
    try:
        yield seen
    finally:
        obs.remove(seen)
