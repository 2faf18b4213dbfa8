"""Inferring a :class:`~gpuemu.schema.model.Schema` from a PyTorch reference and its example call(s).

What the example says, and what probing the reference confirms:

1. **Arguments** by what they hold. Floating tensors in the dtype most of them share follow the dtype sweep;
   others keep theirs (an fp32 scale beside bf16 activations). All-positive floats are drawn in their range
   (scales), {0, -inf} floats as additive masks, bools with the example's density, fp8 at the example's scale.
   Integer tensors: non-decreasing from 0 are **offsets** (group bounds: tokens per expert), whose last value is
   the size of a dim; non-negative ones are **ids** into the smallest dim larger than their maximum (a row of a
   table, a page of a cache, a position); others (int8 weights) are quantized values in the example's range.
   Python ints equal to a size may **name** that size (a launcher's ``N``, a module's ``in_features``); other
   scalars are kept.
2. **Dims**: axes of equal size are one candidate dim (in every example call). The reference is then run with
   the candidate grown by 1 (then 2, 4, 8, 16: the dim must keep a multiple): if it still runs, the dim is free;
   an axis of a shared size that runs grown on its own is a dim of its own (M and N of a square matmul); a
   candidate that runs only beside one of half (or one more than) its size is tied to it (``D`` and ``D/2`` of
   rope's halves, ``E`` and ``E+1`` offsets); anything else keeps the example's size. Probes use real tensors of
   the example's dtypes, grown only (ids stay valid).
3. **Roles**: a dim that grows an output is ``tiled``; one that does not is ``contracted`` where two inputs hold
   it, else ``reduced``; the dim ids point into is ``index``. The ranges cases draw follow the role
   (:data:`LIMITS`), never past the example's size where it is larger.

Names: a module-level int constant of the reference's file equal to the size (``batch_size``, ``dim``), else the
first argument and axis that hold it (``x.1``). Everything inferred is printed (:meth:`Schema.describe`) and can
be overridden by a declaration (:mod:`gpuemu.schema.declare`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..errors import InvalidArgument
from ..ops import ArgSpec
from .calls import Call, flatten_outputs
from .model import Dim, Output, Schema

LIMITS = {"tiled": (1, 1100), "reduced": (1, 1100), "contracted": (1, 256), "index": (1, 300), "batch": (1, 8),
          "head": (1, 128)}
# a dim is drawn up to 4x its example size (a small one, < 16: a batch or a head count, up to 2x and at least 8), as far
# as its role allows (LIMITS); every case's inputs stay under gpuemu.schema.MAX_ELEMENTS
GROW = (1, 2, 4, 8, 16)  # how much a probe grows a candidate dim (the first that runs: the dim's multiple)
PROBE_SECONDS = 60.0  # probing stops (the remaining candidates keep their sizes) past this much reference time
_FLOAT_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}


@dataclass
class _Slot:
    """One argument of the call while inferring."""

    name: str
    value: Any
    kind: str = "const"
    dtype: str | None = None
    keyword: bool = False
    follows: bool = False
    index_target: int | None = None  # ids / offsets: the size they point into (a group's size)
    lo: Any = None
    hi: Any = None
    density: float | None = None
    values: str | None = None
    sorted: bool = False


def _dtype_name(dt: Any) -> str:
    return str(dt).replace("torch.", "")


def _size_like(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 2**31


def _element(name: str, j: int) -> str:
    """The name inference gives element ``j`` of a tuple-of-sizes argument (a scalar of its own while probing)."""
    return f"{name}[{j}]"


def _classify(name: str, value: Any, keyword: bool) -> _Slot:
    import torch

    s = _Slot(name, value, keyword=keyword)
    if value is None:
        s.kind = "const"
        return s
    if not isinstance(value, torch.Tensor):
        if _size_like(value):
            s.kind = "int_scalar"  # may name a size (decided by probing)
        elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 8 and all(_size_like(v) for v in value):
            s.kind = "int_tuple"  # a shape (layer_norm's normalized_shape, a view's sizes): each int may name one
        return s
    t = value.detach()
    s.dtype = _dtype_name(t.dtype)
    if t.dtype == torch.bool:
        s.kind, s.density = "bool", float(t.float().mean()) if t.numel() else 0.5
    elif t.dtype.is_floating_point and "float8" in s.dtype:
        s.kind = "fp8"
        f = t.float()
        s.hi = float(f[f.isfinite()].abs().max()) if bool(f.isfinite().any()) else 1.0
    elif t.is_floating_point():
        s.kind = "float"
        f = t.double()
        finite = f[f.isfinite()]
        uniq = torch.unique(f) if f.numel() <= 1 << 22 else None
        if uniq is not None and uniq.numel() <= 2 and bool(((uniq == 0) | (uniq == -math.inf)).all()) \
                and bool((uniq == -math.inf).any()):
            s.values, s.density = "mask", float((f == 0).double().mean())
        elif finite.numel() and finite.numel() == f.numel() and float(finite.min()) > 0:
            s.values, s.lo, s.hi = "range", float(finite.min()), float(finite.max())
    elif t.dtype.is_complex:
        raise InvalidArgument(f"argument {name!r} is complex: gpuemu judges real-valued kernels only")
    else:
        flat = t.reshape(-1).long()
        lo, hi = (int(flat.min()), int(flat.max())) if flat.numel() else (0, 0)
        s.lo, s.hi = lo, hi
        monotone = flat.numel() >= 2 and bool((flat[1:] >= flat[:-1]).all())
        if t.dim() == 1 and monotone and lo == 0 and int(flat[0]) == 0 and hi > 0 and s.dtype not in ("int8", "uint8"):
            s.kind, s.index_target = "offsets", hi
        elif lo >= 0 and s.dtype not in ("int8", "uint8"):
            s.kind = "index_candidate"
            s.sorted = monotone and flat.numel() > 2
        else:
            s.kind = "int"
    return s


class _Prober:
    """Runs the reference on grown copies of the example (real tensors, the example's dtypes)."""

    def __init__(self, reference: Callable, slots: list[_Slot], keywords: list[str], writes: tuple[int, ...]) -> None:
        import torch

        self.reference, self.slots, self.keywords, self.writes = reference, slots, keywords, writes
        self.spent = 0.0
        self.runs = 0
        # an axis not grown keeps the example's size
        self.default = {("ax", s.name, ax): int(n) for s in slots if isinstance(s.value, torch.Tensor)
                        for ax, n in enumerate(s.value.shape)}

    def outputs(self, sizes: Mapping[Any, int]) -> list[tuple] | None:
        """Output shapes of the reference with every candidate at ``sizes`` (others as in the example); None
        where it raises."""
        import torch

        from .calls import call_function

        if self.spent > PROBE_SECONDS:
            return None
        g = torch.Generator().manual_seed(1234 + self.runs)
        self.runs += 1
        full = dict(self.default)
        full.update(sizes)
        args = [self._make(s, full, g) for s in self.slots]
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                out = call_function(self.reference, args, self.keywords, self.writes)
            return [tuple(o.shape) for o in flatten_outputs(out)]
        except Exception:  # noqa: BLE001 - the reference refuses these sizes: that is the answer
            return None
        finally:
            self.spent += time.perf_counter() - t0

    def _make(self, s: _Slot, sizes: Mapping[Any, int], g: Any) -> Any:
        import torch

        if s.kind in ("const", "int_scalar"):
            key = ("scalar", s.name)
            return sizes.get(key, s.value) if s.kind == "int_scalar" else s.value
        if s.kind == "int_tuple":
            return type(s.value)(sizes.get(("scalar", _element(s.name, j)), v) for j, v in enumerate(s.value))
        keys = [("ax", s.name, ax) for ax in range(s.value.dim())]
        shape = tuple(sizes[k] for k in keys)
        t = s.value
        if tuple(t.shape) == shape and not (s.index_target is not None and s.index_target in sizes):
            return t
        dt = t.dtype
        if s.kind == "bool":
            return torch.rand(shape, generator=g) < (s.density or 0.5)
        if s.kind == "float":
            if s.values == "mask":
                return torch.where(torch.rand(shape, generator=g) < (s.density or 0.5), 0.0, -math.inf).to(dt)
            if s.values == "range":
                return (s.lo + torch.rand(shape, generator=g) * (s.hi - s.lo)).to(dt)
            return torch.randn(shape, generator=g).to(dt)
        if s.kind == "fp8":
            return (torch.randn(shape, generator=g) * (s.hi or 1.0) / 3).clamp(-448, 448).to(dt)
        n = math.prod(shape)
        if s.kind == "offsets":
            total = sizes.get(s.index_target, s.index_target)
            cuts = torch.sort(torch.randint(0, total + 1, (max(n - 2, 0),), generator=g)).values
            return torch.cat([torch.zeros(1, dtype=torch.long), cuts, torch.tensor([total])])[:n].to(dt).reshape(shape)
        if s.kind == "index_candidate" and s.index_target is not None:
            hi = sizes.get(s.index_target, s.index_target)
            v = torch.randint(0, hi, (n,), generator=g)
            return (torch.sort(v).values if s.sorted else v).to(dt).reshape(shape)
        flat = t.reshape(-1)  # plain ints: the example's own values, resampled
        if flat.numel() == 0:
            return torch.zeros(shape, dtype=dt)
        pick = torch.randint(0, flat.numel(), (n,), generator=g)
        return flat[pick].reshape(shape)


def infer(reference: Callable, calls: Sequence[Call], *, names: Sequence[str], constants: Mapping[str, int] = {},
          call_kind: str = "function", module: Mapping[str, Any] | None = None, where: str = "the reference",
          fixed_names: Sequence[str] = (), fixed_layouts: Sequence[str] = ()) -> Schema:
    """The schema of ``reference`` from its example ``calls`` (see the module docstring). ``names``: one per
    argument (positional, then keyword); ``constants``: the module-level ints of the reference's file, for naming;
    ``fixed_names``: arguments kept as given whatever they hold (a module's constructor arguments that are not
    sizes are found by probing anyway); ``fixed_layouts``: arguments always contiguous (a module's parameters)."""
    import torch

    from .calls import call_function

    first = calls[0]
    values = list(first.args) + list(first.kwargs.values())
    keywords = list(first.kwargs)
    if len(values) != len(names):
        raise InvalidArgument(f"{where}: {len(values)} arguments in the example call, {len(names)} names")
    slots = [_classify(n, v, i >= len(first.args)) for i, (n, v) in enumerate(zip(names, values))]
    for s in slots:
        if s.name in fixed_names and s.kind in ("int_scalar", "int_tuple"):
            s.kind = "const"
    t0 = time.perf_counter()
    from .calls import call_noting_writes

    try:  # (on copies: the user's example stays as given, whatever the reference writes)
        with torch.no_grad():
            out, outs, writes = call_noting_writes(reference, values, keywords)
    except Exception as e:  # noqa: BLE001 - the user's reference on the user's own example
        from ..errors import one_line

        raise InvalidArgument(f"{where} raised on its own example call: {one_line(e)}; fix the reference or the "
                              "inputs function") from None
    ref_seconds = time.perf_counter() - t0
    if call_kind != "function":  # (a module's forward writing its inputs: judged by what it returns)
        writes, outs = (), flatten_outputs(out)
    if not outs:
        raise InvalidArgument(f"{where} returned {type(out).__name__}, no tensor, and wrote none of its arguments: a "
                              "reference returns the output tensor(s) the kernel must produce, or writes them into "
                              "its arguments in place")

    # ---- candidate dims: axes (and size-naming ints) of equal size in every example call
    sizes_of: dict[tuple, list[int]] = {}
    for ci, c in enumerate(calls):
        vals = list(c.args) + list(c.kwargs.values())
        if len(vals) != len(slots):
            raise InvalidArgument(f"{where}: the example calls differ in their number of arguments")
        for s, v in zip(slots, vals):
            if isinstance(v, torch.Tensor):
                for ax, n in enumerate(v.shape):
                    sizes_of.setdefault((s.name, ax), []).append(int(n))
            elif s.kind == "int_scalar":
                sizes_of.setdefault((s.name, None), []).append(int(v))
            elif s.kind == "int_tuple" and isinstance(v, (tuple, list)) and len(v) == len(s.value):
                for j, e in enumerate(v):
                    sizes_of.setdefault((_element(s.name, j), None), []).append(int(e))
    groups: dict[tuple, list[tuple]] = {}
    for axis, seq in sizes_of.items():
        if len(seq) == len(calls):
            groups.setdefault(tuple(seq), []).append(axis)

    # ids point into the smallest candidate (of another argument) larger than their maximum; offsets end at one
    for s in slots:
        if s.kind == "index_candidate":
            cands = sorted(k[0] for k, axes in groups.items() if k[0] > s.hi and any(a[0] != s.name for a in axes))
            if cands:
                s.index_target = cands[0]
                s.kind = "index"
            else:
                s.kind = "int"
        elif s.kind == "offsets" and not any(k[0] == s.index_target for k in groups):
            s.kind, s.index_target = "int", None
    # probing works on "units": a set of axes that grow together; one unit per candidate to begin with
    units: dict[int, list[tuple]] = {}
    unit_size: dict[int, int] = {}
    for i, (key, axes) in enumerate(groups.items()):
        units[i] = list(axes)
        unit_size[i] = key[0]
    prober = _Prober(reference, slots, keywords, writes)

    def sizes_for(grow: Mapping[int, int]) -> dict:
        """The probe's size map: every axis of each grown unit at its new size (and size-naming ints)."""
        out: dict = {}
        for u, new in grow.items():
            for (name, ax) in units[u]:
                out[("scalar", name) if ax is None else ("ax", name, ax)] = new
            out[unit_size[u]] = new  # (ids and offsets pointing at this size follow it)
        return out

    base_shapes = [tuple(o.shape) for o in outs]
    free: dict[int, int] = {}  # unit -> multiple
    notes: list[str] = []
    derived: dict[int, tuple[int, str]] = {}  # unit -> (base unit, "double" | "plus1"): sized from the base
    grown_out: dict[int, list[tuple]] = {}
    order = sorted(units, key=lambda u: -unit_size[u])
    for u in order:
        if unit_size[u] < 1:
            continue
        step = _try_grow(prober, sizes_for, {u: unit_size[u]}, unit_size[u])
        if step is None:
            continue
        free[u], grown_out[u] = step
    # a shared size may be several dims (a square matmul's M, N and K): split each free unit into the smallest
    # sets of axes that grow on their own. Axes at the same place of same-shaped arguments (k and v caches, cos and
    # sin, rank >= 2 and not square) stay together: the reference may not care, the kernel's author does.
    atoms_of = _sibling_atoms(slots)
    for u in list(free):
        axes = list(units[u])
        scalars = [a for a in axes if a[1] is None]  # ints that equal the size: attached after the tensors split
        atoms = _atoms([a for a in axes if a[1] is not None], atoms_of)
        if len(atoms) < 2:
            continue
        m = free[u]
        classes: list[tuple[list, Any]] = []
        rest = list(atoms)
        budget = 40
        while rest and budget > 0:
            found = None
            import itertools

            for k in range(0, min(len(rest), 4)):
                for extra in itertools.combinations(rest[1:], k):
                    cls_atoms = [rest[0], *extra]
                    if not classes and len(cls_atoms) == len(atoms):
                        continue  # the whole unit: known to grow
                    if budget <= 0:
                        break
                    budget -= 1
                    units[u] = [a for at in cls_atoms for a in at]  # (for this probe only)
                    got = prober.outputs(sizes_for({u: unit_size[u] + m}))
                    units[u] = axes
                    if got is not None:
                        found = (cls_atoms, got)
                        break
                if found is not None or budget <= 0:
                    break
            if found is None:
                break
            classes.append(found)
            rest = [x for x in rest if x not in found[0]]
        if not classes:
            continue
        if rest:  # (the atoms left over: growing them on their own was never shown to run)
            classes.append((rest, None))
        # an int equal to the size goes with the first class it grows with (a module's in_features with the
        # weight's columns): a kernel reads its sizes from such ints as often as from shapes
        flat = [[a for at in cls_atoms for a in at] for cls_atoms, _ in classes]
        shapes_after = [got for _, got in classes]
        for sc in scalars:
            for i, cls in enumerate(flat):
                units[u] = cls + [sc]
                got = prober.outputs(sizes_for({u: unit_size[u] + m}))
                if got is not None:
                    flat[i], shapes_after[i] = cls + [sc], got
                    break
            else:
                flat.append([sc])
                shapes_after.append(None)
        units[u], grown_out[u] = flat[0], shapes_after[0]
        for cls, got in zip(flat[1:], shapes_after[1:]):
            nu = max(units) + 1
            units[nu], unit_size[nu] = cls, unit_size[u]
            if got is None:
                got = prober.outputs(sizes_for({nu: unit_size[nu] + m}))
            if got is not None:
                free[nu], grown_out[nu] = m, got
    # a unit that cannot grow alone may grow with one of half, twice, one more or one less than its size: the two
    # are one dim (rope's D and the D/2 of its cos/sin tables, E experts and E+1 offsets)
    for u in sorted(units, key=lambda k: -unit_size[k]):
        if u in free or not units[u] or u in derived:
            continue
        for v in sorted(units, key=lambda k: -unit_size[k]):
            if v == u or not units[v] or v in derived:
                continue
            su, sv = unit_size[u], unit_size[v]
            rel = {2 * su: "double", su + 1: "plus1"}.get(sv)  # v = 2u / u + 1: u is the base dim
            base, dep = (u, v)
            if rel is None:
                rel = {2 * sv: "double", sv + 1: "plus1"}.get(su)  # u = 2v / v + 1: v is the base
                base, dep = (v, u)
            if rel is None:
                continue
            for g in (1, 2, 4, 8):
                nb = unit_size[base] + g
                sizes = sizes_for({base: nb})
                sizes.update(sizes_for({dep: 2 * nb if rel == "double" else nb + 1}))
                got = prober.outputs(sizes)
                if got is not None:
                    free[base], grown_out[base] = (g if unit_size[base] % g == 0 else 1), got
                    free.pop(dep, None)
                    derived[dep] = (base, rel)
                    break
            if u in derived or u in free:
                break

    # ---- dims: names, roles, limits
    dim_name: dict[int, str] = {}
    used_names: set[str] = set()
    def position(a: tuple) -> tuple[int, int]:  # (an element of a tuple of sizes sorts with its argument)
        return names.index(a[0].split("[", 1)[0]), a[1] if a[1] is not None else -1

    for u in sorted(units, key=lambda k: min(position(a) for a in units[k]) if units[k] else (1 << 30, 0)):
        if not units[u] or u in derived or (unit_size[u] == 1 and u not in free):  # (a fixed 1: a broadcast axis)
            continue
        size = unit_size[u]
        consts = [k for k, v in constants.items() if v == size and not k.startswith("_")
                  and not any(w in k.upper() for w in ("BLOCK", "TILE", "WARP", "STAGE", "SEED", "GROUP"))]
        if len(consts) == 1 and consts[0] not in used_names:
            nm = consts[0]
        else:
            a = min(units[u], key=position)
            nm = f"{a[0]}.{a[1]}" if a[1] is not None else a[0]
        while nm in used_names:
            nm += "_"
        used_names.add(nm)
        dim_name[u] = nm

    in_output: dict[int, bool] = {}
    for u in free:
        got = grown_out.get(u)
        in_output[u] = got is not None and got != base_shapes
    float_holders: dict[int, set[str]] = {}
    for u in units:
        float_holders[u] = {a[0] for a in units[u] if a[1] is not None and next(
            s for s in slots if s.name == a[0]).kind in ("float", "fp8", "int")}
    index_units = set()
    for s in slots:
        if s.index_target is not None:
            for u in units:
                if unit_size[u] == s.index_target and units[u] and any(
                        a[0] != s.name for a in units[u]) and u not in derived:
                    index_units.add(u)
                    s.index_target = ("unit", u)
                    break
            else:
                s.kind = "int" if s.kind in ("index", "offsets") else s.kind
                s.index_target = None

    dims: dict[str, Dim] = {}
    for u, nm in dim_name.items():
        size = unit_size[u]
        if u in free:
            m = free[u]
            if in_output.get(u):
                role = "tiled"
            elif u in index_units:
                role = "index"
            elif len(float_holders.get(u, ())) >= 2:
                role = "contracted"
            else:
                role = "reduced"
            lo, hi = LIMITS[role]
            hi = min(hi, 4 * size if size >= 16 else max(2 * size, 8))
            hi -= hi % m
            lo = max(lo, m)
            if m > 1:
                lo += -lo % m
            why = "" if len(units[u]) == 1 else f"shared by {', '.join(_axis_label(a) for a in units[u])}"
            dims[nm] = Dim(nm, role, size, lo, max(lo, hi), m, why)
        else:
            role = "tiled" if any(size in o for o in base_shapes) else "reduced"
            dims[nm] = Dim(nm, role, size, size, size, 1, "kept: the reference does not run at other sizes")

    # ---- arguments
    def axis_dim(name: str, ax: int | None) -> str:
        for u, axes in units.items():
            if (name, ax) in axes:
                if u in derived:  # sized from another dim: twice it (its halves are the base dim) or one more
                    base_u, rel = derived[u]
                    return f"2*{dim_name[base_u]}" if rel == "double" else f"{dim_name[base_u]}+1"
                if u not in dim_name:
                    raise KeyError((name, ax))
                return dim_name[u]
        raise KeyError((name, ax))

    primary = _primary(slots)
    args: list[ArgSpec] = []
    for s in slots:
        kind = s.kind
        if kind == "int_scalar":
            try:
                d = axis_dim(s.name, None)
            except KeyError:
                d = None
            if d is not None and "/" not in d and "+" not in d and not dims[d].fixed:
                args.append(ArgSpec(s.name, (), kind="dim", index_of=d, keyword=s.keyword))
            else:
                args.append(ArgSpec(s.name, (), kind="const", value=s.value, keyword=s.keyword))
            continue
        if kind == "int_tuple":  # each int that names a free dim follows it; the others keep their value
            elements = []
            for j, v in enumerate(s.value):
                try:
                    d = axis_dim(_element(s.name, j), None)
                except KeyError:
                    d = None
                elements.append(d if d is not None and "/" not in d and "+" not in d and not dims[d].fixed
                                else str(int(v)))
            if all(e.isdigit() for e in elements):
                args.append(ArgSpec(s.name, (), kind="const", value=s.value, keyword=s.keyword))
            else:
                args.append(ArgSpec(s.name, tuple(elements), kind="dim", value=s.value, keyword=s.keyword))
            continue
        if kind == "const":
            args.append(ArgSpec(s.name, (), kind="const", value=s.value, keyword=s.keyword))
            continue
        shape = []
        for ax, n in enumerate(s.value.shape):
            try:
                shape.append(axis_dim(s.name, ax))
            except KeyError:
                shape.append(str(int(n)))
        target = dim_name.get(s.index_target[1]) if isinstance(s.index_target, tuple) else None
        fixed_layout = s.name in fixed_layouts
        if kind == "float":
            follows = _FLOAT_NAMES.get(s.dtype) == primary
            args.append(ArgSpec(s.name, tuple(shape), kind="float", dtype=None if follows else s.dtype,
                                values=s.values, lo=s.lo, hi=s.hi, density=s.density, keyword=s.keyword,
                                contiguous=fixed_layout))
        elif kind == "fp8":
            args.append(ArgSpec(s.name, tuple(shape), kind="fp8", dtype=s.dtype, hi=s.hi, keyword=s.keyword))
        elif kind == "bool":
            args.append(ArgSpec(s.name, tuple(shape), kind="bool", dtype="bool", density=s.density, keyword=s.keyword))
        elif kind in ("index", "offsets") and target is not None:
            args.append(ArgSpec(s.name, tuple(shape), kind=kind, index_of=target, dtype=s.dtype, sorted=s.sorted,
                                keyword=s.keyword))
        else:
            args.append(ArgSpec(s.name, tuple(shape), kind="int", dtype=s.dtype, lo=s.lo, hi=s.hi, keyword=s.keyword))

    outputs = []
    for i, o in enumerate(outs):
        shape = []
        for j, n in enumerate(o.shape):
            grew = [nm for u, nm in dim_name.items() if u in free and grown_out.get(u) and i < len(grown_out[u])
                    and j < len(grown_out[u][i]) and grown_out[u][i][j] != int(n)]
            shape.append(grew[0] if len(grew) == 1 else str(int(n)))
        outputs.append(Output(_dtype_name(o.dtype), tuple(shape)))
    if prober.spent > PROBE_SECONDS:
        notes.append(f"probing stopped after {prober.spent:.0f} s of reference time; the dims not probed keep their "
                     "example sizes")
    if ref_seconds > 5:
        notes.append(f"the reference took {ref_seconds:.1f} s on the example; cases draw smaller sizes")
    dtypes = ("fp32", "fp16", "bf16") if primary in ("fp32", "fp16", "bf16") else (primary,)
    return Schema(args=tuple(args), dims=dims, dtypes=dtypes, primary=primary, outputs=tuple(outputs),
                  call=call_kind, module=dict(module or {}), notes=tuple(notes),
                  writes=tuple(slots[i].name for i in writes))


def _sibling_atoms(slots: list[_Slot]) -> dict[tuple, tuple]:
    """axis -> the axes it must stay with: the same place of every other argument of the same shape, kind and dtype
    (rank >= 2, and not a square shape, whose places could be any of its dims)."""
    import torch

    shaped: dict[tuple, list[_Slot]] = {}
    for s in slots:
        v = s.value
        if isinstance(v, torch.Tensor) and v.dim() >= 2 and len(set(v.shape)) == v.dim():
            shaped.setdefault((tuple(v.shape), s.kind, s.dtype), []).append(s)
    out: dict[tuple, tuple] = {}
    for group in shaped.values():
        if len(group) < 2:
            continue
        for ax in range(group[0].value.dim()):
            atom = tuple((s.name, ax) for s in group)
            for a in atom:
                out[a] = atom
    return out


def _atoms(axes: list[tuple], atoms_of: Mapping[tuple, tuple]) -> list[tuple]:
    """``axes`` grouped into atoms (siblings together), in order."""
    out: list[tuple] = []
    seen: set = set()
    for a in axes:
        if a in seen:
            continue
        atom = tuple(x for x in atoms_of.get(a, (a,)) if x in axes) or (a,)
        seen.update(atom)
        out.append(atom)
    return out


def _axis_label(a: tuple) -> str:
    return f"{a[0]}.{a[1]}" if a[1] is not None else a[0]


def _primary(slots: list[_Slot]) -> str:
    """The dtype most floating tensor arguments share (ties: the first's): the one the sweep replaces."""
    counts: dict[str, int] = {}
    for s in slots:
        if s.kind == "float" and s.dtype in _FLOAT_NAMES:
            counts[_FLOAT_NAMES[s.dtype]] = counts.get(_FLOAT_NAMES[s.dtype], 0) + 1
    if not counts:
        return "fp32"
    best = max(counts.values())
    return next(k for k, v in counts.items() if v == best)


def _try_grow(prober: _Prober, sizes_for: Callable, unit: Mapping[int, int], size: int) -> tuple[int, list] | None:
    """(the multiple the unit keeps, the output shapes grown) for the first growth in GROW that runs; None."""
    (u, _), = unit.items()
    for g in GROW:
        if size % g:
            continue
        got = prober.outputs(sizes_for({u: size + g}))
        if got is not None:
            return g, got
    return None
