#!/usr/bin/env python3
"""Run the commands of docs/gate.md and of the README's gate section in a fresh copy of the repository and compare
their output with the page's.

    python scripts/gate_doc.py            # check both pages: exit 0 when every command gives the documented output
    python scripts/gate_doc.py --update   # write the outputs of this run into the pages
    python scripts/gate_doc.py README.md  # one page

The copy is what a fresh clone holds (git's tracked and unignored files of the working tree, committed in a new
repository), so nothing of this checkout's state (stores, caches, outputs) leaks in. Every ```console block of the
page runs in order in one bash session per command, sharing the working directory (``cd`` is followed): a line
``$ COMMAND`` runs COMMAND, the lines after it up to the next ``$`` are its output (stderr and stdout together), and
``COMMAND  # exit N`` says its exit code. Compared after normalising what differs between runs by design:
seconds, dates, signing-key ids, commit hashes, and the order in which parallel workers finish.

A ```markdown block right after the line ``<!-- gate-doc: job summary -->`` is the job summary the Action's script
writes when the page's workflow runs (``run_action``): each `run:` step of action.yml runs in bash with the
environment GitHub sets and the workflow's ``with:`` inputs, as tests/test_action.py runs them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "gate.md"
PAGES = [DOC, ROOT / "README.md"]  # the README's gate section repeats the page's first block
FENCE = re.compile(r"^(`{3,})(\w*)\s*$")

_NORMAL = [
    (re.compile(r"\b\d+(\.\d+)?( ?)s\b"), r"<t>\2s"),  # 3.2 s, 11.91s
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\+00:00|Z)?"), "<date>"),
    (re.compile(r"\b[0-9a-f]{40}\b"), "<commit>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<key id>"),
    (re.compile(r"key [0-9a-f]{16}…"), "key <key id>…"),
    (re.compile(r"\[\d+/(\d+)\]"), r"[_/\1]"),  # progress lines come in the order workers finish
    (re.compile(r"(failures/0x[0-9a-f]+--)[\w.-]*?(examples_gate_)"), r"\1…\2"),  # a record's name holds its path
]
DOC_ROOT = "/home/you/gpuemu"  # where the page says the clone is (the run's own folder differs)


def _slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", path).strip("_")


def as_documented(text: str, clone: Path) -> str:
    """``text`` with the clone's folder written as the page writes it."""
    return text.replace(str(clone), DOC_ROOT).replace(_slug(str(clone)), _slug(DOC_ROOT))


def normalise(text: str) -> list[str]:
    lines = []
    for ln in text.rstrip("\n").splitlines():
        for pat, rep in _NORMAL:
            ln = pat.sub(rep, ln)
        lines.append(ln.rstrip())
    progress = sorted(ln for ln in lines if ln.lstrip().startswith("[_/"))  # compared as a set, in place
    it = iter(progress)
    return [next(it) if ln.lstrip().startswith("[_/") else ln for ln in lines]


def blocks(text: str) -> list[tuple[str, int, int, str]]:
    """(language, first line, last line (exclusive), the line before the fence) of every fenced block; a block
    opened with four backticks may hold three-backtick fences (a job summary does)."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(2):
            j = i + 1
            while j < len(lines) and lines[j].strip() != m.group(1):
                j += 1
            out.append((m.group(2), i + 1, j, lines[i - 1] if i else ""))
            i = j + 1
        elif m:  # a block without a language: skipped whole
            j = i + 1
            while j < len(lines) and lines[j].strip() != m.group(1):
                j += 1
            i = j + 1
        else:
            i += 1
    return out


def fresh_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    git = ["git", "-C", str(dest), "-c", "user.name=gate-doc", "-c", "user.email=gate-doc@localhost",
           "-c", "commit.gpgsign=false"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "fresh clone"], check=True)
    return dest


def environment(clone: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "GPUEMU_", "RUNNER_")) and k not in ("CI", "TRITON_INTERPRET", "PYTHONPATH")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(clone)  # the copy's gpuemu, whatever is installed
    env["COLUMNS"] = "110"  # pytest's rules and headers
    return env


def run_console(doc: str, clone: Path, update: bool) -> tuple[str, list[str]]:
    """Run every console block; returns (the page with outputs as run, the differences)."""
    lines = doc.split("\n")
    env = environment(clone)
    cwd = clone
    problems: list[str] = []
    new = list(lines)
    out_blocks = []
    for lang, start, end, _ in blocks(doc):
        if lang != "console":
            continue
        body = lines[start:end]
        if not any(ln.startswith("$ ") for ln in body):
            continue
        cmds: list[tuple[str, list[str]]] = []
        for ln in body:
            if ln.startswith("$ "):
                cmds.append((ln[2:], []))
            elif cmds:
                cmds[-1][1].append(ln)
        rendered = []
        for cmd, expected in cmds:
            want_code = 0
            m = re.search(r"\s+# exit (\d+)$", cmd)
            if m:
                want_code = int(m.group(1))
            if cmd.startswith("cd "):
                cwd = (cwd / cmd[3:].split("  #")[0].strip()).resolve()
                rendered.append(f"$ {cmd}")
                continue
            p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=900)
            got = as_documented(p.stdout, clone)
            if p.returncode != want_code:
                problems.append(f"line {start}: `{cmd}` exited {p.returncode}, the page says {want_code}\n{got}")
            if normalise(got) != normalise("\n".join(expected)):
                import difflib

                diff = "\n".join(difflib.unified_diff(normalise("\n".join(expected)), normalise(got), "docs/gate.md",
                                                      "this run", lineterm=""))
                problems.append(f"line {start}: `{cmd}` printed something else:\n{diff}")
            rendered.append(f"$ {cmd}")
            rendered += got.rstrip("\n").split("\n") if got.strip() else []
        out_blocks.append((start, end, rendered))
    for start, end, rendered in reversed(out_blocks):  # from the end: earlier line numbers stay valid
        new[start:end] = rendered
    return "\n".join(new), problems


def has_workflow(doc: str) -> bool:
    try:
        workflow(doc)
    except SystemExit:
        return False
    return True


def workflow(doc: str) -> dict:
    """The page's GitHub workflow (the ```yaml block with a `jobs:` key)."""
    import yaml

    lines = doc.split("\n")
    for lang, start, end, _ in blocks(doc):
        if lang == "yaml":
            data = yaml.safe_load("\n".join(lines[start:end]))
            if isinstance(data, dict) and "jobs" in data:
                return data
    raise SystemExit("docs/gate.md has no workflow (a ```yaml block with jobs:)")


def run_action(doc: str, clone: Path) -> tuple[str, dict, str, int]:
    """The workflow's gpuemu step, as GitHub runs the composite action: (job summary, step outputs, the check
    step's log, the verdict step's exit code). GitHub's checkout is the copy; the action's own checkout too."""
    import yaml

    wf = workflow(doc)
    (job,) = wf["jobs"].values()
    step = next(s for s in job["steps"] if "gpuemu@" in str(s.get("uses", "")) or s.get("uses") == "./")
    with_ = dict(step.get("with") or {})
    action = yaml.safe_load((clone / "action.yml").read_text())
    work = clone  # GitHub runs the action's steps in the workspace: the checkout
    gh = clone.parent / "gh"
    gh.mkdir(exist_ok=True)
    env = environment(clone)
    env.update({"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_OUTPUT": str(gh / "output"),
                "GITHUB_STEP_SUMMARY": str(gh / "summary.md"), "GITHUB_ACTION_PATH": str(clone),
                "GITHUB_WORKSPACE": str(clone), "GITHUB_REPOSITORY": "acme/kernels", "GITHUB_RUN_ID": "1234567890",
                "GITHUB_RUN_ATTEMPT": "1", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_WORKFLOW": wf.get("name", ""),
                "GITHUB_EVENT_NAME": "pull_request", "GPUEMU_PYTHON": sys.executable})
    for name in ("output", "summary.md"):
        (gh / name).write_text("")

    def expr(v: str, outputs: dict) -> str:
        def one(m):
            e = m.group(1).strip()
            if e.startswith("inputs."):
                k = e[len("inputs."):]
                return str(with_.get(k, action["inputs"][k].get("default", "")))
            if e.startswith("steps.check.outputs."):
                return outputs.get(e.rsplit(".", 1)[1], "")
            if e == "github.action_path":
                return str(clone)
            raise SystemExit(f"action.yml: an expression the page's runner does not know: {e}")
        return re.sub(r"\$\{\{(.*?)\}\}", one, str(v))

    def run_step(name: str, outputs: dict) -> subprocess.CompletedProcess:
        s = next(x for x in action["runs"]["steps"] if x["name"] == name)
        senv = dict(env, **{k: expr(v, outputs) for k, v in (s.get("env") or {}).items()})
        return subprocess.run(["bash", "-c", s["run"]], cwd=work, env=senv, capture_output=True, text=True,
                              timeout=900)

    check = run_step("gpuemu check", {})
    outputs = dict(ln.split("=", 1) for ln in (gh / "output").read_text().splitlines() if "=" in ln)
    verdict = run_step("Fail on a FAIL", outputs)
    return (as_documented((gh / "summary.md").read_text(), clone), outputs,
            check.stdout + check.stderr + verdict.stdout, verdict.returncode)


def check_summary(doc: str, summary: str, update: bool) -> tuple[str, list[str]]:
    lines = doc.split("\n")
    for lang, start, end, before in blocks(doc):
        if lang == "markdown" and "gate-doc: job summary" in before:
            if normalise("\n".join(lines[start:end])) != normalise(summary):
                if update:
                    lines[start:end] = summary.rstrip("\n").split("\n")
                    return "\n".join(lines), []
                import difflib

                diff = "\n".join(difflib.unified_diff(normalise("\n".join(lines[start:end])), normalise(summary),
                                                      "docs/gate.md", "this run", lineterm=""))
                return doc, [f"line {start}: the job summary differs:\n{diff}"]
            return doc, []
    return doc, ["docs/gate.md has no ```markdown block after <!-- gate-doc: job summary -->"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true", help="write this run's outputs into the page")
    ap.add_argument("--keep", metavar="DIR", help="run in DIR (kept) instead of a temporary folder")
    ap.add_argument("docs", nargs="*", default=[str(p) for p in PAGES])
    args = ap.parse_args(argv)
    return max(check_page(Path(d), args) for d in args.docs)


def check_page(doc_path: Path, args) -> int:
    """One page in a fresh copy of its own: its console blocks and, where it has one, its workflow."""
    doc = doc_path.read_text()
    tmp = Path(args.keep) / doc_path.stem if args.keep else Path(tempfile.mkdtemp(prefix="gate-doc-"))
    try:
        clone = fresh_copy(tmp / "repo") if not (tmp / "repo").exists() else tmp / "repo"
        new, problems = run_console(doc, clone, args.update)
        if has_workflow(doc):
            summary, outputs, log, code = run_action(doc, clone)
            if code != 1 or outputs.get("exit-code") != "1":
                problems.append(f"the workflow's gate: the verdict step exited {code} (outputs {outputs}), the page's "
                                f"project has a failing launcher: 1 expected\n{log[-3000:]}")
            new, more = check_summary(new, summary, args.update)
            problems += more
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.update:
        doc_path.write_text(new)
        print(f"{doc_path}: outputs written ({len(problems)} differed from the page before)")
        return 0
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{doc_path}: {'the documented output, exactly' if not problems else f'{len(problems)} difference(s)'}",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
