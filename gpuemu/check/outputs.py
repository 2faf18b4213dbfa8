"""Writers for a :class:`~.run.CheckResult`: the summary table (text and Markdown), JUnit XML and SARIF 2.1.0.

JUnit: one ``testcase`` per launcher (classname = its module path, name = ``function[op]``), a ``failure``
carrying the FAIL line as its message and the mismatch report, replay command and case as its text;
launchers that could not run are ``error``. SARIF: one result per failing launcher, located at the
``@triton.jit`` line of the kernel it launched (the launcher's ``def`` when no kernel was seen), with
stable rule ids ``<status>.<kind>`` and a fingerprint of target, op and rule so an alert survives edits.

Every format renders a launcher by its *level* (:attr:`KernelResult.level`, from the PRECONDITION policy in
:func:`gpuemu.preconditions.counts_as`): ``fail`` is an error everywhere (exit 1, ``:x:``, a JUnit failure, a
SARIF ``error``, red), ``warn`` a warning everywhere (the gate passes; ``:warning:``, a passing JUnit test with
the report in its output, a SARIF ``warning``, amber), ``pass`` passes (an ignored PRECONDITION included: no
SARIF result, its count still in the table). A passing launcher with LIMIT cases (launches the GPU refuses) shows
them everywhere with the envelope it launches in: the table's note, JUnit's output, a SARIF ``note``, the HTML;
inside the sizes it declares supported (``supports:``) its status is LIMIT, a failure.
"""

from __future__ import annotations

import hashlib
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from .run import PASSING, CheckResult, KernelResult

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_KIND_TEXT = {
    "mismatch": "the output differs from the fp64 reference beyond the calibrated tolerance",
    "nonfinite": "the output is inf/nan where the fp64 reference is finite",
    "oob": "the kernel read or wrote out of bounds",
    "overflow": "integer index arithmetic wraps (int32 past 2**31) and reaches an address: wrong memory on a GPU",
    "exception": "the launcher raised on a valid input of the op",
    "shape": "the output has the wrong shape", "dtype": "the output has the wrong dtype",
    "nondeterministic": "two runs of the same input gave different bits",
    "mutation": "the launcher modified an input", "alias": "the output aliases an input",
    "out_of_resources": "the target GPU refuses the launch (shared memory, registers, threads or grid)",
    "refusal": "the launcher refused the input on the host before any kernel launch",
    "internal": "gpuemu failed internally (a bug in gpuemu, not in the launcher)",
}


def rel(path: str | None, root: str) -> str | None:
    if not path:
        return None
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return path


def first_failure(k: KernelResult) -> dict | None:
    return k.failures[0] if k.failures else None


def worst_text(k: KernelResult) -> str:
    """The worst failing case's error as a multiple of its bound ('12.4x' / 'inf'); '' when none failed."""
    ratios = [w.get("worst_ratio") for w in k.worst.values()]
    if not ratios:
        return ""
    vals = [float("inf") if r is None else float(r) for r in ratios]
    m = max(vals)
    return "non-finite" if m == float("inf") else f"{m:.3g}x"


_POLICY_NOTE = {"warn": "warn", "ignore": "ignored"}


def status_word(k: KernelResult) -> str:
    """The verdict word every format shows: PASS, FAIL, ERROR, PRECONDITION; a PRECONDITION that does not fail
    the gate says so (``PRECONDITION (warn)``, ``PRECONDITION (ignored)``)."""
    if k.status in PASSING:
        return "PASS"
    word = k.status.upper()
    return f"{word} ({_POLICY_NOTE[k.policy]})" if k.status == "precondition" and k.policy in _POLICY_NOTE else word


def limit_text(k: KernelResult) -> str:
    """``3 LIMIT: launches on sm_90 for D <= 128 (...)``, or '' for a launcher with no refused launch."""
    return f"{k.limits} LIMIT: {k.envelope or 'launches refused by the GPU'}" if k.limits else ""


def summary_rows(result: CheckResult) -> list[list[str]]:
    rows = []
    for k in result.kernels:
        f = first_failure(k)
        if k.status in PASSING:
            note = limit_text(k)
        elif k.status == "refused":
            note = f"{k.refused} refused on the host: {k.rejected_reason}"
        else:
            note = f["line"] if f else (k.error or "")
        rows.append([status_word(k), f"{rel(k.file, result.root)}:{k.function}", k.op, ",".join(k.dtypes) or "-",
                     f"{k.passed}/{k.iterations}", worst_text(k), note])
    return rows


def totals_line(result: CheckResult) -> str:
    n = len(result.kernels)
    good = sum(k.ok for k in result.kernels)
    kinds: dict[str, int] = {}
    for k in result.kernels:
        if k.status not in PASSING:
            word = k.status + (f" {'warned' if k.level == 'warn' else 'ignored'}" if k.level != "fail" else "")
            kinds[word] = kinds.get(word, 0) + 1
    others = ", ".join(f"{v} {s}" for s, v in sorted(kinds.items()))
    cases = sum(k.iterations for k in result.kernels)
    return (f"{good}/{n} kernels passed" + (f" ({others})" if others else "")
            + f" · {cases} cases · seed 0x{result.seed:x} · {result.seconds:.1f} s on {result.jobs} worker"
            + ("s" if result.jobs != 1 else ""))


def summary_text(result: CheckResult, width: int | None = None) -> str:
    """The table; ``width`` (a terminal's) cuts the first-failure column to fit, None keeps every line whole."""
    head = ["status", "kernel", "op", "dtypes", "passed", "worst", "first failure"]
    rows = summary_rows(result)
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(6)]
    lines = []
    for r in [head] + rows:
        left = "  ".join(c.ljust(w) for c, w in zip(r[:6], widths))
        note = r[6]
        if width is not None:
            room = max(20, width - len(left) - 2)
            note = note if len(note) <= room else note[:room - 1] + "…"
        lines.append((left + "  " + note).rstrip())
    lines.append(totals_line(result))
    return "\n".join(lines)


def summary_markdown(result: CheckResult) -> str:
    """The job-summary table (GitHub renders Markdown from $GITHUB_STEP_SUMMARY)."""
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    out = ["## gpuemu check", "", f"**{totals_line(result)}**", "",
           "| | kernel | op | dtypes | passed | worst err / bound | first failure |", "|---|---|---|---|---|---|---|"]
    icons = {"pass": ":white_check_mark:", "warn": ":warning:", "fail": ":x:"}
    for k, r in zip(result.kernels, summary_rows(result)):
        out.append(f"| {icons[k.level]} {r[0]} | `{esc(r[1])}` | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {esc(r[6])} |")
    replays = [(k, first_failure(k)) for k in result.kernels if k.level != "pass" and first_failure(k)]
    if replays:
        out += ["", "### Replay", ""]
        run_id = os.environ.get("GITHUB_RUN_ID")
        if os.environ.get("GITHUB_ACTIONS") == "true" and run_id:  # the Action uploads the store as an artifact
            out += ["From the root of a clone of this commit, with the failure store this run uploaded:", "", "```",
                    f"gh run download {run_id} -n gpuemu-store -D gpuemu-store   # or the artifact's zip from the "
                    "run's page: --store gpuemu-store.zip"] + [f"{f['replay']}   # {k.function}" for k, f in replays] \
                + ["```"]
        else:
            out += ["```"] + [f"{f['replay']}   # {k.function}" for k, f in replays] + ["```"]
    out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ JUnit


def failure_text(f: dict) -> str:
    parts = [f["line"], f"replay: {f['replay']}", f"case: {f.get('case_text') or f['case']}"]
    if f.get("original_case_text"):
        parts.append(f"shrunk from: {f['original_case_text']}")
    if f.get("hint"):
        parts.append(f"hint: {f['hint']}")
    if f["verdict"].get("detail"):
        parts.append(f["verdict"]["detail"])
    return "\n".join(parts)


def junit_xml(result: CheckResult) -> str:
    n = len(result.kernels)
    errors = sum(1 for k in result.kernels if k.status == "error")
    failures = sum(1 for k in result.kernels if k.level == "fail" and k.status != "error")
    attrs = {"name": "gpuemu check", "tests": str(n), "failures": str(failures), "errors": str(errors),
             "time": f"{result.seconds:.3f}"}
    suites = ET.Element("testsuites", attrs)
    suite = ET.SubElement(suites, "testsuite", dict(attrs, skipped="0", timestamp=result.started,
                                                   hostname=os.uname().nodename if hasattr(os, "uname") else ""))
    props = ET.SubElement(suite, "properties")
    for name, value in [("seed", f"0x{result.seed:x}"), ("device", result.device), ("manifest", result.manifest),
                        *[(f"version.{k}", str(v)) for k, v in result.versions.items()]]:
        ET.SubElement(props, "property", {"name": name, "value": value})
    for k in result.kernels:
        relfile = rel(k.file, result.root) or k.file
        classname = relfile[:-3].replace("/", ".") if relfile.endswith(".py") else relfile
        tc = ET.SubElement(suite, "testcase", {"classname": classname, "name": f"{k.function}[{k.op}]",
                                               "file": relfile, "time": f"{k.seconds:.3f}"})
        f = first_failure(k)
        if k.status == "error" and f is None:
            el = ET.SubElement(tc, "error", {"message": k.error or "error", "type": "error"})
            el.text = k.error or ""
        elif k.level == "fail":
            tag = "error" if k.status == "error" else "failure"
            el = ET.SubElement(tc, tag, {"message": f["line"] if f else k.status,
                                         "type": f"{k.status}.{f['verdict'].get('kind', '') if f else ''}"})
            el.text = (failure_text(f) if f else "") + "\n" + _counts_line(k)
        out = ET.SubElement(tc, "system-out")
        out.text = _counts_line(k) + f"\nseed: 0x{k.seed:x}"
        if k.level == "warn" and f:  # passes the gate: no <failure>, the report in its output
            out.text += f"\nwarning ({status_word(k)}, --preconditions {k.policy}):\n" + failure_text(f)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _counts_line(k: KernelResult) -> str:
    s = f"Passed: {k.passed}/{k.iterations}"
    other = ", ".join(f"{n} {st}" for st, n in sorted(k.statuses.items()) if st != "pass")
    s += (f" ({other})" if other else "") + (f" · {limit_text(k)}" if k.limits else "")
    if k.refused:
        s += f" · {k.refused} refused on the host: {k.rejected_reason}"
    return s + "".join(f" · {d} skipped: {w}" for d, w in k.skipped.items())


# ------------------------------------------------------------------------------------------------ SARIF


def _location(k: KernelResult, f: dict | None, root: str) -> dict | None:
    launched = [lch.get("kernel") for lch in (f or {}).get("launches", [])]
    located = [x for x in k.kernels if x.get("path") and x.get("start_line")]
    pick = next((x for name in launched for x in located if x["name"] == name), located[0] if located else None)
    if pick is None:
        return None
    uri = rel(pick["path"], root)
    relative = not uri.startswith("/")
    art: dict = {"uri": uri if relative else Path(uri).as_uri()}
    if relative:
        art["uriBaseId"] = "%SRCROOT%"
    return {"physicalLocation": {"artifactLocation": art,
                                 "region": {"startLine": pick["start_line"], "endLine": pick["end_line"]}},
            "logicalLocations": [{"name": pick["name"], "fullyQualifiedName": f"{uri}:{pick['name']}",
                                  "kind": "function"}]}


def sarif_log(result: CheckResult, *, command_line: str | None = None) -> dict:
    from .. import __version__

    results, rule_ids = [], []
    rule_levels: dict[str, str] = {}
    for k in result.kernels:
        if k.level == "pass" and not k.limits:
            continue
        f = first_failure(k) if k.level != "pass" else None
        kind = f["verdict"].get("kind", "other") if f else "out_of_resources" if k.limits and k.level == "pass" \
            else "refusal" if k.status == "refused" else "launcher"
        rid = f"{'limit' if k.level == 'pass' else k.status}.{kind}"
        if rid not in rule_ids:
            rule_ids.append(rid)
        level = "error" if k.level == "fail" else "warning" if k.level == "warn" else "note"
        if rule_levels.get(rid) != "error" and not (rule_levels.get(rid) == "warning" and level == "note"):
            rule_levels[rid] = level
        text = (failure_text(f) if f else limit_text(k) if k.level == "pass"
                else f"{k.refused} case(s) refused on the host before any launch: {k.rejected_reason}"
                if k.status == "refused" else f"{k.target} could not be fuzzed: {k.error}") + "\n" + _counts_line(k)
        res: dict = {"ruleId": rid, "ruleIndex": rule_ids.index(rid),
                     "level": level,
                     "message": {"text": text},
                     "partialFingerprints": {"gpuemuCheck/v1": hashlib.sha256(
                         f"{rel(k.file, result.root)}:{k.function}|{k.op}|{rid}".encode()).hexdigest()[:32]},
                     "properties": {"target": rel(k.file, result.root) + ":" + k.function, "op": k.op,
                                    "status": k.status, "policy": k.policy, "passed": k.passed,
                                    "iterations": k.iterations,
                                    "seed": f"0x{k.seed:x}", "replay": f["replay"] if f else None,
                                    "case": f["case"] if f else None, "hint": f.get("hint") if f else None}}
        loc = _location(k, f, result.root)
        if loc:
            res["locations"] = [loc]
        results.append(res)
    rules = []
    for rid in rule_ids:
        status, _, kind = rid.partition(".")
        what = _KIND_TEXT.get(kind, f"verdict kind {kind!r}")
        rules.append({"id": rid, "name": "".join(w.capitalize() for w in rid.replace("-", ".").split(".")),
                      "shortDescription": {"text": f"{status.upper()}: {what}"},
                      "fullDescription": {"text": f"gpuemu fuzzed the launcher against the op's fp64 oracle and a "
                                                  f"case ended with status {status!r}: {what}."},
                      "help": {"text": "Run the replay command in the result's message on any machine (no GPU "
                                       "needed) to reproduce the failing case from its stored bytes."},
                      "defaultConfiguration": {"level": rule_levels[rid]},
                      "properties": {"tags": ["correctness", "gpu", "triton"], "precision": "very-high"}})
    invocation: dict = {"executionSuccessful": True}
    if command_line:
        invocation["commandLine"] = command_line
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "gpuemu-check", "semanticVersion": __version__, "version": __version__,
                            "rules": rules}},
        "automationDetails": {"id": "gpuemu-check/"},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(result.root).resolve().as_uri() + "/"}},
        "invocations": [invocation], "columnKind": "unicodeCodePoints", "results": results,
        "properties": {"seed": f"0x{result.seed:x}", "device": result.device, "versions": result.versions}}]}
