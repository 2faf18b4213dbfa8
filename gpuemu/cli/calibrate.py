"""``gpuemu calibrate --op OP``: fit per-op, per-dtype tolerances from correct controls; write a rule pack."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ._common import err, prepare_device


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="fit tolerances from correct control kernels",
                       description="Run correct controls over an op's cases, measure their error ratio against "
                                   "the fp64 reference, fit rtol = p95 over controls x 2, write a rule pack.")
    p.add_argument("--op", required=True, help="op name, or 'all'")
    p.add_argument("--controls", nargs="+", metavar="TARGET", default=None,
                   help="correct launchers (file.py:func); default: the framework's own op")
    p.add_argument("--corpus", metavar="MANIFEST", default=None,
                   help="also use the correct kernels of a corpus manifest as controls of their op")
    p.add_argument("--with-framework", action="store_true", help="keep the framework's own op among named controls")
    p.add_argument("--dtype", default="fp32,fp16,bf16", help="comma-separated dtypes")
    p.add_argument("--samples", type=int, default=200, help="cases per control and dtype (default 200)")
    p.add_argument("--seed", type=lambda t: int(t, 0), default=0, help="case seed (default 0)")
    p.add_argument("--out", metavar="PATH", default="-", help="rule pack to write ('-' for stdout)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (a fit on cuda is written as the GPU's "
                                                     "device_tolerances, beside the CPU's)")
    p.add_argument("--jobs", "-j", type=int, default=1, help="ops fitted at once, in worker processes (default 1)")
    p.set_defaults(run=run)


def _fit(op: str, named: list[tuple[str, str]], corpus: list[tuple[str, str]], framework: bool, dtypes: list[str],
         samples: int, seed: int, device: str) -> list:
    """Fit one op (in this process or a worker): controls are loaded here from their targets."""
    from ..calibrate import calibrate, framework_controls
    from ..target import load

    ctrls = [(name, load(spec)) for name, spec in named + corpus]
    if framework:
        ctrls[:0] = framework_controls(op)[:1]
    return calibrate(op, controls=ctrls, dtypes=dtypes, samples=samples, seed=seed, device=device)


def run(args) -> int:
    from .. import ops
    from ..calibrate import HEADROOM, rulepack_yaml
    from ..errors import InvalidArgument
    from ..target import load

    if args.samples < 1:
        raise InvalidArgument(f"--samples {args.samples}: must be >= 1")
    if args.jobs < 1:
        raise InvalidArgument(f"--jobs {args.jobs}: must be >= 1")
    names = ops.names() if args.op == "all" else [ops.get(args.op).name]
    device = prepare_device(args.device)
    dtypes = [d for d in args.dtype.split(",") if d.strip()]
    for t in args.controls or []:
        load(t)  # a target that does not load is a usage error, found before any op is fitted
    named = [(t, t) for t in (args.controls or [])]
    corpus: dict[str, list] = {}
    if args.corpus:
        from ..corpus import load_manifest, resolve_target

        for e in load_manifest(args.corpus):
            # tolerance controls: the corpus's correct kernels, less the precondition demos and the entries marked
            # `fit: false` (the field's eager patterns: judged against the fit by make soak and the tests)
            if e.correct and not e.expect and e.fit:
                corpus.setdefault(e.op, []).append((e.target, resolve_target(e, Path(args.corpus).resolve().parent.parent.parent)))
    framework = not args.controls or args.with_framework  # named controls replace the framework's op unless asked
    tasks = [(op, named, corpus.get(op, []), framework, dtypes, args.samples, args.seed, device) for op in names]
    if args.jobs > 1 and len(tasks) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a fresh interpreter per worker (fork after torch/Triton/CUDA start is unsafe)
        with ProcessPoolExecutor(max_workers=min(args.jobs, len(tasks)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            results = list(pool.map(_fit, *zip(*tasks)))
    else:
        results = [_fit(*t) for t in tasks]
    fits = []
    for op, got in zip(names, results):
        for f in got:
            shown = "".join(f"; {n}: {e['cases_above_fit']}/{e['cases']} above" for n, e in f.evidence.items())
            err(f"{op:14s} {f.dtype}: rtol={f.rtol:.3g} (p95 over {len(f.controls)} control(s) x {HEADROOM:g}; "
                f"per-case p50 {f.p50:.2g}, max {f.max:.2g}; {f.samples} cases{shown})")
        fits += got
    cmd = "gpuemu " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv and sys.argv[0].endswith("gpuemu") \
        else "gpuemu calibrate " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    text = rulepack_yaml(fits, command=cmd, seed=args.seed, samples=args.samples, device=device)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(out)
        err(f"wrote {out}")
    return 0
