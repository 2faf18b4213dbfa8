"""Capturing a call's tensors before it runs: exact copies that never touch the user's tensors.

Kernels write in place, so a shadow check copies the arguments *before* the real launch. A copy keeps
the tensor's exact view geometry (size, stride, storage offset) over a copy of its whole storage, and
arguments that share a storage share one copy, so a re-launch on the copies sees the same aliasing and
the same bytes (an in-place kernel, or an out-of-bounds read into the rest of the storage, behaves as it
did on the real call). Copies are detached: autograd never sees them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def is_tensor(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def storage_bytes(tensors: Iterable[Any]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (what :func:`capture` copies)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if is_tensor(t):
            st = t.untyped_storage()
            seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
    return sum(seen.values())


def capture(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """Exact detached copies of the tensors in ``tensors`` (other values pass through unchanged)."""
    import torch

    copies: dict[tuple, Any] = {}
    out: dict[str, Any] = {}
    with torch.no_grad():
        for name, t in tensors.items():
            if not is_tensor(t):
                out[name] = t
                continue
            t = t.detach()
            st = t.untyped_storage()
            key = (st.data_ptr(), str(t.device))
            if key not in copies:
                copies[key] = st.clone() if st.nbytes() else st
            view = torch.empty(0, dtype=t.dtype, device=t.device)
            view.set_(copies[key], t.storage_offset(), t.size(), t.stride())
            out[name] = view
    return out


def clone_group(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """Copies of already-captured tensors (aliasing among them kept): scratch space for a re-launch."""
    return capture(tensors)


def same_bits(a: Any, b: Any) -> bool:
    """True when two tensors hold the same bytes in their views (NaNs compare equal)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}[a.element_size()]
        try:
            return bool(torch.equal(a.contiguous().view(width), b.to(a.device).contiguous().view(width)))
        except RuntimeError:
            return bool(torch.equal(a.contiguous(), b.to(a.device).contiguous()))
    return bool(torch.equal(a, b.to(a.device)))


def first_tensor(values: Iterable[Any]) -> Any:
    """The first tensor among ``values`` (the signature tensor of a call), else None."""
    for v in values:
        if is_tensor(v):
            return v
    return None


def target_of(fn: Any) -> str:
    """A replayable name for a kernel or launcher: ``package.module:qualname``, or ``/abs/file.py:qualname``
    when it was defined in a script (``__main__``) or a file loaded by path."""
    import os
    import sys

    mod_name = getattr(fn, "__module__", None) or ""
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    mod = sys.modules.get(mod_name)
    f = getattr(mod, "__file__", None)
    if f and (mod_name == "__main__" or mod_name.startswith("gpuemu_target_")):
        return f"{os.path.abspath(f)}:{qual}"
    return f"{mod_name}:{qual}"


def source_file(fn: Any) -> str | None:
    """The absolute path of the file defining ``fn`` (a fallback when its module cannot be imported)."""
    import inspect
    import os

    try:
        f = inspect.getsourcefile(fn)
    except (TypeError, OSError):
        return None
    return os.path.abspath(f) if f else None
