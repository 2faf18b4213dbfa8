"""``gpuemu.fuzz`` and ``gpuemu.reproduce``: the driver of the fuzz engine's phases (:mod:`gpuemu.engine`: plan,
generate, run, classify, minimize, report) and the replay of a stored failure. Results are gpuemu.results; their
text gpuemu.reporting.

>>> import gpuemu
>>> result = gpuemu.fuzz(my_softmax, op="softmax", iterations=50)   # doctest: +SKIP
>>> result.raise_for_failures()                                   # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from . import ops
from .cases import Blocks, Case, generate
from .engine.plan import parse_seed  # noqa: F401 (re-exported: gpuemu.fuzzer.parse_seed)
from .engine.report import MAX_STORED  # noqa: F401 (re-exported: how many failing cases a run stores)
from .errors import InvalidArgument
from .explain import HINT_SEEDS, attribute_blocks, diagnose  # noqa: F401 (re-exported)
from .explain import learn as _learn
from .results import Failure, FuzzInterrupted, FuzzResult  # noqa: F401 (re-exported: gpuemu.Failure, ...)
from .shrink import ShrinkStats, shrink  # noqa: F401 (re-exported)
from .oracle import FAIL, LIMIT, PASS, PRECONDITION, REJECTED, Oracle, Verdict
from .preconditions import Requires
from .rng import derive_seed
from .runners import default_device, precompile
from .runners.cuda_on_cpu import cuda_on_cpu
from .store import Store, seed_hex

MAX_TIMEOUTS = 3  # a launcher that hangs this many times would hang on every case: the run stops there


# ------------------------------------------------------------------------------------ the driver
@cuda_on_cpu()  # (a machine without CUDA: the kernel's CUDA host calls answered on the CPU)
def fuzz(fn: Callable, *, op: str | None = None, reference: Any = None, inputs: Any = None,
         schema: Mapping[str, Any] | str | None = None, init_inputs: Any = None,
         iterations: int | None = None, seed: int | None = None,
         dtypes: Iterable[str] | str | None = None, strategy: str | None = None, store: str | os.PathLike | None = None,
         rulepack: Iterable[str] = (), device: str | None = None, shrink_failures: bool = True,
         save: bool = True, target: str | None = None, max_failures: int | None = None,
         check_determinism: bool | None = None, requires: Requires | None = None,
         preconditions: str | None = None, case_timeout: float | None = None,
         on_case: Callable[[int, Case, Verdict], None] | None = None,
         compile_workers: int | None = None, framework: str | None = None, limits: str | None = None,
         supports: Any = None, refusals: str | None = None) -> FuzzResult:
    """Fuzz launcher ``fn`` as an implementation of ``op`` (a registry op), or against ``reference`` (a PyTorch
    function, or a KernelBench ``Model`` class for a ``ModelNew`` ``fn``) with the example call(s) ``inputs``
    returns and the declaration ``schema`` (see :mod:`gpuemu.schema`).

    Cases come from the op's schema (shapes at tile edges, strided layouts, boundary and adversarial
    values) and are judged by the fp64 oracle with per-op, per-dtype tolerances. The first failure is
    shrunk to the smallest failing shape and explained by a hint where a one-factor change makes it pass;
    every failing case's exact inputs are stored for ``gpuemu reproduce``. The phases are the modules of
    :mod:`gpuemu.engine`; this function drives them.

    ``requires`` adds to the preconditions declared on ``fn`` (``@gpuemu.requires``) and in ``gpuemu.yaml``:
    no case is drawn outside them. A case that fails only because of an undeclared one (its contiguous twin
    passes) is a PRECONDITION, not a FAIL; ``preconditions="warn"`` lets those pass the run.

    ``case_timeout`` (seconds; rule pack ``fuzz.case_timeout``) bounds each case: one that runs past it is
    an ERROR verdict of kind ``timeout`` with its seed, and is neither shrunk nor explained. ``seed`` is an
    int in [0, 2**64) or a decimal/0x-hex string. ``compile_workers`` (rule pack ``fuzz.compile_workers``)
    processes compile the kernels of the coming cases ahead of the loop on CUDA; on the CPU runtime one process
    compiles the coming launch-limit checks once they have cost the run 2 s (a cold Triton cache; see
    :mod:`gpuemu.runners.precompile`); 0 compiles in the loop. Ctrl-C raises :class:`FuzzInterrupted` (a
    KeyboardInterrupt) carrying the partial result. While the cases run, torch's CPU ops use
    ``fuzz.torch_threads`` intra-op threads (default 1; 0 leaves torch's setting; restored afterwards): see
    :data:`gpuemu.engine.plan.TORCH_THREADS`.

    A case whose launch the target GPU refuses (shared memory, registers, grid: predicted on the CPU, raised on a
    GPU) is a LIMIT verdict, not a failure, and later cases stay inside the envelope learnt (:mod:`gpuemu.envelope`);
    ``limits="fail"`` (rule pack ``fuzz.limits``) makes it fatal for a launcher that declares such shapes supported;
    ``supports`` (``"all"``, ``"D<=256"`` or ``{"D": 256}``; rule pack ``fuzz.supports``) makes it fatal only inside
    the sizes declared.

    One refusal rule: an exception the launcher raises on the host before any kernel launch, whatever its type, is a
    refusal of the input (REJECTED: shown and counted; ``refusals="fail"`` or rule pack ``fuzz.refusals`` makes it
    fatal; a launcher that refuses every case fails); one raised inside a kernel or after a launch is the kernel's
    ERROR; a failure of gpuemu's own code is an ERROR of kind ``internal``, never the kernel's.

    ``framework`` ('torch', 'jax' or 'tf'; default: detected from ``fn``'s module, see
    :mod:`gpuemu.frameworks`): a JAX/Pallas or TensorFlow launcher gets the same cases' tensors by DLPack
    and its output is judged by the same oracle; its cases run with contiguous inputs (no strides there).

    >>> r = fuzz(lambda x: x.softmax(-1), op="softmax", iterations=5, seed=1, save=False)
    >>> r.ok
    True
    """
    from .origin import is_replaying

    if is_replaying():  # a replay is importing the script that made this call: no second run, no store write
        return FuzzResult(target=target or getattr(fn, "__qualname__", "?"), op=op or "reference", seed=0,
                          stopped="not run: a replay imported the script that calls gpuemu.fuzz")
    from .cases import dim_limits
    from .engine import classify as C
    from .engine.generate import Drawer
    from .engine.minimize import minimize
    from .engine.plan import make_plan, set_torch_threads
    from .engine.report import replay_lines, store_failure
    from .engine.run import Runner
    from .envelope import DtypeEnvelopes, covers
    from .frameworks import no_strides_reason
    from .resources import project_targets

    plan = make_plan(fn, op=op, reference=reference, inputs=inputs, schema=schema, init_inputs=init_inputs,
                     iterations=iterations, seed=seed, dtypes=dtypes, strategy=strategy, store=store, rulepack=rulepack,
                     device=device, target=target, check_determinism=check_determinism, requires=requires,
                     preconditions=preconditions, case_timeout=case_timeout, compile_workers=compile_workers,
                     framework=framework, limits=limits, supports=supports, refusals=refusals)
    spec, fz, settings = plan.spec, plan.fz, plan.settings
    oracle = Oracle.from_settings(settings)
    run = Runner(plan.fn, oracle, plan.device, plan.determinism, plan.case_timeout)
    st = Store(settings.store) if save else None
    result = FuzzResult(target=plan.target, op=plan.op, seed=plan.seed, store=str(settings.store) if save else None,
                        requires=plan.requires.to_dict() if plan.requires else {}, precondition_policy=plan.policy,
                        case_timeout=plan.case_timeout, limit_policy=plan.limit_policy,
                        refusal_policy=plan.refusal_policy)
    if plan.bound is None:
        check_signature(plan.fn, spec, generate(plan.op, derive_seed(plan.seed, 0), dtype=plan.dtypes[0],
                                                strategy=plan.strategy), plan.target)
    if st is not None:
        st.ensure_writable()
    blocks, envelope = Blocks(), DtypeEnvelopes()
    draw = Drawer(plan, blocks, envelope)
    lows = {d: dim_limits(spec, d)[0] for d in spec.dims}
    targets_scope = project_targets(fz)  # the GPUs whose refusals CPU runs predict (fuzz.targets)
    targets_scope.__enter__()
    try:
        ahead, lookahead = _compile_ahead(plan, dict(fn=fn, reference=reference, inputs=inputs, schema=schema,
                                                     init_inputs=init_inputs, rulepacks=tuple(rulepack)))
    except BaseException:
        targets_scope.__exit__(None, None, None)
        raise
    extra = {"framework": plan.framework} if plan.framework != "torch" else {}
    if plan.bound is not None:
        extra["bound"] = plan.bound.record()
    shrunk: set[str] = set()  # the first failure of each class (FAIL/ERROR, PRECONDITION) is shrunk
    outside = 0  # draws in a row the reference could not compute (a reference-defined op)
    t_start = time.perf_counter()
    threads_before = set_torch_threads(plan.threads)
    try:
        while result.iterations < plan.iterations and draw.active:
            case = draw.next(long_rows="long rows" not in result.skipped)
            ev = run(case)
            out = C.classify(run, case, ev)
            if out.status == C.SKIP_CASE:
                if out.why == "reference":
                    outside += 1
                    if outside > C_MAX_OUTSIDE:
                        raise InvalidArgument(f"{plan.target}: the reference rejects every case drawn from its schema "
                                              f"(last: {out.verdict.message}); declare the dims it needs "
                                              "(--show-schema prints them, --schema corrects them)")
                elif out.why == "long rows":  # a row past the size caps that a GPU refuses: no longer rows
                    result.skipped["long rows"] = (f"the launch is refused at {case.shape_label()} "
                                                   f"({out.verdict.message.split(';')[0]}); no row past the size caps "
                                                   "is drawn for this launcher")
                elif out.why == "bf16":
                    result.skipped["bf16"] = C.BF16_INTERPRETER_REASON
                    draw.drop("bf16")
                continue
            outside = 0
            _learn(blocks, spec, ev.launches)
            if lookahead is not None and ahead is None:
                ahead = lookahead.poll(draw.index)
            i = result.iterations
            result.iterations += 1
            verdict = out.verdict
            if on_case:
                on_case(i, case, verdict)
            if out.status == LIMIT:  # the GPU refuses this launch: shown, and later cases stay inside
                envelope.refused_at(case.dtype, case.dims, verdict.message, lows, ev.launches)
                result.limits += 1
                result.envelope = envelope.to_dict()
                if covers(plan.supports, case.dims):
                    result.failures.append(Failure(case=case, verdict=verdict, launches=tuple(ev.launches),
                                                   not_stored="a refused launch produces no output to replay; "
                                                              "re-run the fuzz with the same --seed"))
                continue
            if verdict.status in (PASS, REJECTED, FAIL) and ev.launches:  # (not a refusal before any launch)
                envelope.launched_at(case.dtype, case.dims, ev.launches)  # (the GPU takes this size)
            if verdict.status in (PASS, REJECTED):
                result.passed += 1
                result.framework_passes += verdict.basis == "framework"
                if verdict.status == REJECTED:
                    result.rejected += 1
                    result.refused += verdict.kind == "refusal"
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
                failure = minimize(run, case, ev, verdict, blocks, int(fz.get("shrink_budget", 48)),
                                   result.shrink_stats)
                if verdict.status == PRECONDITION and failure.verdict.status != PRECONDITION:
                    result.precondition_cases -= 1  # (its shrunk case fails with contiguous inputs too)
            tol = oracle.tolerances.get(plan.op, failure.case.dtype, plan.device)
            result.failures.append(store_failure(st, result, failure, plan.device, tol, extra))
            if max_failures is not None and len(result.failures) >= max_failures:
                break
            if run.context_lost:
                result.stopped = run.context_lost
                break
            if result.timed_out >= MAX_TIMEOUTS:
                result.stopped = (f"{result.timed_out} cases ran past the {plan.case_timeout:g} s limit; the rest would "
                                  "too (fix the hang, or raise --case-timeout)")
                break
    except KeyboardInterrupt:
        result.interrupted = True
        result.iterations = result.passed + result.failed_cases  # the case cut short has no verdict: not counted
    finally:
        set_torch_threads(threads_before)
        targets_scope.__exit__(None, None, None)
        if ahead is not None:
            ahead.stop()
    result.seconds = time.perf_counter() - t_start
    if draw.flattened:
        result.skipped["non-contiguous layouts"] = no_strides_reason(plan.framework, draw.flattened, draw.index)
    result.timings = dict(run.timings)
    result.blocks = blocks.to_dict()
    replay_lines(result, st, settings)
    if result.interrupted:
        result.stopped = "interrupted (Ctrl-C)"
        raise FuzzInterrupted(result)
    return result


def _rebuildable(plan, given: dict) -> bool:
    """True when another process can bind the kernel to its reference again from the targets ``given`` (the
    launcher and the reference importable by name, the inputs a target or the reference file's, the declaration
    plain data, the init inputs the problem file's own)."""
    inputs, schema = given["inputs"], given["schema"]
    return isinstance(given["reference"], str) and (inputs is None or isinstance(inputs, str)) \
        and given["init_inputs"] is None and (schema is None or isinstance(schema, (str, dict))) \
        and precompile.importable(given["fn"], plan.target)


C_MAX_OUTSIDE = 200  # draws in a row outside the user's reference's domain before the run gives up


def _compile_ahead(plan, given: dict) -> tuple:
    """(a CUDA precompile pool, a CPU lookahead for launch-limit compiles): the kernels of the coming cases compiled
    in other processes (gpuemu.runners.precompile; for a kernel judged against its reference on CUDA,
    gpuemu.check.warm, whose workers rebuild the binding from the targets ``given`` to fuzz); (None, None) where
    that does not apply."""
    if plan.framework != "torch" or plan.compile_workers <= 0:
        return None, None
    if plan.bound is not None:
        if not plan.device.startswith("cuda") or not _rebuildable(plan, given):
            return None, None
        from .check.warm import Warming

        kw = dict(seed=plan.seed, iterations=plan.iterations, dtypes=tuple(plan.dtypes), strategy=plan.strategy,
                  rulepacks=given["rulepacks"], requires=plan.requires.to_dict() if plan.requires else None,
                  preconditions=plan.policy, framework=plan.framework)
        return Warming(plan.target, reference=given["reference"], inputs=given["inputs"], schema=given["schema"],
                       kw=kw, device=plan.device, workers=plan.compile_workers), None
    if not precompile.importable(plan.fn, plan.target):
        return None, None
    req = plan.requires.to_dict() if plan.requires else {}
    if plan.device.startswith("cuda"):
        return precompile.start(plan.target, op=plan.op, seed=plan.seed, dtypes=plan.dtypes, strategy=plan.strategy,
                                iterations=plan.iterations, requires=req, workers=plan.compile_workers), None
    if plan.device == "cpu":
        from .resources import current_targets

        return None, precompile.Lookahead(plan.target, op=plan.op, seed=plan.seed, dtypes=plan.dtypes,
                                          strategy=plan.strategy, iterations=plan.iterations, requires=req, workers=1,
                                          targets=current_targets())
    return None, None


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


@cuda_on_cpu()
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
    if fn is None:
        from .origin import replaying, resolve

        with replaying():  # (a script that calls gpuemu.fuzz at import does not fuzz again)
            fn = load(resolve(rec["target"], rec.get("origin"), st.root))
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
    if _device_kind(rec.get("device")) not in (None, _device_kind(device)):
        tol = None  # replayed on another kind of device: judged with that device's own calibrated bound
    ev = oracle.evaluate(fn, case, device=device, inputs=inputs, tol=tol)
    stored = Verdict.from_dict(rec["verdict"])
    verdict = ev.verdict
    if stored.status == PRECONDITION and verdict.status != PASS:  # still only outside the precondition?
        from .engine.classify import layout_precondition
        from .engine.run import Runner

        verdict = layout_precondition(Runner(fn, oracle, device, True), case, verdict, attribute=True) or verdict
    failure = Failure(case=case, verdict=verdict, hint=rec.get("hint"), launches=tuple(ev.launches))
    return Replay(record=rec, case=case, verdict=verdict, stored=stored, failure=failure)


def _device_kind(device: Any) -> str | None:
    """'cuda' for 'cuda:0' or torch.device('cuda', 0); None when none is named."""
    if device is None:
        return None
    return str(getattr(device, "type", device)).split(":", 1)[0] or None


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

    @property
    def recorded_on(self) -> str | None:
        return _device_kind(self.record.get("device"))

    def agreement(self, device: Any) -> tuple[bool, str]:
        """(whether the verdict here is the stored one's class, the agreement line): ``cpu: FAIL mismatch · cuda:
        FAIL mismatch · the devices agree``. Classes, not bits: two devices' arithmetic differs by design."""
        here, there = _device_kind(device) or "?", self.recorded_on or "the record's device"
        a, b = self.verdict, self.stored
        agree = a.status == b.status
        words = "agree" if agree else "DISAGREE"
        if agree and a.kind != b.kind and a.status != PASS:  # (a FAIL both ways, by a different symptom)
            words = f"agree on {a.status.upper()} (the symptom differs: {b.kind} on {there}, {a.kind} on {here})"
        return agree, (f"{there}: {b.status.upper()} {b.kind} · {here}: {a.status.upper()} {a.kind} · the "
                       f"{'devices' if there != here else 'runs'} {words}")
