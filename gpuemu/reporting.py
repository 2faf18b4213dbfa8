"""The text of a fuzz run, written once: the terminal (``gpuemu fuzz``) and the AssertionError of
``FuzzResult.raise_for_failures()`` (pytest) read the same lines. JSON is ``FuzzResult.to_dict()``.
(Signed Kernel Correctness Reports are :mod:`gpuemu.report`.)

The first failure gets the whole story — its failure line, the replay command, the case, what it was shrunk
from and the assert_close-shaped detail; the next five get their line; the summary ends it.
"""

from __future__ import annotations

from typing import Any

SHOWN = 6  # failures shown by their line (the first with its detail); the rest are counted


def timing_line(result: Any) -> str:
    """``seed 0x.. · 12.3 s · gpuemu's own share 31% (kernel 8.5 s)``."""
    return (f"seed 0x{result.seed:x} · {result.seconds:.1f} s · gpuemu's own share {100 * result.own_share():.0f}% "
            f"(kernel {result.timings.get('kernel', 0):.1f} s)")


def failure_lines(result: Any, *, more_note: str = "") -> list[str]:
    """The failures of ``result`` (a :class:`gpuemu.fuzzer.FuzzResult`), real ones first; ``more_note`` follows
    the count of those not shown (the CLI points to --json)."""
    failures = result.ordered_failures()
    if not failures:
        return []
    first = failures[0]
    lines = [first.line(), f"replay: {first.replay_line()}", f"case: {first.case.describe()}"]
    if first.original is not None:
        lines.append(f"shrunk from: {first.original.describe()}")
    if first.verdict.detail:
        lines += ["  " + ln for ln in first.verdict.detail.splitlines()]
    lines += [f.line() for f in failures[1:SHOWN]]
    if len(failures) > SHOWN:
        lines.append(f"... and {len(failures) - SHOWN} more failing seeds{more_note}")
    return lines


def report(result: Any, *, more_note: str = "", timing: bool = False) -> str:
    """The whole text: (the timing line,) the failures, a store warning, the summary."""
    lines = [timing_line(result)] if timing else []
    lines += failure_lines(result, more_note=more_note)
    if result.store_error:
        lines.append(f"warning: failures not stored: {result.store_error}")
    lines.append(result.summary())
    return "\n".join(lines)
