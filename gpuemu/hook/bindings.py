"""Bindings: which raw Triton kernel computes which op, and which of its parameters are the op's arguments.

A rule pack's (or gpuemu.yaml's) ``bindings:`` section maps a kernel's name to an op, in a short or a
long form::

    bindings:
      _rmsnorm_kernel: rmsnorm                 # short: parameters found by name (below)
      _my_norm_fwd:                            # long: name them
        op: rmsnorm
        inputs: {x: X, weight: W}              # op argument -> kernel parameter (a tensor)
        output: Y                              # the kernel parameter the result is written to
        kwargs: {eps: eps}                     # op keyword -> kernel parameter (a scalar)

By name, op argument ``a`` is the kernel parameter ``a``, ``a_ptr``, ``A`` or ``A_ptr`` (else its initial:
``weight`` -> ``w_ptr``, when only one parameter matches); the output is
the first of ``out_ptr, y_ptr, output_ptr, o_ptr, out, y, output, o``; an op keyword (``eps``) is the
parameter of that name. A launcher (a Python function with the op's signature) is bound in code with
``@gpuemu.hook.shadow(op=...)`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import RulePackError

OUTPUT_NAMES = ("out_ptr", "y_ptr", "output_ptr", "o_ptr", "out", "y", "output", "o")
_LONG_KEYS = {"op", "inputs", "output", "kwargs"}


@dataclass(frozen=True)
class Binding:
    """A kernel bound to an op; empty mappings are filled by name when the kernel is first seen."""

    kernel: str
    op: str
    inputs: Mapping[str, str] = field(default_factory=dict)
    output: str | None = None
    kwargs: Mapping[str, str] = field(default_factory=dict)

    def resolve(self, params: list[str]) -> "ResolvedBinding":
        """Match the op's arguments to the kernel's ``params``; raises RulePackError naming what is missing."""
        from .. import ops

        spec = ops.get(self.op)
        where = f"bindings.{self.kernel}"
        inputs: dict[str, str | None] = {}
        for a in spec.args:
            p = self.inputs.get(a.name) or _by_name(a.name, params)
            if p is None and not a.optional:
                raise RulePackError(f"{where}: no kernel parameter for {self.op}'s argument {a.name!r} "
                                    f"(tried {a.name}, {a.name}_ptr, {a.name.upper()}, {a.name.upper()}_ptr, {a.name[0]}_ptr; "
                                    f"parameters: {', '.join(params)}); name it under inputs:")
            if p is not None and p not in params:
                raise RulePackError(f"{where}.inputs.{a.name}: {p!r} is not a parameter of the kernel "
                                    f"({', '.join(params)})")
            inputs[a.name] = p
        out = self.output or next((n for n in OUTPUT_NAMES if n in params), None)
        if out is None or out not in params:
            raise RulePackError(f"{where}: no output parameter {out or ''} among {', '.join(params)}; "
                                "name it with output:")
        kw: dict[str, str] = {}
        for k in spec.kwargs:
            p = self.kwargs.get(k) or (k if k in params else None)
            if p is not None:
                if p not in params:
                    raise RulePackError(f"{where}.kwargs.{k}: {p!r} is not a parameter of the kernel")
                kw[k] = p
        return ResolvedBinding(self.kernel, self.op, inputs, out, kw)


@dataclass(frozen=True)
class ResolvedBinding:
    kernel: str
    op: str
    inputs: Mapping[str, str | None]
    output: str
    kwargs: Mapping[str, str]

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "op": self.op, "inputs": dict(self.inputs), "output": self.output,
                "kwargs": dict(self.kwargs)}


def _by_name(name: str, params: list[str]) -> str | None:
    for cand in (name, f"{name}_ptr", name.upper(), f"{name.upper()}_ptr"):
        if cand in params:
            return cand
    short = [c for c in (name[0], f"{name[0]}_ptr", name[0].upper(), f"{name[0].upper()}_ptr") if c in params]
    return short[0] if len(short) == 1 else None


def _strs(v: Any, where: str) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, Mapping) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise RulePackError(f"{where}: expected a mapping of names to kernel parameter names")
    return dict(v)


def parse_bindings(raw: Any, *, source: str = "rule pack") -> dict[str, Binding]:
    """Validate a ``bindings:`` section; errors name the file(s), the key and the reason."""
    from .. import ops

    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise RulePackError(f"{source}: bindings: expected a mapping of kernel name -> op")
    out: dict[str, Binding] = {}
    for kernel, entry in raw.items():
        where = f"{source}: bindings.{kernel}"
        if isinstance(entry, str):
            entry = {"op": entry}
        if not isinstance(entry, Mapping):
            raise RulePackError(f"{where}: expected an op name or a mapping with op, inputs, output, kwargs")
        unknown = set(entry) - _LONG_KEYS
        if unknown:
            raise RulePackError(f"{where}.{sorted(unknown)[0]}: unknown key; allowed: {', '.join(sorted(_LONG_KEYS))}")
        op = entry.get("op")
        if not isinstance(op, str) or op not in ops.names():
            raise RulePackError(f"{where}.op: {op!r} is not a known op (see 'gpuemu ops')")
        output = entry.get("output")
        if output is not None and not isinstance(output, str):
            raise RulePackError(f"{where}.output: expected a kernel parameter name")
        out[str(kernel)] = Binding(str(kernel), op, _strs(entry.get("inputs"), f"{where}.inputs"), output,
                                   _strs(entry.get("kwargs"), f"{where}.kwargs"))
    return out
