"""Explaining a failure: which dims the kernel tiles, and a bug-class hint backed by evidence.

A hint is given only where a one-factor change of the (shrunk) failing case makes it pass, on its own seed and
on ``HINT_SEEDS - 1`` more: the rules below are a table, each proposing such variants and saying what their
passing means. The words for the value distributions are a table too (:data:`VALUE_HINTS`), one entry per
distribution the case generator draws (a test holds them in step).

>>> from gpuemu.explain import VALUE_HINTS
>>> VALUE_HINTS["negative"].split(":")[0]
'max-type bug suspected'
"""

from __future__ import annotations

from typing import Callable, Iterable

from . import ops
from .cases import Blocks, Case, contiguous_twin, layout_note, strided_args, with_dims
from .rng import derive_seed
from .runners import Launch

HINT_SEEDS = 3  # a hint needs its one-factor variant to pass on this many seeds
NUMERIC = frozenset({"mismatch", "nonfinite"})  # verdict kinds a hint can explain (wrong values)

# what a failure that needs these values, and passes with normal ones, points to
VALUE_HINTS: dict[str, str] = {
    "large_spread": "overflow suspected: fails only for large magnitudes (missing max-subtraction?)",
    "near_max": "overflow suspected: fails only near the dtype's max",
    "past_fp16": "narrowing suspected: fails only for bf16 values past fp16's 65,504 (a cast to fp16 inside?)",
    "spike": "overflow or precision suspected: fails only with one-hot spikes",
    "cancellation": "cancellation suspected: fails only for large mean, small variance (naive variance?)",
    "ties": "tie-breaking suspected: fails only with tied values (first index on ties?)",
    "tiny": "underflow suspected: fails only for tiny values",
    "zeros": "fails only for all-zero inputs (division by zero?)",
    "uniform": "fails only for uniform values",
    "positive": "accumulation suspected: fails only when all values share a sign (sums grow, "
                "low-precision running totals lose bits)",
    # a max (or argmax) whose masked or padded lanes hold 0 is right while some value is above 0: only rows
    # below zero everywhere (log-probabilities, masked scores) let the 0 win
    "negative": "max-type bug suspected: fails only when every value is below zero (a masked or padded lane "
                "filled with 0 instead of -inf, or a running max that starts at 0?)",
}
# an index output (argmax) is decided by which of equal values wins: all-zero rows are all ties
INDEX_VALUE_HINTS: dict[str, str] = {
    "zeros": "tie-breaking suspected: fails when every value is equal (first index on ties?)",
}


# ops whose overflow at large magnitudes is exp(x) without the row max subtracted first; elsewhere (rmsnorm's
# x*x, a variance's square, a matmul's products) the cause is another intermediate leaving the dtype's range
EXP_OPS = frozenset({"softmax", "log_softmax", "logsumexp", "cross_entropy", "attention"})
OTHER_OVERFLOW = ("overflow suspected: fails only for large magnitudes (an intermediate leaves the dtype's range: "
                  "squares or products of large values? scale first, or accumulate in fp32)")


def value_hint(spec: ops.OpSpec, values: str) -> str:
    """The hint for a failure that needs the ``values`` distribution (and passes with normal values)."""
    if spec.out_kind == "index" and values in INDEX_VALUE_HINTS:
        return INDEX_VALUE_HINTS[values]
    if values == "large_spread" and spec.name not in EXP_OPS:
        return OTHER_OVERFLOW
    return VALUE_HINTS.get(values, f"fails only for {values} values")


# ------------------------------------------------------------------------------------ kernel awareness


def attribute_blocks(spec: ops.OpSpec, launches: Iterable[Launch]) -> dict[str, list[tuple[str, int]]]:
    """Block-size constexprs of the launches, attributed to the op's dims by name (BLOCK_N -> N; a suffix that
    is no dim of the op through ``OpSpec.block_aliases``, else every tiled, reduced, contracted or head dim)."""
    edge_dims = spec.dims_of_role("tiled", "reduced", "contracted", "head")
    out: dict[str, list[tuple[str, int]]] = {}
    for launch in launches:
        for name, val in launch.constexprs.items():
            if isinstance(val, bool) or not isinstance(val, int) or val < 2 or val & (val - 1):
                continue
            up = name.upper()
            if not any(w in up for w in ("BLOCK", "TILE", "CHUNK", "SIZE")):
                continue
            suffix = up.split("_")[-1] if "_" in up else ""
            dim = next((d for d in spec.dims if d.upper() == suffix), None) or spec.block_aliases.get(suffix)
            targets = [dim] if dim in spec.dims else edge_dims
            for d in targets:
                if (name, val) not in out.setdefault(d, []):
                    out[d].append((name, val))
    return out


def learn(blocks: Blocks, spec: ops.OpSpec, launches: Iterable[Launch]) -> None:
    """Add the launches' block sizes to ``blocks`` (generation then draws shapes at their edges)."""
    for dim, pairs in attribute_blocks(spec, launches).items():
        blocks.by_dim.setdefault(dim, set()).update(v for _, v in pairs)


# ------------------------------------------------------------------------------------ the hint rules
#
# Each rule takes the failing case (and its verdict and launches) and a ``passes(variant)`` test; it returns
# the hints its passing variants support, in the order they are reported.

Passes = Callable[[Case], bool]


def _stride_rule(case: Case, verdict, launches, passes: Passes, original: Case | None) -> list[str]:
    if case.is_contiguous() or not passes(contiguous_twin(case)):
        return []
    odd = ", ".join(layout_note(case, k) for k in strided_args(case))
    return [f"stride bug suspected: fails only for non-contiguous inputs ({odd})"]


def _values_rule(case: Case, verdict, launches, passes: Passes, original: Case | None) -> list[str]:
    if case.values == "normal":
        return []
    # a shrunk case can be too small to tell: at N=1 a normal row is all negative half the time, so "passes with
    # normal values on 3 seeds" fails by chance; the drawn case, failing the same way, then gives the evidence
    for c in (case, original):
        if c is not None and c.values == case.values and passes(with_dims(c.replace(values="normal"))):
            return [value_hint(case.spec, case.values)]
    return []


def _causal_rule(case: Case, verdict, launches, passes: Passes, original: Case | None) -> list[str]:
    if not case.kwargs.get("causal") or not passes(case.replace(kwargs=dict(case.kwargs, causal=False))):
        return []
    return ["causal mask suspected: fails only with causal=True"
            + (" and Nq != Nk (mask alignment?)" if case.dims.get("Nq") != case.dims.get("Nk") else "")]


def _constant_rule(case: Case, verdict, launches, passes: Passes, original: Case | None) -> list[str]:
    drawn = {a.name: a.value for a in case.spec.args if a.kind == "const" and a.name in case.kwargs}
    if not drawn or not passes(case.replace(kwargs={k: v for k, v in case.kwargs.items() if k not in drawn})):
        return []
    what = ", ".join(f"{k}={case.kwargs[k]}" for k in drawn)
    example = ", ".join(f"{k}={v}" for k, v in drawn.items())
    return [f"hard-coded constant suspected: fails with {what}, passes with the example's {example}"]


def _dtype_rule(case: Case, verdict, launches, passes: Passes, original: Case | None) -> list[str]:
    if case.dtype != "fp32" and passes(with_dims(case.replace(dtype="fp32"))):
        return [f"precision suspected: fails only for {case.dtype}, passes in fp32 (accumulation dtype?)"]
    if case.dtype == "fp32" and verdict.kind == "mismatch" and passes(with_dims(case.replace(dtype="fp16"))):
        # the same case at fp16's coarser tolerance passes: the error is a few fp16 ulps, not a wrong formula
        return ["precision suspected: fails only in fp32, passes in fp16 (a truncated constant, an "
                "approximation, or an intermediate rounded to fp16/bf16?)"]
    return []


def _block_rule(case: Case, verdict, launches, passes: Passes, original: Case | None) -> list[str]:
    spec = case.spec
    hints = []
    for dim, pairs in attribute_blocks(spec, launches).items():
        n = case.dims.get(dim)
        if n is None:
            continue
        for name, b in sorted(pairs, key=lambda p: p[1]):
            if n % b and passes(with_dims(case, {dim: -(-n // b) * b})):
                if spec.dims[dim] == "head":
                    hints.append(f"padded head dim suspected: fails only when {dim} % {name} != 0 "
                                 f"(tail mask, or 1/sqrt({name}) instead of 1/sqrt({dim})?)")
                else:
                    hints.append(f"tail-mask leak suspected: {dim} % {name} != 0")
                break
            if n > b and passes(with_dims(case, {dim: b})):
                if spec.dims[dim] == "contracted":
                    hints.append(f"accumulator suspected: fails only when {dim} > {name} (acc = instead of acc +=?)")
                elif dim == spec.online_softmax_dim:
                    hints.append(f"online-softmax rescale suspected: fails only when {dim} > {name}")
                else:
                    hints.append(f"cross-block bug suspected: fails only when {dim} > {name} (carry between blocks?)")
                break
    return hints


# (name, rule) in report order; a rule takes (case, verdict, launches, passes, original: the case before shrinking)
HINT_RULES: tuple[tuple[str, Callable[..., list[str]]], ...] = (
    ("stride", _stride_rule), ("values", _values_rule), ("causal", _causal_rule), ("constant", _constant_rule),
    ("dtype", _dtype_rule),
    ("blocks", _block_rule),
)


def diagnose(run: Callable, case: Case, verdict, launches: Iterable[Launch], *,
             original: Case | None = None) -> str | None:
    """A bug-class hint, only where a one-factor change of the failing case makes it pass. ``run(case)``
    evaluates a case (an :class:`gpuemu.oracle.Evaluation`); ``original`` is the case ``case`` was shrunk from,
    asked where the shrunk one is too small to tell (the value rule)."""
    if verdict.kind not in NUMERIC:
        return None
    spec = case.spec
    launches = list(launches)

    def passes(cand: Case) -> bool:
        """The one-factor variant passes on its own seed and on two more (one lucky draw is no evidence)."""
        if spec.check_dims(cand.dims, cand.kwargs) is not None:
            return False
        for k in range(HINT_SEEDS):
            seeded = cand if k == 0 else with_dims(cand.replace(seed=derive_seed(cand.seed, 1000 + k)))
            if run(seeded).verdict.status != "pass":
                return False
        return True

    hints: list[str] = []
    for _, rule in HINT_RULES:
        hints += rule(case, verdict, launches, passes, original)
    return "; ".join(dict.fromkeys(hints)) or None
