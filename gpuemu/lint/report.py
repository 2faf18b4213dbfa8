"""Terminal output of a lint run (rich tables on stderr): kernels per target, findings, baseline diff."""

from __future__ import annotations

import sys
from typing import TextIO

from .engine import LintResult

_LEVEL_STYLE = {"error": "bold red", "warning": "yellow", "note": "cyan"}


def _console(file: TextIO | None = None):
    from rich.console import Console

    out = file or sys.stderr
    tty = hasattr(out, "isatty") and out.isatty()
    return Console(file=out, width=None if tty else 160, highlight=False, soft_wrap=False)


def _cell(m) -> str:
    if m is None:
        return "[red]compile error[/]"
    text = f"{m.registers}r {m.occupancy.occupancy:.0%}"
    if m.spill_bytes:
        text += f" [bold red]spill {m.spill_bytes}B[/]"
    elif m.stack_bytes or m.local_bytes:
        text += f" [yellow]local {m.stack_bytes + m.local_bytes}B[/]"
    tc = m.sass.tensor_core if m.sass is not None else m.ptx.tensor_core
    if tc:
        text += " [green]TC[/]"
    return text


def render(result: LintResult, file: TextIO | None = None, *, show_kernels: bool = True) -> None:
    """Print the kernel table, the findings and (with a baseline) the diff, then a summary line."""
    from rich.table import Table

    con = _console(file)
    if show_kernels and result.reports:
        t = Table(title="gpuemu lint: registers, occupancy, spills (TC = tensor-core instructions)",
                  title_justify="left", show_lines=False)
        t.add_column("kernel", overflow="fold")
        for tg in result.targets:
            t.add_column(tg.name, no_wrap=True)
        rows: dict[str, dict[str, object]] = {}
        for r in result.reports:
            rows.setdefault(r.kernel_id, {})[r.target.name] = r.metrics
        for kid, per in rows.items():
            t.add_row(kid, *[_cell(per.get(tg.name)) if tg.name in per else "-" for tg in result.targets])
        con.print(t)
    if result.findings:
        t = Table(title="findings", title_justify="left")
        for col in ("level", "rule", "kernel", "target", "measured", "allowed", "why"):
            t.add_column(col, overflow="fold", no_wrap=col in ("level", "target"))
        order = {"error": 0, "warning": 1, "note": 2}
        for f in sorted(result.findings, key=lambda f: (f.baseline_state == "unchanged", order[f.level],
                                                        f.kernel, f.target)):
            level = f"[{_LEVEL_STYLE[f.level]}]{f.level}[/]" + (" (baseline)" if f.baseline_state == "unchanged" else "")
            unit = f" {f.unit}" if f.unit else ""
            t.add_row(level, f.rule, f.kernel, f.target, f"{f.measured}{unit}", f"{f.allowed}{unit}", f.why)
        con.print(t)
    if result.baseline is not None:
        changed = [d for d in result.diff if d.status != "unchanged"]
        if changed:
            t = Table(title=f"against baseline {result.baseline.path}", title_justify="left")
            for col in ("kernel", "target", "status", "registers", "spill B", "occupancy", "instructions"):
                t.add_column(col, overflow="fold")

            def pair(d, key, fmt="{}"):
                b = d.before.get(key) if d.before else None
                a = d.after.get(key) if d.after else None
                if b is None and a is None:
                    return "-"
                if b is None or a is None or b == a:
                    return fmt.format(a if a is not None else b)
                return f"{fmt.format(b)} -> [bold]{fmt.format(a)}[/]"

            for d in changed:
                instr = "sass_instructions" if (d.before or {}).get("sass_instructions") is not None \
                    and (d.after or {}).get("sass_instructions") is not None else "ptx_instructions"
                t.add_row(d.kernel, d.target, d.status, pair(d, "registers"), pair(d, "spill_bytes"),
                          pair(d, "occupancy", "{:.0%}"), pair(d, instr))
            con.print(t)
        else:
            con.print(f"against baseline {result.baseline.path}: no kernel changed")
    con.print(summary(result))


def summary(result: LintResult) -> str:
    """One line: what was linted, how long it took, what was found and whether it fails."""
    tm = result.timings
    kernels = len({r.kernel_id for r in result.reports})
    by = {lv: sum(f.level == lv for f in result.findings) for lv in ("error", "warning", "note")}
    found = ", ".join(f"{n} {lv}{'s' if n != 1 else ''}" for lv, n in by.items() if n) or "no findings"
    base = ""
    if result.baseline is not None:
        new = sum(f.baseline_state == "new" for f in result.findings)
        base = f" ({new} new vs baseline)"
    gate = (f"FAIL: {len(result.gating)} finding(s) at or above '{result.fail_on}'" if result.gating
            else "OK")
    return (f"Linted {kernels} kernel(s) x {len(result.targets)} target(s): {tm.get('jobs', 0)} compiles, "
            f"{tm.get('cache_hits', 0)} from cache, {tm.get('total_s', 0.0):.1f} s · {found}{base} · {gate}")
