"""The op registry: one :class:`OpSpec` per op in ``shared/OPS.md``.

>>> from gpuemu import ops
>>> ops.get("softmax").dims
{'N': 'reduced'}
"""

from __future__ import annotations

import difflib

from ..errors import UnknownOp
from ._spec import FLOAT_DTYPES, ROLES, ArgSpec, OpSpec

__all__ = ["ArgSpec", "OpSpec", "ROLES", "FLOAT_DTYPES", "get", "names", "register"]

# ops defined by a user's PyTorch reference (gpuemu.schema), registered while a process binds or replays them
_BOUND: dict[str, OpSpec] = {}


def _registry() -> dict[str, OpSpec]:
    from ._defs import OPS  # torch and mpmath load only when an op is asked for

    return OPS


def names() -> list[str]:
    """Every known op name, sorted."""
    return sorted(_registry())


def get(name: str) -> OpSpec:
    """The :class:`OpSpec` of ``name``; an unknown name raises :class:`UnknownOp` with suggestions."""
    reg = _registry()
    if name in reg:
        return reg[name]
    if name in _BOUND:
        return _BOUND[name]
    if name.startswith("ref:"):
        raise UnknownOp(f"op {name!r} is defined by a PyTorch reference that is not bound in this process: replay "
                        "its record with 'gpuemu reproduce' (the record holds the reference and the schema)")
    close = difflib.get_close_matches(name, reg, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UnknownOp(f"op={name!r} is not a known op; {hint}known ops: {', '.join(sorted(reg))}. "
                    "Run 'gpuemu ops' for their signatures.")


def register(spec: OpSpec) -> None:
    """Add an op defined by a user's reference (``gpuemu.schema``); its name must not be a registry op's."""
    if spec.name in _registry():
        raise ValueError(f"{spec.name!r} is an op of the registry")
    _BOUND[spec.name] = spec
