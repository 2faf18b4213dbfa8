"""The run's settings, resolved once: argument > environment > project file > rule pack (gpuemu.config), and every
user mistake found here, before any kernel runs, as one InvalidArgument line."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .. import ops
from ..cases import STRATEGIES, canonical_dtype, is_production_strategy
from ..errors import InvalidArgument
from ..preconditions import Requires, declared, from_project, resolve_policy
from ..rng import MASK64

# torch's intra-op threads while a fuzz run's cases run. A run is thousands of small tensor ops (inputs, the fp64
# reference, the comparison, the runtime's own); threads spin-wait for each other, and on a machine whose cores are
# busy that costs more than it gains. Measured on 2 shared cores at load ~3 (100 iterations, threads 2 -> 1):
# matmul 12.2 s -> 8.3 s (its fp64 reference 2.4 s -> 0.05 s), embedding_stride 1.2 s -> 0.3 s (compare 0.3 s ->
# 0.04 s), eager_attention 1.6 s -> 0.8-1.0 s; hf_llama_rmsnorm the same. Rule pack: fuzz.torch_threads.
TORCH_THREADS = 1
_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass
class Plan:
    """Everything a run needs, resolved: the launcher (adapted to its framework), the op, the cases' settings."""

    fn: Callable
    spec: ops.OpSpec
    target: str
    bound: Any  # gpuemu.schema.Bound for a kernel judged against its reference, else None
    settings: Any
    iterations: int
    strategy: str
    policy: str
    limit_policy: str  # allow: a LIMIT is shown; fail: a LIMIT inside ``supports`` fails the run
    supports: dict | None  # gpuemu.envelope.parse_supports: None, {} (every size) or {dim: largest size}
    refusal_policy: str  # allow: a host-side refusal passes its case; fail: it fails the run
    requires: Requires
    framework: str
    dtypes: list[str]
    seed: int
    case_timeout: float | None
    device: str
    threads: int | None
    determinism: bool
    compile_workers: int

    @property
    def op(self) -> str:
        return self.spec.name

    @property
    def fz(self) -> Mapping[str, Any]:
        return self.settings.fuzz


def make_plan(fn: Callable, *, op: str | None, reference: Any, inputs: Any, schema: Any, init_inputs: Any,
              iterations: int | None, seed: Any, dtypes: Iterable[str] | str | None, strategy: str | None,
              store: Any, rulepack: Iterable[str], device: str | None, target: str | None,
              check_determinism: bool | None, requires: Requires | None, preconditions: str | None,
              case_timeout: float | None, compile_workers: int | None, framework: str | None,
              limits: str | None, supports: Any = None, refusals: str | None = None) -> Plan:
    from .. import config
    from ..runners import default_device
    from ..target import describe

    bound = None
    if reference is not None:
        if op is not None:
            raise InvalidArgument(f"give op= (a registry op) or reference= (a PyTorch reference), not both (op={op!r})")
        from ..schema import Bound, bind

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
    if strategy not in STRATEGIES and not is_production_strategy(strategy):  # (gpuemu/sizes.py)
        raise InvalidArgument(f"strategy {strategy!r} is not known; use one of {', '.join(STRATEGIES)}")
    policy = resolve_policy(preconditions, settings=settings)  # fail, warn or ignore: see gpuemu.preconditions
    limit_policy = limits or fz.get("limits", "allow")
    if limit_policy not in ("allow", "fail"):
        raise InvalidArgument(f"limits={limit_policy!r}: use allow (a launch the GPU refuses is shown, not failed) or "
                              "fail")
    from ..envelope import parse_supports

    try:
        declared_supports = parse_supports(supports if supports is not None else fz.get("supports"))
    except ValueError as e:
        raise InvalidArgument(f"supports: {e}") from None
    if limit_policy == "fail" and declared_supports is None:
        declared_supports = {}
    if declared_supports is not None:
        limit_policy = "fail"
    refusal_policy = refusals or fz.get("refusals", "allow")
    if refusal_policy not in ("allow", "fail"):
        raise InvalidArgument(f"refusals={refusal_policy!r}: use allow (an input the launcher refuses on the host, "
                              "before any launch, is shown, not failed) or fail")
    target = target or describe(fn)
    req = declared(fn).merge(from_project(target, settings.requires, fn=fn)).merge(requires or Requires())
    if bound is not None and bound.schema.declared.get("requires"):
        try:
            req = req.merge(Requires.from_dict(bound.schema.declared["requires"]))
        except ValueError as e:
            raise InvalidArgument(f"schema declaration: requires: {e}") from None
    req.check_against(spec)
    from ..frameworks import adapt, resolve

    fw = resolve(fn, framework)  # a JAX or TF launcher gets torch-made cases by DLPack (gpuemu.frameworks)
    fn = adapt(fn, fw, index_output=spec.out_kind == "index")
    if isinstance(dtypes, str):
        dtypes = [d for d in dtypes.split(",") if d.strip()]
    default_dtypes = list(bound.schema.dtypes) if bound is not None else fz.get("dtypes", ["fp32", "fp16", "bf16"])
    dts = [canonical_dtype(d) for d in (dtypes or default_dtypes)]
    dts = [d for d in dict.fromkeys(dts) if d in _DTYPES and _DTYPES[d] in spec.dtypes]
    if req.dtypes:
        dts = [d for d in dts if d in req.dtypes]
    if not dts:
        raise InvalidArgument(f"none of the requested dtypes is supported by {op} (supports {', '.join(spec.dtypes)})"
                              + (f" and declared by the launcher ({', '.join(req.dtypes)})" if req.dtypes else ""))
    seed = int.from_bytes(os.urandom(4), "little") if seed is None else parse_seed(seed)
    case_timeout = fz.get("case_timeout") if case_timeout is None else case_timeout
    if case_timeout is not None:
        if isinstance(case_timeout, bool) or not isinstance(case_timeout, (int, float)) or not case_timeout > 0 \
                or case_timeout == float("inf"):
            raise InvalidArgument(f"case_timeout={case_timeout!r} must be a number of seconds > 0")
        case_timeout = float(case_timeout)
    threads = fz.get("torch_threads", TORCH_THREADS)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
        raise InvalidArgument(f"fuzz.torch_threads={threads!r} must be an int >= 0 (0: leave torch's setting)")
    determinism = fz.get("determinism_check", True) if check_determinism is None else check_determinism
    workers = int(fz.get("compile_workers", 0) if compile_workers is None else compile_workers)
    return Plan(fn=fn, spec=spec, target=target, bound=bound, settings=settings, iterations=iterations,
                strategy=strategy, policy=policy, limit_policy=limit_policy, supports=declared_supports,
                refusal_policy=refusal_policy, requires=req, framework=fw, dtypes=dts,
                seed=seed, case_timeout=case_timeout, device=device or default_device(), threads=threads,
                determinism=bool(determinism), compile_workers=workers)


def set_torch_threads(n: int | None) -> int | None:
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
