"""Triton's own language tests, run under Triton's interpreter and under the gpuemu runtime, side by side.

    python bench/conformance/run.py                      # find or fetch the tests, run both, write the table
    python bench/conformance/run.py --tests ~/triton     # a Triton checkout (or any folder holding python/test)
    python bench/conformance/run.py --triton-git DIR     # a git directory with Triton's history (a clone, a mirror)
    python bench/conformance/run.py -k test_bin_op       # a subset (pytest's -k)

What runs: every test of ``python/test/unit/language/test_core.py`` and the tests marked ``interpreter`` in the
other files of Triton's own ``make test-interpret`` list (FILES below), with ``TRITON_INTERPRET=1 --device=cpu``,
unchanged, once as they are (the stock interpreter) and once with ``gpuemu.runtime.activate()`` at the start of
each pytest process (``-p gpuemu_runtime_plugin``). Each test has a 120 s limit (pytest-timeout).

Where the tests come from, in this order: ``--tests`` (or $TRITON_TESTS), ``--triton-git`` (or $TRITON_GIT) at
``--commit``, else the commit's source archive from GitHub. The default commit is the one recorded for the
installed Triton's version in COMMITS (the tests are not in the wheel). Nothing of Triton's is kept in this repo.

Every test that passes under the stock interpreter must pass on the runtime, or match an entry of known.yaml
(a test-id pattern and the documented reason it differs, e.g. a GPU-faithful result the stock interpreter does
not give); the tests that fail under the stock interpreter and pass on the runtime are listed too. Exit 1 if any
difference is unexplained. The table goes to --out (Markdown) and --json.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# Triton's tests are not in its wheel: the commit of triton-lang/triton whose python/test goes with a version
# (3.8: upstream main at 192cdbe, the closest to the 3.8.0 release found; its _internal_testing differs from the
# wheel's by one helper the files below do not use)
COMMITS = {"3.8": "192cdbe70c5a6b4c8724cac4bd83fc45b0f406ee"}

# Triton's `make test-interpret` list (relative to python/test): (path, whether every test runs or only those
# marked `interpreter`)
FILES = [
    ("unit/language/test_core.py", "all"),
    ("unit/language/test_standard.py", "interpreter"),
    ("unit/language/test_random.py", "interpreter"),
    ("unit/language/test_block_pointer.py", "interpreter"),
    ("unit/language/test_subprocess.py", "interpreter"),
    ("unit/language/test_line_info.py", "interpreter"),
    ("unit/language/test_tuple.py", "interpreter"),
    ("unit/language/test_tensor_descriptor.py", "interpreter"),
    ("unit/runtime/test_launch.py", "interpreter"),
    ("unit/runtime/test_autotuner.py::test_kwargs[False]", "interpreter"),
    ("../tutorials/06-fused-attention.py::test_op", "interpreter"),
]


def fail(msg: str) -> "NoReturn":  # noqa: F821
    print(f"conformance: {msg}", file=sys.stderr)
    raise SystemExit(2)


def triton_version() -> str:
    import triton

    return ".".join(triton.__version__.split(".")[:2])


def locate(args: argparse.Namespace, work: Path) -> Path:
    """The folder holding python/test (and python/tutorials) of the chosen Triton source."""
    given = args.tests or os.environ.get("TRITON_TESTS")
    if given:
        p = Path(given).expanduser().resolve()
        for cand in (p, p / "python", p.parent):
            if (cand / "test" / "unit" / "language" / "test_core.py").is_file():
                return cand
        fail(f"--tests {given}: no test/unit/language/test_core.py under it or its python/ folder; pass a Triton "
             "checkout (or its python/ folder)")
    commit = args.commit or COMMITS.get(triton_version())
    if commit is None:
        fail(f"no commit recorded for triton {triton_version()}: pass --commit SHA (a commit of triton-lang/triton "
             "matching the installed version) or --tests DIR")
    git = args.triton_git or os.environ.get("TRITON_GIT")
    dest = work / "triton"
    dest.mkdir(parents=True, exist_ok=True)
    if git:
        arch = subprocess.run(["git", "--git-dir", git, "archive", "--format=tar", commit, "python/test",
                               "python/tutorials"], capture_output=True)
        if arch.returncode != 0:
            fail(f"--triton-git {git}: cannot read {commit[:12]}'s python/test ({arch.stderr.decode().strip()})")
        with tarfile.open(fileobj=_bytes(arch.stdout), mode="r:") as tar:
            tar.extractall(dest, filter="data")
        return dest / "python"
    url = f"https://codeload.github.com/triton-lang/triton/tar.gz/{commit}"
    print(f"conformance: fetching {url} (python/test and python/tutorials only)", file=sys.stderr)
    try:
        with urllib.request.urlopen(url, timeout=120) as r, tarfile.open(fileobj=r, mode="r|gz") as tar:
            for m in tar:
                parts = m.name.split("/", 1)
                if len(parts) == 2 and (parts[1].startswith("python/test/") or parts[1].startswith("python/tutorials/")):
                    m.name = parts[1]
                    tar.extract(m, dest, filter="data")
    except OSError as e:
        fail(f"cannot fetch {url} ({e}); pass --tests DIR (a Triton checkout) or --triton-git DIR")
    return dest / "python"


def _bytes(b: bytes):
    import io

    return io.BytesIO(b)


def run_mode(mode: str, pyroot: Path, selection: list[str], args: argparse.Namespace, out: Path) -> Path:
    """Run the selection under ``mode`` ("stock" or "runtime"); returns its JUnit XML."""
    xml = out / f"{mode}.xml"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", "--device=cpu",
           "--timeout", str(args.timeout), "--junitxml", str(xml), "-o", "junit_family=xunit1",
           "--continue-on-collection-errors"]
    if args.workers > 1:
        cmd += ["-n", str(args.workers)]
    if args.k:
        cmd += ["-k", args.k]
    paths = [str(HERE), str(ROOT)] if mode == "runtime" else []
    if any(p.startswith("../") for p in selection):  # the tutorials' own pytest.ini would make their folder the
        paths.append(str(pyroot / "test"))           # rootdir: python/test's conftest (--device) as a plugin
        cmd += ["-c", str(pyroot / "tutorials" / "pytest.ini"), "-p", "conftest"]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths + [env.get("PYTHONPATH")]))
    if mode == "runtime":
        cmd += ["-p", "gpuemu_runtime_plugin"]
    t0 = time.time()
    with open(out / f"{mode}.log", "w") as log:
        rc = subprocess.run(cmd + selection, cwd=pyroot / "test", env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    print(f"conformance: {mode}: pytest exit {rc} in {time.time() - t0:.0f} s (log {out / (mode + '.log')})",
          file=sys.stderr)
    if not xml.is_file():
        fail(f"{mode} run wrote no JUnit XML; see {out / (mode + '.log')}")
    return xml


def selections(pyroot: Path) -> list[list[str]]:
    """pytest argument lists: the whole-file entries; the `interpreter`-marked ones (-m differs); the tutorial on
    its own (on a machine with no GPU driver it fails to import under the stock interpreter, which would end its
    pytest session before any other file ran)."""
    every = [p for p, how in FILES if how == "all"]
    present = [p for p, how in FILES if how == "interpreter" and (pyroot / "test" / p.split("::")[0]).is_file()]
    out = [every, ["-m", "interpreter", *[p for p in present if not p.startswith("../")]]]
    out += [["-m", "interpreter", p] for p in present if p.startswith("../")]
    return out


def outcomes(xml: Path) -> dict[str, tuple[str, float, str]]:
    """test id -> (passed | failed | skipped | error, seconds, first line of the message)."""
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        tid = f"{case.get('file') or case.get('classname', '').replace('.', '/') + '.py'}::{case.get('name')}"
        state, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                state = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                msg = (child.get("message") or child.text or "").strip().splitlines()[0:1]
                msg = msg[0][:300] if msg else ""
                break
        out[tid] = (state, float(case.get("time") or 0.0), msg)
    return out


def merge(paths: list[Path]) -> dict[str, tuple[str, float, str]]:
    got: dict = {}
    for p in paths:
        got.update(outcomes(p))
    return got


def load_known() -> list[dict]:
    import yaml

    data = yaml.safe_load((HERE / "known.yaml").read_text()) or {}
    return list(data.get("differences") or [])


def explain(tid: str, known: list[dict], direction: str) -> dict | None:
    for k in known:
        if k.get("direction", "stock-only") == direction and fnmatch.fnmatchcase(tid, k["tests"]):
            return k
    return None


def compare(stock: dict, rt: dict, known: list[dict]) -> dict:
    ids = sorted(set(stock) | set(rt))
    ok = lambda s: s == "passed"  # noqa: E731
    both = [t for t in ids if ok(stock.get(t, ("?",))[0]) and ok(rt.get(t, ("?",))[0])]
    stock_only = [t for t in ids if ok(stock.get(t, ("?",))[0]) and not ok(rt.get(t, ("?",))[0])]
    rt_only = [t for t in ids if not ok(stock.get(t, ("?",))[0]) and ok(rt.get(t, ("?",))[0])]
    rows = {"stock_only": [], "runtime_only": []}
    for t in stock_only:
        k = explain(t, known, "stock-only")
        rows["stock_only"].append({"test": t, "runtime": rt.get(t, ("missing", 0, ""))[0],
                                   "message": rt.get(t, ("", 0, ""))[2], "reason": k and k["reason"]})
    for t in rt_only:
        k = explain(t, known, "runtime-only")
        rows["runtime_only"].append({"test": t, "stock": stock.get(t, ("missing", 0, ""))[0],
                                     "message": stock.get(t, ("", 0, ""))[2], "reason": k and k["reason"]})
    count = lambda d, s: sum(1 for v in d.values() if v[0] == s)  # noqa: E731
    return {
        "tests": len(ids),
        "stock": {s: count(stock, s) for s in ("passed", "failed", "error", "skipped")},
        "runtime": {s: count(rt, s) for s in ("passed", "failed", "error", "skipped")},
        "passed_both": len(both),
        "seconds_in_both": {"stock": round(sum(stock[t][1] for t in both), 1),
                            "runtime": round(sum(rt[t][1] for t in both), 1)},
        "unexplained": sum(1 for r in rows["stock_only"] if not r["reason"]),
        **rows,
    }


def markdown(res: dict, source: str) -> str:
    s, r = res["stock"], res["runtime"]
    lines = [
        "# Triton's language tests: stock interpreter vs the gpuemu runtime",
        "",
        f"Made by `make conformance` (`python bench/conformance/run.py`) from {source}; triton {triton_version()}, "
        "CPU, `TRITON_INTERPRET=1`.",
        "",
        "| run | tests | passed | failed | errors | skipped |",
        "|---|---|---|---|---|---|",
        f"| stock interpreter | {res['tests']} | {s['passed']} | {s['failed']} | {s['error']} | {s['skipped']} |",
        f"| gpuemu runtime | {res['tests']} | {r['passed']} | {r['failed']} | {r['error']} | {r['skipped']} |",
        "",
        f"Passed under the stock interpreter and not on the runtime: {len(res['stock_only'])} "
        f"({res['unexplained']} unexplained). Passed on the runtime and not under the stock interpreter: "
        f"{len(res['runtime_only'])}. Time inside the {res['passed_both']} tests passing in both: "
        f"{res['seconds_in_both']['stock']} s stock, {res['seconds_in_both']['runtime']} s runtime.",
        "",
    ]
    if res["stock_only"]:
        lines += ["## Pass under the stock interpreter, not on the runtime", "", "| test | runtime | reason |",
                  "|---|---|---|"]
        lines += [f"| `{x['test']}` | {x['runtime']} | {x['reason'] or '**unexplained**: ' + x['message']} |"
                  for x in res["stock_only"]]
        lines.append("")
    if res["runtime_only"]:
        lines += ["## Pass on the runtime, not under the stock interpreter", "", "| test | stock | why |",
                  "|---|---|---|"]
        lines += [f"| `{x['test']}` | {x['stock']} | {x['reason'] or x['message']} |" for x in res["runtime_only"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", help="a Triton checkout (or its python/ folder); default $TRITON_TESTS")
    ap.add_argument("--triton-git", help="a git directory with Triton's history; default $TRITON_GIT")
    ap.add_argument("--commit", help="the commit of triton-lang/triton to take the tests from")
    ap.add_argument("-k", help="only tests matching this pytest -k expression")
    ap.add_argument("-n", "--workers", type=int, default=os.cpu_count() or 1, help="pytest-xdist workers")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per test")
    ap.add_argument("--work", help="folder for the tests, logs and JUnit files (default: a temporary one)")
    ap.add_argument("--only", choices=("stock", "runtime"), help="run one mode; the other's XML from --work")
    ap.add_argument("--out", default=str(HERE / "results.md"), help="the Markdown table")
    ap.add_argument("--json", default=str(HERE / "results.json"), help="every difference, as JSON")
    args = ap.parse_args(argv)
    for mod in ("xdist", "pytest_timeout"):
        try:
            __import__(mod)
        except ImportError:
            fail(f"{mod} is not installed: pip install pytest-xdist pytest-timeout (make conformance does)")
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="gpuemu-conformance-"))
    work.mkdir(parents=True, exist_ok=True)
    pyroot = locate(args, work)
    source = args.tests or os.environ.get("TRITON_TESTS") or \
        f"triton-lang/triton@{(args.commit or COMMITS.get(triton_version()))[:10]} python/test"
    results = {}
    for mode in ("stock", "runtime"):
        xmls = []
        for i, sel in enumerate(selections(pyroot)):
            sub = work / f"{mode}-{i}"
            sub.mkdir(exist_ok=True)
            x = sub / f"{mode}.xml"
            if args.only is None or args.only == mode:
                x = run_mode(mode, pyroot, sel, args, sub)
            elif not x.is_file():
                fail(f"--only {args.only}: no earlier {mode} run under {work}")
            xmls.append(x)
        results[mode] = merge(xmls)
    res = compare(results["stock"], results["runtime"], load_known())
    Path(args.out).write_text(markdown(res, source) + "\n")
    Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    s, r = res["stock"], res["runtime"]
    print(f"tests {res['tests']}: stock passed {s['passed']}, runtime passed {r['passed']}; passed stock only "
          f"{len(res['stock_only'])} ({res['unexplained']} unexplained), runtime only {len(res['runtime_only'])}")
    print(f"table: {args.out}; work folder: {work}")
    if not args.work and not res["unexplained"]:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if res["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
