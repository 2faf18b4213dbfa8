"""``gpuemu bench --ablation``: the measurements behind the defaults (strategies, tolerance regimes)."""

from __future__ import annotations

from ._common import err, prepare_device


def register(sub) -> None:
    p = sub.add_parser("bench", help="measure gpuemu's defaults on the example corpus",
                       description="Run the strategy and tolerance ablations on the example corpus.")
    p.add_argument("--ablation", action="store_true", help="run both ablations (the only bench for now)")
    p.add_argument("--corpus", metavar="MANIFEST", default=None, help="corpus manifest (default: examples/kernels)")
    p.add_argument("--iterations", type=int, default=20, help="cases per kernel and strategy (default 20)")
    p.add_argument("--seed", type=lambda t: int(t, 0), default=1, help="seed (default 1)")
    p.add_argument("--out", default="bench/ablation", help="output folder (JSON, Markdown, PNG)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..errors import InvalidArgument

    if not args.ablation:
        raise InvalidArgument("gpuemu bench needs --ablation (the corpus benchmark is `make bench`)")
    if args.iterations < 1:
        raise InvalidArgument(f"--iterations {args.iterations}: must be >= 1")
    prepare_device("cpu")
    from ..ablation import render, run as run_ablation

    def progress(stage, subject, failed):
        err(f"  [{stage}] {subject.name}: {failed}")

    result = run_ablation(manifest=args.corpus, iterations=args.iterations, seed=args.seed, out=args.out,
                          on_row=progress)
    print(render(result))
    err(f"wrote {args.out}/ablation.json, ablation.md" + (", ablation.png" if result.get("png") else
                                                          " (no PNG: pip install 'gpuemu[plot]')"))
    return 0
