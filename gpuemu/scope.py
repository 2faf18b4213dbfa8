"""Patches of third-party objects, undoable: every patch gpuemu makes outside its own code goes through one
:class:`Scope` (the hook's arming, the CPU stand-ins for CUDA host calls)."""

from __future__ import annotations

from typing import Any


class Scope:
    """Patches of third-party objects, each undone in reverse order by :meth:`undo` (and only if still ours)."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any, Any, bool]] = []

    def set(self, obj: Any, attr: str, value: Any) -> None:
        had = attr in vars(obj) if hasattr(obj, "__dict__") else hasattr(obj, attr)
        old = getattr(obj, attr, None)
        setattr(obj, attr, value)
        self._undo.append((obj, attr, old, value, had))

    def undo(self) -> None:
        while self._undo:
            obj, attr, old, value, had = self._undo.pop()
            if getattr(obj, attr, None) is not value:
                continue  # someone patched over us: leave theirs in place
            if had:
                setattr(obj, attr, old)
            else:
                try:
                    delattr(obj, attr)
                except AttributeError:
                    setattr(obj, attr, old)

    def __len__(self) -> int:
        return len(self._undo)
