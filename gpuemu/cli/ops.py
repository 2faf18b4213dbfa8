"""``gpuemu ops [OP]``: the op registry."""

from __future__ import annotations

from ._common import write_json


def register(sub) -> None:
    p = sub.add_parser("ops", help="list the known ops, or show one", description="List the ops gpuemu knows.")
    p.add_argument("op", nargs="?", help="show this op in full")
    p.add_argument("--json", metavar="PATH", default=None, help="write the registry as JSON ('-' for stdout)")
    p.set_defaults(run=run)


def run(args) -> int:
    from .. import config, ops

    if args.op:
        spec = ops.get(args.op)
        table = config.resolve().tolerance_table()
        print(f"{spec.name}: {spec.signature}")
        print(f"  meaning: {spec.meaning}")
        print(f"  dims: {', '.join(f'{d} ({r})' for d, r in spec.dims.items())}" + ("  + leading batch dims" if spec.has_batch else ""))
        print(f"  dtypes: {', '.join(spec.dtypes)}; output: {spec.out_kind}"
              + (" (a more precise float output is accepted, judged in its own dtype)" if spec.wider_output else ""))
        print(f"  error scale: {spec.scale_doc}")
        print(f"  rounding allowed: u * (|ref| + {spec.rounded_doc})" if spec.rounded else
              "  rounding allowed: u * |ref| (the result's own rounding to the dtype; none where rtol is 0)")
        if spec.eager_doc:
            print(f"  PyTorch eager form: {spec.eager_doc} (a case no further from fp64 than 2x this passes)")
        for dt in ("fp32", "fp16", "bf16"):
            t = table.get(spec.name, dt)
            print(f"  tolerance {dt}: rtol={t.rtol:g} atol={t.atol:g}  ({t.source})")
        print(f"  mpmath spot check: {'yes' if spec.mp_element else 'no'}")
        if args.json:
            write_json(args.json, spec.to_dict())
        return 0
    names = ops.names()
    width = max(len(n) for n in names)
    for n in names:
        spec = ops.get(n)
        roles = ", ".join(f"{d}:{r}" for d, r in spec.dims.items())
        print(f"{n:<{width}}  {spec.signature:<58}  {roles}")
    if args.json:
        write_json(args.json, {n: ops.get(n).to_dict() for n in names})
    return 0
