"""Sparse memory: tensors of production size whose bytes exist only where a kernel touched them.

A :class:`SparseBuffer` reserves its whole size as address space (an anonymous mapping with
``MAP_NORESERVE``: nothing is committed) and fills each 4 KiB page (the OS's: what a touch commits anyway) the first time anything touches it:
an input from the portable RNG of that page (``fill``: a function of the page index alone, so the bytes of a
page are the same whoever reads it first, and a case stays exact and replayable), an output with poison
(a NaN payload no arithmetic produces, or the integer minimum), a zero-initialised one with zeros (the
mapping's own). A torch tensor over the buffer is an ordinary CPU tensor to the launcher (shape, strides,
``data_ptr``); the runtime's :class:`~gpuemu.runtime.memory.Arena` looks every tensor argument up here
(:func:`lookup`) and, for a sparse one, fills the pages an access reaches before the access (and keeps a
page's bytes before the launch's first write to it, for a launch that must start again). Code outside the
runtime reads a sparse tensor through :meth:`SparseBuffer.ensure` first (an untouched page reads as zeros).

:func:`allocations` makes the launcher's own large ``torch.empty`` / ``empty_like`` / ``zeros`` / ... sparse
(a TorchDispatchMode): its outputs too cost only what the kernel writes.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

PAGE_SHIFT = 12
PAGE = 1 << PAGE_SHIFT  # bytes: a multiple of every element size
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # (Linux's value; Python < 3.13 does not name it)
# floats: NaNs with a payload no arithmetic produces (2 bytes: a NaN as fp16 and as bf16; 1 byte: fp8's NaN)
POISON_BITS = {1: 0x7F, 2: 0x7FBA, 4: 0x7FBADBAD, 8: 0x7FF0BADBADBADBAD}
_lock = threading.Lock()
_starts: list[int] = []  # host addresses of the live buffers, sorted
_live: list["SparseBuffer"] = []


class SparseBuffer:
    """``nbytes`` of reserved address space, committed and filled a page at a time (see the module docstring).

    ``fill(page, out)`` writes page ``page``'s initial bytes into ``out`` (a uint8 array of :data:`PAGE` bytes,
    the last page possibly shorter); None keeps the mapping's zeros."""

    def __init__(self, nbytes: int, fill: Callable[[int, np.ndarray], None] | None, name: str = "") -> None:
        self.nbytes = int(nbytes)
        self.name = name
        self.size = max(PAGE, -(-self.nbytes // PAGE) * PAGE)
        self.mm = mmap.mmap(-1, self.size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        self.fill = fill
        self.pages = self.size >> PAGE_SHIFT
        self.done: set[int] = set()  # pages filled (or, without fill, touched): few, of a huge range
        self.kept: dict[int, bytes] | None = None  # page -> bytes before the first write since keep()
        self.written: set[int] = set()  # pages an access for writing reached
        self.closed = False
        _register(self)

    # ---------------------------------------------------------------- filling
    def _fill(self, pages: np.ndarray) -> None:
        done = self.done
        new = [p for p in pages.tolist() if p not in done]
        if not new:
            return
        if self.fill is not None:
            view = np.frombuffer(self.mm, dtype=np.uint8)
            for p in new:
                lo = p << PAGE_SHIFT
                self.fill(p, view[lo:min(lo + PAGE, self.size)])
        done.update(new)

    def ensure(self, lo: int, hi: int) -> None:
        """Fill the pages of bytes [lo, hi) (offsets into the buffer) that nothing touched yet."""
        if hi <= lo:
            return
        self._fill(np.arange(lo >> PAGE_SHIFT, ((hi - 1) >> PAGE_SHIFT) + 1))

    def touch(self, offsets: np.ndarray, size: int, write: bool) -> None:
        """Before an access of ``size`` bytes at each of ``offsets`` (byte offsets into the buffer, any shape):
        fill what it reaches, and for a write keep what it overwrites where :meth:`keep` asked to."""
        off = np.asarray(offsets, dtype=np.int64).reshape(-1)
        if not off.size:
            return
        pages = np.unique(np.concatenate([off >> PAGE_SHIFT, (off + (size - 1)) >> PAGE_SHIFT]))
        pages = pages[(pages >= 0) & (pages < self.pages)]
        self._fill(pages)
        if write:
            if self.kept is not None:
                view = np.frombuffer(self.mm, dtype=np.uint8)
                for p in pages.tolist():
                    if p not in self.kept:
                        lo = p << PAGE_SHIFT
                        self.kept[p] = view[lo:lo + PAGE].tobytes()
            self.written.update(pages.tolist())

    # ---------------------------------------------------------------- undoing writes (Arena.keep_writes)
    def keep(self) -> None:
        """From now on keep each page's bytes before its first write."""
        if self.kept is None:
            self.kept = {}

    def put_back(self) -> None:
        """Every kept page gets its bytes back; keeping stops."""
        if self.kept:
            view = np.frombuffer(self.mm, dtype=np.uint8)
            for p, data in self.kept.items():
                lo = p << PAGE_SHIFT
                view[lo:lo + len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.kept = None

    # ---------------------------------------------------------------- views
    def tensor(self, dtype: Any, shape: tuple[int, ...], strides: tuple[int, ...] | None = None,
               offset: int = 0) -> Any:
        """A torch tensor over the buffer (elements of ``dtype``; contiguous unless ``strides``)."""
        import torch

        flat = torch.frombuffer(self.mm, dtype=torch.uint8, count=self.nbytes).view(dtype)
        if strides is None:
            strides = _contiguous(shape)
        return flat.as_strided(tuple(shape), tuple(strides), offset)

    def changed(self) -> list[int]:
        """The filled pages whose bytes are no longer what the fill made (a write from anywhere: a kernel's store
        or the host's), found by filling each again; [] for a buffer without a fill."""
        if self.fill is None:
            return []
        view = np.frombuffer(self.mm, dtype=np.uint8)
        out = []
        for p in sorted(self.done):
            lo = p << PAGE_SHIFT
            hi = min(lo + PAGE, self.size)
            fresh = np.empty(hi - lo, dtype=np.uint8)
            self.fill(p, fresh)
            if not np.array_equal(fresh, view[lo:hi]):
                out.append(p)
        return out

    def committed(self) -> int:
        """Bytes of pages filled or written so far (what the buffer costs in memory)."""
        return len(self.done) * PAGE

    def close(self) -> None:
        """Give the memory back (tensors over it must not be used afterwards)."""
        if not self.closed:
            self.closed = True
            _unregister(self)
            try:
                self.mm.close()
            except BufferError:  # a tensor still exports it: the mapping goes with the last one
                pass


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def _register(b: SparseBuffer) -> None:
    with _lock:
        i = bisect.bisect(_starts, b.addr)
        _starts.insert(i, b.addr)
        _live.insert(i, b)


def _unregister(b: SparseBuffer) -> None:
    with _lock:
        if b in _live:
            i = _live.index(b)
            del _live[i], _starts[i]


def active() -> bool:
    """Whether any sparse buffer lives (the arena looks its arguments up only then)."""
    return bool(_live)


def lookup(host_ptr: int) -> SparseBuffer | None:
    """The live buffer that holds host address ``host_ptr``, if any."""
    with _lock:
        i = bisect.bisect(_starts, host_ptr) - 1
        if i >= 0:
            b = _live[i]
            if b.addr <= host_ptr < b.addr + b.size:
                return b
    return None


def poison_fill(itemsize: int, is_float: bool) -> Callable[[int, np.ndarray], None]:
    """A page fill with the poison of an element type: a signalling NaN with a payload for floats (no
    arithmetic result carries it), the minimum for integers."""
    if is_float:
        pattern = POISON_BITS[itemsize]
    else:
        pattern = 1 << (8 * itemsize - 1)  # the minimum, as an unsigned bit pattern
    unit = np.array([pattern], dtype=f"<u{itemsize}").view(np.uint8)

    def fill(page: int, out: np.ndarray) -> None:
        out[:] = np.resize(unit, out.size)

    return fill


def is_poison(values: Any) -> np.ndarray:
    """Which elements of the tensor ``values`` still hold the poison of their type (see :func:`poison_fill`)."""
    import torch

    t = values.detach().cpu()
    size = t.element_size()
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    bits = t.contiguous().view(ints).numpy().view(f"<u{size}")
    if t.dtype.is_floating_point:
        return bits == POISON_BITS[size]
    return bits == (1 << (8 * size - 1))


# ---------------------------------------------------------------------- the launcher's own allocations
_FACTORIES = {"empty.memory_format": "poison", "empty_strided.default": "poison", "empty_like.default": "poison",
              "new_empty.default": "poison", "new_empty_strided.default": "poison", "zeros.default": "zero",
              "zeros_like.default": "zero", "new_zeros.default": "zero"}


@contextmanager
def allocations(min_bytes: int, owned: list[SparseBuffer]) -> Iterator[None]:
    """While inside: a CPU ``torch.empty``-like call of ``min_bytes`` or more returns a tensor over a new sparse
    buffer (poisoned; ``zeros``-like: zeros), appended to ``owned`` (the caller closes them)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Sparse(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            kind = _FACTORIES.get(f"{func._opname}.{func._overloadname}") if func.namespace == "aten" else None
            if kind is not None:
                made = _factory(func, kind, args, kwargs, min_bytes, owned)
                if made is not None:
                    return made
            return func(*args, **kwargs)

    with _Sparse():
        yield


def _factory(func: Any, kind: str, args: tuple, kwargs: dict, min_bytes: int, owned: list) -> Any:
    import torch

    name = func._opname
    like = args[0] if name.endswith("_like") or name.startswith("new_") else None
    if name in ("empty_like", "zeros_like"):
        shape, dtype = tuple(like.shape), kwargs.get("dtype") or like.dtype
        device = kwargs.get("device") or like.device
    elif name.startswith("new_"):
        shape = tuple(args[1])
        dtype, device = kwargs.get("dtype") or like.dtype, kwargs.get("device") or like.device
    else:
        shape = tuple(args[0])
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        device = kwargs.get("device") or torch.device("cpu")
    if torch.device(device).type != "cpu" or kwargs.get("pin_memory"):
        return None
    strides = tuple(args[1]) if name == "empty_strided" else None
    itemsize = torch.empty((), dtype=dtype).element_size()
    n = 1
    for s in shape:
        n *= int(s)
    if strides is not None:
        n = 1 + sum((int(s) - 1) * int(st) for s, st in zip(shape, strides)) if all(shape) else 0
    nbytes = n * itemsize
    if nbytes < min_bytes:
        return None
    fill = poison_fill(itemsize, dtype.is_floating_point) if kind == "poison" else None
    buf = SparseBuffer(nbytes, fill, name=f"{name}{list(shape)}")
    owned.append(buf)
    return buf.tensor(dtype, shape, strides)


__all__ = ["PAGE", "SparseBuffer", "allocations", "active", "lookup", "poison_fill", "is_poison"]
