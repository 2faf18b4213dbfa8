"""The one-file HTML report of a ``gpuemu check`` run: static, no script, no network.

A reviewer sees, top to bottom: the verdict and run metadata; one row per launcher (red when it failed);
a plot of each failing launcher's worst case as a multiple of its tolerance bound (log scale, the bound at
1x); then per launcher a pass/fail matrix by dtype and case strategy, the shrunk failing case, its FAIL
line, mismatch report, hint and the replay command.
"""

from __future__ import annotations

import html
import math

from ..check.outputs import first_failure, limit_text, rel, status_word, summary_rows, totals_line
from ..check.run import PASSING, CheckResult, KernelResult

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1400px;color:#1f2328;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:0}
.verdict{display:inline-block;padding:4px 10px;border-radius:6px;font-weight:600;color:#fff}
.verdict.ok{background:#1a7f37} .verdict.bad{background:#cf222e}
table{border-collapse:collapse;width:100%;margin:8px 0} th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.row-fail td{background:#ffebe9} tr.row-fail td.status{background:#cf222e;color:#fff;font-weight:600}
tr.row-pass td.status{background:#1a7f37;color:#fff;font-weight:600}
tr.row-warn td{background:#fff8c5} tr.row-warn td.status{background:#9a6700;color:#fff;font-weight:600}
td.cell-pass{background:#dafbe1} td.cell-fail{background:#ffcecb} td.cell-none{color:#8c959f}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:8px;overflow-x:auto;white-space:pre-wrap}
details{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;margin:8px 0}
details.fail{border-color:#cf222e} details.warn{border-color:#9a6700} summary{cursor:pointer}
.meta td:first-child{width:180px;color:#59636e}
.muted{color:#59636e}
#summary code{overflow-wrap:anywhere;word-break:break-word} #summary td:nth-child(7){width:42%}
"""


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def _row_class(k: KernelResult) -> str:
    """Red when it fails the gate, amber for a warning, green when it passes (gpuemu.check.outputs: the level)."""
    return f"row-{k.level}"


def _plot(result: CheckResult) -> str:
    """Horizontal bars: log10(worst error / bound) per failing launcher and dtype; the bound is the 1x line."""
    bars = []
    for k in result.kernels:
        for dt, w in sorted(k.worst.items()):
            r = w.get("worst_ratio")
            ratio = math.inf if r is None or (isinstance(r, float) and math.isnan(r)) else float(r)
            bars.append((f"{k.function} {dt}", ratio, w))
    if not bars:
        return '<p class="muted">No case exceeded its bound: nothing to plot.</p>'
    finite = [b[1] for b in bars if math.isfinite(b[1]) and b[1] > 0]
    top = max([math.log10(max(x, 1.0)) for x in finite] + [1.0])
    top = math.ceil(top + 0.5)
    label_w, plot_w, bar_h, gap = 260, 620, 16, 6
    height = len(bars) * (bar_h + gap) + 40
    x0 = label_w + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="worst error over bound" '
           f'width="{x0 + plot_w + 120}" height="{height}" font-family="system-ui,sans-serif" font-size="12">']
    for d in range(0, top + 1):  # decade grid: 1x (the bound), 10x, 100x, ...
        x = x0 + plot_w * d / top
        out.append(f'<line x1="{x:.1f}" y1="10" x2="{x:.1f}" y2="{height - 24}" stroke="{"#cf222e" if d == 0 else "#d0d7de"}" '
                   f'stroke-width="{2 if d == 0 else 1}"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 8}" text-anchor="middle" fill="#59636e">'
                   f'{"bound" if d == 0 else f"1e{d}x"}</text>')
    for i, (label, ratio, w) in enumerate(bars):
        y = 14 + i * (bar_h + gap)
        if math.isfinite(ratio):
            length = plot_w * max(0.0, math.log10(max(ratio, 1.0))) / top
            txt = f"{ratio:.3g}x"
        else:
            length, txt = plot_w, "non-finite"
        title = _e(f"{label}: {w.get('message', '')} (seed {w.get('seed')})")
        out.append(f'<text x="{label_w}" y="{y + 12}" text-anchor="end">{_e(label)}</text>')
        out.append(f'<rect x="{x0}" y="{y}" width="{max(length, 2):.1f}" height="{bar_h}" fill="#cf222e" '
                   f'fill-opacity="0.8"><title>{title}</title></rect>')
        out.append(f'<text x="{x0 + max(length, 2) + 6:.1f}" y="{y + 12}" fill="#1f2328">{_e(txt)}</text>')
    out.append("</svg>")
    return "".join(out)


def _matrix(k: KernelResult) -> str:
    strategies = sorted({s for by in k.matrix.values() for s in by})
    if not strategies:
        return ""
    groups: dict[str, int] = {}
    for s in strategies:
        groups[s.partition(":")[0]] = groups.get(s.partition(":")[0], 0) + 1
    top = "".join(f'<th colspan="{n}">{_e(g)}</th>' for g, n in groups.items())
    head = "".join(f"<th>{_e(s.partition(':')[2] or s)}</th>" for s in strategies)
    rows = []
    for dt in sorted(k.matrix):
        cells = []
        for s in strategies:
            counts = k.matrix[dt].get(s)
            if not counts:
                cells.append('<td class="cell-none">–</td>')
                continue
            n = sum(counts.values())
            good = sum(v for st, v in counts.items() if st in PASSING)
            bad = ", ".join(f"{v} {st}" for st, v in sorted(counts.items()) if st not in PASSING)
            cls = "cell-pass" if good == n else "cell-fail"
            cells.append(f'<td class="{cls} num" title="{_e(bad) or "all passed"}">{good}/{n}'
                         + (f" <span>({_e(bad)})</span>" if bad else "") + "</td>")
        rows.append(f"<tr><th>{_e(dt)}</th>{''.join(cells)}</tr>")
    return (f'<div style="overflow-x:auto"><table class="matrix"><tr><th rowspan="2">dtype</th>{top}</tr><tr>{head}</tr>'
            f'{"".join(rows)}</table></div>'
            "<p class='muted'>passing / cases, by what the strategy drew: a case counts once in each group.</p>")


def _kernel_section(i: int, k: KernelResult, root: str) -> str:
    f = first_failure(k)
    where = ", ".join(f"{_e(x['name'])} at {_e(rel(x['path'], root))}:{x['start_line']}" for x in k.kernels
                      if x.get("path")) or "not seen"
    parts = [f'<details id="kernel-{i}" class="{k.level}"{"" if k.level == "pass" else " open"}>',
             f"<summary><h3 style='display:inline'>{_e(status_word(k))} · "
             f"{_e(rel(k.file, root))}:{_e(k.function)} <span class='muted'>({_e(k.op)}, {k.passed}/{k.iterations} "
             f"cases, seed 0x{k.seed:x}, {k.seconds:.1f} s)</span></h3></summary>",
             f"<p class='muted'>Triton kernels launched: {where}</p>", _matrix(k)]
    if k.limits:
        parts.append(f"<p class='limit'>{_e(limit_text(k))}</p>")
    if k.refused:
        parts.append(f"<p class='muted'>{k.refused} case(s) refused on the host before any launch: "
                     f"{_e(k.rejected_reason)}</p>")
    if k.skipped:
        parts.append("<p class='muted'>" + "; ".join(f"{_e(d)} skipped: {_e(w)}" for d, w in k.skipped.items()) + "</p>")
    if k.error and not f:
        parts.append(f"<pre class='error'>{_e(k.error)}</pre>")
    if f:
        parts.append(f"<p><strong>{_e(f['line'])}</strong></p>")
        parts.append(f"<p>Replay (any machine, no GPU): <code class='replay'>{_e(f['replay'])}</code></p>")
        parts.append(f"<p>Shrunk failing case: <code>{_e(f.get('case_text') or f['case'])}</code></p>")
        if f.get("original_case_text"):
            parts.append(f"<p class='muted'>shrunk from: <code>{_e(f['original_case_text'])}</code></p>")
        if f.get("hint"):
            parts.append(f"<p>Hint: {_e(f['hint'])}</p>")
        if f["verdict"].get("detail"):
            parts.append(f"<pre>{_e(f['verdict']['detail'])}</pre>")
        more = k.failures[1:6]
        if more:
            parts.append("<p class='muted'>Other failing seeds:</p><pre>" + _e("\n".join(x["line"] for x in more)) + "</pre>")
    parts.append("</details>")
    return "".join(parts)


def render(result: CheckResult) -> str:
    """The report as one HTML string."""
    ok = result.ok
    rows = []
    for i, (k, r) in enumerate(zip(result.kernels, summary_rows(result))):
        rows.append(f'<tr class="{_row_class(k)}" id="row-{i}" data-status="{_e(k.status)}">'
                    f'<td class="status">{_e(r[0])}</td><td><a href="#kernel-{i}"><code>{_e(r[1])}</code></a></td>'
                    f'<td>{_e(r[2])}</td><td>{_e(r[3])}</td><td class="num">{_e(r[4])}</td>'
                    f'<td class="num">{_e(r[5])}</td><td><code>{_e(r[6])}</code></td></tr>')
    meta = [("seed", f"0x{result.seed:x}"), ("device", result.device), ("started", result.started),
            ("duration", f"{result.seconds:.1f} s on {result.jobs} worker(s)"),
            ("manifest", rel(result.manifest, result.root)),
            *[(name, str(v)) for name, v in result.versions.items()],
            ("rule packs", ", ".join(rel(p, result.root) or p for p in result.rulepacks))]
    failing = [(i, k) for i, k in enumerate(result.kernels) if k.level != "pass"]
    passing = [(i, k) for i, k in enumerate(result.kernels) if k.level == "pass"]
    body = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>gpuemu check report</title>", f"<style>{_CSS}</style></head><body>",
        "<h1>gpuemu check</h1>",
        f'<p><span class="verdict {"ok" if ok else "bad"}" id="verdict">{"PASS" if ok else "FAIL"}</span> '
        f"{_e(totals_line(result))}</p>",
        '<table class="meta">' + "".join(f"<tr><td>{_e(a)}</td><td><code>{_e(b)}</code></td></tr>" for a, b in meta)
        + "</table>",
        "<h2>Kernels</h2>",
        '<table id="summary"><tr><th>status</th><th>launcher</th><th>op</th><th>dtypes</th><th>passed</th>'
        "<th>worst err / bound</th><th>first failure</th></tr>" + "".join(rows) + "</table>",
        "<h2>Worst case against its bound</h2>",
        "<p class='muted'>Per failing launcher and dtype, the case farthest beyond its tolerance bound "
        "(error / allowed, log scale). Passing cases stay under 1x and are not drawn.</p>", _plot(result),
        "<h2>Failing launchers and warnings</h2>" if failing else "",
        *[_kernel_section(i, k, result.root) for i, k in failing],
        "<h2>Passing launchers</h2>" if passing else "",
        *[_kernel_section(i, k, result.root) for i, k in passing],
        f"<p class='muted'>gpuemu {_e(result.versions.get('gpuemu'))} · this file is self-contained (no scripts, "
        "no network).</p>", "</body></html>",
    ]
    return "\n".join(x for x in body if x) + "\n"
