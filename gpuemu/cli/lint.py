"""``gpuemu lint SOURCE... --target sm_80,sm_86,sm_89,sm_90``: static PTX/SASS lint, no GPU needed."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ._common import err, write_json


def register(sub) -> None:
    p = sub.add_parser(
        "lint", help="compile kernels for GPU targets ahead of time and lint registers, spills, occupancy, SASS",
        description="Compile Triton kernels (and CUDA C with nvcc) for each target without a GPU, read registers, "
                    "spills, shared/local memory, occupancy and the PTX/SASS mix, and check them against the "
                    "rule pack and an optional baseline. Exit 0 clean, 1 findings, 2 usage error.")
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="file.py:launcher[,launcher...] (recorded on example inputs), file.py:kernel (declared "
                        "under lint.kernels), file.py (its launchers in the corpus manifest or rule pack), file.cu")
    p.add_argument("--corpus", action="store_true", help="lint every launcher of the example corpus manifest")
    p.add_argument("--manifest", metavar="PATH", default=None,
                   help="corpus manifest naming each launcher's op (default: examples/kernels/manifest.yaml)")
    p.add_argument("--target", default=None, help="comma-separated GPU targets (default: sm_80,sm_86,sm_89,sm_90)")
    p.add_argument("--op", default=None, help="the op the launchers implement: builds their example inputs")
    p.add_argument("--dtype", default="fp16", help="dtype of the example inputs: fp16 (default), bf16 or fp32")
    p.add_argument("--dims", default=None, help="override example sizes, e.g. N=4096,D=128")
    p.add_argument("--baseline", metavar="FILE", default=None, help="gate on regressions against this baseline")
    p.add_argument("--update-baseline", action="store_true",
                   help="write the run's metrics and findings to --baseline FILE (accepting them) and exit 0")
    p.add_argument("--json", metavar="PATH", default=None, help="write the result as JSON ('-' for stdout)")
    p.add_argument("--sarif", metavar="PATH", default=None, help="write SARIF 2.1.0 for GitHub code scanning")
    p.add_argument("--rulepack", metavar="PATH", action="append", default=[], help="extra rule pack (repeatable)")
    p.add_argument("--cache", metavar="DIR", default=None, help="artifact cache (default: .gpuemu/lint-cache)")
    p.add_argument("--no-cache", action="store_true", help="compile everything, read and write no cache")
    p.add_argument("--jobs", "-j", type=int, default=None, help="parallel compile processes (default: CPU count)")
    p.add_argument("--sass", action="store_true",
                   help="also disassemble SASS for its instruction mix (about 0.5 s per kernel and target)")
    p.add_argument("--fail-on", default=None, choices=("note", "warning", "error"),
                   help="least severe level that fails the run (rule pack default: warning)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (for upload steps in CI)")
    p.add_argument("--quiet", "-q", action="store_true", help="print only findings and the summary line")
    p.set_defaults(run=run)


def _progress():
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("compiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True)
    task = bar.add_task("lint", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop


def run(args) -> int:
    from ..errors import InvalidArgument
    from ..lint import engine, report, sarif
    from ..lint.examples import parse_dims

    sources = list(args.sources)
    if args.corpus:
        sources += engine.corpus_sources(args.manifest)
    if not sources:
        raise InvalidArgument("nothing to lint: name SOURCE files (file.py:launcher, file.cu) or pass --corpus")
    if args.update_baseline and not args.baseline:
        raise InvalidArgument("--update-baseline needs --baseline FILE (where to write it)")
    if args.jobs is not None and args.jobs < 1:
        raise InvalidArgument(f"--jobs {args.jobs}: use 1 or more")
    baseline = args.baseline
    if args.update_baseline and baseline and not Path(baseline).is_file():
        baseline = None  # first baseline: nothing to compare with yet
    progress, stop = _progress()
    try:
        result = engine.lint(sources, target=args.target, op=args.op, dtype=args.dtype, dims=parse_dims(args.dims),
                             baseline=baseline, rulepacks=args.rulepack, cache_dir=args.cache,
                             use_cache=not args.no_cache, workers=args.jobs, sass=args.sass, manifest=args.manifest,
                             fail_on=args.fail_on, progress=progress)
    finally:
        stop()
    report.render(result, show_kernels=not args.quiet)
    if args.json:
        write_json(args.json, result.to_dict())
    if args.sarif:
        from .. import __version__

        cmd = " ".join(["gpuemu lint", *map(shlex.quote, args.sources), *(["--corpus"] if args.corpus else []),
                        *([f"--target {args.target}"] if args.target else [])])
        write_json(args.sarif, sarif.build(result.findings, version=__version__, command_line=cmd))
        err(f"SARIF written to {args.sarif}")
    if args.update_baseline:
        doc = engine.write_baseline(result, args.baseline)
        err(f"baseline written to {args.baseline}: {sum(len(v) for v in doc['kernels'].values())} kernel x target "
            f"entries, {len(doc['accepted'])} accepted finding(s)")
        return 0
    if args.exit_zero:
        return 0
    return result.exit_code()
