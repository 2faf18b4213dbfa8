"""Bounds-checked device memory for the CPU runtime.

Every pointer argument gets its own window of the 64-bit address space: argument ``i`` sees its storage at
virtual address ``(i << 44) + 2**43``, so any pointer arithmetic of +-8 TiB from an argument still names
that argument (the "tensor it came from") and never silently lands in a neighbour. A load, store or atomic
decodes each active lane's address to (argument, byte offset), checks it against the argument's extent,
and only then touches host memory through Triton's own load/store primitives. A violation is a
``KernelFinding("oob", ...)``: kernel, source line, argument, offset and lane, instead of garbage or SIGSEGV.

The extent of a tensor argument is the span of its view (storage offset to the last reachable element),
not its whole storage: reading past a slice is a bug even where the allocation happens to continue.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import sparse as _sparse

WINDOW_SHIFT = 44
_CENTER = 1 << (WINDOW_SHIFT - 1)


@dataclass
class Region:
    """One pointer argument: where its bytes live on the host and which of them it may touch."""

    index: int
    name: str
    host_ptr: int  # real address of the backing storage's byte 0
    lo: int  # valid bytes [lo, hi) relative to storage byte 0
    hi: int
    data_offset: int  # byte offset of the argument's first element within the storage
    itemsize: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    writeback: Callable[[], None] | None = None
    sparse: Any = None  # the runtime.sparse.SparseBuffer holding it (pages filled on first touch), if any

    @property
    def base(self) -> int:
        return (self.index << WINDOW_SHIFT) + _CENTER

    @property
    def virtual_ptr(self) -> int:
        return self.base + self.data_offset

    def describe(self) -> str:
        shape = "x".join(str(s) for s in self.shape) if self.shape else "scalar"
        return f"'{self.name}' ({self.dtype}, shape [{shape}], strides {list(self.strides)})"


@dataclass
class Violation:
    """What a bad access looked like; the executor adds kernel, line and program before raising."""

    kind: str  # "read" | "write" | "atomic"
    region: Region | None
    lane: tuple[int, ...]
    n_bad: int
    n_active: int
    byte_offset: int  # relative to the argument's first element
    access_size: int
    address: int
    misaligned: bool = False

    def message(self) -> str:
        verb = {"read": "read", "write": "write", "atomic": "atomic access"}[self.kind]
        lane = "[" + ",".join(str(i) for i in self.lane) + "]"
        lanes = f"lane {lane}" + (f" (and {self.n_bad - 1} more of {self.n_active} active lanes)" if self.n_bad > 1 else "")
        if self.region is None:
            return (f"{verb} through pointer 0x{self.address:x} that does not point into any tensor argument "
                    f"at {lanes}")
        r = self.region
        elem = self.byte_offset / self.access_size
        elem_s = str(int(elem)) if float(elem).is_integer() else f"{elem:.2f}"
        lo_e = (r.lo - r.data_offset) // max(r.itemsize, 1)
        hi_e = (r.hi - r.data_offset) // max(r.itemsize, 1)
        if self.misaligned:
            return (f"misaligned {verb} of {r.describe()} at byte offset {self.byte_offset} "
                    f"(not a multiple of {self.access_size}) at {lanes}")
        where = "before the start" if self.byte_offset < r.lo - r.data_offset else "past the end"
        return (f"out-of-bounds {verb} of {r.describe()}: element offset {elem_s} is {where} "
                f"(valid element offsets {lo_e}..{hi_e - 1}) at {lanes}")


class MemoryError_(Exception):
    """Raised by the arena on a bad access; carries the Violation (converted to a finding by the executor).
    ``site`` (file:line in the kernel) is filled in by the executor's load/store patches."""

    site = "?"

    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.message())
        self.violation = violation


@dataclass
class Arena:
    """The pointer arguments of one launch."""

    regions: list[Region] = field(default_factory=list)
    epoch: int = 0  # bumped on every write: a spin on an unchanged value is a wait on another program
    # while not None: each region's valid bytes as they were before the first write to it since
    # keep_writes() (region index -> (region, bytes), in the order kept), for put_back()
    saved: dict | None = None
    sparse: bool = False  # an argument lives in a sparse buffer: accesses fill its pages first (_touch)

    # ------------------------------------------------------------------ undoing writes
    def keep_writes(self) -> None:
        """From now on keep each region's bytes before its first write (copy on first write: a region only
        read is never copied), so put_back() can return to this moment. Every write the runtime makes goes
        through scatter(), or through keep_all() before Triton's own store and atomics."""
        if self.saved is None:
            self.saved = {}

    def keep(self, r: Region) -> None:
        if r.sparse is not None:  # page by page, at each page's first write (a sparse region is never copied whole)
            r.sparse.keep()
            self.saved[r.index] = (r, None)
        elif r.hi > r.lo:
            self.saved[r.index] = (r, ctypes.string_at(r.host_ptr + r.lo, r.hi - r.lo))

    def keep_all(self) -> None:
        """Keep every region not kept yet (before a write whose regions are not worked out)."""
        if self.saved is not None:
            for r in self.regions:
                if r.index not in self.saved:
                    self.keep(r)

    def put_back(self) -> None:
        """Every region kept gets its bytes back, the last kept first (where two arguments share bytes, the
        first kept holds them as they were)."""
        for r, data in reversed(list((self.saved or {}).values())):
            if data is None:
                r.sparse.put_back()
                r.sparse.keep()  # (still keeping: the launch goes on from here)
            else:
                ctypes.memmove(r.host_ptr + r.lo, data, len(data))

    def add(self, obj: Any, name: str) -> int:
        """Register a tensor-like argument; returns the virtual address the kernel sees as its data pointer."""
        region = _region_of(obj, name, len(self.regions) + 1)
        if _sparse.active():
            region.sparse = _sparse.lookup(region.host_ptr)
            self.sparse = self.sparse or region.sparse is not None
        self.regions.append(region)
        return region.virtual_ptr

    def _touch(self, r: Region, offsets: np.ndarray, size: int, write: bool) -> None:
        """Before an access of ``size`` bytes at ``offsets`` (bytes from the region's host byte 0) of a sparse
        region: fill the pages it reaches; for a write, first keep what it overwrites (keep_writes)."""
        if write and self.saved is not None and r.index not in self.saved:
            self.keep(r)
        buf = r.sparse
        buf.touch(offsets + (r.host_ptr - buf.addr), size, write)

    def _touch_real(self, real: np.ndarray, active: np.ndarray | None, size: int, write: bool) -> None:
        """:meth:`_touch` for host addresses (the lane-by-lane path)."""
        sel = real if active is None else real[np.broadcast_to(active, real.shape)]
        sel = sel.astype(np.int64).reshape(-1)
        for r in self.regions:
            if r.sparse is not None:
                mine = sel[(sel >= r.host_ptr + r.lo) & (sel < r.host_ptr + r.hi)]
                if mine.size:
                    self._touch(r, mine - r.host_ptr, size, write)

    def writeback(self) -> None:
        for r in self.regions:
            if r.writeback is not None:
                r.writeback()

    # ------------------------------------------------------------------ translation
    def translate(self, ptrs: np.ndarray, mask: np.ndarray | None, size: int, kind: str) -> np.ndarray:
        """Check the active lanes of ``ptrs`` (virtual, uint64) for an access of ``size`` bytes; return the
        host addresses (inactive lanes point at a harmless valid byte and are not touched)."""
        addr = np.asarray(ptrs, dtype=np.uint64)
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != addr.shape:
                mask = np.broadcast_to(mask, addr.shape)
        hit = self._translate_fast(addr, mask, size)
        if hit is not None:
            if self.sparse:
                self._touch_real(hit, mask, size, kind != "read")
            return hit
        if mask is None:
            active = np.ones(addr.shape, dtype=bool)
        else:
            active = mask
        if not active.any():
            return np.zeros(addr.shape, dtype=np.uint64)
        rid = (addr >> np.uint64(WINDOW_SHIFT)).astype(np.int64)
        act_rid = rid[active]
        first = int(act_rid.flat[0])
        if (act_rid == first).all():
            out = self._translate_one(addr, active, first, size, kind)
        else:
            out = np.zeros(addr.shape, dtype=np.uint64)
            for r in np.unique(act_rid):
                sub = active & (rid == r)
                part = self._translate_one(addr, sub, int(r), size, kind)
                out = np.where(sub, part, out)
        if self.sparse:
            self._touch_real(out, active, size, kind != "read")
        return out

    def _one_region(self, sel: np.ndarray, size: int) -> tuple[Region, np.ndarray] | None:
        """(the region, each address's offset from the region's first valid byte) where every address of ``sel``
        (uint64, non-empty) lies in one region with room for ``size`` bytes and its host address is a multiple of
        ``size``; None otherwise. The region is the first address's: the offsets are taken modulo 2**64, so an
        address before it wraps past any extent, and the largest offset bounds them all; an access is aligned
        when no offset, moved by the region's own host misalignment, has a low bit."""
        rid = int(sel.flat[0]) >> WINDOW_SHIFT
        if not 1 <= rid <= len(self.regions):
            return None
        r = self.regions[rid - 1]
        d = sel - np.uint64(r.base + r.lo)
        if int(d.max()) > r.hi - r.lo - size:
            return None
        if size > 1:
            skew = (r.host_ptr + r.lo) % size  # a lane's host address: host_ptr + lo + its offset
            if int(np.bitwise_or.reduce(d + np.uint64(skew) if skew else d, axis=None)) & (size - 1):
                return None
        return r, d

    def _translate_fast(self, addr: np.ndarray, active: np.ndarray | None, size: int) -> np.ndarray | None:
        """The common case in a few whole-array operations: every active lane in one argument, in bounds
        and aligned. Returns what :meth:`_translate_one` returns for it, or None (anything else, a
        violation included, takes the lane-by-lane path that describes it)."""
        if addr.ndim == 0 or addr.size == 0 or size & (size - 1):
            return None
        if active is None or active.all():
            sel, every = addr, True
        else:
            sel, every = addr[active], False
            if sel.size == 0:
                return None
        hit = self._one_region(sel, size)
        if hit is None:
            return None
        r = hit[0]
        delta = np.uint64((r.host_ptr - r.base) % (1 << 64))  # virtual -> host, modulo 2**64 as uint64 adds
        real = addr + delta
        if every:
            return real
        return np.where(active, real, np.uint64(r.host_ptr + (r.lo if r.hi > r.lo else 0)))

    # ------------------------------------------------------------------ numpy access
    # Triton's C++ load and store visit lane by lane (about 0.1 us a lane); where translate() found every
    # active lane in one region, the same bytes are gathered and scattered with numpy over a view of it.
    def _view(self, r: Region, npd: np.dtype) -> tuple[np.ndarray, int] | None:
        """``r``'s valid bytes as an array of ``npd`` and the host address of its element 0; None where the
        region does not start on an element boundary or holds no element."""
        size = npd.itemsize
        start = r.host_ptr + r.lo
        n = (r.hi - r.lo) // size
        if start % size or n <= 0:
            return None
        return _host_view(start, n, npd), start

    def _lanes(self, addr: np.ndarray, mask: np.ndarray, npd: np.dtype):
        """For an access of ``npd`` elements: (the region's view, element indices of the active lanes -- in
        lane order, of ``addr``'s shape when every lane is active --, all lanes active?, the :class:`_Lanes`
        kept for these arrays or None) when every active lane lies in one region, in bounds and aligned -- what
        :meth:`translate`'s fast path accepts; None for anything else (which translate() describes). For
        read-only ``addr`` and ``mask`` (no one changes them) the answer is kept (:data:`_known_lanes`) and given
        again while the region has the same index and extent."""
        key = (id(addr), id(mask), npd)
        known = _known_lanes.get(key)
        if known is not None and known.addr is addr and known.mask is mask:
            regions = self.regions
            if known.rid <= len(regions):
                r = regions[known.rid - 1]
                if r.lo == known.lo and r.hi == known.hi:
                    if r.host_ptr == known.host_ptr:
                        return known.view, known.idx, known.every, known, r
                    if (r.host_ptr + r.lo) % npd.itemsize == known.skew:  # (another tensor there: its own view)
                        view = self._view(r, npd)
                        if view is not None:
                            known.host_ptr, known.view = r.host_ptr, view[0]
                            return view[0], known.idx, known.every, known, r
        if addr.ndim == 0 or addr.dtype != np.uint64:
            return None
        size = npd.itemsize
        if size & (size - 1):
            return None
        every = bool(mask.all())
        # (every lane: the block itself, in its shape -- a broadcast view is not copied first; _one_region's
        # offsets are a new array either way)
        sel = addr if every else addr[mask]
        if sel.size == 0:
            return None
        hit = self._one_region(sel, size)
        if hit is None:
            return None
        r, d = hit  # (d: byte offsets from the view's first element, a new array)
        view = self._view(r, npd)
        if view is None:
            return None
        idx = np.right_shift(d, np.uint64(size.bit_length() - 1), out=d)  # indices below the view's length
        idx = idx.view(np.intp) if np.dtype(np.intp).itemsize == 8 else idx.astype(np.intp)
        if not idx.flags.c_contiguous:  # (the block's own layout, which a gather would keep: Triton's load returns
            idx = np.ascontiguousarray(idx)  # C order, and a dot or reduction of the loaded block sums by layout)
        if not addr.flags.writeable and not mask.flags.writeable:  # (arrays no one changes: see _known_lanes)
            if len(_known_lanes) >= _MAX_KNOWN_LANES:
                _known_lanes.clear()
            _known_lanes[key] = _Lanes(addr, mask, r, view[0], idx, every)
        return view[0], idx, every, None, r  # (what else the lanes allow is found once they recur)

    def gather(self, addr: np.ndarray, mask: np.ndarray, other: np.ndarray | None,
               npd: np.dtype) -> np.ndarray | None:
        """What Triton's ``load(translate(addr, mask), mask, other, npd)`` returns (``other`` None: zeros), in a
        few whole-array numpy operations (Triton's C++ visits lane by lane); None where :meth:`_lanes` declines."""
        hit = self._lanes(addr, mask, npd)
        if hit is None:
            return None
        arr, idx, every, known, r = hit
        if self.sparse and r.sparse is not None:
            self._touch(r, idx.astype(np.int64) * npd.itemsize + r.lo, npd.itemsize, False)
        span = known.span if known is not None else None
        # (arr[idx] rather than arr.take(idx): the same copy; timed inside launches, where nothing else calls
        # take, the first take of a launch ran cold at 7-13 us, indexing at 2-4 us)
        if every:
            return arr[idx] if span is None else arr[span[0]:span[1]].reshape(addr.shape).copy()
        # C order, as Triton's load returns (reductions sum by layout)
        out = np.zeros(addr.shape, dtype=npd) if other is None else np.array(other, dtype=npd, order="C")
        if span is None:
            out[mask] = arr[idx]
        elif known.prefix:
            out.reshape(-1)[:span[1] - span[0]] = arr[span[0]:span[1]]
        else:
            out[mask] = arr[span[0]:span[1]]
        return out

    def scatter(self, addr: np.ndarray, value: np.ndarray, mask: np.ndarray) -> bool:
        """Triton's ``store(translate(addr, mask), value, mask)`` with numpy, where :meth:`_lanes` accepts
        and no two active lanes write one element (so lane order cannot matter: :func:`_distinct`); False
        where the caller must take Triton's path."""
        hit = self._lanes(addr, mask, value.dtype)
        if hit is None:
            return False
        arr, idx, every, known, r = hit
        if self.saved is not None and r.index not in self.saved:
            self.keep(r)
        if self.sparse and r.sparse is not None:
            self._touch(r, idx.astype(np.int64) * value.dtype.itemsize + r.lo, value.dtype.itemsize, True)
        if known is not None and known.span is not None:  # (increasing: distinct)
            lo, hi = known.span
            arr[lo:hi] = value.reshape(-1) if every else value.reshape(-1)[:hi - lo] if known.prefix else value[mask]
            return True
        distinct = known.distinct if known is not None else None
        if distinct is None:
            distinct = _distinct(idx.reshape(-1), mask, every) or _distinct_marked(idx, arr.size)
            if known is not None:
                known.distinct = distinct
        if not distinct:
            return False
        arr[idx] = value if every else value[mask]
        return True

    def _translate_one(self, addr, active, rid: int, size: int, kind: str) -> np.ndarray:
        if not 1 <= rid <= len(self.regions):
            lane = tuple(int(i) for i in np.argwhere(active)[0]) if addr.ndim else ()
            raise MemoryError_(Violation(kind, None, lane, int(active.sum()), int(active.sum()), 0, size,
                                         int(addr[lane] if addr.ndim else addr)))
        r = self.regions[rid - 1]
        off = (addr - np.uint64(r.base)).view(np.int64)
        bad = active & ((off < r.lo) | (off + size > r.hi))
        misaligned = False
        if not bad.any():
            bad = active & (((off + r.host_ptr) % size) != 0)
            misaligned = bool(bad.any())
        if bad.any():
            idx = np.argwhere(bad)[0] if addr.ndim else ()
            lane = tuple(int(i) for i in idx)
            o = int(off[lane] if addr.ndim else off)
            raise MemoryError_(Violation(kind, r, lane, int(bad.sum()), int(active.sum()), o - r.data_offset, size,
                                         int(addr[lane] if addr.ndim else addr), misaligned))
        safe = np.int64(r.lo if r.hi > r.lo else 0)
        real = np.where(active, off, safe).astype(np.uint64) + np.uint64(r.host_ptr)
        return real


# (id(addresses), id(mask), dtype) -> the _Lanes that _lanes found for two read-only arrays (a recorded trace's
# launch-invariant addresses and masks recur as the same objects, trace._Memo): for a region of the same index
# and extent the same indices and the same verdict; kept with the arrays, so their ids stay theirs
_MAX_KNOWN_LANES = 512


class _Lanes:
    """What :meth:`Arena._lanes` found for read-only addresses and mask, with what else an access by them
    can reuse: the element indices as one increasing run ``[lo, hi)`` where they are (a slice then serves,
    and a store's lanes are distinct), whether the active lanes are the first ones in C order (``prefix``),
    and a store's distinctness once shown."""

    __slots__ = ("addr", "mask", "rid", "lo", "hi", "skew", "host_ptr", "view", "idx", "every", "_span", "prefix",
                 "distinct")

    def __init__(self, addr: np.ndarray, mask: np.ndarray, r: Region, view: np.ndarray, idx: np.ndarray,
                 every: bool) -> None:
        self.addr, self.mask, self.rid, self.lo, self.hi = addr, mask, r.index, r.lo, r.hi
        self.skew = (r.host_ptr + r.lo) % view.itemsize
        self.host_ptr, self.view, self.idx, self.every = r.host_ptr, view, idx, every
        idx.flags.writeable = False
        self._span: Any = _MISSING  # (found when an access first reuses these lanes)
        self.prefix = every
        self.distinct: bool | None = None

    @property
    def span(self) -> tuple[int, int] | None:
        if self._span is _MISSING:
            flat = self.idx.reshape(-1)
            n = flat.size
            self._span = (int(flat[0]), int(flat[-1]) + 1) if n and int(flat[-1]) - int(flat[0]) + 1 == n and (
                n == 1 or bool((flat[1:] > flat[:-1]).all())) else None
            self.prefix = self.every or bool(self.mask.reshape(-1)[:n].all())
        return self._span


_MISSING = object()
_known_lanes: "dict[tuple, _Lanes]" = {}
_host_views: "dict[tuple, np.ndarray]" = {}  # (host address, elements, dtype) -> an array over those bytes
_MAX_HOST_VIEWS = 256


def _host_view(start: int, n: int, npd: np.dtype) -> np.ndarray:
    """An array of ``n`` ``npd`` elements over the host bytes at ``start``. Kept across launches (a fuzz run
    launches on same-sized tensors at recurring addresses): a view is only looked up for a region of a live
    argument with exactly these bytes, and an array over an address owns nothing, so a reused one is the
    array a new one would be."""
    key = (start, n, npd)
    v = _host_views.get(key)
    if v is None:
        import ctypes

        if len(_host_views) >= _MAX_HOST_VIEWS:
            _host_views.clear()
        buf = (ctypes.c_char * (n * npd.itemsize)).from_address(start)
        v = _host_views[key] = np.frombuffer(buf, dtype=npd, count=n)
    return v


def _distinct(idx: np.ndarray, mask: np.ndarray, every: bool) -> bool:
    """Whether the element indices ``idx`` of the active lanes (in lane order) are pairwise distinct, shown
    cheaply: strictly increasing; or, with a leading program axis, strictly increasing within each
    program's lanes with the programs' [first, last] spans disjoint (programs of a batched launch write
    their own tiles, in whatever order the grid lists them). False means "not shown", not "duplicates"."""
    if idx.size < 2:
        return True
    up = idx[1:] > idx[:-1]
    if up.all():
        return True
    if mask.ndim < 2 or mask.shape[0] < 2:
        return False
    per = mask.reshape(mask.shape[0], -1)
    counts = per.shape[1] if every else per.sum(axis=1)
    ends = np.cumsum(np.broadcast_to(counts, (per.shape[0],)))  # one past each program's last active lane
    starts = ends - counts
    cut = ends[:-1] - 1  # the pairs that straddle two programs' lanes are not compared
    up[cut[(cut >= 0) & (cut < up.size)]] = True
    if not up.all():
        return False
    live = ends > starts
    first, last = idx[starts[live]], idx[ends[live] - 1]
    order = np.argsort(first, kind="stable")
    return bool((first[order][1:] > last[order][:-1]).all())


def _distinct_marked(idx: np.ndarray, n: int) -> bool:
    """Whether the element indices ``idx`` (each below ``n``) are pairwise distinct, by marking each one in
    a table of ``n`` flags: exact, for any order (the tiles of a 2-D grid interleave, which
    :func:`_distinct` cannot show), tried where that fails; only where the table is not much larger than the
    indices (False: not shown)."""
    if n > max(8 * idx.size, 1 << 16) or idx.size < 2:
        return idx.size < 2
    mark = np.zeros(n, dtype=np.bool_)
    mark[idx] = True
    return int(np.count_nonzero(mark)) == idx.size


# ---------------------------------------------------------------------- describing arguments
def _torch_dtype_name(dt: Any) -> str:
    return str(dt).replace("torch.", "")


def _region_of(obj: Any, name: str, index: int) -> Region:
    """Resolve a tensor-like object to host bytes and a valid extent.

    Order: torch.Tensor (and Triton's TensorWrapper) -> anything with untyped_storage() -> the array
    interface -> data_ptr() with nbytes / numel()*element_size() / shape*itemsize (duck-typed buffers).
    """
    import torch

    if isinstance(obj, torch.Tensor):  # (Triton's TensorWrapper, below, is not one)
        return _tensor_region(obj, name, index)
    base = getattr(obj, "base", None)
    dtype_override = None
    if type(obj).__name__ == "TensorWrapper" and isinstance(base, torch.Tensor):  # triton.reinterpret
        dtype_override = obj.dtype
        obj = base
    if isinstance(obj, torch.Tensor):
        return _tensor_region(obj, name, index, dtype_override)
    storage_fn = getattr(obj, "untyped_storage", None)
    if callable(storage_fn):
        try:
            return _storage_region(obj, storage_fn(), name, index)
        except Exception:  # fall through to the plainer protocols
            pass
    iface = getattr(obj, "__array_interface__", None)
    if isinstance(iface, dict) and "data" in iface:
        arr = np.asarray(obj)
        ptr = int(iface["data"][0])
        return Region(index, name, ptr, 0, int(arr.nbytes), 0, int(arr.itemsize), str(arr.dtype),
                      tuple(arr.shape), tuple(s // arr.itemsize for s in arr.strides))
    ptr = int(obj.data_ptr())
    itemsize = _itemsize(obj)
    nbytes = _nbytes(obj, itemsize)
    shape = tuple(int(s) for s in getattr(obj, "shape", ()) or ())
    return Region(index, name, ptr, 0, nbytes, 0, itemsize, _torch_dtype_name(getattr(obj, "dtype", "?")), shape,
                  tuple(int(s) for s in _strides(obj, shape)))


def _itemsize(obj: Any) -> int:
    es = getattr(obj, "element_size", None)
    if callable(es):
        return int(es())
    dt = getattr(obj, "dtype", None)
    for attr in ("itemsize",):
        if hasattr(dt, attr):
            return int(getattr(dt, attr))
    return 1


def _nbytes(obj: Any, itemsize: int) -> int:
    nb = getattr(obj, "nbytes", None)
    if isinstance(nb, int):
        return nb
    numel = getattr(obj, "numel", None)
    if callable(numel):
        return int(numel()) * itemsize
    shape = getattr(obj, "shape", None)
    if shape is not None:
        return int(np.prod([int(s) for s in shape])) * itemsize
    raise TypeError(f"argument of type {type(obj).__name__} has data_ptr() but no size "
                    "(nbytes, numel(), or shape): the runtime cannot bound its accesses")


def _strides(obj: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    st = getattr(obj, "stride", None)
    try:
        if callable(st):
            return tuple(st())
    except Exception:
        pass
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def _extent(offset: int, shape, strides) -> tuple[int, int]:
    """[first, last+1) element offsets reachable by a strided view (empty view: empty range)."""
    lo = hi = offset
    for n, st in zip(shape, strides):
        n, st = int(n), int(st)
        if n == 0:
            return offset, offset
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + 1


_dtype_names: dict = {}


def _tensor_region(t, name: str, index: int, dtype_override=None) -> Region:
    import torch

    st = t.untyped_storage()
    itemsize = t.element_size()
    shape, strides = tuple(t.shape), t.stride()
    if t.is_contiguous():  # what _extent computes for it, without the loops
        off = t.storage_offset()
        lo_e, hi_e = off, off + (t.numel() if all(shape) else 0)
    else:
        lo_e, hi_e = _extent(t.storage_offset(), shape, strides)
    data_offset = t.data_ptr() - st.data_ptr()
    dt = dtype_override if dtype_override is not None else t.dtype
    dtype = _dtype_names.get(dt)
    if dtype is None:
        dtype = _dtype_names[dt] = _torch_dtype_name(dt)
    if t.is_cpu:
        host_ptr, writeback = st.data_ptr(), None
    else:  # a device tensor: work on a host copy of its storage, copy back after the launch
        host = torch.empty(st.nbytes(), dtype=torch.uint8).untyped_storage()
        host.copy_(st)
        host_ptr = host.data_ptr()

        def writeback(st=st, host=host):
            st.copy_(host)

    return Region(index, name, host_ptr, lo_e * itemsize, hi_e * itemsize, data_offset, itemsize, dtype,
                  shape, strides, writeback)


def _storage_region(obj: Any, st, name: str, index: int) -> Region:
    itemsize = _itemsize(obj)
    data_offset = int(obj.data_ptr()) - int(st.data_ptr())
    shape = tuple(int(s) for s in getattr(obj, "shape", ()) or ())
    strides = _strides(obj, shape)
    lo_e, hi_e = _extent(data_offset // max(itemsize, 1), shape, strides)
    return Region(index, name, int(st.data_ptr()), lo_e * itemsize, hi_e * itemsize, data_offset, itemsize,
                  _torch_dtype_name(getattr(obj, "dtype", "?")), shape, tuple(strides))
