"""Batched-grid execution: many program instances of one launch in one pass of the kernel's Python.

Triton's interpreter runs the kernel once per program id, and each ``tl.*`` call costs microseconds of
Python whatever the block size. Here the program id is a vector: ``tl.program_id(axis)`` returns the ids
of a whole chunk of programs, every value derived from it carries a leading *program axis*, and one numpy
operation serves the chunk. Values that do not depend on the program id (``tl.arange``, scalar
arguments, constants) keep their own shape and broadcast.

How a value is recognised as batched: a block of logical rank ``r`` (its ``tl`` type) has ``r + 1``
dimensions; a scalar has ``P`` elements (the interpreter keeps an unbatched scalar as one element). The
builder methods whose result depends on shapes or axes (splat, broadcast, reshape, expand_dims,
permute, gather, unsplat) and ``tl.reduce`` / ``tl.associative_scan`` are overridden to keep the program
axis first; elementwise work, loads and stores (the bounds-checked :class:`~gpuemu.runtime.memory.Arena`)
and dots (``np.matmul`` broadcasts) need nothing.

What cannot run batched raises :class:`NotBatchable` and the launch runs program by program, from the
memory as it was before (the arena keeps the bytes of each argument before its first write): control flow that
depends on the program id (``if pid == 0``, loop bounds from a loaded value that differs between
programs), atomics (programs communicating), volatile loads, ``device_print``, block pointers and tensor
descriptors, ``tl.cat`` of 2-D blocks, histograms. A finding (an out-of-bounds access, a failed
assertion) also re-runs sequentially, so its program, lane and line are reported exactly as before.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

CHUNK = 512  # programs per pass: bounds the memory of the batched values (P x block elements each)


class NotBatchable(Exception):
    """This launch cannot run with a program axis; the message says why (reported in --verbose)."""


def chunks(programs: int, size: int = CHUNK) -> list[tuple[int, int]]:
    """[start, stop) ranges over the flat program index, none of one program (a chunk of one is ambiguous
    with an unbatched scalar: it joins the chunk before it)."""
    out = []
    start = 0
    while start < programs:
        stop = min(programs, start + size)
        if programs - stop == 1:
            stop = programs
        out.append((start, stop))
        start = stop
    return out


def program_ids(grid3: tuple[int, int, int], start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, z) ids of the flat programs [start, stop) in the sequential loop's order (x outermost); the
    arrays are read-only and shared by launches of the same grid (a launch's chunks recur)."""
    key = (grid3, start, stop)
    hit = _pids.get(key)
    if hit is None:
        flat = np.arange(start, stop, dtype=np.int64)
        ny, nz = grid3[1], grid3[2]
        x, rest = np.divmod(flat, ny * nz)
        y, z = np.divmod(rest, nz)
        hit = (x.astype(np.int32), y.astype(np.int32), z.astype(np.int32))
        for a in hit:
            a.flags.writeable = False
        if len(_pids) >= 256:
            _pids.clear()
        _pids[key] = hit
    return hit


_pids: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # (grid, start, stop) -> program_ids


class Batch:
    """The program axis of the chunk in progress, and the patches that keep it first."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.P = 0
        self.pids: tuple[np.ndarray, ...] = ()
        self.typing = 0  # > 0 while building types that carry the program axis (P need not be a power of 2)

    # ------------------------------------------------------------------ recognising batched values
    def scalar_batched(self, data: np.ndarray) -> bool:
        return self.P > 1 and np.size(data) == self.P

    def tensor_batched(self, t: Any) -> bool:
        """A ``tl.tensor``: its handle's data has a program axis."""
        data = t.handle.data
        if t.type.is_block():
            return np.ndim(data) == len(t.type.shape) + 1
        return self.scalar_batched(data)

    def uniform(self, data: np.ndarray, what: str) -> Any:
        """The one value of a batched scalar every program shares; NotBatchable when they differ."""
        flat = np.asarray(data).reshape(-1)
        first = flat[0]
        if not (flat == first).all() and not (np.isnan(flat).all() if flat.dtype.kind == "f" else False):
            raise NotBatchable(f"{what} depends on the program id")
        return first

    # ------------------------------------------------------------------ patches
    def install(self, scope: Any, builder: Any, it: Any) -> None:
        import triton.language as tl

        TH = it.TensorHandle
        batch = self
        cls = type(builder)

        def get_program_id(axis):
            return TH(batch.pids[axis].copy(), tl.int32)

        splat0 = builder.create_splat  # the launch's own patches when there are (numerics, memory)

        def create_splat(ret_ty, arg):
            if batch.scalar_batched(arg.data) and not isinstance(arg.dtype, tl.block_type):
                shape = tuple(ret_ty.shape)
                out = np.empty((batch.P,) + shape, dtype=np.asarray(arg.data).dtype)
                out[...] = np.asarray(arg.data).reshape((batch.P,) + (1,) * len(shape))
                return TH(out, arg.dtype.scalar)
            return splat0(ret_ty, arg)

        def create_unsplat(arg):
            if batch.scalar_batched(arg.data):
                return TH(np.asarray(arg.data).reshape(batch.P).copy(), arg.dtype.scalar)
            return cls.create_unsplat(builder, arg)

        def create_broadcast(arg, shape):
            shape = tuple(shape)
            if np.ndim(arg.data) == len(shape) + 1:
                return TH(np.broadcast_to(arg.data, (np.shape(arg.data)[0],) + shape), arg.dtype.scalar)
            return TH(np.broadcast_to(arg.data, shape), arg.dtype.scalar)

        def create_reshape(arg, shape, allow_reorder):
            shape = tuple(shape)
            n = int(np.prod(shape)) if shape else 1
            if batch.P > 1 and np.size(arg.data) == batch.P * n and np.size(arg.data) != n:
                return TH(np.asarray(arg.data).reshape((batch.P,) + shape), arg.dtype.scalar)
            return TH(np.asarray(arg.data).reshape(shape), arg.dtype.scalar)

        def create_expand_dims(arg, axis):
            r = arg.attr.get("_rank")
            if r is None:
                raise NotBatchable("expand_dims of a value whose rank is not known")
            if np.ndim(arg.data) == r + 1:
                return TH(np.expand_dims(arg.data, axis + 1), arg.dtype.scalar)
            return TH(np.expand_dims(arg.data, axis), arg.dtype.scalar)

        def create_trans(arg, perm):
            perm = tuple(perm)
            if np.ndim(arg.data) == len(perm) + 1:
                return TH(np.transpose(arg.data, (0,) + tuple(p + 1 for p in perm)), arg.dtype.scalar)
            return TH(np.transpose(arg.data, perm), arg.dtype.scalar)

        def create_cat(lhs, rhs):
            if np.ndim(lhs.data) > 1 or np.ndim(rhs.data) > 1:
                raise NotBatchable("tl.cat with a program axis")
            return cls.create_cat(builder, lhs, rhs)

        def create_gather(src, indices, axis):
            r = src.attr.get("_rank")
            if r is None:
                raise NotBatchable("gather of a value whose rank is not known")
            s, i = np.asarray(src.data), np.asarray(indices.data)
            if s.ndim == r + 1 or i.ndim == r + 1:
                if s.ndim == r:
                    s = np.broadcast_to(s, (batch.P,) + s.shape)
                if i.ndim == r:
                    i = np.broadcast_to(i, (batch.P,) + i.shape)
                return TH(np.take_along_axis(s, i, axis=axis + 1), src.dtype.scalar)
            return TH(np.take_along_axis(s, i, axis=axis), src.dtype.scalar)

        def refuse(what):
            def fn(*args, **kwargs):
                raise NotBatchable(what)
            return fn

        masked_load0 = builder.create_masked_load

        def create_masked_load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
            if is_volatile:
                raise NotBatchable("a volatile load (programs waiting on each other)")
            return masked_load0(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)

        for name, fn in (("create_get_program_id", get_program_id), ("create_splat", create_splat),
                         ("create_unsplat", create_unsplat), ("create_broadcast", create_broadcast),
                         ("create_reshape", create_reshape), ("create_expand_dims", create_expand_dims),
                         ("create_trans", create_trans), ("create_cat", create_cat),
                         ("create_gather", create_gather), ("create_masked_load", create_masked_load),
                         ("create_atomic_rmw", refuse("atomics (programs communicating)")),
                         ("create_atomic_cas", refuse("atomics (programs communicating)")),
                         ("create_print", refuse("device_print (its output order is per program)")),
                         ("create_histogram", refuse("tl.histogram")),
                         ("create_make_block_ptr", refuse("block pointers")),
                         ("create_make_tensor_descriptor", refuse("tensor descriptors")),
                         ("create_dot_scaled", refuse("dot_scaled"))):
            if hasattr(builder, name):
                scope.set(builder, name, fn)

        # block types with the program axis in front: P need not be a power of two, a logical block must
        validate0 = tl.core.validate_block_shape

        def validate_block_shape(shape, _v=validate0):
            if batch.typing and shape and shape[0] == batch.P:
                return math.prod(shape)
            return _v(shape)

        scope.set(tl.core, "validate_block_shape", validate_block_shape)

        # every tl.tensor records its logical rank on its handle (expand_dims and gather need it)
        init0 = tl.core.tensor.__init__

        def tensor_init(self, handle, type, _init=init0):
            _init(self, handle, type)
            attr = getattr(handle, "attr", None)
            if isinstance(attr, dict):
                attr["_rank"] = len(type.shape) if type.is_block() else 0

        scope.set(tl.core.tensor, "__init__", tensor_init)

        # Python control flow on a value: one for every program, or this launch runs program by program
        bool0 = tl.tensor.__bool__
        index0 = tl.tensor.__index__

        def tensor_bool(self, _b=bool0):
            if not self.type.is_block() and batch.scalar_batched(self.handle.data):
                batch.state.tick()
                return bool(batch.uniform(self.handle.data, "a branch or loop condition"))
            return _b(self)

        def tensor_index(self, _i=index0):
            if not self.type.is_block() and batch.scalar_batched(self.handle.data):
                return int(batch.uniform(self.handle.data, "a loop bound or index"))
            return _i(self)

        scope.set(tl.tensor, "__bool__", tensor_bool)
        scope.set(tl.tensor, "__index__", tensor_index)

        T0 = tl.tensor.T  # the interpreter's property: what `.T` of a value without a program axis does

        def transpose_T(self):
            if batch.tensor_batched(self):
                assert self.type.is_block()
                shape = list(self.type.shape)
                shape[-1], shape[-2] = shape[-2], shape[-1]
                data = np.swapaxes(self.handle.data, -1, -2)
                return tl.core.tensor(TH(data, self.handle.dtype), tl.core.block_type(self.dtype, shape))  # logical
            return T0.fget(self)

        scope.set(tl.tensor, "T", property(transpose_T))

        # reductions and scans: the axis moves one to the right; the result's type is the logical one
        for mod in (tl, tl.core):
            scope.set(mod, "reduce", self._reduce(mod.reduce))
            scope.set(mod, "associative_scan", self._scan(mod.associative_scan))

    def _as_batched_block(self, t: Any) -> Any:
        """``t`` (batched) as a block whose type includes the program axis."""
        import triton.language as tl

        shape = [self.P] + (list(t.type.shape) if t.type.is_block() else [])
        # a handle of its own: every tensor notes its rank on its handle (tensor_init), and t's handle must keep t's
        # (t[:, None] after tl.sum(t) expanded the wrong axis: a silent wrong answer where the two block sizes match)
        return tl.core.tensor(type(t.handle)(t.handle.data, t.handle.dtype), self.block_type(t.dtype, shape))

    def block_type(self, dtype: Any, shape: list[int]) -> Any:
        import triton.language as tl

        self.typing += 1
        try:
            return tl.core.block_type(dtype, shape)
        finally:
            self.typing -= 1

    def _logical(self, r: Any, template_shape: list[int]) -> Any:
        """A result of the batched computation, typed without the program axis."""
        import triton.language as tl

        data = r.handle.data
        if template_shape:
            return tl.core.tensor(r.handle, tl.core.block_type(r.dtype, template_shape))
        return tl.core.tensor(type(r.handle)(np.asarray(data).reshape(self.P), r.handle.dtype), r.dtype)

    def _operands(self, input: Any) -> tuple[bool, tuple | None]:
        """(one operand?, the operands) of a reduce or scan; the operands are None when none is batched."""
        import triton.language as tl

        single = not isinstance(input, tuple)
        inputs = (input,) if single else tuple(input)
        if not any(self.tensor_batched(t) for t in inputs if isinstance(t, tl.tensor)):
            return single, None
        return single, inputs

    def _with_program_axis(self, t: Any, shape: list[int]) -> Any:
        """``t`` (logical ``shape``) with the program axis: itself when batched, else repeated per program."""
        import triton.language as tl

        if self.tensor_batched(t):
            return t
        data = np.ascontiguousarray(np.broadcast_to(t.handle.data, (self.P,) + tuple(shape)))
        return tl.core.tensor(type(t.handle)(data, t.handle.dtype), tl.core.block_type(t.dtype, shape) if shape else t.dtype)

    def _reduce(self, inner: Any) -> Any:
        import triton.language as tl

        batch = self

        def reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
            single, inputs = batch._operands(input)
            if inputs is None:
                return inner(input, axis, combine_fn, keep_dims=keep_dims, **kwargs)
            axis_v = axis.value if isinstance(axis, tl.constexpr) else axis
            shape = list(inputs[0].type.shape) if inputs[0].type.is_block() else []
            moved = []
            for t in inputs:
                t = batch._with_program_axis(t, shape)
                if axis_v is None:  # every element of each program: flatten behind the program axis
                    flat = np.asarray(t.handle.data).reshape(batch.P, -1)
                    t = tl.core.tensor(type(t.handle)(flat, t.handle.dtype),
                                       batch.block_type(t.dtype, [batch.P, flat.shape[1]]))
                else:
                    t = batch._as_batched_block(t)
                moved.append(t)
            ax = 1 if axis_v is None else int(axis_v) + 1
            batch.typing += 1
            try:
                res = inner(moved[0] if single else tuple(moved), ax, combine_fn, keep_dims=keep_dims, **kwargs)
            finally:
                batch.typing -= 1
            if axis_v is None:
                out_shape = [1] * len(shape) if keep_dims else []
            else:
                out_shape = shape[:int(axis_v)] + ([1] if keep_dims else []) + shape[int(axis_v) + 1:]

            def fix(r):
                if axis_v is None and keep_dims:
                    r = tl.core.tensor(type(r.handle)(np.asarray(r.handle.data).reshape((batch.P,) + (1,) * len(shape)),
                                                      r.handle.dtype), r.type)
                return batch._logical(r, out_shape)

            return tuple(fix(r) for r in res) if isinstance(res, tuple) else fix(res)

        return reduce

    def _scan(self, inner: Any) -> Any:
        import triton.language as tl

        batch = self

        def scan(input, axis, combine_fn, reverse=False, **kwargs):
            single, inputs = batch._operands(input)
            if inputs is None:
                return inner(input, axis, combine_fn, reverse=reverse, **kwargs)
            shape = list(inputs[0].type.shape)
            moved = []
            for t in inputs:
                moved.append(batch._as_batched_block(batch._with_program_axis(t, shape)))
            ax = int(axis.value if isinstance(axis, tl.constexpr) else axis) + 1
            batch.typing += 1
            try:
                res = inner(moved[0] if single else tuple(moved), ax, combine_fn, reverse=reverse, **kwargs)
            finally:
                batch.typing -= 1
            if isinstance(res, (tuple, list)):
                return tuple(batch._logical(r, shape) for r in res)
            return batch._logical(res, shape)

        return scan


_installed: dict[str, tuple] = {}  # "batch" -> (what it was built over, the Batch, its Patches)


def run(body: Any, kargs: dict, grid3: tuple[int, int, int], state: Any, builder: Any, scope: Any, it: Any,
        reuse: Any = None, lean: bool = False) -> int:
    """Run every program of the launch in chunks with a program axis (``body(**kargs)`` is one pass of the
    kernel: the rewritten kernel or its recorded form); returns the number of passes.
    Raises NotBatchable (or whatever a program raised) for the executor to fall back on.

    ``reuse``: when not None, the launch's other patches are the same objects as the last time ``run`` saw
    this value (the executor's reused patch list), so the batch patches built then (over the same state
    object) are set again from their list instead of being built anew; ``lean``: only the part a lean replay
    reaches (``executor.Patches.for_replay``)."""
    hit = _installed.get("batch") if reuse is not None else None
    if hit is not None and hit[0] is reuse and hit[1].state is state:
        batch = hit[1]
        batch.typing = 0
        scope.apply(hit[2].for_replay() if lean else hit[2])
    else:
        batch = Batch(state)
        if reuse is not None:
            scope.recording = []
        batch.install(scope, builder, it)
        if reuse is not None:
            entries, scope.recording = scope.recording, None
            from .executor import Patches

            _installed["batch"] = (reuse, batch, Patches(entries))
    programs = grid3[0] * grid3[1] * grid3[2]
    passes = 0
    for start, stop in chunks(programs):
        batch.P = stop - start
        batch.pids = program_ids(grid3, start, stop)
        state.program = (int(batch.pids[0][0]), int(batch.pids[1][0]), int(batch.pids[2][0]))
        state.tick()
        body(**kargs)
        passes += 1
    return passes


__all__ = ["NotBatchable", "Batch", "run", "chunks", "program_ids", "CHUNK"]
