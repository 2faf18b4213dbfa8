"""The fuzz engine: cases -> oracle -> failures, the first of each class shrunk (gpuemu.shrink) and explained
(gpuemu.explain), recorded in the store, and replay. Results are gpuemu.results; their text gpuemu.reporting.

>>> import gpuemu
>>> result = gpuemu.fuzz(my_softmax, op="softmax", iterations=50)   # doctest: +SKIP
>>> result.raise_for_failures()                                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from . import __version__, ops
from .cases import (Blocks, Case, canonical_dtype, contiguous_twin, generate, layout_note, materialize,
                    strided_args)
from .errors import InvalidArgument, StoreError
from .explain import HINT_SEEDS, attribute_blocks, diagnose  # noqa: F401 (re-exported)
from .explain import learn as _learn
from .results import Failure, FuzzInterrupted, FuzzResult  # noqa: F401 (re-exported: gpuemu.Failure, ...)
from .shrink import ShrinkStats, shrink  # noqa: F401 (re-exported)
from .shrink import candidates as _shrink_candidates, same_failure as _same_failure  # noqa: F401
from .oracle import ERROR, FAIL, LIMIT, PASS, PRECONDITION, REJECTED, Evaluation, Oracle, Verdict
from .preconditions import Requires, declared, from_project, resolve_policy
from .rng import MASK64, derive_seed
from .runners import bf16_unfaithful, default_device, interpreting, precompile
from .runners.limits import CaseTimeout, time_limit
from .store import Store, replay_command, seed_hex

BF16_INTERPRETER_REASON = ("Triton's interpreter mishandles bf16 (fp32->bf16 casts truncate, bf16 arithmetic raises "
                           "or is wrong); bf16 cases of Triton kernels run on a GPU")
MAX_STORED = 100
# torch's intra-op threads while a fuzz run's cases run. A run is thousands of small tensor ops (inputs, the fp64
# reference, the comparison, the runtime's own); threads spin-wait for each other, and on a machine whose cores are
# busy that costs more than it gains. Measured on 2 shared cores at load ~3 (100 iterations, threads 2 -> 1):
# matmul 12.2 s -> 8.3 s (its fp64 reference 2.4 s -> 0.05 s), embedding_stride 1.2 s -> 0.3 s (compare 0.3 s ->
# 0.04 s), eager_attention 1.6 s -> 0.8-1.0 s; hf_llama_rmsnorm the same. Rule pack: fuzz.torch_threads.
TORCH_THREADS = 1
MAX_TIMEOUTS = 3  # a launcher that hangs this many times would hang on every case: the run stops there


# ------------------------------------------------------------------------------------ the loop
class _Runner:
    """Evaluates cases of one launcher and keeps the time accounts."""

    def __init__(self, fn: Callable, oracle: Oracle, device: str, determinism: bool,
                 case_timeout: float | None = None) -> None:
        self.fn, self.oracle, self.device, self.determinism = fn, oracle, device, determinism
        self.case_timeout = case_timeout
        self.timings: dict[str, float] = {"generate": 0.0, "kernel": 0.0, "reference": 0.0, "compare": 0.0}
        self.hang_aborts = False  # while shrinking or explaining: a hang ends that phase (see _Hang)

    def __call__(self, case: Case, inputs: Mapping[str, Any] | None = None) -> Evaluation:
        t0 = time.perf_counter()
        try:
            with time_limit(self.case_timeout):
                ev = self.oracle.evaluate(self.fn, case, device=self.device, check_determinism=self.determinism,
                                          inputs=inputs)
        except CaseTimeout as e:
            self.timings["kernel"] = self.timings.get("kernel", 0.0) + time.perf_counter() - t0
            if self.hang_aborts:
                raise _Hang() from None
            return Evaluation(_timeout_verdict(e), [])
        for k, v in ev.verdict.seconds.items():
            self.timings[k] = self.timings.get(k, 0.0) + v
        return ev


class _Hang(Exception):
    """A case ran past its time limit while shrinking or explaining: stop that phase (one hang, not 48)."""


def _timeout_verdict(e: CaseTimeout) -> Verdict:
    """ERROR of kind ``timeout``, naming where the case was when the limit struck (the launcher's own line
    when it was in the launcher's Python or its kernel, else the judging of its output)."""
    import traceback

    from .runners import _user_frame

    frames = traceback.extract_tb(e.__traceback__)
    in_launcher = any(f.name == "run_launcher" for f in frames)
    fr = _user_frame([f for f in frames if not f.filename.startswith("<")]) if in_launcher else None  # not exec'd code
    where = f" (at {fr.filename}:{fr.lineno})" if fr is not None and fr.name != "run_launcher" else ""
    what = "the launcher or its kernel" if in_launcher else "judging its output"
    return Verdict(ERROR, "timeout", f"case {e} in {what}{where}; raise it with --case-timeout or "
                                     "fuzz.case_timeout if the case is only slow")


def _random_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def _record(result: FuzzResult, failure: Failure, device: str, tol, extra: Mapping[str, Any]) -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # pragma: no cover
        triton_version = None
    return {
        "gpuemu": __version__, "target": result.target, "op": result.op, "device": device,
        "interpreter": interpreting(), "torch": torch.__version__, "triton": triton_version,
        "case": failure.case.to_dict(), "verdict": failure.verdict.to_dict(), "hint": failure.hint,
        "line": failure.line(), "tolerance": tol.to_dict(), "run_seed": seed_hex(result.seed),
        "launches": [lch.to_dict() for lch in failure.launches],
        "original_case": failure.original.to_dict() if failure.original else None, **extra,
    }


_MAX_UNFIT = 200  # draws in a row that the declared preconditions made invalid before the run gives up


def fuzz(fn: Callable, *, op: str | None = None, reference: Any = None, inputs: Any = None,
         schema: Mapping[str, Any] | str | None = None, init_inputs: Any = None,
         iterations: int | None = None, seed: int | None = None,
         dtypes: Iterable[str] | str | None = None, strategy: str | None = None, store: str | os.PathLike | None = None,
         rulepack: Iterable[str] = (), device: str | None = None, shrink_failures: bool = True,
         save: bool = True, target: str | None = None, max_failures: int | None = None,
         check_determinism: bool | None = None, requires: Requires | None = None,
         preconditions: str | None = None, case_timeout: float | None = None,
         on_case: Callable[[int, Case, Verdict], None] | None = None,
         compile_workers: int | None = None, framework: str | None = None, limits: str | None = None) -> FuzzResult:
    """Fuzz launcher ``fn`` as an implementation of ``op`` (a registry op), or against ``reference`` (a PyTorch
    function, or a KernelBench ``Model`` class for a ``ModelNew`` ``fn``) with the example call(s) ``inputs``
    returns and the declaration ``schema`` (see :mod:`gpuemu.schema`).

    Cases come from the op's schema (shapes at tile edges, strided layouts, boundary and adversarial
    values) and are judged by the fp64 oracle with per-op, per-dtype tolerances. The first failure is
    shrunk to the smallest failing shape and explained by a hint where a one-factor change makes it pass;
    every failing case's exact inputs are stored for ``gpuemu reproduce``.

    ``requires`` adds to the preconditions declared on ``fn`` (``@gpuemu.requires``) and in ``gpuemu.yaml``:
    no case is drawn outside them. A case that fails only because of an undeclared one (its contiguous twin
    passes) is a PRECONDITION, not a FAIL; ``preconditions="warn"`` lets those pass the run with a warning,
    ``"ignore"`` counts them as passing (see :func:`gpuemu.preconditions.resolve_policy`).

    ``case_timeout`` (seconds; rule pack ``fuzz.case_timeout``) bounds each case: one that runs past it is
    an ERROR verdict of kind ``timeout`` with its seed, and is neither shrunk nor explained. ``seed`` is an
    int in [0, 2**64) or a decimal/0x-hex string. ``compile_workers`` (rule pack ``fuzz.compile_workers``)
    processes compile the kernels of the coming cases ahead of the loop on CUDA; on the CPU runtime one process
    compiles the coming launch-limit checks once they have cost the run 2 s (a cold Triton cache; see
    :mod:`gpuemu.runners.precompile`); 0 compiles in the loop. Ctrl-C raises :class:`FuzzInterrupted` (a
    KeyboardInterrupt) carrying the partial result. While the cases run, torch's CPU ops use
    ``fuzz.torch_threads`` intra-op threads (default 1; 0 leaves torch's setting; restored afterwards): see
    :data:`TORCH_THREADS`.

    A case whose launch the target GPU refuses (shared memory, registers, grid: predicted on the CPU, raised on a
    GPU) is a LIMIT verdict, not a failure, and later cases stay inside the envelope learnt (:mod:`gpuemu.envelope`);
    ``limits="fail"`` (rule pack ``fuzz.limits``) makes it fatal for a launcher that declares such shapes supported.

    ``framework`` ('torch', 'jax' or 'tf'; default: detected from ``fn``'s module, see
    :mod:`gpuemu.frameworks`): a JAX/Pallas or TensorFlow launcher gets the same cases' tensors by DLPack
    and its output is judged by the same oracle; its cases run with contiguous inputs (no strides there).

    >>> r = fuzz(lambda x: x.softmax(-1), op="softmax", iterations=5, seed=1, save=False)
    >>> r.ok
    True
    """
    from . import config
    from .cases import STRATEGIES
    from .target import describe

    bound = None
    if reference is not None:
        if op is not None:
            raise InvalidArgument(f"give op= (a registry op) or reference= (a PyTorch reference), not both (op={op!r})")
        from .schema import bind

        from .schema import Bound

        target = target or describe(fn)
        bound = reference if isinstance(reference, Bound) else \
            bind(fn, reference=reference, inputs=inputs, schema=schema, init_inputs=init_inputs)
        fn, op = bound.launcher, bound.op
    elif op is None:
        raise InvalidArgument("fuzz needs op= (an op of the registry: 'gpuemu ops' lists them) or reference= (the "
                              "kernel's PyTorch reference, with inputs= its example call)")
    spec = ops.get(op)
    settings = config.resolve(rulepacks=tuple(rulepack), store=store)
    fz = settings.fuzz
    iterations = int(fz.get("iterations", 100) if iterations is None else iterations)
    if iterations < 1:
        raise InvalidArgument(f"iterations={iterations} must be >= 1")
    strategy = strategy or fz.get("strategy", "default")
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"strategy {strategy!r} is not known; use one of {', '.join(STRATEGIES)}")
    policy = resolve_policy(preconditions, settings=settings)  # fail, warn or ignore: see gpuemu.preconditions
    limit_policy = limits or fz.get("limits", "allow")
    if limit_policy not in ("allow", "fail"):
        raise InvalidArgument(f"limits={limit_policy!r}: use allow (a launch the GPU refuses is shown, not failed) or "
                              "fail")
    target = target or describe(fn)
    req = declared(fn).merge(from_project(target, settings.requires, fn=fn)).merge(requires or Requires())
    if bound is not None and bound.schema.declared.get("requires"):
        try:
            req = req.merge(Requires.from_dict(bound.schema.declared["requires"]))
        except ValueError as e:
            raise InvalidArgument(f"schema declaration: requires: {e}") from None
    req.check_against(spec)
    from .frameworks import adapt, no_strides_reason, resolve

    fw = resolve(fn, framework)  # a JAX or TF launcher gets torch-made cases by DLPack (gpuemu.frameworks)
    fn = adapt(fn, fw, index_output=spec.out_kind == "index")
    if isinstance(dtypes, str):
        dtypes = [d for d in dtypes.split(",") if d.strip()]
    default_dtypes = list(bound.schema.dtypes) if bound is not None else fz.get("dtypes", ["fp32", "fp16", "bf16"])
    dts = [canonical_dtype(d) for d in (dtypes or default_dtypes)]
    dts = [d for d in dict.fromkeys(dts) if d in {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
           and {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[d] in spec.dtypes]
    if req.dtypes:
        dts = [d for d in dts if d in req.dtypes]
    if not dts:
        raise InvalidArgument(f"none of the requested dtypes is supported by {op} (supports {', '.join(spec.dtypes)})"
                              + (f" and declared by the launcher ({', '.join(req.dtypes)})" if req.dtypes else ""))
    seed = _random_seed() if seed is None else parse_seed(seed)
    case_timeout = fz.get("case_timeout") if case_timeout is None else case_timeout
    if case_timeout is not None:
        if isinstance(case_timeout, bool) or not isinstance(case_timeout, (int, float)) or not case_timeout > 0 \
                or case_timeout == float("inf"):
            raise InvalidArgument(f"case_timeout={case_timeout!r} must be a number of seconds > 0")
        case_timeout = float(case_timeout)
    device = device or default_device()
    threads = fz.get("torch_threads", TORCH_THREADS)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
        raise InvalidArgument(f"fuzz.torch_threads={threads!r} must be an int >= 0 (0: leave torch's setting)")
    oracle = Oracle.from_settings(settings)
    determinism = fz.get("determinism_check", True) if check_determinism is None else check_determinism
    run = _Runner(fn, oracle, device, bool(determinism), case_timeout)
    st = Store(settings.store) if save else None
    result = FuzzResult(target=target, op=op, seed=seed, store=str(settings.store) if save else None,
                        requires=req.to_dict() if req else {}, precondition_policy=policy, case_timeout=case_timeout,
                        limit_policy=limit_policy)
    from .cases import dim_limits
    from .envelope import Envelope

    envelope = Envelope()
    lows = {d: dim_limits(spec, d)[0] for d in spec.dims}
    if bound is None:
        check_signature(fn, spec, generate(op, derive_seed(seed, 0), dtype=dts[0], strategy=strategy), target)
    if st is not None:
        st.ensure_writable()

    workers = int(fz.get("compile_workers", 0) if compile_workers is None else compile_workers)
    ahead = None
    lookahead = None  # on the CPU runtime: a worker for the launch-limit compiles, once they cost the run time
    if fw == "torch" and workers > 0 and bound is None and precompile.importable(fn, target):
        if device.startswith("cuda"):
            ahead = precompile.start(target, op=op, seed=seed, dtypes=dts, strategy=strategy, iterations=iterations,
                                     requires=req.to_dict() if req else {}, workers=workers)
        elif device == "cpu":
            from .resources import current_targets

            lookahead = precompile.Lookahead(target, op=op, seed=seed, dtypes=dts, strategy=strategy,
                                             iterations=iterations, requires=req.to_dict() if req else {},
                                             workers=1, targets=current_targets())
    blocks = Blocks()
    active = list(dts)
    shrunk: set[str] = set()  # the first failure of each class (FAIL/ERROR, PRECONDITION) is shrunk
    t_start = time.perf_counter()
    i = 0
    case_index = 0
    unfit = 0
    outside = 0  # draws in a row the reference could not compute (a reference-defined op)
    flattened = 0
    threads_before = _set_torch_threads(threads)
    try:
        while result.iterations < iterations and active:
            dtype = active[case_index % len(active)]
            case_seed = derive_seed(seed, case_index)
            case_index += 1
            case = req.apply(generate(op, case_seed, dtype=dtype, strategy=strategy, blocks=blocks,
                                      long_rows="long rows" not in result.skipped,
                                      caps=_capped(req.max_dims, envelope.caps)))
            # a dim rounded up to a declared divisor can break a constraint of the op: such a draw is skipped
            if spec.check_dims(case.dims, case.kwargs) is not None:
                unfit += 1
                if unfit > _MAX_UNFIT:
                    raise InvalidArgument(f"{target or op}: the declared preconditions {req.to_dict()} leave no valid "
                                          f"{op} shape ({spec.check_dims(case.dims, case.kwargs)}); relax them")
                continue
            unfit = 0
            if fw != "torch" and not case.is_contiguous():  # same seed and values, dense (no strides there)
                case = _contiguous_twin(case)
                flattened += 1
            ev = run(case)
            if ev.verdict.status == REJECTED and ev.verdict.kind == "reference":  # outside the reference's domain:
                outside += 1                                                        # no case, draw another
                if outside > _MAX_UNFIT:
                    raise InvalidArgument(f"{target}: the reference rejects every case drawn from its schema (last: "
                                          f"{ev.verdict.message}); declare the dims it needs (--show-schema prints "
                                          "them, --schema corrects them)")
                continue
            outside = 0
            _learn(blocks, spec, ev.launches)
            if lookahead is not None and ahead is None:
                ahead = lookahead.poll(case_index)
            # a row past the size caps that a GPU refuses to launch (one block per row): the launcher's design
            # limit, not a wrong answer; such rows are not drawn again, and the case is not counted
            if case.shape_kind == "long_row" and ev.verdict.status == LIMIT:
                result.skipped["long rows"] = (f"the launch is refused at {case.shape_label()} "
                                               f"({ev.verdict.message.split(';')[0]}); no row past the size caps "
                                               "is drawn for this launcher")
                continue
            if ev.verdict.status == LIMIT:  # the GPU refuses this launch: shown, and later cases stay inside
                envelope.refused_at(case.dims, ev.verdict.message, lows, ev.launches)
                result.iterations += 1
                result.limits += 1
                result.envelope = envelope.to_dict()
                if on_case:
                    on_case(result.iterations - 1, case, ev.verdict)
                if limit_policy == "fail":
                    result.failures.append(Failure(case=case, verdict=ev.verdict, launches=tuple(ev.launches)))
                continue
            # skip bf16 only where the plain interpreter ran it; gpuemu's runtime runs bf16 as a GPU does
            if bf16_unfaithful(dtype, ev.launches):
                result.skipped["bf16"] = BF16_INTERPRETER_REASON
                active.remove("bf16")
                continue
            i = result.iterations
            result.iterations += 1
            verdict = ev.verdict
            if verdict.status != PASS and not case.is_contiguous() and verdict.kind != "timeout":
                verdict = _layout_precondition(run, case, verdict) or verdict
            if on_case:
                on_case(i, case, verdict)
            if verdict.status in (PASS, REJECTED) or verdict.status == FAIL:
                envelope.launched_at(case.dims, ev.launches)  # (it launched: the GPU takes this size)
            if verdict.status == PASS:
                result.passed += 1
                result.framework_passes += verdict.basis == "framework"
                continue
            if verdict.status == REJECTED:
                result.passed += 1
                result.rejected += 1
                result.rejected_reason = result.rejected_reason or verdict.message
                continue
            result.failed_cases += 1
            result.precondition_cases += verdict.status == PRECONDITION
            if result.first_failure_iteration is None:
                result.first_failure_iteration = i + 1
                result.first_failure_seconds = time.perf_counter() - t_start
            failure = Failure(case=case, verdict=verdict, launches=tuple(ev.launches))
            kind = "precondition" if verdict.status == PRECONDITION else "fail"
            result.timed_out += verdict.kind == "timeout"
            if kind not in shrunk and shrink_failures and verdict.kind != "timeout":
                shrunk.add(kind)
                failure = _shrink_and_explain(run, case, ev, verdict, blocks, int(fz.get("shrink_budget", 48)),
                                              result.shrink_stats)
            if st is not None and result.stored < MAX_STORED and result.store_error is None:
                try:
                    inputs, _ = materialize(failure.case, "cpu")
                    extra = {"framework": fw} if fw != "torch" else {}
                    if bound is not None:
                        extra["bound"] = bound.record()
                    path = st.save(_record(result, failure, device, oracle.tolerances.get(op, failure.case.dtype, device),
                                           extra), inputs)
                    failure = dataclasses.replace(failure, record=str(path))
                    result.stored += 1
                except StoreError as e:  # a full disk must not end the run: the verdicts still stand
                    result.store_error = str(e)
            result.failures.append(failure)
            if max_failures is not None and len(result.failures) >= max_failures:
                break
            if result.timed_out >= MAX_TIMEOUTS:
                result.stopped = (f"{result.timed_out} cases ran past the {case_timeout:g} s limit; the rest would too "
                                  "(fix the hang, or raise --case-timeout)")
                break
    except KeyboardInterrupt:
        result.interrupted = True
        result.iterations = result.passed + result.failed_cases  # the case cut short has no verdict: not counted
    finally:
        _set_torch_threads(threads_before)
        if ahead is not None:
            ahead.stop()
    result.seconds = time.perf_counter() - t_start
    if flattened:
        result.skipped["non-contiguous layouts"] = no_strides_reason(fw, flattened, case_index)
    result.timings = dict(run.timings)
    result.blocks = blocks.to_dict()
    _finish_replay_lines(result, st, settings)
    if result.interrupted:
        result.stopped = "interrupted (Ctrl-C)"
        raise FuzzInterrupted(result)
    return result


def _capped(declared: Mapping[str, int], envelope: Mapping[str, int]) -> dict[str, int]:
    """The size caps of the next draws: the launcher's declared ones and the envelope's, the smaller of each."""
    out = dict(declared)
    for d, c in envelope.items():
        out[d] = min(out.get(d, c), c)
    return out


def _set_torch_threads(n: int | None) -> int | None:
    """Set torch's intra-op CPU threads to ``n`` (None or 0: leave them); returns the setting to restore."""
    if not n:
        return None
    import torch

    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    return before


def parse_seed(seed: Any) -> int:
    """A run seed as an int in [0, 2**64): an int, or a decimal or 0x-hex string; InvalidArgument otherwise.

    >>> parse_seed("0x10"), parse_seed(7)
    (16, 7)
    """
    if isinstance(seed, str):
        try:
            value = int(seed.strip(), 0)
        except ValueError:
            raise InvalidArgument(f"seed {seed!r} is not an integer (decimal or 0x-hex)") from None
    elif isinstance(seed, int) and not isinstance(seed, bool):
        value = seed
    else:
        raise InvalidArgument(f"seed {seed!r} is a {type(seed).__name__}; give an int or a decimal/0x-hex string")
    if not 0 <= value <= MASK64:
        raise InvalidArgument(f"seed {seed!r} is outside [0, 0xffffffffffffffff] (a 64-bit unsigned seed)")
    return value


def check_signature(fn: Callable, spec: ops.OpSpec, case: Case, target: str) -> None:
    """A launcher that cannot take the op's arguments at all is a usage error, found before any kernel runs
    (a launcher that takes them and then raises is a kernel failure: ERROR verdicts)."""
    import inspect

    from .cases import call_kwargs

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to check ahead of the call
        return
    try:
        sig.bind(*[None] * len(spec.args), **call_kwargs(case))
    except TypeError as e:
        raise InvalidArgument(f"{target}{sig} cannot be called as {spec.name}'s launcher ({e}); the op's "
                              f"signature is '{spec.signature}' ('gpuemu ops {spec.name}')") from None


def _finish_replay_lines(result: FuzzResult, st: Store | None, settings) -> None:
    """Each failure's pasteable replay command, and a note of the seeds that were found but not stored."""
    from pathlib import Path

    from .store import _slug

    if st is None:
        result.failures = [dataclasses.replace(f, not_stored="this run did not use a store (save=False)")
                           for f in result.failures]
        return
    store_arg = None
    try:
        if Path(settings.store).resolve() != (Path.cwd() / ".gpuemu").resolve():
            store_arg = str(settings.store)
    except OSError:
        store_arg = str(settings.store)
    others = st.targets() - {_slug(result.target)}
    target_arg = result.target if others else None
    unstored: dict[int, str] = {}
    out = []
    for f in result.failures:
        if f.record is None:
            why = f"the store failed: {result.store_error}" if result.store_error else \
                f"only the first {MAX_STORED} failing cases of a run are stored"
            unstored[f.case.seed] = why
            out.append(dataclasses.replace(f, not_stored=why))
        else:
            out.append(dataclasses.replace(f, command=replay_command(f.case.seed, target=target_arg, store=store_arg)))
    result.failures = out
    st.note_run(result.target, result.seed, unstored)


_contiguous_twin, _strided_args = contiguous_twin, strided_args


def _layout_precondition(run: _Runner, case: Case, verdict: Verdict, *, attribute: bool = False) -> Verdict | None:
    """A failing non-contiguous case whose contiguous twin passes: the launcher assumes contiguous inputs.
    A clear refusal (ValueError, ...) is REJECTED; silently wrong output is PRECONDITION, naming the
    arguments (with ``attribute``, the fewest whose contiguity alone makes the case pass). None otherwise."""
    if run(_contiguous_twin(case)).verdict.status != PASS:
        return None
    strided = _strided_args(case)
    if verdict.status == ERROR and verdict.kind == "refusal":
        return Verdict(REJECTED, "refusal", f"rejects non-contiguous input ({verdict.message})", reference=verdict.reference)
    if verdict.status == ERROR:
        return None  # a crash on strided input is an error, not a declared-or-not contract
    names = strided
    if attribute and len(strided) > 1:
        alone = [n for n in strided if run(_contiguous_twin(case, [n])).verdict.status == PASS]
        names = alone or strided
    layouts = ", ".join(layout_note(case, n) for n in names)
    subject = " and ".join(names)
    return dataclasses.replace(
        verdict, status=PRECONDITION,
        message=f"{subject} must be contiguous: silently wrong otherwise ({verdict.message} with {layouts}; "
                "the same case with contiguous inputs passes)",
        detail=(verdict.detail + "\n" if verdict.detail else "")
        + f"Fix: declare it (@gpuemu.requires(contiguous={names!r}), --requires contiguous={','.join(names)}, or "
          "requires: in gpuemu.yaml), or call .contiguous() in the launcher.")


def _shrink_and_explain(run: _Runner, case: Case, ev: Evaluation, verdict: Verdict, blocks: Blocks,
                        budget: int, stats: ShrinkStats | None = None) -> Failure:
    """The first failure of its class, shrunk and with its hint (PRECONDITION ones keep their layout).
    A candidate that hangs ends shrinking (and explaining) there: one hang, never one per candidate."""
    run.hang_aborts = True
    try:
        return _shrink_and_explain_inner(run, case, ev, verdict, blocks, budget, stats)
    except _Hang:
        return Failure(case=case, verdict=verdict, hint="not shrunk: a smaller case ran past the time limit",
                       launches=tuple(ev.launches))
    finally:
        run.hang_aborts = False


def _shrink_and_explain_inner(run: _Runner, case: Case, ev: Evaluation, verdict: Verdict, blocks: Blocks,
                              budget: int, stats: ShrinkStats | None = None) -> Failure:
    small, small_ev, _ = shrink(run, case, ev.verdict, blocks, budget, stats)
    final_ev = small_ev or ev
    final = final_ev.verdict
    if verdict.status == PRECONDITION:
        final = _layout_precondition(run, small, final, attribute=True) or verdict
        odd = ", ".join(layout_note(small, k) for k in _strided_args(small))
        hint = f"stride bug suspected: fails only for non-contiguous inputs ({odd})"
    else:
        hint = diagnose(run, small, final, final_ev.launches, original=case if small != case else None)
    return Failure(case=small, verdict=final, hint=hint, original=case if small != case else None,
                   launches=tuple(final_ev.launches))


def reproduce(seed: str | int, *, store: str | os.PathLike | None = None, fn: Callable | None = None,
              target: str | None = None, device: str | None = None, rulepack: Iterable[str] = (),
              framework: str | None = None) -> "Replay":
    """Re-run a stored failure on its exact stored input bytes; returns the new verdict beside the stored one.

    >>> replay = reproduce("0x6f3a91")   # doctest: +SKIP
    >>> replay.verdict.max_abs_err == replay.stored.max_abs_err   # doctest: +SKIP
    True
    """
    from . import config
    from .target import load

    settings = config.resolve(rulepacks=tuple(rulepack), store=store)
    st = Store(settings.store)
    text = seed_hex(seed) if isinstance(seed, int) else str(seed)
    rec, tensors = st.fetch(text, target)
    fn = fn or load(rec["target"])
    if rec.get("bound"):  # a kernel judged against its reference: the op of the stored schema, registered again
        from .schema import bind_record

        fn = bind_record(rec, fn).launcher
    case = Case.from_dict(rec["case"])
    from .frameworks import adapt, resolve

    fn = adapt(fn, resolve(fn, framework or rec.get("framework")), index_output=case.spec.out_kind == "index")
    device = device or default_device()
    from .cases import to_device

    inputs = {k: to_device(v, device) for k, v in tensors.items()}  # the stored geometry, on any device
    oracle = Oracle.from_settings(settings)
    from .tolerance import Tolerance

    tol = Tolerance(float(rec["tolerance"]["rtol"]), float(rec["tolerance"]["atol"]), rec["tolerance"].get("source", "record"))
    ev = oracle.evaluate(fn, case, device=device, inputs=inputs, tol=tol)
    stored = Verdict.from_dict(rec["verdict"])
    verdict = ev.verdict
    if stored.status == PRECONDITION and verdict.status != PASS:  # still only outside the precondition?
        run = _Runner(fn, oracle, device, True)
        verdict = _layout_precondition(run, case, verdict, attribute=True) or verdict
    failure = Failure(case=case, verdict=verdict, hint=rec.get("hint"), launches=tuple(ev.launches))
    return Replay(record=rec, case=case, verdict=verdict, stored=stored, failure=failure)


@dataclass(frozen=True)
class Replay:
    record: dict
    case: Case
    verdict: Verdict
    stored: Verdict
    failure: Failure

    @property
    def same(self) -> bool:
        """True when the replay reproduces the stored verdict exactly (status, kind, max abs err bits)."""
        a, b = self.verdict, self.stored
        same_err = (a.max_abs_err == b.max_abs_err) or (a.max_abs_err is not None and b.max_abs_err is not None
                                                         and math.isnan(a.max_abs_err) and math.isnan(b.max_abs_err))
        return a.status == b.status and a.kind == b.kind and same_err and a.index == b.index
