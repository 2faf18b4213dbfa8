"""``gpuemu check``: fuzz every launcher of the project's manifest; one table, exit 0/1/2, CI outputs."""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys

from ..preconditions import POLICIES
from ._common import check_writable, err, prepare_device, write_json


def register(sub) -> None:
    p = sub.add_parser(
        "check", help="fuzz every launcher listed in the project's manifest (the CI gate)",
        description="Fuzz every launcher of the manifest ([tool.gpuemu.check] in pyproject.toml, 'check:' in "
                    "gpuemu.yaml, or --manifest PATH) against its op's fp64 oracle. Exit 0 when all pass, 1 when "
                    "any fails, 2 on a usage or configuration error.")
    p.add_argument("--manifest", metavar="PATH", default=None,
                   help="manifest file (default: ./pyproject.toml [tool.gpuemu.check], else ./gpuemu.yaml check:)")
    p.add_argument("-k", dest="patterns", metavar="GLOB", action="append", default=[],
                   help="only launchers whose function or file:function matches GLOB (repeatable)")
    p.add_argument("--select", metavar="KEY=VALUE", action="append", default=[],
                   help="only manifest entries whose KEY equals VALUE (KEY!=VALUE: differs, or is absent), "
                        "e.g. --select correct=true (repeatable; all must hold)")
    p.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: the manifest's, else CPUs)")
    p.add_argument("--ray", metavar="ADDRESS", nargs="?", const="local", default=None,
                   help="run the launchers as tasks on a Ray cluster: ADDRESS (host:6379, ray://host:10001), 'auto' "
                        "for the ambient cluster, or none for a local cluster of --jobs CPUs (needs gpuemu[ray])")
    p.add_argument("--iterations", "-n", type=int, default=None, help="cases per launcher (overrides the manifest)")
    p.add_argument("--seed", type=_seed, default=None, help="run seed (overrides the manifest; default: random)")
    p.add_argument("--store", metavar="DIR", default=None, help="failure store (default: .gpuemu, or GPUEMU_STORE)")
    p.add_argument("--rulepack", metavar="PATH", action="append", default=[], help="extra rule pack (repeatable)")
    p.add_argument("--device", default=None, help="auto (default), cpu or cuda")
    p.add_argument("--json", metavar="PATH", default=None, help="write the results as JSON ('-' for stdout)")
    p.add_argument("--junit", metavar="PATH", default=None, help="write JUnit XML")
    p.add_argument("--sarif", metavar="PATH", default=None, help="write SARIF 2.1.0 (for code scanning)")
    p.add_argument("--html", metavar="PATH", default=None, help="write the one-file HTML report")
    p.add_argument("--markdown", metavar="PATH", default=None, help="write the summary table as Markdown "
                   "(append when PATH exists: it may be $GITHUB_STEP_SUMMARY)")
    p.add_argument("--attest", metavar="KEY", default=None,
                   help="sign a Kernel Correctness Report with this ed25519 private key ('gpuemu keygen')")
    p.add_argument("--attest-out", metavar="PATH", default=None,
                   help="where to write the signed report (default: gpuemu-report.dsse.json)")
    p.add_argument("--preconditions", choices=POLICIES, default=None,
                   help="a launcher silently wrong only outside an undeclared precondition (PRECONDITION): fail the "
                        "gate (default), warn (shown, the gate passes) or ignore (counted as passing); overrides "
                        "the manifest's preconditions and gpuemu.yaml's oracle.preconditions")
    p.add_argument("--confirm-on", metavar="DEVICE", default=None,
                   help="re-run each failing launcher's first failure on DEVICE (cuda, or cpu after a GPU run) from "
                        "its stored bytes, and say whether the devices agree")
    p.add_argument("--no-warm", action="store_true",
                   help="on CUDA, do not compile every launcher's kernels on all cores before fuzzing (the default "
                        "warms Triton's cache first: gpuemu.check.warm)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when launchers fail (for upload steps)")
    p.set_defaults(run=run)


def _seed(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed {text!r} is not an integer (decimal or 0x-hex)") from None


def _filter(kernels, patterns: list[str], selects: list[str]):
    from ..errors import InvalidArgument

    wanted: list[tuple[str, str, bool]] = []  # (key, value, negated)
    for s in selects:
        key, eq, value = s.partition("=")
        negated = key.endswith("!")
        key = key.rstrip("!")
        if not eq or not key:
            raise InvalidArgument(f"--select {s!r}: use KEY=VALUE or KEY!=VALUE, e.g. --select correct=true")
        wanted.append((key, value, negated))

    def keep(e) -> bool:
        if patterns and not any(fnmatch.fnmatchcase(e.function, p) or fnmatch.fnmatchcase(
                f"{os.path.basename(e.file)}:{e.function}", p) or fnmatch.fnmatchcase(e.target, p) for p in patterns):
            return False
        for key, value, negated in wanted:
            have = e.extra.get(key, getattr(e, key, None)) if key not in ("extra", "where") else None
            if (str(have).lower() == value.lower()) == negated:  # a missing key equals no value
                return False
        return True

    return tuple(e for e in kernels if keep(e))


class _Progress:
    """A rich bar over launchers on a terminal; one plain line per finished launcher otherwise."""

    def __init__(self, total: int, header: str) -> None:
        self.total, self.header, self.done, self.failed, self.bar = total, header, 0, 0, None

    def start(self) -> None:
        """Everything is validated: say what runs (a configuration error before this stays one line)."""
        err(self.header)
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("gpuemu check"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[failed]} failing"), TimeElapsedColumn(), transient=True,
                                console=Console(stderr=True))
            self.task = self.bar.add_task("check", total=self.total, failed=0)
            self.bar.start()

    def __call__(self, k) -> None:
        self.done += 1
        self.failed += not k.ok
        if self.bar is not None:
            self.bar.update(self.task, advance=1, failed=self.failed)
        else:
            from ..check.outputs import status_word

            err(f"  [{self.done}/{self.total}] {status_word(k):5} {k.target.rpartition('/')[2]} "
                f"({k.passed}/{k.iterations}, {k.seconds:.1f} s)")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _outputs(args) -> list[tuple[str, str]]:
    """(flag, path) of every file this run will write, in the order they are written."""
    out = [(f"--{name}", getattr(args, name)) for name in ("json", "junit", "sarif", "html", "markdown")
           if getattr(args, name) and getattr(args, name) != "-"]
    if args.attest:
        out.append(("--attest-out", args.attest_out or "gpuemu-report.dsse.json"))
    return out


def _check_before_running(args) -> None:
    """Every usage mistake that does not need the manifest, found before anything runs: numbers, output paths
    (writable, in a folder that exists: nothing is created unasked) and the signing key (readable, ed25519)."""
    from ..errors import InvalidArgument

    for flag in ("jobs", "iterations"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise InvalidArgument(f"--{flag} {v}: must be >= 1")
    seen: dict[str, str] = {}
    for flag, path in _outputs(args):
        check_writable(path, flag, create=False)
        real = os.path.realpath(path)
        if real in seen:
            raise InvalidArgument(f"{flag} {path}: {seen[real]} writes the same file; give each output its own path")
        seen[real] = flag
    if args.attest:
        from ..report.attest import _load_private

        _load_private(args.attest)  # missing, unreadable, not PEM, not ed25519, no cryptography: one line now


def _confirm(result, device: str) -> None:
    """Replay each failing launcher's first stored failure on ``device``; the agreement goes on its result."""
    from ..errors import one_line
    from ..fuzzer import reproduce
    from ..origin import replaying
    from ..target import load

    for k in result.kernels:
        f = k.failures[0] if k.level != "pass" and k.failures else None
        seed = (f or {}).get("case", {}).get("seed") if f else None
        if seed is None or not result.store or not f.get("record"):  # (an unstored failure cannot be replayed)
            continue
        try:
            with replaying():
                fn = load(k.target)
            rp = reproduce(f"0x{int(seed):x}", store=result.store, target=k.target, device=device, fn=fn)
            agree, line = rp.agreement(device)
            k.confirmed = {"device": device, "status": rp.verdict.status, "kind": rp.verdict.kind, "agree": agree,
                           "line": line}
        except Exception as e:  # noqa: BLE001 - a replay that cannot run is reported, the check's result stands
            k.confirmed = {"device": device, "status": None, "kind": None, "agree": None,
                           "line": f"not replayed on {device}: {one_line(e)}"}


def run(args) -> int:
    import dataclasses
    import shlex

    from ..check import manifest as mf
    from ..check.outputs import junit_xml, sarif_log, summary_markdown, summary_text
    from ..check.run import run_check
    from ..errors import InvalidArgument

    _check_before_running(args)
    where = mf.find() if args.manifest is None else args.manifest
    device = prepare_device(args.device or "auto")  # before a function glob imports a launcher file
    manifest = mf.load(where)
    if manifest.device and args.device is None:
        device = prepare_device(manifest.device)
    kernels = _filter(manifest.kernels, args.patterns, args.select)
    if not kernels:
        raise InvalidArgument(f"no launcher of {manifest.path} matches the -k/--select filters")
    manifest = dataclasses.replace(manifest, kernels=kernels)
    jobs = args.jobs or manifest.jobs or min(len(kernels), os.cpu_count() or 1)
    n = f"{len(kernels)} launcher{'s' if len(kernels) != 1 else ''}"
    if args.ray is not None:
        from ..check.on_ray import require_ray

        require_ray()  # one usage line before anything runs
        where_ray = "a local Ray cluster" if args.ray == "local" else f"Ray cluster {args.ray}"
        header = f"gpuemu check {os.path.relpath(manifest.path)} · {n} · {where_ray} · device {device}"
    else:
        header = (f"gpuemu check {os.path.relpath(manifest.path)} · {n} · {jobs} worker{'s' if jobs != 1 else ''}"
                  f" · device {device}")
    progress = _Progress(len(kernels), header)
    try:
        result = run_check(manifest, device=device, jobs=jobs, seed=args.seed, iterations=args.iterations,
                           store=args.store, rulepacks=tuple(args.rulepack), on_start=progress.start,
                           on_done=progress, ray=args.ray, preconditions=args.preconditions, warm=not args.no_warm)
    finally:
        progress.close()
    width = None  # not a terminal (a CI log, a file): every line whole
    if sys.stderr.isatty():
        try:
            width = max(100, os.get_terminal_size(sys.stderr.fileno()).columns)
        except OSError:
            pass
    if args.confirm_on:
        _confirm(result, prepare_device(args.confirm_on))
    err(summary_text(result, width=width))
    if result.warmed:
        w = result.warmed
        err(f"warmed Triton's cache first: {w['seconds']:.1f} s, {w['jobs']} jobs, {w['specialisations']} "
            f"specialisations compiled once each ({w['shared']} shared between launchers)"
            + (f" ({w['failed']} did not finish; their workers compiled those)" if w["failed"] else "")
            + (f"; {w['busy_seconds']:.0f} s of compiling in all, longest: "
               + ", ".join(f"{t.rsplit(':', 1)[-1]} {s:.0f} s" for t, s in w["slowest"][:3]) if w.get("slowest") else ""))
    for k in result.kernels:
        if k.level != "pass" and k.failures:
            err(f"replay {k.function}: {k.failures[0]['replay']}")
        if k.confirmed:
            err(f"confirm {k.function}: {k.confirmed['line']}")
    if args.json:
        write_json(args.json, result.to_dict())
    if args.junit:
        _write(args.junit, junit_xml(result), "--junit")
    if args.sarif:
        import json

        cmd = "gpuemu " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["check"] else None
        _write(args.sarif, json.dumps(sarif_log(result, command_line=cmd), indent=2) + "\n", "--sarif")
    if args.html:
        from ..report.html import render

        _write(args.html, render(result), "--html")
    if args.markdown:
        _write(args.markdown, summary_markdown(result), "--markdown", append=True)
    if args.attest:
        import json

        from ..report.attest import sign_check

        out = args.attest_out or "gpuemu-report.dsse.json"
        envelope = sign_check(result, key_path=args.attest)
        _write(out, json.dumps(envelope, indent=2) + "\n", "--attest-out")
        err(f"signed Kernel Correctness Report: {out} (verify: gpuemu verify {out} --key PUBLIC_KEY)")
    return 0 if result.ok or args.exit_zero else 1


def _write(dest: str, text: str, flag: str, append: bool = False) -> None:
    from ..errors import StoreError

    try:
        if append and os.path.exists(dest):
            with open(dest, "a", encoding="utf-8") as f:
                f.write(text)
            return
        tmp = f"{dest}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, dest)
    except OSError as e:
        raise StoreError(f"cannot write {flag} {dest}: {e.strerror or e}") from None
