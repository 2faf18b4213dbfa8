"""SARIF 2.1.0 output that GitHub code scanning accepts.

What code scanning needs, and this writer gives: ``tool.driver.rules[]`` with stable ids (the rule ids of
:mod:`.rules`), one result per finding with ``ruleId``/``ruleIndex``, a ``level``, a message, a
``physicalLocation`` whose ``artifactLocation.uri`` is relative to the repository root (``uriBaseId``
``%SRCROOT%``) and whose region is the kernel's ``def`` lines, and ``partialFingerprints`` so an alert
survives unrelated edits. Findings a baseline accepted carry ``baselineState: "unchanged"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from .rules import RULES, Finding

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _uri(path: str, root: Path) -> tuple[str, bool]:
    """(uri, relative?) of ``path``: repo-relative with '/' when under ``root``, else a file:// URI."""
    p = Path(path).resolve()
    try:
        return p.relative_to(root).as_posix(), True
    except ValueError:
        return p.as_uri(), False


def _rule_descriptor(rid: str) -> dict:
    r = RULES[rid]
    params = ", ".join(f"{k}={v}" for k, v in r.params.items())
    return {"id": r.id, "name": r.name,
            "shortDescription": {"text": r.title},
            "fullDescription": {"text": r.why[0].upper() + r.why[1:] + "."},
            "help": {"text": f"{r.title}. See docs/lint.md#{r.id}. Why it matters: {r.why}. "
                             + (f"Thresholds (rule pack lint.rules.{r.id}): {params}. " if params else "")
                             + ("Compares with --baseline. " if r.needs_baseline else ""),
                     "markdown": f"**{r.title}**\n\n{r.why}.\n\n"
                                 + (f"Thresholds: `{params}` (set `lint.rules.{r.id}` in gpuemu.yaml).\n\n"
                                    if params else "")
                                 + ("Needs `--baseline`.\n" if r.needs_baseline else "")},
            "defaultConfiguration": {"level": r.level},
            "properties": {"tags": ["gpu", "performance", "triton"], "precision": "high"}}


def build(findings: Iterable[Finding], *, root: str | os.PathLike | None = None, version: str = "0.1.0",
          command_line: str | None = None) -> dict:
    """The SARIF log (a dict) for ``findings``; locations relative to ``root`` (default: the working directory)."""
    base = Path(root or os.getcwd()).resolve()
    ids = list(RULES)
    results = []
    for f in findings:
        res: dict = {
            "ruleId": f.rule, "ruleIndex": ids.index(f.rule), "level": f.level,
            "message": {"text": f.message},
            "partialFingerprints": {"gpuemuFinding/v1": f.fingerprint},
            "properties": {"kernel": f.kernel, "target": f.target, "measured": f.measured, "allowed": f.allowed,
                           "unit": f.unit},
        }
        if f.baseline_state in ("new", "unchanged"):
            res["baselineState"] = f.baseline_state
        if f.location is not None:
            uri, relative = _uri(f.location.path, base)
            art: dict = {"uri": uri}
            if relative:
                art["uriBaseId"] = "%SRCROOT%"
            res["locations"] = [{
                "physicalLocation": {"artifactLocation": art,
                                     "region": {"startLine": max(1, f.location.start_line),
                                                "endLine": max(f.location.start_line, f.location.end_line)}},
                "logicalLocations": [{"name": f.name, "fullyQualifiedName": f.kernel, "kind": "function"}],
            }]
        results.append(res)
    invocation: dict = {"executionSuccessful": True}
    if command_line:
        invocation["commandLine"] = command_line
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "gpuemu-lint", "semanticVersion": version, "version": version,
                                "rules": [_rule_descriptor(r) for r in ids]}},
            "automationDetails": {"id": "gpuemu-lint/"},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": base.as_uri() + "/"}},
            "invocations": [invocation],
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
