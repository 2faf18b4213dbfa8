"""Production sizes: the shapes real models launch, for ``gpuemu fuzz --sizes production``.

A production case draws a preset of ``rulepacks/production.yaml`` (Llama-3 8B/70B/405B, Mixtral, DeepSeek-V3,
Qwen2.5, Gemma 2: hidden, MLP width, vocab, heads, head dim, context) and builds the op's call from it, with the
row count (tokens = batch x sequence) chosen so that the largest tensor is past 2^31 elements where the op
allows, plus a remainder drawn from the seed so the rows are no round number:

| ops | shape |
|---|---|
| elementwise (add, gelu, swiglu, ...) | [tokens, hidden or MLP width] |
| softmax, log_softmax, logsumexp, argmax, amax, cross_entropy | [tokens, vocab] (an LM head's logits) |
| layernorm, rmsnorm, sum, mean | [tokens, hidden] |
| cumsum | [rows, context] |
| matmul / linear | [tokens, hidden] x [hidden, width] (M x K past 2^31) |
| bmm | [batch x heads, context, head dim] x [.., head dim, context] (the score matrix past 2^31) |
| attention | [batch, heads, context, head dim], batch such that B*H*T*D is past 2^32 (half the heads start past 2^31); causal or not |
| rope | [batch, context, heads, head dim], likewise |
| embedding | ids [batch, context] into a [vocab, hidden] table, widened until V*D is past 2^32 (half its rows past 2^31) |

What a sampled program must read whole (a GEMM's B column strip spans every row of B) stays under
``touch_mib``, so a case stays within the CPU bound docs/production-sizes.md states. Cases are contiguous,
with normal values (the size is what is under test), and are judged by :mod:`gpuemu.production`. The default
strategy draws none: at these sizes the corpus's own "correct" kernels that compute row offsets in int32 are
OVERFLOW (wrong on a GPU there), so a share of default cases would move the corpus's verdicts, and a case costs
seconds (docs/production-sizes.md).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping

from . import ops
from .cases import Case, canonical_dtype, value_params
from .errors import InvalidArgument, RulePackError
from .rng import Rng, derive_seed

_KEYS = ("hidden", "intermediate", "vocab", "heads", "head_dim", "seq")
_ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}


@functools.lru_cache(maxsize=1)
def settings() -> dict:
    """The ``production`` section of the built-in rule pack, checked."""
    import yaml

    from .config import builtin_dir

    path = builtin_dir() / "production.yaml"
    try:
        doc = yaml.safe_load(path.read_text())["production"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        raise RulePackError(f"{path}: production: cannot read the production presets ({e})") from None
    for name, p in (doc.get("presets") or {}).items():
        missing = [k for k in _KEYS if not isinstance(p.get(k), int) or p[k] < 1]
        if missing:
            raise RulePackError(f"{path}: production.presets.{name}.{missing[0]}: expected a positive integer")
    if not doc.get("presets"):
        raise RulePackError(f"{path}: production.presets: expected at least one preset")
    return doc


def presets() -> dict[str, dict]:
    return dict(settings()["presets"])


def production_case(op: str, seed: int, *, dtype: str, preset: str | None = None) -> Case:
    """One production-size case of ``op`` drawn from ``seed`` (``preset``: that model's dims, else one drawn).

    >>> c = production_case("softmax", 1, dtype="fp32", preset="llama3-8b")
    >>> c.dims["N"], c.batch[0] * c.dims["N"] >= 2**31, c.shape_kind
    (128256, True, 'production')
    """
    spec = ops.get(op)
    dtype = canonical_dtype(dtype)
    cfg = settings()
    table = cfg["presets"]
    rng = Rng(derive_seed(seed, 5))
    if preset is None:
        preset = rng.choice(sorted(table))
    if preset not in table:
        raise InvalidArgument(f"preset {preset!r} is not known; use one of {', '.join(sorted(table))}")
    p = table[preset]
    big = int(cfg.get("min_elements", 2**31))
    touch = int(cfg.get("touch_mib", 512)) << 20
    item = _ITEMSIZE[dtype]
    dims, batch, kwargs = _draw(spec, p, rng, big, touch, item)
    return Case(op=op, dtype=dtype, dims=dims, seed=seed, batch=batch,
                layouts={a.name: "contiguous" for a in spec.args if a.is_tensor}, values="normal",
                value_params=value_params("normal", spec, dtype, dims), kwargs=kwargs, strategy="production",
                shape_kind="production")


def _past(big: int, per_row: int, rng: Rng, spread: int) -> int:
    """Rows so that rows x per_row is past ``big``, plus a remainder in [0, spread)."""
    return -(-big // per_row) + rng.below(max(spread, 1))


def _draw(spec: ops.OpSpec, p: Mapping[str, int], rng: Rng, big: int, touch: int,
          item: int) -> tuple[dict[str, int], tuple[int, ...], dict[str, Any]]:
    name = spec.name
    kwargs = dict(spec.kwargs)
    width = rng.choice([p["hidden"], p["intermediate"]])
    if name in ("softmax", "log_softmax", "logsumexp", "argmax", "amax"):
        return {"N": p["vocab"]}, (_past(big, p["vocab"], rng, 64),), kwargs
    if name == "cross_entropy":
        return {"N": _past(big, p["vocab"], rng, 64), "C": p["vocab"]}, (), kwargs
    if name in ("layernorm", "rmsnorm", "sum", "mean"):
        return {"N": p["hidden"]}, (_past(big, p["hidden"], rng, 4096),), kwargs
    if name == "cumsum":
        return {"N": p["seq"]}, (_past(big, p["seq"], rng, 64),), kwargs
    if spec.dims == {"N": "tiled"}:  # elementwise
        return {"N": width}, (_past(big, width, rng, 4096),), kwargs
    if name in ("matmul", "linear"):
        K = p["hidden"]
        N = max(64, min(width, touch // (K * item)))  # (a program reads a K x BLOCK_N strip of every row of B)
        M = _past(big, K, rng, 4096)
        if name == "matmul":
            return {"M": M, "K": K, "N": N}, (), kwargs
        return {"K": K, "N": N}, (M,), kwargs
    if name == "bmm":
        T, D = p["seq"], p["head_dim"]
        T = min(T, touch // (D * item))
        return {"B": max(1, -(-big // (T * T))) + rng.below(2), "M": T, "K": D, "N": T}, (), kwargs
    if name == "attention":
        H, D = p["heads"], p["head_dim"]
        T = min(p["seq"], 32768)  # (a program streams every key of its head: 2 x T x D values)
        kwargs["causal"] = rng.below(2) == 1
        # (B*H*T*D past 2^32: the later half of the heads start past 2^31, not only their last rows)
        return {"B": max(2, -(-2 * big // (H * T * D))), "H": H, "Nq": T, "Nk": T, "D": D}, (), kwargs
    if name == "rope":
        H, D, T = p["heads"], p["head_dim"], p["seq"]
        return {"B": max(2, -(-2 * big // (T * H * D))), "N": T, "H": H, "D": D}, (), kwargs
    if name == "embedding":
        V = p["vocab"]
        D = max(p["hidden"], -(-2 * big // V))  # (the table's upper half is past 2^31: half the ids address there)
        D += -D % 128
        return {"S": p["seq"], "V": V, "D": D}, (1 + rng.below(2),), kwargs
    raise InvalidArgument(f"op {name!r} has no production sizes (its calls are not drawn from model dims)")


def touched_bound(case: Case) -> int:
    """Elements of the case's tensors, summed (what a whole run would allocate), for reports."""
    return sum(math.prod(a.resolve(case.dims, case.batch)) for a in case.spec.args if a.is_tensor)


__all__ = ["production_case", "presets", "settings", "touched_bound"]
