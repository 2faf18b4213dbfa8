"""``gpuemu fuzz TARGET --op OP``: fuzz a launcher against the op's fp64 oracle; ``gpuemu fuzz TARGET --reference
REF [--inputs FN]``: against its PyTorch reference, with a schema inferred from the example call (gpuemu.schema)."""

from __future__ import annotations

import argparse
import sys

from ..preconditions import POLICIES
from ._common import check_writable, err, prepare_device, write_json


def register(sub) -> None:
    p = sub.add_parser("fuzz", help="fuzz a kernel launcher against the fp64 oracle",
                       description="Fuzz TARGET (path/to/file.py:func or pkg.module:func) as an implementation of OP, "
                                   "or against its PyTorch reference (--reference, with --inputs the example call).")
    p.add_argument("target", metavar="TARGET", help="path/to/file.py:function or package.module:function (a "
                                                   "KernelBench ModelNew class with --reference problem.py:Model)")
    p.add_argument("--op", default=None, help="the op the launcher implements ('gpuemu ops' lists them)")
    p.add_argument("--reference", metavar="REF", default=None,
                   help="the kernel's PyTorch reference, FILE.py:FUNC (or a KernelBench problem's FILE.py:Model): "
                        "judged in fp64, fuzzed on a schema inferred from the example call")
    p.add_argument("--inputs", metavar="FN", default=None,
                   help="FILE.py:FUNC returning one example call's arguments (a list; a dict: keyword arguments), "
                        "or several calls (a list of such, from a function named get_examples); default: the "
                        "reference file's get_examples or get_inputs")
    p.add_argument("--schema", metavar="FILE", default=None,
                   help="a YAML/JSON declaration correcting the inferred schema (dims, args, dtypes, requires)")
    p.add_argument("--show-schema", action="store_true", help="print the schema inferred for --reference and exit")
    p.add_argument("--iterations", "-n", type=int, default=None, help="cases to run (rule pack default: 100)")
    p.add_argument("--seed", type=_seed, default=None, help="run seed, decimal or 0x-hex (default: random)")
    p.add_argument("--dtype", default=None, help="comma-separated dtypes: fp32,fp16,bf16 (default: all the op supports)")
    p.add_argument("--strategy", default=None, help="case strategy (default: the mix of all)")
    p.add_argument("--sizes", choices=("default", "production"), default=None,
                   help="production: the shapes real models launch, past 2^31 elements where the op allows, run as "
                        "sampled programs over sparse memory (docs/production-sizes.md); default: the fuzzed sizes")
    p.add_argument("--preset", default=None,
                   help="with --sizes production: one model's dims (rulepacks/production.yaml: llama3-8b, "
                        "llama3-70b, deepseek-v3, ...); default: a preset drawn per case")
    p.add_argument("--json", metavar="PATH", default=None, help="write the result as JSON to PATH ('-' for stdout)")
    p.add_argument("--store", metavar="DIR", default=None, help="failure store (default: .gpuemu, or GPUEMU_STORE)")
    p.add_argument("--rulepack", metavar="PATH", action="append", default=[], help="extra rule pack (repeatable)")
    p.add_argument("--device", default="auto", help="auto (CUDA if present, else CPU interpreter), cpu or cuda")
    p.add_argument("--no-shrink", action="store_true", help="report the first failure as found, unshrunk")
    p.add_argument("--requires", metavar="PRECONDITION", action="append", default=[],
                   help="what the launcher's callers guarantee; no case is drawn outside it (repeatable): "
                        "contiguous[=ARG,...], dtypes=fp16,bf16, divisible=DIM:N, max=DIM:N")
    p.add_argument("--preconditions", choices=POLICIES, default=None,
                   help="a case that fails only outside an undeclared precondition (PRECONDITION): fail the run "
                        "(default), warn (show it, pass the run) or ignore (count it as passing)")
    p.add_argument("--limits", choices=("allow", "fail"), default=None,
                   help="a case whose launch the target GPU refuses (shared memory, registers, grid): a LIMIT line, "
                        "not a failure (allow, default), or a failure (fail: the shape is declared supported)")
    p.add_argument("--supports", metavar="SIZES", default=None,
                   help="sizes the launcher is declared to launch at: all, or DIM<=SIZE[,...] (e.g. D<=256); a LIMIT "
                        "inside them fails the run (rule pack: fuzz.supports)")
    p.add_argument("--refusals", choices=("allow", "fail"), default=None,
                   help="an input the launcher refuses on the host before any launch (any exception): REJECTED and "
                        "counted (allow, default; a launcher refusing every case still fails), or a failure (fail)")
    p.add_argument("--case-timeout", metavar="SECONDS", type=_seconds, default=None,
                   help="per-case time limit: a case running longer is an ERROR verdict (rule pack: fuzz.case_timeout)")
    p.add_argument("--target", dest="gpu_targets", metavar="SM_XX,...", default=None,
                   help="GPU targets whose launch limits (shared memory, threads) a CPU run enforces, as in "
                        "'gpuemu lint --target' (default: fuzz.targets of the rule pack, else sm_80,sm_90; none: off)")
    p.add_argument("--compile-workers", metavar="N", type=int, default=None,
                   help="processes that compile the coming cases' kernels ahead of the loop on CUDA (on the "
                        "CPU: one, for the launch-limit checks, once they cost the run 2 s) (rule pack: "
                        "fuzz.compile_workers, default 8; 0: compile in the loop)")
    p.add_argument("--framework", choices=("torch", "jax", "tf"), default=None,
                   help="what the launcher is written against (default: detected from its module); a jax or tf "
                        "launcher gets the same cases by DLPack, with contiguous inputs only")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when cases fail (for upload steps in CI)")
    p.set_defaults(run=run)


def _strategy(args: argparse.Namespace) -> str | None:
    """--strategy, or the production strategy of --sizes production (with its --preset)."""
    from ..errors import InvalidArgument

    if args.sizes != "production":
        if args.preset:
            raise InvalidArgument("--preset names a model's dims for --sizes production; add --sizes production")
        return args.strategy
    if args.strategy:
        raise InvalidArgument(f"--sizes production draws its own shapes: drop --strategy {args.strategy}")
    if args.preset:
        from ..sizes import presets

        if args.preset not in presets():
            raise InvalidArgument(f"--preset {args.preset!r} is not known; use one of {', '.join(sorted(presets()))}")
        return f"production:{args.preset}"
    return "production"


def _seed(text: str) -> int:
    from ..errors import InvalidArgument
    from ..fuzzer import parse_seed

    try:
        return parse_seed(text)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _seconds(text: str) -> float:
    import math

    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"--case-timeout {text!r}: give a number of seconds > 0")
    return v


def _check_flags(args) -> None:
    """Usage errors found before any kernel runs: empty lists, unwritable --json, bad dtypes."""
    from ..cases import canonical_dtype
    from ..errors import InvalidArgument

    if args.dtype is not None:
        names = [d.strip() for d in args.dtype.split(",")]
        if not any(names) or not all(names):
            raise InvalidArgument(f"--dtype {args.dtype!r}: give comma-separated dtypes, e.g. fp32,fp16")
        for d in names:
            try:
                if canonical_dtype(d) not in ("fp32", "fp16", "bf16"):
                    raise ValueError
            except (ValueError, InvalidArgument):
                raise InvalidArgument(f"--dtype {d!r} is not one of fp32, fp16, bf16") from None
    if args.json and args.json != "-":
        check_writable(args.json, "--json")


class _Progress:
    """A rich progress bar on a terminal; a plain line every tenth of the run otherwise."""

    def __init__(self, total: int, label: str, header: str = "") -> None:
        self.total, self.label, self.failed, self.limits, self.header = total, label, 0, 0, header
        self.bar = None
        self.step = max(1, total // 10)

    def _start(self) -> None:
        err(self.header)
        self.header = ""
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[failed]} failing"), TimeElapsedColumn(), transient=True,
                                console=_console())
            self.task = self.bar.add_task(self.label, total=self.total, failed=0)
            self.bar.start()

    def __call__(self, i: int, case, verdict) -> None:
        if self.header:
            self._start()
        # as the summary counts: a clean refusal passes, a launch the GPU refuses is a LIMIT line, not a failure
        self.limits += verdict.status == "limit"
        self.failed += verdict.status not in ("pass", "rejected", "limit")
        if self.bar is not None:
            self.bar.update(self.task, advance=1, failed=self.failed)
        elif (i + 1) % self.step == 0 or i + 1 == self.total:
            limits = f", {self.limits} LIMIT" if self.limits else ""
            err(f"  [{i + 1}/{self.total}] {i + 1 - self.failed - self.limits} passed, {self.failed} failing{limits}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _console():
    from rich.console import Console

    return Console(stderr=True)


def run(args) -> int:
    from ..fuzzer import fuzz
    from ..ops import get
    from ..target import load

    from ..preconditions import parse_cli

    from ..errors import InvalidArgument

    if (args.op is None) == (args.reference is None):
        raise InvalidArgument("give --op OP (an op of the registry: 'gpuemu ops' lists them) or --reference "
                              "FILE.py:FUNC (the kernel's PyTorch reference), one of the two")
    for flag in ("inputs", "schema", "show_schema"):
        if getattr(args, flag) and args.reference is None:
            raise InvalidArgument(f"--{flag.replace('_', '-')} goes with --reference")
    spec = get(args.op) if args.op else None  # unknown op: one line before anything heavy happens
    _check_flags(args)
    requires = parse_cli(args.requires)
    if spec is not None:
        requires.check_against(spec)
    device = prepare_device(args.device)
    from ..frameworks import quiet_native_logs, resolve

    with quiet_native_logs():  # a module importing TensorFlow: its load-time notices are not gpuemu's report
        fn = load(args.target)

    framework = resolve(fn, args.framework)  # a missing jax/tensorflow or an ambiguous module: one line here
    bound = None
    if spec is None:
        from ..schema import bind

        bound = bind(fn, reference=args.reference, inputs=args.inputs, schema=args.schema)
        spec = get(bound.op)
        requires.check_against(spec)
        text = bound.schema.describe()
        if args.show_schema:
            print(f"schema of {args.target} against {args.reference}:\n{text}")
            return 0
        err(f"schema (inferred from the example call of {bound.inputs or 'the inputs function'}"
            f"{'' if not bound.schema.declared else ', with the declaration'}; correct it with --schema FILE):\n"
            + "\n".join("  " + ln for ln in text.splitlines()))
    else:
        from ..cases import canonical_dtype, generate
        from ..fuzzer import check_signature

        # a launcher that cannot take the op's arguments: one line before anything runs
        check_signature(fn, spec, generate(spec.name, 0, dtype=canonical_dtype(spec.dtypes[0])), args.target)
    iterations = args.iterations
    if iterations is not None and iterations < 1:
        from ..errors import InvalidArgument

        raise InvalidArgument(f"--iterations {iterations}: must be >= 1")
    from .. import config

    settings = config.resolve(rulepacks=tuple(args.rulepack), store=args.store)
    total = iterations or int(settings.fuzz.get("iterations", 100))
    from ..store import Store

    Store(settings.store).ensure_writable()
    # the header comes with the first case, so that a usage error found inside fuzz() stays one line
    against = f"--op {spec.name}" if bound is None else f"--reference {args.reference}"
    progress = _Progress(total, f"fuzzing {args.target if bound else spec.name}",
                         header=f"gpuemu fuzz {args.target} {against} · {total} cases · device {device}"
                         + (f" · {framework} launcher" if framework != "torch" else
                            " (Triton interpreter with gpuemu's runtime)" if device == "cpu" else ""))
    from ..fuzzer import FuzzInterrupted

    interrupted = False
    from ..resources import parse_targets, predicting

    # a bad --target is one usage line, before any case runs
    gpu_targets = parse_targets(args.gpu_targets if args.gpu_targets is not None else settings.fuzz.get("targets"))
    try:
        with predicting(gpu_targets):
            result = fuzz(fn, op=spec.name if bound is None else None, reference=bound,
                          iterations=iterations, seed=args.seed, dtypes=args.dtype,
                          strategy=_strategy(args), store=args.store, rulepack=args.rulepack, device=device,
                          shrink_failures=not args.no_shrink, target=args.target, requires=requires,
                          preconditions=args.preconditions, case_timeout=args.case_timeout, on_case=progress,
                          compile_workers=args.compile_workers, framework=framework, limits=args.limits,
                          supports=args.supports, refusals=args.refusals)
    except FuzzInterrupted as e:  # Ctrl-C: report and write what ran, then exit 130
        result, interrupted = e.result, True
    finally:
        progress.close()
    from ..reporting import report

    err(report(result, more_note=" (--json for all)", timing=True))
    if args.json:
        write_json(args.json, result.to_dict())
    if interrupted:
        err("gpuemu: interrupted" + (f"; partial result written to {args.json}" if args.json and args.json != "-" else ""))
        return 130
    if result.iterations == 0:
        from ..errors import InvalidArgument

        raise InvalidArgument(f"no case ran: {'; '.join(f'{k} skipped: {v}' for k, v in result.skipped.items())}; "
                              "choose other dtypes with --dtype")
    if result.refused_every_case:  # (the summary says so) a launcher written for another framework raises on all
        from ..frameworks import other_framework_hint

        hint = other_framework_hint(fn, framework)
        if hint:
            err(f"hint: {hint}")
    if result.all_errored and not result.timed_out:  # it takes the op's arguments (checked above): a broken kernel
        from ..frameworks import other_framework_hint

        messages = {f.verdict.message for f in result.failures}
        if len(messages) == 1:  # one cause: say it (a Pallas kernel that cannot run here, a wrong framework)
            err(f"every case raised the same error: {messages.pop()}")
        else:
            err(f"every case raised: {args.target} or its kernel is broken (ERROR verdicts above, each with its seed)")
        hint = other_framework_hint(fn, framework)
        if hint:
            err(f"hint: {hint}")
    internal = [f for f in result.failed if f.verdict.kind == "internal"]
    if internal and len(internal) == len(result.failed) and not args.exit_zero:
        err(f"gpuemu: {len(internal)} case(s) hit an internal error of gpuemu (not the kernel's): exit 101")
        return 101
    if not result.ok and not args.exit_zero:
        return 1  # FAIL or ERROR; PRECONDITION too unless the policy is warn or ignore (gpuemu.preconditions)
    return 0
