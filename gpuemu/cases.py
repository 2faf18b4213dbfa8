"""Cases: (op, strategy, seed) -> a JSON-able :class:`Case` -> the exact input tensors.

A case names everything about a call: dtype, dim sizes, batch dims, the layout of each argument, the
value distribution and its resolved parameters, keyword arguments, and a 64-bit seed. The same case
always yields the same tensor bytes (see :mod:`gpuemu.rng`), so a case JSON is a complete replay recipe.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from . import ops
from .errors import InvalidArgument
from .rng import Rng, derive_seed, normal, raw_u64, uniform01

SCHEMA_VERSION = 1

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_DTYPE_ALIASES = {"fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32",
                  "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
                  "bf16": "bf16", "bfloat16": "bf16"}
# largest finite value of each dtype; kernels compute fp16/bf16 in fp32
_FMAX = {"fp32": 3.4028234663852886e38, "fp16": 65504.0, "bf16": 3.3895313892515355e38}
_TINY = {"fp32": 1.1754943508222875e-38, "fp16": 6.103515625e-05, "bf16": 1.1754943508222875e-38}

REGULAR_VALUES = ("normal", "uniform", "positive", "negative")
BOUNDARY_VALUES = ("zeros", "ties", "tiny", "near_max")
ADVERSARIAL_VALUES = ("large_spread", "cancellation", "spike")
# bf16 holds what fp16 cannot: values past fp16's 65,504 (drawn for bf16 cases only, see value_weights)
PAST_FP16 = "past_fp16"
DISTRIBUTIONS = REGULAR_VALUES + BOUNDARY_VALUES + ADVERSARIAL_VALUES + (PAST_FP16,)
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "none")
# views that real callers hand a kernel (parametrised, see parse_layout):
#   "padded:DIM+E" / "padded:DIM+E@S": a slice [S, S + size) along DIM of a buffer E elements longer there.
#     DIM the last dim: a row-padded tensor (big[:, :N], a vocab-padded logits buffer, qkv[..., :D]);
#     an outer dim: a KV-cache slice (cache[:, :n]) or a head slice of a fused projection (qkv split/chunk).
#     The stride of the dim just outside DIM then differs from the product of the inner extents.
#   "perm:0213": storage in another dim order, viewed back (head-major [B,H,N,D] storage seen as [B,N,H,D]).
VIEW_LAYOUTS = ("padded", "perm")
SHAPE_KINDS = ("fixed", "regular", "random", "boundary", "tile_edge", "adversarial", "long_row", "real_size",
               "production")

GUARD = 16  # poison elements after every input's view: small overruns read NaN, not neighbours
OFFSET = 3  # elements before the view in the "offset" layout
_BOUNDARY_SIZES = (1, 2, 3, 5, 7, 11, 13, 17, 31, 33, 47, 61, 63, 65, 97, 127, 129, 191, 255, 257,
                   383, 509, 511, 513, 767, 1021, 1023, 1025)


def canonical_dtype(name: str) -> str:
    """'float16' -> 'fp16'; an unknown name raises InvalidArgument."""
    try:
        return _DTYPE_ALIASES[str(name).strip().lower()]
    except KeyError:
        raise InvalidArgument(f"dtype {name!r} is not supported; use fp32, fp16 or bf16") from None


def torch_dtype(name: str):
    import torch

    return getattr(torch, DTYPES[canonical_dtype(name)])


@dataclass(frozen=True)
class Case:
    """One fully described call of an op. ``to_dict()``/``from_dict()`` round-trip exactly."""

    op: str
    dtype: str
    dims: Mapping[str, int]
    seed: int
    batch: tuple[int, ...] = ()
    layouts: Mapping[str, str] = field(default_factory=dict)
    values: str = "normal"
    value_params: Mapping[str, float] = field(default_factory=dict)
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    strategy: str = "default"
    shape_kind: str = "regular"

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "op": self.op,
            "dtype": self.dtype,
            "dims": dict(self.dims),
            "batch": list(self.batch),
            "layouts": dict(self.layouts),
            "values": self.values,
            "value_params": dict(self.value_params),
            "kwargs": dict(self.kwargs),
            "seed": self.seed,
            "strategy": self.strategy,
            "shape_kind": self.shape_kind,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Case":
        if d.get("schema_version") != SCHEMA_VERSION:
            raise InvalidArgument(f"case schema_version {d.get('schema_version')!r} is not {SCHEMA_VERSION}")
        try:
            return cls(op=d["op"], dtype=canonical_dtype(d["dtype"]), dims={k: int(v) for k, v in d["dims"].items()},
                       seed=int(d["seed"]), batch=tuple(int(b) for b in d.get("batch", ())),
                       layouts=dict(d.get("layouts", {})), values=d.get("values", "normal"),
                       value_params={k: float(v) for k, v in d.get("value_params", {}).items()},
                       kwargs=dict(d.get("kwargs", {})), strategy=d.get("strategy", "default"),
                       shape_kind=d.get("shape_kind", "regular"))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed case record: {e}") from None

    def replace(self, **changes) -> "Case":
        return dataclasses.replace(self, **changes)

    @property
    def spec(self) -> ops.OpSpec:
        return ops.get(self.op)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {a.name: a.resolve(self.dims, self.batch) for a in self.spec.args if a.is_tensor}

    def shape_label(self) -> str:
        """The first tensor argument's shape, as in the failure line: ``[8,257,64]``."""
        first = next((a for a in self.spec.args if a.is_tensor), self.spec.args[0])
        return "[" + ",".join(str(s) for s in first.resolve(self.dims, self.batch)) + "]"

    def is_contiguous(self) -> bool:
        return all(v in ("contiguous", "none") for v in self.layouts.values())

    def describe(self) -> str:
        shapes = ", ".join(f"{k}={list(v)}" for k, v in self.shapes().items())
        lay = ", ".join(f"{k}:{v}" for k, v in self.layouts.items() if v != "contiguous") or "all contiguous"
        kw = ", ".join(f"{k}={v}" for k, v in self.kwargs.items())
        return (f"{self.op} {self.dtype} {shapes}; layouts: {lay}; values: {self.values}"
                + (f"; {kw}" if kw else ""))


# ------------------------------------------------------------------------------------ value limits


def magnitude_limit(spec: ops.OpSpec, dtype: str, dims: Mapping[str, int]) -> float:
    """The largest input magnitude for which a correct kernel's result stays finite in ``dtype``.

    Inputs beyond it overflow in any correct implementation, so they tell nothing about the kernel.
    """
    out_max = _FMAX[dtype]
    # the longest sum in the op; attention also sums over its head dim (q.k). A reference-defined op may sum along
    # any of its dims (a cumsum's, a layernorm's stay in the output): every dim counts there
    roles = ("reduced", "contracted", "head") if spec.magnitude == "dot" else ("reduced", "contracted")
    reduced = max([dims[d] for d in (spec.dims if spec.schema is not None else spec.dims_of_role(*roles))] or [1])
    if spec.magnitude == "sum" or (spec.schema is not None and spec.magnitude == "any"):
        return out_max / (4 * reduced)
    if spec.magnitude == "product":
        return math.sqrt(out_max) / 4
    if spec.magnitude == "dot":
        return math.sqrt(out_max / (4 * reduced))
    if spec.magnitude == "norm":  # x*x is formed in fp32
        return min(out_max, math.sqrt(_FMAX["fp32"] / (4 * reduced))) / 4
    return out_max / 4


def value_params(dist: str, spec: ops.OpSpec, dtype: str, dims: Mapping[str, int]) -> dict[str, float]:
    """Resolve a distribution's parameters for this op, dtype and size (recorded in the case)."""
    lim = magnitude_limit(spec, dtype, dims)
    if dist == "normal":
        return {"scale": 1.0}
    if dist == "uniform":
        return {"low": -1.0, "high": 1.0}
    if dist == "positive":  # post-ReLU activations, probabilities: one sign, so sums never cancel
        return {"low": 0.0, "high": 1.0}
    if dist == "negative":  # log-probabilities, masked scores: every value below zero, so a 0 is no neutral max
        return {"low": -1.0, "high": 0.0}
    if dist == "zeros":
        return {}
    if dist == "ties":
        return {"levels": 5.0}
    if dist == "tiny":
        return {"scale": _TINY[dtype] * 8}
    if dist == "near_max":
        return {"scale": lim}
    if dist == "large_spread":
        return {"scale": min(300.0, lim / 4)}
    if dist == "cancellation":
        mean, std = {"fp32": (1.0e4, 1.0), "fp16": (512.0, 8.0), "bf16": (512.0, 32.0)}[dtype]
        mean = min(mean, lim / 2)
        return {"mean": mean, "std": min(std, mean / 16)}  # mean >> std: every value has the mean's sign
    if dist == "spike":
        return {"scale": 1.0, "spike": min(60.0, lim / 2)}
    if dist == PAST_FP16:  # most values past fp16's 65,504, as far as the op's finite range allows
        return {"scale": min(2.0e5, lim / 4)}
    raise InvalidArgument(f"value distribution {dist!r} is not known; use one of {', '.join(DISTRIBUTIONS)}")


def _float_values(dist: str, params: Mapping[str, float], shape: tuple[int, ...], rng: Rng):
    """float64 numpy values of ``shape`` in row-major order; draws exactly one block seed (+1 for spikes)."""
    import numpy as np

    n = math.prod(shape)
    block = rng.next_u64()
    if dist in ("normal", "large_spread", "tiny", PAST_FP16):
        v = normal(block, n) * params["scale"]
    elif dist in ("uniform", "positive", "negative"):
        v = params["low"] + uniform01(block, n) * (params["high"] - params["low"])
    elif dist == "zeros":
        v = np.zeros(n)
    elif dist == "ties":
        lv = int(params["levels"])
        v = (raw_u64(block, n) >> np.uint64(32)).astype(np.float64)
        v = np.floor(v * (lv / 4294967296.0)) - (lv // 2)
    elif dist == "near_max":
        u = uniform01(block, n)
        sign = np.where(u < 0.5, -1.0, 1.0)
        v = sign * (0.5 + np.abs(u - 0.5)) * params["scale"]
    elif dist == "cancellation":
        v = params["mean"] + normal(block, n) * params["std"]
    elif dist == "spike":
        v = normal(block, n) * params["scale"]
        if n and shape:
            rows = n // shape[-1]
            pos = (raw_u64(rng.next_u64(), rows) >> np.uint64(32)) * np.uint64(shape[-1]) >> np.uint64(32)
            v.reshape(rows, shape[-1])[np.arange(rows), pos.astype(np.int64)] = params["spike"]
    else:
        raise InvalidArgument(f"value distribution {dist!r} is not known")
    return v.reshape(shape)


def parse_layout(layout: str) -> tuple[str, dict[str, Any]]:
    """``"padded:N+13@5"`` -> ``("padded", {"dim": "N", "extra": 13, "start": 5})``; ``"perm:0213"`` ->
    ``("perm", {"order": (0, 2, 1, 3)})``; a plain layout name -> ``(name, {})``. InvalidArgument otherwise."""
    kind, sep, rest = layout.partition(":")
    if not sep:
        if kind not in LAYOUTS:
            raise InvalidArgument(f"layout {layout!r} is not known; use one of {', '.join(LAYOUTS)}, "
                                  "padded:DIM+EXTRA[@START] or perm:ORDER")
        return kind, {}
    try:
        if kind == "padded":
            dim, _, amount = rest.rpartition("+")
            extra, _, start = amount.partition("@")
            p = {"dim": dim, "extra": int(extra), "start": int(start or 0)}
            if dim and 0 <= p["start"] <= p["extra"] and p["extra"] >= 1:
                return kind, p
        elif kind == "perm" and rest.isdigit() and sorted(rest) == [str(i) for i in range(len(rest))]:
            return kind, {"order": tuple(int(c) for c in rest)}
    except ValueError:
        pass
    raise InvalidArgument(f"layout {layout!r} is malformed; write padded:DIM+EXTRA[@START] (0 <= START <= EXTRA, "
                          "EXTRA >= 1) or perm:ORDER (a permutation of 0..ndim-1 as digits)")


def dim_names(arg: ops.ArgSpec, batch: tuple[int, ...]) -> tuple[str, ...]:
    """A name per position of ``arg``'s resolved shape: the spec's dim names, ``...0``, ``...1`` for batch dims."""
    out: list[str] = []
    for d in arg.shape:
        out.extend(f"...{i}" for i in range(len(batch))) if d == "..." else out.append(d)
    return tuple(out)


def view_geometry(shape: tuple[int, ...], names: tuple[str, ...], layout: str) -> tuple[tuple[int, ...], int]:
    """(strides, storage offset) of an argument of ``shape`` placed in ``layout``, without building it."""
    kind, p = parse_layout(layout)
    nd = len(shape)

    def dense(sh):
        st, acc = [0] * len(sh), 1
        for i in range(len(sh) - 1, -1, -1):
            st[i] = acc
            acc *= sh[i]
        return st

    if kind == "transposed" and nd >= 2:
        st = dense(shape[:-2] + (shape[-1], shape[-2]))
        return tuple(st[:-2] + [st[-1], st[-2]]), 0
    if kind == "strided" and nd >= 1:
        st = dense(shape[:-1] + (2 * shape[-1],))
        return tuple(st[:-1] + [2]), 0
    if kind == "padded" and p["dim"] in names:
        i = names.index(p["dim"])
        big = list(shape)
        big[i] += p["extra"]
        st = dense(big)
        return tuple(st), p["start"] * st[i]
    if kind == "perm" and len(p["order"]) == nd:
        st = dense(tuple(shape[o] for o in p["order"]))
        out = [0] * nd
        for j, o in enumerate(p["order"]):
            out[o] = st[j]
        return tuple(out), 0
    return tuple(dense(shape)), OFFSET if kind == "offset" else 0


def stride_breaks(shape: tuple[int, ...], names: tuple[str, ...], layout: str) -> list[str]:
    """Where a view's strides break what a kernel deriving them from the sizes would assume: for each dim whose
    stride is not (next dim's size) x (next dim's stride), e.g. ``stride(B) = 2560, not N*stride(N) = 2048``;
    an inner stride other than 1 too. The dim named is the one whose stride a kernel must not assume."""
    strides, _ = view_geometry(shape, names, layout)
    names = tuple(f"dim {n[3:]}" if n.startswith("...") else n for n in names)
    out = []
    for k in range(len(shape) - 1):
        if shape[k] > 1 and strides[k] != shape[k + 1] * strides[k + 1]:
            out.append(f"stride({names[k]}) = {strides[k]}, not {names[k + 1]}*stride({names[k + 1]}) = "
                       f"{shape[k + 1] * strides[k + 1]}")
    if shape and shape[-1] > 1 and strides[-1] != 1:
        out.append(f"stride({names[-1]}) = {strides[-1]}, not 1")
    return out


def layout_note(case: "Case", name: str) -> str:
    """``x padded:N+13`` plus, for the views, the strides that break a from-the-sizes assumption:
    ``x padded:N+13 (x[B,N,H,D]: stride(B) = 2560, not N*stride(N) = 2048)``."""
    layout = case.layouts.get(name, "contiguous")
    arg = next((a for a in case.spec.args if a.name == name), None)
    if arg is None or parse_layout(layout)[0] not in VIEW_LAYOUTS:
        return f"{name} {layout}"
    breaks = stride_breaks(arg.resolve(case.dims, case.batch), dim_names(arg, case.batch), layout)
    dims = ",".join(d if not d.startswith("...") else "..." for d in dim_names(arg, case.batch))
    return f"{name} {layout}" + (f" ({name}[{dims}]: {'; '.join(breaks)})" if breaks else "")


def _place(values, layout: str, poison, names: tuple[str, ...] = ()):
    """Put logical ``values`` (a torch tensor) into storage of the given layout, poisoning the gaps.
    ``names`` (one per dim, :func:`dim_names`) resolves the dim a ``padded:DIM+E`` layout pads."""
    import torch

    shape = tuple(values.shape)
    n = values.numel()
    kind, p = parse_layout(layout)
    if kind == "padded" and p["dim"] in names:
        i = names.index(p["dim"])
        big_shape = list(shape)
        big_shape[i] += p["extra"]
        m = math.prod(big_shape)
        flat = torch.full((m + GUARD,), poison, dtype=values.dtype)
        index = [slice(None)] * len(shape)
        index[i] = slice(p["start"], p["start"] + shape[i])
        view = flat[:m].view(big_shape)[tuple(index)]
        view.copy_(values)
        return view
    if kind == "perm" and len(p["order"]) == len(shape):
        order = p["order"]
        flat = torch.full((n + GUARD,), poison, dtype=values.dtype)
        inverse = [order.index(k) for k in range(len(shape))]
        view = flat[:n].view(tuple(shape[o] for o in order)).permute(*inverse)
        view.copy_(values)
        return view
    if layout == "transposed" and values.dim() >= 2:
        t_shape = shape[:-2] + (shape[-1], shape[-2])
        flat = torch.full((n + GUARD,), poison, dtype=values.dtype)
        flat[:n] = values.transpose(-1, -2).reshape(-1)
        return flat[:n].view(t_shape).transpose(-1, -2)
    if layout == "strided" and values.dim() >= 1:
        big_shape = shape[:-1] + (2 * shape[-1],)
        m = math.prod(big_shape)
        flat = torch.full((m + GUARD,), poison, dtype=values.dtype)
        big = flat[:m].view(big_shape)
        big[..., ::2] = values
        return big[..., ::2]
    pad = OFFSET if layout == "offset" else 0
    flat = torch.full((pad + n + GUARD,), poison, dtype=values.dtype)
    flat[pad:pad + n] = values.reshape(-1)
    return flat[pad:pad + n].view(shape)


def materialize(case: Case, device: str = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    """The exact inputs of ``case``: (tensors by argument name, keyword arguments)."""
    import numpy as np
    import torch

    spec = case.spec
    err = spec.check_dims(case.dims, case.kwargs)
    if err:
        raise InvalidArgument(f"case for {case.op} is invalid: {err}")
    if case.shape_kind == "production":  # tens of GiB: built sparse, page by page (gpuemu.production.make_inputs)
        raise InvalidArgument(f"a production-size case of {case.op} is not materialized whole; "
                              "gpuemu.production.make_inputs builds its inputs sparse")
    rng = Rng(derive_seed(case.seed, 1))
    dt = torch_dtype(case.dtype)
    out: dict[str, Any] = {}
    for arg in spec.args:
        if arg.kind == "const":
            out[arg.name] = case.kwargs.get(arg.name, arg.value)  # a reference's float constant may be drawn
            continue
        if arg.kind == "dim":
            out[arg.name] = arg.dim_value(case.dims, case.batch)
            continue
        shape = arg.resolve(case.dims, case.batch)
        layout = case.layouts.get(arg.name, "contiguous")
        if layout == "none":
            rng.next_u64()  # keep later arguments' streams independent of this choice
            out[arg.name] = None
            continue
        if arg.kind == "index":
            hi = case.dims[arg.index_of]
            raw = raw_u64(rng.next_u64(), math.prod(shape)) >> np.uint64(32)
            ids = ((raw * np.uint64(hi)) >> np.uint64(32)).astype(np.int64)
            vals = torch.from_numpy(np.sort(ids) if arg.sorted else ids).reshape(shape)
            if arg.dtype and arg.dtype != "int64":
                vals = vals.to(getattr(torch, arg.dtype))
            t = _place(vals, layout, 0, dim_names(arg, case.batch))
        elif arg.kind in ("offsets", "int", "bool", "fp8") or (arg.kind == "float" and arg.dtype):
            t = _place(_drawn(arg, shape, case, rng, spec), layout, _POISON.get(arg.kind, float("nan")),
                       dim_names(arg, case.batch))
        else:
            if arg.values in ("range", "mask"):  # (a reference-defined op's scales and additive masks)
                t = _place(_drawn(arg, shape, case, rng, spec).to(dt), layout, float("nan"), dim_names(arg, case.batch))
                out[arg.name] = to_device(t, device)
                continue
            if arg.values == "unit":
                dist, params = "uniform", {"low": -1.0, "high": 1.0}
            elif arg.values:
                dist, params = arg.values, value_params(arg.values, spec, case.dtype, case.dims)
            else:
                dist = case.values
                params = case.value_params or value_params(dist, spec, case.dtype, case.dims)
            v64 = torch.from_numpy(_float_values(dist, params, shape, rng))
            vals = v64.to(torch.float32).to(dt)  # the documented rounding path: f64 -> f32 -> dtype
            t = _place(vals, layout, float("nan"), dim_names(arg, case.batch))
        out[arg.name] = to_device(t, device)
    return out, call_kwargs(case)


_POISON = {"offsets": 0, "int": 0, "bool": False}


def _drawn(arg: ops.ArgSpec, shape: tuple[int, ...], case: "Case", rng: Rng, spec: ops.OpSpec):
    """The values of an argument of a reference-defined op (gpuemu.schema) that is not a plain float of the case's
    dtype: offsets, quantized ints, bools, fp8, floats of a fixed dtype (each draws exactly one block seed)."""
    import numpy as np
    import torch

    from .schema.model import bound_value

    n = math.prod(shape)
    block = rng.next_u64()
    if arg.kind == "offsets":  # group bounds: 0, sorted cut points, the total
        total = case.dims[arg.index_of]
        cuts = np.sort(((raw_u64(block, max(n - 2, 0)) >> np.uint64(32)) * np.uint64(total + 1)
                        >> np.uint64(32)).astype(np.int64))
        vals = np.concatenate([[0], cuts, [total]])[:n] if n else np.zeros(0, np.int64)
        return torch.from_numpy(vals.astype(np.int64)).reshape(shape).to(getattr(torch, arg.dtype or "int64"))
    if arg.kind == "int":
        lo, hi = int(bound_value(arg.lo if arg.lo is not None else 0, case.dims)), \
            int(bound_value(arg.hi if arg.hi is not None else 127, case.dims))
        span = max(hi - lo + 1, 1)
        vals = lo + ((raw_u64(block, n) >> np.uint64(32)) * np.uint64(span) >> np.uint64(32)).astype(np.int64)
        return torch.from_numpy(vals).reshape(shape).to(getattr(torch, arg.dtype or "int64"))
    if arg.kind == "bool":
        return torch.from_numpy(uniform01(block, n) < (arg.density if arg.density is not None else 0.5)).reshape(shape)
    if arg.kind == "fp8":  # the example's scale, saturated at the format's largest finite value
        dt = getattr(torch, arg.dtype or "float8_e4m3fn")
        top = float(torch.finfo(dt).max)
        v = np.clip(normal(block, n) * ((arg.hi or 3.0) / 3.0), -top, top)
        return torch.from_numpy(v).to(torch.float32).to(dt).reshape(shape)
    dt = getattr(torch, arg.dtype) if arg.dtype else torch_dtype(case.dtype)  # (fixed, or the case's)
    if arg.values == "range":
        lo, hi = float(bound_value(arg.lo, case.dims)), float(bound_value(arg.hi, case.dims))
        v = lo + uniform01(block, n) * (hi - lo)
    elif arg.values == "mask":
        v = np.where(uniform01(block, n) < (arg.density if arg.density is not None else 0.5), 0.0, -np.inf)
    else:
        dist = case.values if arg.dtype in ("float32", "float16", "bfloat16") else "normal"
        params = case.value_params or value_params(dist, spec, case.dtype, case.dims)
        v = _float_values(dist, params, shape, Rng(block)).reshape(-1)
    return torch.from_numpy(v.reshape(shape)).to(torch.float32).to(dt)


def to_device(t, device: str):
    """``t`` on ``device`` with the geometry it has here: the whole storage moves (NaN gaps and the guard zone
    after the view included) and the view is rebuilt with the same size, strides and offset. ``t.to(device)``
    would hand the kernel a dense copy, and a kernel that ignores strides would never see a strided tensor."""
    import torch

    if t is None or str(t.device) == str(torch.device(device)):
        return t
    return _move_storage(t, device)


def _move_storage(t, device: str):
    import torch

    st = t.untyped_storage()
    whole = torch.empty(0, dtype=t.dtype, device=t.device).set_(st, 0, (st.nbytes() // t.element_size(),), (1,))
    return whole.to(device, copy=True).as_strided(tuple(t.shape), tuple(t.stride()), t.storage_offset())


def scalar_args(case: Case) -> dict[str, Any]:
    """The non-tensor arguments of a case (a reference-defined op's constants and sizes): what a snapshot, which
    holds tensors only, leaves to the case."""
    return {a.name: (case.kwargs.get(a.name, a.value) if a.kind == "const" else a.dim_value(case.dims, case.batch))
            for a in case.spec.args if not a.is_tensor}


def call_kwargs(case: Case) -> dict[str, Any]:
    """Keyword arguments to pass: only those that differ from the op's defaults (eps, causal)."""
    spec = case.spec
    consts = {a.name for a in spec.args if a.kind == "const"}  # drawn constants go in as arguments (materialize)
    return {k: v for k, v in case.kwargs.items() if k not in consts and spec.kwargs.get(k, object()) != v}


# ------------------------------------------------------------------------------------ generation

CONSTANT_DRAW_ONE_IN = 2  # a reference's float constant (alpha, eps, a scale, a temperature) is redrawn in half the
# default cases: a kernel that hard-codes the example's value (alpha = 1 where the module was built with 1) passes
# every case that keeps it


def draw_constants(rng: Rng, spec: Any) -> dict[str, float]:
    """Values for the float constants of a reference-defined op (its schema's ``const`` arguments holding a finite,
    non-zero float): within a declared ``range`` when there is one (``range: [v, v]`` pins it), else the example's
    value times 2^u, u uniform in [-1, 1], rounded to 4 significant digits. Ints, flags and other constants are
    kept. Each constant is drawn, or kept, independently (:data:`CONSTANT_DRAW_ONE_IN`)."""
    out: dict[str, float] = {}
    for a in spec.args:
        if not a.drawn_constant or rng.below(CONSTANT_DRAW_ONE_IN) != 0:
            continue
        u, r = rng.uniform(), a.declared_range
        v = r[0] + (r[1] - r[0]) * u if r else a.value * 2.0 ** (2.0 * u - 1.0)
        out[a.name] = float(f"{v:.4g}")
    return out


@dataclass
class Blocks:
    """Block sizes seen at launch (kernel-aware generation): per dim, and unattributed."""

    by_dim: dict[str, set[int]] = field(default_factory=dict)
    unattributed: set[int] = field(default_factory=set)

    def for_dim(self, dim: str) -> list[int]:
        return sorted(self.by_dim.get(dim) or self.unattributed)

    def empty(self) -> bool:
        return not self.unattributed and not any(self.by_dim.values())

    def to_dict(self) -> dict:
        return {"by_dim": {k: sorted(v) for k, v in self.by_dim.items()}, "unattributed": sorted(self.unattributed)}


_DEFAULT_LIMITS = {"tiled": (1, 1100), "reduced": (1, 1100), "contracted": (1, 200), "head": (1, 128),
                   "batch": (1, 8), "index": (1, 300)}
_ROW_CAP = 16  # leading batch rows: the interpreter runs one Python loop iteration per program


def dim_limits(spec: ops.OpSpec, dim: str) -> tuple[int, int]:
    return spec.dim_limits.get(dim, _DEFAULT_LIMITS[spec.dims[dim]])


def _pow2_in(lo: int, hi: int) -> list[int]:
    out, p = [], 1
    while p <= hi:
        if p >= lo:
            out.append(p)
        p *= 2
    return out or [lo]


def _random_size(rng: Rng, lo: int, hi: int) -> int:
    """Log-uniform-ish integer in [lo, hi]: pick an octave, then a size inside it (integer ops only)."""
    octaves = max(hi.bit_length() - 1, 0)
    k = rng.between(0, octaves)
    a, b = max(lo, 1 << k), min(hi, (2 << k) - 1)
    return rng.between(a, b) if a <= b else rng.between(lo, hi)


def _tile_edges(blocks: list[int]) -> list[int]:
    out: set[int] = set()
    for b in blocks:
        out.update({b - 1, b + 1, 2 * b + 1, 2 * b - 1, 3 * b + 1})
    return sorted(x for x in out if x >= 1)


def _pick_dim(rng: Rng, kind: str, lo: int, hi: int, blocks: list[int]) -> int:
    # blocks that grow with the dim (BLOCK = next_pow2(N)) must not feed back into ever larger sizes
    blocks = [b for b in blocks if b <= hi]
    if kind == "tile_edge" and blocks:
        edges = [e for e in _tile_edges(blocks) if lo <= e <= max(hi, 2 * max(blocks) + 1)]
        if edges:
            return rng.choice(edges)
    if kind in ("regular", "fixed"):
        return rng.choice(_pow2_in(lo, hi))
    if kind == "boundary":
        cands = [s for s in _BOUNDARY_SIZES if lo <= s <= hi] or [lo]
        return rng.choice(cands)
    if kind == "adversarial":
        primes = [p for p in (2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021) if lo <= p <= hi]
        return rng.choice([lo, hi] + primes)
    return _random_size(rng, lo, hi)


def _pick_batch(rng: Rng, kind: str) -> tuple[int, ...]:
    if kind == "fixed":
        return (4,)
    nb = rng.below(3)
    batch: list[int] = []
    rows = 1
    for _ in range(nb):
        cap = max(1, _ROW_CAP // rows)
        b = rng.choice([s for s in (1, 2, 3, 4, 5, 7, 8) if s <= cap] or [1])
        batch.append(b)
        rows *= b
    return tuple(batch)


# what each strategy varies; "default" mixes them all
STRATEGIES = ("fixed", "random_shapes", "boundary_shapes", "tile_edges", "strided", "boundary_values",
              "adversarial_values", "default")


def is_production_strategy(strategy: str) -> bool:
    """``production`` or ``production:PRESET`` (gpuemu/sizes.py): not one of :data:`STRATEGIES`, whose cases a
    whole process materializes."""
    return strategy == "production" or strategy.startswith("production:")
_SHAPE_WEIGHTS = {"regular": 2, "random": 2, "boundary": 3, "tile_edge": 3, "adversarial": 1}
_VALUE_WEIGHTS = {"normal": 4, "uniform": 1, "positive": 2, "negative": 1, "zeros": 1, "ties": 1, "tiny": 1,
                  "near_max": 1, "large_spread": 3, "cancellation": 2, "spike": 2}
# extra weight where a bug class of the op needs those values (by the op's schema, never by a kernel):
# - an additive reduction or a contraction (sum, mean, cumsum, the norms' moments, matmul's K) goes wrong in
#   precision only on one-signed rows: a running total kept in fp16/bf16 loses bits only while the sum grows
#   (positive), a one-pass variance cancels only under a large common offset (cancellation);
# - a max-type reduction (amax, argmax, softmax, logsumexp, cross_entropy) goes wrong with a masked lane filled
#   with 0 (neutral for a sum, not for a max) only when every real value is below 0 (negative);
# - an index output (argmax) is decided by which of several equal values wins: ties and all-equal rows.
_ADDITIVE_VALUE_BOOST = {"positive": 2, "cancellation": 2}
_MAX_VALUE_BOOST = {"negative": 2}
_INDEX_VALUE_BOOST = {"ties": 4, "zeros": 1}


# a bf16 case's values past fp16's range: a kernel that narrows bf16 to fp16 inside (a bf16 path "as wide as
# logits need") turns them into inf; near_max alone (weight 1 of 22) drew one such case in ~70 bf16 cases
_PAST_FP16_WEIGHT = 3


def value_weights(spec: ops.OpSpec, dtype: str | None = None) -> dict[str, int]:
    """The default strategy's weights of the value distributions for ``spec`` (see the boosts' comment); a bf16
    case also draws :data:`PAST_FP16` values."""
    weights = dict(_VALUE_WEIGHTS)
    if dtype == "bf16" and spec.out_kind != "index":  # (an index output is decided by ties, not magnitudes)
        weights[PAST_FP16] = _PAST_FP16_WEIGHT
    boosts = []
    if spec.magnitude in ("sum", "norm") or spec.dims_of_role("contracted"):
        boosts.append(_ADDITIVE_VALUE_BOOST)
    if spec.magnitude == "any" and spec.dims_of_role("reduced"):
        boosts.append(_MAX_VALUE_BOOST)
    if spec.out_kind == "index":
        boosts.append(_INDEX_VALUE_BOOST)
    for boost in boosts:
        for k, w in boost.items():
            weights[k] += w
    return weights


def generate(op: str, seed: int, *, dtype: str, strategy: str = "default", blocks: Blocks | None = None,
             long_rows: bool = True, caps: Mapping[str, int] | None = None) -> Case:
    """Draw one case of ``op`` from ``seed`` under ``strategy``. ``long_rows=False`` draws no row or size past the
    size caps, neither long rows nor real sizes (the fuzzer's answer to a launcher whose launch a GPU refuses at
    such sizes). ``caps`` are the launcher's declared largest dims (``max_dims``): every size is drawn under them
    (no long row on a capped dim shorter than a long row), so that the op's constraints hold for the sizes drawn.

    >>> generate("softmax", 1, dtype="fp32").op
    'softmax'
    """
    if strategy.split(":")[0] == "production":  # the shapes real models launch (gpuemu/sizes.py), run partially
        from .sizes import production_case      # over sparse memory; "production:PRESET" one model's dims

        return production_case(op, seed, dtype=dtype, preset=strategy.partition(":")[2] or None)
    spec = ops.get(op)
    dtype = canonical_dtype(dtype)
    blocks = blocks or Blocks()
    rng = Rng(derive_seed(seed, 0))
    shape_kind = {"fixed": "fixed", "random_shapes": "random", "boundary_shapes": "boundary",
                  "tile_edges": "tile_edge" if not blocks.empty() else "boundary",
                  "strided": "regular", "boundary_values": "regular", "adversarial_values": "regular"}.get(strategy)
    if shape_kind is None:
        weights = dict(_SHAPE_WEIGHTS)
        if blocks.empty():
            weights.pop("tile_edge")
        shape_kind = rng.weighted(weights)

    caps = caps or {}
    for _attempt in range(20):
        dims: dict[str, int] = {}
        for d in spec.dims:
            lo, hi = dim_limits(spec, d)
            hi = max(lo, min(hi, caps.get(d, hi)))
            if shape_kind == "fixed":
                dims[d] = {"batch": 2, "head": 64, "index": 256}.get(spec.dims[d], min(256, _pow2_in(lo, hi)[-1]))
            else:
                dims[d] = _pick_dim(rng, shape_kind, lo, hi, blocks.for_dim(d))
        batch = _pick_batch(rng, shape_kind) if spec.has_batch else ()
        kwargs = dict(spec.kwargs)
        if "causal" in kwargs and shape_kind != "fixed":
            kwargs["causal"] = rng.below(2) == 1
        if _fit(spec, dims, kwargs):
            break
    else:  # pragma: no cover - the constraints above always admit some draw
        raise AssertionError(f"could not draw a valid shape for {op}")

    layouts = {}
    for a in spec.args:
        if not a.is_tensor:
            continue
        layouts[a.name] = "contiguous"
        if a.optional and shape_kind != "fixed" and rng.below(3) == 0:
            layouts[a.name] = "none"
    noncontig = strategy == "strided" or (strategy == "default" and rng.below(10) < 4)
    cands = [a for a in spec.args if a.is_tensor and not a.contiguous and layouts[a.name] != "none"
             and a.resolve(dims, batch)]
    if noncontig and cands:
        chosen = [a for a in cands if rng.below(2) == 1] or [rng.choice(cands)]
        for a in chosen:
            nd = len(a.resolve(dims, batch))
            options = ["strided", "offset"] + (["transposed"] if nd >= 2 else [])
            layouts[a.name] = rng.choice(options)

    # the draws below come from their own streams, so adding them left every earlier draw of a seed as it was
    if strategy in ("default", "strided") and shape_kind != "fixed":
        _draw_views(Rng(derive_seed(seed, 2)), spec, dims, batch, layouts, often=strategy == "strided")
    long_rng = Rng(derive_seed(seed, 3))
    long_row = strategy == "default" and shape_kind != "fixed" and long_rng.below(_LONG_ROW_ONE_IN) == 0 \
        and long_rows
    if long_row:
        drawn = _long_row_dims(long_rng, spec, dims, batch, kwargs, blocks, caps)
        if drawn is not None:
            dims, batch = drawn
            shape_kind = "long_row"
    real_rng = Rng(derive_seed(seed, 4))
    if strategy == "default" and shape_kind not in ("fixed", "long_row") and spec.real_sizes and long_rows \
            and real_rng.below(_REAL_SIZE_ONE_IN) == 0:
        drawn = _real_size_dims(real_rng, spec, dims, batch, kwargs, blocks, caps)
        if drawn is not None:
            dims, batch = drawn
            shape_kind = "real_size"

    if spec.max_elements:
        dims = _within(spec, dims, batch, kwargs)
    if strategy in ("fixed", "random_shapes", "boundary_shapes", "tile_edges", "strided"):
        values = "normal"
    elif strategy == "boundary_values":
        values = rng.choice(BOUNDARY_VALUES)
    elif strategy == "adversarial_values":
        values = rng.choice(ADVERSARIAL_VALUES)
    else:
        values = rng.weighted(value_weights(spec, dtype))
    if shape_kind == "long_row" and long_rng.below(2) == 0:
        values = "large_spread"  # logits past exp's (88) and exp2's (128) overflow: a max-free path shows
    if getattr(spec, "schema", None) is not None and strategy == "default" and shape_kind != "fixed":
        kwargs.update(draw_constants(Rng(derive_seed(seed, 5)), spec))
    return Case(op=op, dtype=dtype, dims=dims, seed=seed, batch=batch, layouts=layouts, values=values,
                value_params=value_params(values, spec, dtype, dims), kwargs=kwargs, strategy=strategy,
                shape_kind=shape_kind)


# ------------------------------------------------------------------------------------ views and long rows

_VIEW_ONE_IN, _VIEW_TENTHS = 10, 3  # a view layout in 3 of 10 default cases, in half the "strided" ones
_VIEW_WEIGHTS = {"row": 3, "outer": 2, "perm": 1}
# an argument with batch/head/token structure (3 or more named dims: rope's x[B,N,H,D], attention's k) is where
# an outer dim's stride gets assumed (b * N * stride_n): such ops get views in 4 of 10 cases, and their views
# are mostly KV-cache and fused-projection slices and head-major storage
_VIEW_TENTHS_STRUCTURED = 4
_VIEW_WEIGHTS_STRUCTURED = {"row": 2, "outer": 3, "perm": 2}


def _structured(arg: ops.ArgSpec) -> bool:
    return len([d for d in arg.shape if d != "..."]) >= 3


def _view_kinds(arg: ops.ArgSpec, dims: Mapping[str, int], batch: tuple[int, ...]) -> list[tuple[str, str]]:
    """The views a caller makes of ``arg``: (kind, dim) for row padding of the last dim, a slice along an outer
    named dim (KV cache, a head slice of a fused projection), a head-major <-> token-major permutation."""
    names = dim_names(arg, batch)
    if len(names) < 2:
        return []
    out = []
    if not names[-1].startswith("..."):
        out.append(("row", names[-1]))
    out += [("outer", d) for d in names[1:-1] if not d.startswith("...")]
    if "..." not in arg.shape and len(names) in (3, 4):
        out.append(("perm", "0213" if len(names) == 4 else "102"))
    return out


def _breaking_views(arg: ops.ArgSpec, dims: Mapping[str, int], batch: tuple[int, ...]) -> list[tuple[str, str]]:
    """The views of :func:`_view_kinds` that break a stride at these sizes, where there are such: a slice along a
    dim breaks the stride of the dim outside it, which no kernel can get wrong where that dim has one element
    (B = 1: a KV-cache slice along N would test nothing there, a head slice or head-major storage still does)."""
    shape, names = arg.resolve(dims, batch), dim_names(arg, batch)
    kinds = _view_kinds(arg, dims, batch)

    def breaks(layout: str) -> bool:  # a stride that a kernel deriving it from the sizes gets wrong
        strides, _ = view_geometry(shape, names, layout)
        return any(shape[k] > 1 and strides[k] != math.prod(shape[k + 1:]) for k in range(len(shape)))

    breaking = [(kind, dim) for kind, dim in kinds if breaks(f"perm:{dim}" if kind == "perm" else f"padded:{dim}+1")]
    return breaking or kinds


def _view_layout(rng: Rng, kind: str, dim: str, size: int) -> str:
    if kind == "perm":
        return f"perm:{dim}"
    # how real buffers are larger: one fused neighbour or two (qkv), rounded up to 64 (vocab), a few spare
    extra = rng.choice([size, 2 * size, (-size) % 64 or 64, 1, 7])
    start = size * rng.below(extra // size + 1) if extra % size == 0 else 0  # which chunk of the split
    return f"padded:{dim}+{extra}" + (f"@{start}" if start else "")


def _draw_views(rng: Rng, spec: ops.OpSpec, dims: Mapping[str, int], batch: tuple[int, ...],
                layouts: dict[str, str], *, often: bool) -> None:
    """Replace some arguments' layouts by views that real callers make (see LAYOUTS' comment), in place."""
    tenths = _VIEW_TENTHS_STRUCTURED if any(_structured(a) for a in spec.args if a.is_tensor) else _VIEW_TENTHS
    if rng.below(_VIEW_ONE_IN) >= (_VIEW_ONE_IN // 2 if often else tenths):
        return
    cands = [(a, k) for a in spec.args if a.is_tensor and not a.contiguous and layouts[a.name] != "none"
             and (k := _breaking_views(a, dims, batch))]
    if not cands:
        return
    chosen = [c for c in cands if rng.below(2) == 1] or [rng.choice(cands)]
    for arg, kinds in chosen:
        by_kind: dict[str, list[str]] = {}
        for kind, dim in kinds:
            by_kind.setdefault(kind, []).append(dim)
        weights = _VIEW_WEIGHTS_STRUCTURED if _structured(arg) else _VIEW_WEIGHTS
        kind = rng.weighted({k: w for k, w in weights.items() if k in by_kind})
        dim = rng.choice(by_kind[kind])
        size = 0 if kind == "perm" else arg.resolve(dims, batch)[dim_names(arg, batch).index(dim)]
        layouts[arg.name] = _view_layout(rng, kind, dim, max(size, 1))


def simpler_views(case: Case, name: str) -> list[str]:
    """Simpler layouts for argument ``name`` that keep it a view, for shrinking: a permutation becomes a slice
    padding one dim by one element (one broken stride, the one a hint can name), a larger slice pads by one."""
    layout = case.layouts.get(name, "contiguous")
    kind, p = parse_layout(layout)
    arg = next(a for a in case.spec.args if a.name == name)
    if kind == "perm":
        return [f"padded:{d}+1" for k, d in _view_kinds(arg, case.dims, case.batch) if k != "perm"]
    if kind == "padded" and (p["extra"] > 1 or p["start"]):
        return [f"padded:{p['dim']}+1"]
    return []


_LONG_ROW_ONE_IN = 10  # default strategy: one case in this many has a row of several blocks (a cross-block bug
# of a chunked path, C > 4096, showed first at iteration 2-44 over 5 seeds at one in 16)
_LONG_ROW_MAX = 16384  # reduced and contracted dims of those cases (OpSpec.long_rows raises it per dim)


_LONG_ROW_BLOCKS = 256  # at most this many of the largest block seen on the dim: the interpreter loops per block


def _long_row_dims(rng: Rng, spec: ops.OpSpec, dims: Mapping[str, int], batch: tuple[int, ...],
                   kwargs: Mapping[str, Any], blocks: Blocks,
                   caps: Mapping[str, int]) -> tuple[dict[str, int], tuple[int, ...]] | None:
    """A row far past any kernel's largest block (up to 16k, 64k where the op says so) in one or two rows,
    the other dims small, so the interpreter's cost stays bounded; a kernel seen looping over small fixed blocks
    gets rows of at most 256 of them. None for ops without a reduced dim."""
    long = spec.dims_of_role("reduced", "contracted")
    if not long:
        return None
    dim = rng.choice(long)
    lo = 2 * dim_limits(spec, dim)[1] + 1
    hi = spec.long_rows.get(dim, _LONG_ROW_MAX)
    if spec.schema is not None:  # a reference-defined op: its dims' cost is unknown (a page count times the pages'
        hi = min(hi, 8 * dim_limits(spec, dim)[1])  # work): rows up to 8x the largest drawn otherwise
    hi = min(hi, caps.get(dim, hi))
    if hi < lo:  # the launcher declares rows this long unsupported
        return None
    seen = blocks.for_dim(dim)
    if seen:
        hi = min(hi, _LONG_ROW_BLOCKS * max(seen))
    hi = max(hi, lo)
    new = dict(dims)
    new[dim] = _random_size(rng, lo, hi)
    for d, role in spec.dims.items():
        if d == dim:
            continue
        dlo, dhi = dim_limits(spec, d)
        if role == "batch":
            new[d] = rng.between(dlo, min(dhi, 2))
        elif role in ("tiled", "head", "reduced", "contracted"):
            new[d] = min(new[d], max(dlo, min(dhi, 16)))
    if not _fit(spec, new, kwargs):
        return None
    return new, ((rng.between(1, 2),) if batch else ())


_REAL_SIZE_ONE_IN = 16  # default strategy: one case in this many at real model sizes (ops with OpSpec.real_sizes)


def _real_size(rng: Rng, role: str, lo: int, hi: int, seen: list[int]) -> int:
    """One dim of a real-size case: a head dim a power of two; otherwise, half the time, a multiple of the
    largest block seen on the dim or one off it (a tile edge at that size), else uniform in [lo, hi]."""
    if role == "head":
        return rng.choice(_pow2_in(lo, hi))
    if seen and rng.below(2) == 0:
        b = max(seen)
        edges = [m * b + d for m in range(1, hi // b + 2) for d in (-1, 0, 1) if lo <= m * b + d <= hi]
        if edges:
            return rng.choice(edges)
    return rng.between(lo, hi)


def _real_size_dims(rng: Rng, spec: ops.OpSpec, dims: Mapping[str, int], batch: tuple[int, ...],
                    kwargs: dict, blocks: Blocks, caps: Mapping[str, int]) -> tuple[dict[str, int], tuple[int, ...]] | None:
    """The dims of a case at the sizes real models launch (``spec.real_sizes``): one GEMM of 257-1100 per dim,
    attention over 257-2048 tokens with head dim 64 or 128, batch dims at their smallest; a dim the launcher
    declares a largest size for (``caps``) stays under it. None when they do not form a valid call."""
    new = dict(dims)
    for d, role in spec.dims.items():
        if d in spec.real_sizes:
            lo, hi = spec.real_sizes[d]
            hi = min(hi, caps.get(d, hi))
            new[d] = _real_size(rng, role, min(lo, hi), hi, blocks.for_dim(d))
        elif role == "batch":
            new[d] = dim_limits(spec, d)[0]
    rows = spec.real_sizes.get("...")
    new_batch = (rng.between(*rows),) if rows and spec.has_batch else tuple(1 for _ in batch)
    if not _fit(spec, new, kwargs):
        return None
    return new, new_batch


def _within(spec: ops.OpSpec, dims: dict[str, int], batch: tuple[int, ...], kwargs: Mapping[str, Any]) -> dict:
    """``dims`` with the largest free dim halved (kept a valid size) until the inputs' elements, summed, are within
    ``spec.max_elements`` (a reference-defined op: the CPU runs what a GPU runs, one program at a time)."""
    dims = dict(dims)

    def total() -> int:
        return sum(math.prod(a.resolve(dims, batch)) for a in spec.args if a.is_tensor)

    for _ in range(64):
        if total() <= spec.max_elements:
            break
        free = [d for d in spec.dims if dims[d] > dim_limits(spec, d)[0]]
        if not free:
            break
        d = max(free, key=lambda k: dims[k])
        lo = dim_limits(spec, d)[0]
        m = spec.multiples.get(d, 1)
        new = max(lo, dims[d] // 2)
        new -= new % m
        dims[d] = max(new, lo)
        _fit(spec, dims, kwargs)
    return dims


def _fit(spec: ops.OpSpec, dims: dict[str, int], kwargs: Mapping[str, Any]) -> bool:
    """Make drawn ``dims`` (in place) what the op's call needs where a draw cannot choose freely: a causal
    attention's queries no more than its keys (Nq and Nk swapped), even dims even. Whether they form a valid call."""
    if kwargs.get("causal") and dims["Nq"] > dims["Nk"]:
        dims["Nq"], dims["Nk"] = dims["Nk"], dims["Nq"]
    for d in spec.even_dims:
        dims[d] += dims[d] % 2
    for d, m in spec.multiples.items():
        dims[d] += -dims[d] % m
    return spec.check_dims(dims, kwargs) is None


def contiguous_twin(case: Case, names: Iterable[str] | None = None) -> Case:
    """The same case with the named (default: all) arguments contiguous: same seed, sizes and values."""
    names = set(case.layouts) if names is None else set(names)
    return case.replace(layouts={k: ("contiguous" if k in names and v != "none" else v) for k, v in case.layouts.items()})


def strided_args(case: Case) -> list[str]:
    """The arguments of ``case`` drawn as views (not contiguous, not None)."""
    return [k for k, v in case.layouts.items() if v not in ("contiguous", "none")]


def with_dims(case: Case, dims: Mapping[str, int] | None = None, batch: tuple[int, ...] | None = None) -> Case:
    """The same case at other sizes, value parameters re-resolved for them (used by shrinking and hints)."""
    new_dims = dict(case.dims, **(dims or {}))
    spec = case.spec
    params = value_params(case.values, spec, case.dtype, new_dims)
    return case.replace(dims=new_dims, batch=case.batch if batch is None else tuple(batch), value_params=params)
