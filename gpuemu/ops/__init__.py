"""The op registry: one :class:`OpSpec` per op in ``shared/OPS.md``.

>>> from gpuemu import ops
>>> ops.get("softmax").dims
{'N': 'reduced'}
"""

from __future__ import annotations

import difflib

from ..errors import UnknownOp
from ._spec import FLOAT_DTYPES, ROLES, ArgSpec, OpSpec

__all__ = ["ArgSpec", "OpSpec", "ROLES", "FLOAT_DTYPES", "get", "names"]


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
    close = difflib.get_close_matches(name, reg, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UnknownOp(f"op={name!r} is not a known op; {hint}known ops: {', '.join(sorted(reg))}. "
                    "Run 'gpuemu ops' for their signatures.")
