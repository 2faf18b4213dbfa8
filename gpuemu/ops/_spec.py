"""The records that describe an op: its arguments, dims and their roles, and its fp64 meaning."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

ROLES = ("batch", "tiled", "reduced", "contracted", "head", "index")
FLOAT_DTYPES = ("float32", "float16", "bfloat16")


ARG_KINDS = ("float", "index", "offsets", "int", "bool", "fp8", "const", "dim")


@dataclass(frozen=True)
class ArgSpec:
    """One launcher argument.

    ``shape`` lists dim names; ``"..."`` stands for the leading batch dims, ``"D/2"`` for half a dim, ``"2*D"`` for twice one, ``"E+1"``
    for a dim plus one and digits for a fixed size (a broadcast axis of 1).
    ``kind``: ``float`` (in the dtype under test, or in ``dtype`` where one is fixed), ``index`` (``dtype``, int64 by
    default, in ``[0, index_of)``; ``sorted``: non-decreasing), ``offsets`` (monotone from 0 to ``index_of``: the
    bounds of consecutive groups, e.g. tokens per expert), ``int`` (``dtype`` in ``[lo, hi]``: quantized values),
    ``bool`` (True with probability ``density``), ``fp8`` (``dtype`` float8, values of the case's distribution
    scaled by ``hi``, saturated), ``const`` (``value`` as given: a scalar, a flag) and ``dim`` (the int size of
    ``index_of``: a launcher or module parameter that names a size; or, with ``shape`` set, a tuple of sizes such
    as layer_norm's ``normalized_shape``, of the type of ``value``).
    ``values``: a fixed distribution for parameter-like args ("normal", "unit"); ``"range"`` draws uniformly in
    ``[lo, hi]`` (a positive scale), ``"mask"`` draws 0 or -inf (an additive mask, 0 with probability ``density``).
    ``keyword``: passed by name.
    """

    name: str
    shape: tuple[str, ...]
    kind: str = "float"
    index_of: str | None = None
    optional: bool = False  # may be passed as None (linear's bias)
    values: str | None = None  # a fixed distribution for parameter-like args ("normal", "unit", "range", "mask")
    dtype: str | None = None  # a fixed torch dtype name ("float32", "int32", "float8_e4m3fn"); None: the case's
    lo: float | None = None
    hi: float | None = None
    value: Any = None  # a const argument's value
    density: float | None = None
    keyword: bool = False
    sorted: bool = False
    contiguous: bool = False  # always drawn contiguous (a module's parameters: they are allocated, never views)

    def resolve(self, dims: Mapping[str, int], batch: tuple[int, ...]) -> tuple[int, ...]:
        out: list[int] = []
        for d in self.shape:
            if d == "...":
                out.extend(batch)
            elif d.isdigit():
                out.append(int(d))
            elif d.endswith("/2"):
                out.append(dims[d[:-2]] // 2)
            elif d.startswith("2*"):
                out.append(2 * dims[d[2:]])
            elif d.endswith("+1"):
                out.append(dims[d[:-2]] + 1)
            else:
                out.append(dims[d])
        return tuple(out)

    def dim_value(self, dims: Mapping[str, int], batch: tuple[int, ...] = ()) -> Any:
        """A ``dim`` argument's value: the size of ``index_of``, or, for a tuple of sizes (``shape`` set, ``value``
        the example's tuple or list), that tuple at these dims."""
        if self.shape:
            return type(self.value or ())(self.resolve(dims, batch))
        return dims[self.index_of]

    @property
    def is_tensor(self) -> bool:
        return self.kind not in ("const", "dim")

    @property
    def drawn_constant(self) -> bool:
        """A float constant a reference-judged case may redraw (gpuemu.cases.draw_constants): finite, non-zero."""
        import math

        return self.kind == "const" and isinstance(self.value, float) and math.isfinite(self.value) \
            and self.value != 0.0

    @property
    def declared_range(self) -> tuple[float, float] | None:
        """``(lo, hi)`` when both are numbers (a declared ``range``), else None."""
        ok = isinstance(self.lo, (int, float)) and isinstance(self.hi, (int, float))
        return (float(self.lo), float(self.hi)) if ok else None


@dataclass(frozen=True)
class OpSpec:
    """Everything gpuemu knows about one op of ``shared/OPS.md``.

    ``reference(**inputs, **kwargs)`` takes float64 tensors and returns the float64 (or int64) result.
    ``error_scale(inputs, kwargs, ref)`` returns, per output element, the magnitude that rounding
    errors of a correct kernel scale with; the bound there is ``atol + rtol * scale`` (plus the
    rounding allowance, see :mod:`gpuemu.tolerance`).
    ``rounded(inputs, kwargs, ref)``, where given, is the magnitude of the intermediates that correct code
    legitimately stores in the input dtype: the framework's own eager form (``F.silu(a)`` stored in fp16
    before ``* b``; Hugging Face's RMSNorm casting the normalised value back before ``* weight``; the
    products of eager rope) and the tensor-core form of flash kernels (attention's P cast to the input
    dtype before P @ V). The bound allows each such rounding exactly, at the dtype's unit roundoff.
    ``eager(*args, **kwargs)`` is the op as PyTorch eager code writes it, in the input dtype (the answer the
    field trusts: a kernel no further from fp64 than it is correct; see :mod:`gpuemu.oracle`).
    ``wider_output``: a float output more precise than the input dtype is accepted (an fp32 loss for fp16
    logits, fp32 statistics) and judged in its own dtype; a less precise one is a failure.
    ``mp_element(inputs, kwargs, index)`` recomputes one output element with mpmath.
    ``long_rows`` raises, per reduced dim, the size of the few cases with rows of several blocks (default 16384;
    class counts of a vocabulary reach 64k).
    ``real_sizes`` gives, per dim, the range of the few cases at the sizes real models launch (matmul dims past
    1024 with tile edges, attention's sequence lengths up to 2048 with head dims 64/128; ``"..."`` the leading
    rows of a batched input); the op's other dims keep their limits, batch dims their smallest size.
    ``exact_reference``: the fp64 reference is exact (a copy, a selection): fp64 cannot be the one that is wrong,
    so the oracle's mpmath guards do not run (``mp_element`` still documents the element and is tested).
    ``block_aliases`` maps the suffix of a conventional block constexpr whose letter is not a dim of the op to the
    dim it tiles (attention's ``BLOCK_M`` tiles ``Nq``; cross-entropy's ``BLOCK_V`` tiles ``C``): launches steer
    shapes and hints through it. ``online_softmax_dim``: a failure only past one block of this dim points to a
    missing online-softmax rescale, not a lost carry. ``even_dims`` are drawn (and shrunk) even only.
    """

    name: str
    signature: str
    meaning: str
    args: tuple[ArgSpec, ...]
    dims: Mapping[str, str]  # dim name -> role
    reference: Callable[..., Any]
    error_scale: Callable[..., Any]
    scale_doc: str
    mp_element: Callable[..., Any] | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    has_batch: bool = False
    out_kind: str = "float"  # "float" or "index"
    dtypes: tuple[str, ...] = FLOAT_DTYPES
    magnitude: str = "any"  # how input size limits values: any | sum | product | dot | norm
    dim_limits: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    constraints: Callable[[Mapping[str, int], Mapping[str, Any]], str | None] | None = None
    rounded: Callable[..., Any] | None = None
    rounded_doc: str = ""
    eager: Callable[..., Any] | None = None
    eager_doc: str = ""
    wider_output: bool = False
    long_rows: Mapping[str, int] = field(default_factory=dict)  # dim -> size cap of the few long-row cases
    real_sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # dim -> range of the real-size cases
    exact_reference: bool = False
    block_aliases: Mapping[str, str] = field(default_factory=dict)  # constexpr suffix -> dim (BLOCK_M -> Nq)
    online_softmax_dim: str | None = None  # the dim an online softmax streams over in blocks (attention's Nk)
    even_dims: tuple[str, ...] = ()  # dims drawn even only (rope's head dim D: two halves)
    multiples: Mapping[str, int] = field(default_factory=dict)  # dim -> drawn (and shrunk) a multiple of this
    # an op defined by a user's PyTorch reference (gpuemu.schema): its Schema; None for the registry's ops. Such an
    # op is judged by gpuemu.judge (fp64 truth, the reference in the working dtype as the control, the eager-relative
    # bound) instead of ``error_scale``; ``reference`` takes its arguments positionally in ``args`` order.
    schema: Any = None
    max_elements: int | None = None  # the cases' input elements, summed, stay under this (the largest dims halved)

    def rounded_magnitude(self, inputs64: Mapping[str, Any], kwargs: Mapping[str, Any], ref: Any,
                          dtype: str | None = None) -> Any:
        """``rounded`` on fp64 inputs with the op's default kwargs filled in; None for ops without one.
        ``dtype`` (the input dtype) reaches ``rounded`` as ``kwargs["_dtype"]``: an intermediate stored below the
        dtype's smallest normal loses an absolute half spacing, not a relative half ulp."""
        if not self.rounded:
            return None
        return self.rounded(inputs64, dict(self.kwargs, **kwargs, _dtype=dtype), ref)

    def dims_of_role(self, *roles: str) -> list[str]:
        return [d for d, r in self.dims.items() if r in roles]

    def check_dims(self, dims: Mapping[str, int], kwargs: Mapping[str, Any]) -> str | None:
        """None when (dims, kwargs) form a valid call, else why not."""
        for d in self.dims:
            if d not in dims:
                return f"missing dim {d}"
            if dims[d] < 1:
                return f"dim {d}={dims[d]} must be >= 1"
            m = self.multiples.get(d, 1)
            if m > 1 and dims[d] % m:
                return f"dim {d}={dims[d]} must be a multiple of {m}"
        return self.constraints(dims, kwargs) if self.constraints else None

    def float_args(self) -> list[ArgSpec]:
        return [a for a in self.args if a.kind == "float"]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "signature": self.signature,
            "meaning": self.meaning,
            "dims": dict(self.dims),
            "dtypes": list(self.dtypes),
            "kwargs": dict(self.kwargs),
            "output": self.out_kind,
            "error_scale": self.scale_doc,
            "rounded_intermediate": self.rounded_doc or None,
            "eager_form": self.eager_doc or None,
            "wider_output": self.wider_output,
            "mpmath_check": self.mp_element is not None,
        }
