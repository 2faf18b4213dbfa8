"""Running a launcher: on the CPU under Triton's interpreter, or on CUDA when present.

:func:`run_launcher` calls a launcher once with hygiene around it: output allocations made inside the
call are poisoned, Triton launches are observed, exceptions are captured (a kernel that raises is a
verdict, not a crash of gpuemu), and the time spent is measured.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from .launches import Launch, observe_launches
from .poison import poison_allocations

__all__ = ["Launch", "RunOutcome", "default_device", "interpreting", "observe_launches", "run_launcher"]


def interpreting() -> bool:
    """True when Triton kernels run under the interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0", "false", "False")


def default_device() -> str:
    """'cuda' when a GPU is present and the interpreter is off, else 'cpu'."""
    if interpreting():
        return "cpu"
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover - torch broken
        return "cpu"


@dataclass
class RunOutcome:
    output: Any = None
    error: BaseException | None = None
    error_text: str = ""
    launches: list[Launch] = field(default_factory=list)
    seconds: float = 0.0


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def run_launcher(fn: Callable, args: list, kwargs: dict, *, device: str = "cpu", poison: bool = True) -> RunOutcome:
    """Call ``fn(*args, **kwargs)``; never raises for what the launcher does."""
    import numpy as np

    out = RunOutcome()
    t0 = time.perf_counter()
    try:
        # the interpreter evaluates kernels with numpy: an exp that overflows is the kernel's business
        with observe_launches() as launches, poison_allocations(enabled=poison), np.errstate(all="ignore"):
            out.output = fn(*args, **kwargs)
            _sync(device)
        out.launches = launches
    except Exception as e:  # the kernel's failure is the verdict
        out.error = e
        tb = traceback.extract_tb(e.__traceback__)
        where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
        out.error_text = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}{where}"
    out.seconds = time.perf_counter() - t0
    return out
