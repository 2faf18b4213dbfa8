"""The schema of a kernel judged against its PyTorch reference: what a case of it is made of.

A :class:`Schema` names the dims of the call (each with its role, its size in the example and the range cases
draw it from), the arguments (an :class:`~gpuemu.ops.ArgSpec` each: shape as dim names, kind, dtype, value
range), the dtypes to sweep and how the reference and the kernel are called. It is inferred from example calls
(:mod:`gpuemu.schema.infer`), can be corrected by a declaration (:mod:`gpuemu.schema.declare`), is printed for the
user to read (:meth:`Schema.describe`) and travels in every stored failure so a replay rebuilds the same op.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

import re

from ..ops import ArgSpec

SCHEMA_VERSION = 1
ROLES = ("batch", "tiled", "reduced", "contracted", "head", "index")


@dataclass(frozen=True)
class Dim:
    """One dim of the call. ``lo``/``hi``: the sizes cases draw (equal: fixed at that size); ``multiple_of``:
    every size drawn is a multiple of it; ``example``: its size in the (first) example call."""

    name: str
    role: str
    example: int
    lo: int
    hi: int
    multiple_of: int = 1
    why: str = ""  # how inference decided (printed with the schema)

    @property
    def fixed(self) -> bool:
        return self.lo == self.hi

    def to_dict(self) -> dict:
        d = {"role": self.role, "example": self.example, "lo": self.lo, "hi": self.hi}
        if self.multiple_of > 1:
            d["multiple_of"] = self.multiple_of
        if self.why:
            d["why"] = self.why
        return d

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> "Dim":
        return cls(name, str(d["role"]), int(d["example"]), int(d["lo"]), int(d["hi"]),
                   int(d.get("multiple_of", 1)), str(d.get("why", "")))


@dataclass(frozen=True)
class Output:
    """One output of the reference on the example: its dtype and shape in dim names (digits where fixed)."""

    dtype: str
    shape: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class Schema:
    """What cases of a reference-defined kernel are made of (see the module docstring).

    ``call``: "function" (kernel and reference take the arguments) or "module" (a KernelBench problem: the
    arguments are the forward inputs, then the constructor's, then the parameters by name; see
    :mod:`gpuemu.schema.calls`). ``primary``: the dtype the example's floating arguments that follow the sweep had.
    """

    args: tuple[ArgSpec, ...]
    dims: Mapping[str, Dim]
    dtypes: tuple[str, ...]
    primary: str
    outputs: tuple[Output, ...] = ()
    call: str = "function"
    module: Mapping[str, Any] = field(default_factory=dict)  # call == "module": inputs, init, params (names)
    notes: tuple[str, ...] = ()
    declared: Mapping[str, Any] = field(default_factory=dict)  # the user's declaration, as given
    writes: tuple[str, ...] = ()  # arguments the reference writes in place: outputs too, after what it returns

    def write_positions(self) -> tuple[int, ...]:
        """The positions in :attr:`args` of the arguments written in place (``call_function``'s ``writes``)."""
        return tuple(i for i, a in enumerate(self.args) if a.name in self.writes)

    def to_dict(self) -> dict:
        return {**({"writes": list(self.writes)} if self.writes else {}),
            "schema_version": SCHEMA_VERSION,
            "call": self.call,
            "dims": {k: d.to_dict() for k, d in self.dims.items()},
            "args": [_arg_dict(a) for a in self.args],
            "dtypes": list(self.dtypes),
            "primary": self.primary,
            "outputs": [o.to_dict() for o in self.outputs],
            "module": dict(self.module),
            "notes": list(self.notes),
            "declared": dict(self.declared),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Schema":
        from ..errors import InvalidArgument

        if d.get("schema_version") != SCHEMA_VERSION:
            raise InvalidArgument(f"schema version {d.get('schema_version')!r} is not {SCHEMA_VERSION}: this record "
                                  "was written by another gpuemu; re-run the fuzz with this one")
        try:
            return cls(args=tuple(_arg_from(a) for a in d["args"]),
                       dims={k: Dim.from_dict(k, v) for k, v in d["dims"].items()},
                       dtypes=tuple(d["dtypes"]), primary=str(d["primary"]),
                       outputs=tuple(Output(o["dtype"], tuple(o["shape"])) for o in d.get("outputs", ())),
                       call=d.get("call", "function"), module=dict(d.get("module") or {}),
                       notes=tuple(d.get("notes", ())), declared=dict(d.get("declared") or {}),
                       writes=tuple(d.get("writes", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed schema record: {e}") from None

    def replace(self, **changes) -> "Schema":
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """The schema as the user reads (and corrects) it: one line per dim, one per argument."""
        lines = ["dims:"]
        for d in self.dims.values():
            rng = f"fixed at {d.lo}" if d.fixed else f"{d.lo}..{d.hi}"
            mult = f", multiple of {d.multiple_of}" if d.multiple_of > 1 else ""
            why = f"  ({d.why})" if d.why else ""
            lines.append(f"  {d.name:<12} {d.role:<10} example {d.example}, drawn {rng}{mult}{why}")
        lines.append("args:")
        for a in self.args:
            lines.append(f"  {_arg_line(a, self.primary)}")
        if self.outputs:
            lines.append("outputs: " + ", ".join(f"{o.dtype}[{','.join(o.shape)}]" for o in self.outputs))
        if self.writes:
            lines.append(f"written in place: {', '.join(self.writes)} (outputs, after what the reference returns; "
                         "the kernel's copies judged)")
        lines.append(f"dtypes swept: {', '.join(self.dtypes)}")
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)


def _arg_line(a: ArgSpec, primary: str) -> str:
    shape = f"[{','.join(a.shape)}]" if a.is_tensor else ""
    dtype = a.dtype or f"{primary} (swept)"
    if a.kind == "const":
        if a.drawn_constant and a.declared_range:
            return f"{a.name:<12} const {a.value!r}, drawn in [{a.lo}, {a.hi}] in half the cases"
        if a.drawn_constant:
            return f"{a.name:<12} const {a.value!r}, drawn in [x0.5, x2] in half the cases (range: [v, v] pins it)"
        return f"{a.name:<12} const {a.value!r}"
    if a.kind == "dim":
        if a.shape:
            return f"{a.name:<12} sizes ({', '.join(a.shape)}{',' if len(a.shape) == 1 else ''})"
        return f"{a.name:<12} int = size of {a.index_of}"
    extra = {
        "index": f"ids in [0, {a.index_of})" + (", sorted" if a.sorted else ""),
        "offsets": f"offsets: monotone from 0 to {a.index_of}",
        "int": f"ints in [{_num(a.lo)}, {_num(a.hi)}]",
        "bool": f"True with p={a.density:.2g}" if a.density is not None else "bools",
        "fp8": f"fp8 values, scale {_num(a.hi)}",
    }.get(a.kind, "")
    if a.kind == "float":
        extra = {"range": f"uniform in [{_num(a.lo)}, {_num(a.hi)}]",
                 "mask": f"additive mask: 0 with p={a.density or 0:.2g}, else -inf"}.get(a.values or "", a.values or "")
    opt = " (may be None)" if a.optional else ""
    return f"{a.name:<12} {a.kind:<7} {dtype:<16} {shape:<18} {extra}{opt}".rstrip()


def _num(v: Any) -> str:
    if v is None:
        return "?"
    return f"{v:g}" if isinstance(v, float) else str(v)


_ARG_FIELDS = [f.name for f in dataclasses.fields(ArgSpec)]


def _arg_dict(a: ArgSpec) -> dict:
    out = {}
    for name in _ARG_FIELDS:
        v = getattr(a, name)
        default = next(f for f in dataclasses.fields(ArgSpec) if f.name == name).default
        if name in ("name", "shape", "kind") or v != default:
            out[name] = list(v) if isinstance(v, tuple) else _jsonable(v)
    return out


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return {"repr": repr(v)}


def _arg_from(d: Mapping[str, Any]) -> ArgSpec:
    kw = {k: v for k, v in d.items() if k in _ARG_FIELDS}
    kw["shape"] = tuple(kw.get("shape", ()))
    if isinstance(kw.get("value"), dict) and set(kw["value"]) == {"repr"}:
        kw["value"] = _from_repr(kw["value"]["repr"])
    elif isinstance(kw.get("value"), list):
        kw["value"] = tuple(kw["value"])
    return ArgSpec(**kw)


def _from_repr(text: str) -> Any:
    """A constant that JSON cannot hold (a torch dtype, mostly) back from its repr."""
    if text.startswith("torch."):
        import torch

        return getattr(torch, text.split(".", 1)[1])
    return text


def bound_value(v: Any, dims: Mapping[str, int]) -> Any:
    """A declared range bound: a number, or a sum/product of dims (``"P*S"``, ``"T+1"``) at these dims."""
    if not isinstance(v, str):
        return v
    total, op, val = 0, "+", None
    for tok in re.findall(r"[A-Za-z_][\w.]*|\d+|[*+-]", v):
        if tok in "*+-":
            op = tok
            continue
        val = int(tok) if tok.isdigit() else dims[tok]
        total = total * val if op == "*" else total + val if op == "+" else total - val
        op = "+"
    return total
