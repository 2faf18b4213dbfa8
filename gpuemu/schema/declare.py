"""Declaring what inference got wrong or cannot know: a short mapping, in Python or YAML.

    dims:
      N: {min: 1, max: 4096, multiple_of: 16}   # drawn in [1, 4096], multiples of 16
      D: 64                                     # fixed at 64 (or {fixed: true}: fixed at the example's size)
      T: {role: tiled}
    args:
      offsets: {kind: offsets, of: T}           # monotone from 0 to T (group bounds)
      ids: {kind: index, of: V, sorted: true}   # ids in [0, V)
      scale: {dtype: float32, range: [0.5, 2.0]}
      seq_lens: {kind: int, range: [1, "P*S"]}  # bounds may be products/sums of dims
      x: {dtype: float16}                        # a fixed dtype: not swept
    dtypes: [fp16, bf16]
    requires: {contiguous: true}                # preconditions, as --requires

Given as ``schema=`` (a mapping, or the path of a YAML/JSON file), ``--schema FILE``, a manifest entry's
``schema:``, and/or a ``GPUEMU_SCHEMA`` mapping in the reference's own file (the given one on top of it, entry by
entry: see :func:`load_declaration`). Names are those the printed schema
uses (``gpuemu fuzz ... --show-schema``); anything unknown is an error naming what is known.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Mapping

from ..errors import InvalidArgument
from .model import Dim, Schema, bound_value  # noqa: F401 (bound_value: the declared bounds)

TOP_KEYS = ("dims", "args", "dtypes", "requires")
DIM_KEYS = ("min", "max", "multiple_of", "fixed", "role")
ARG_KEYS = ("kind", "of", "dtype", "range", "sorted", "density", "values", "value")
KINDS = ("float", "index", "offsets", "int", "bool", "fp8", "const", "dim")
_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "float32": "float32", "float16": "float16",
           "bfloat16": "bfloat16", "float64": "float64", "int8": "int8", "uint8": "uint8", "int16": "int16",
           "int32": "int32", "int64": "int64", "bool": "bool", "fp8e4m3": "float8_e4m3fn", "fp8e5m2": "float8_e5m2",
           "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def load_declaration(given: Any, reference: Any = None) -> dict:
    """The declaration as a mapping: the reference module's ``GPUEMU_SCHEMA`` (if any) with ``given`` (a mapping or
    a file path) on top: an entry of ``given`` replaces the same dim's, argument's or precondition's entry of the
    module's, ``dtypes`` replaces the list; what ``given`` does not name stays as the module declares it."""
    import inspect

    mod = inspect.getmodule(reference) if reference is not None else None
    own = getattr(mod, "GPUEMU_SCHEMA", None) if mod is not None else None
    own = _checked(own, f"GPUEMU_SCHEMA of {getattr(mod, '__name__', 'the reference module')}") if own is not None else {}
    if given is None:
        return own
    if isinstance(given, (str, Path)):
        path = Path(given)
        if not path.is_file():
            raise InvalidArgument(f"schema file {str(path)!r} does not exist")
        import yaml

        try:
            given = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise InvalidArgument(f"schema file {str(path)!r} is not valid YAML{at}: fix its syntax") from None
    given = _checked(given, "schema declaration")
    merged = dict(own)
    for key, value in given.items():
        if key != "dtypes" and isinstance(value, Mapping) and isinstance(own.get(key), Mapping):
            merged[key] = {**own[key], **value}
        else:
            merged[key] = value
    return merged


def _checked(given: Any, what: str) -> dict:
    if not isinstance(given, Mapping):
        raise InvalidArgument(f"a schema declaration is a mapping with keys {', '.join(TOP_KEYS)}; got "
                              f"{type(given).__name__} ({what})")
    bad = [k for k in given if k not in TOP_KEYS]
    if bad:
        raise InvalidArgument(f"{what}: unknown key {bad[0]!r}; allowed: {', '.join(TOP_KEYS)}")
    return dict(given)


_EXPR = re.compile(r"^[A-Za-z_][\w.]*(\s*[*+-]\s*([A-Za-z_][\w.]*|\d+))*$|^\d+$")


def apply(sch: Schema, declared: Mapping[str, Any]) -> Schema:
    """``sch`` with the declaration's corrections (InvalidArgument for a name or key it does not know)."""
    if not declared:
        return sch
    dims = dict(sch.dims)
    for name, d in (declared.get("dims") or {}).items():
        if name not in dims:
            raise InvalidArgument(f"schema declaration: dim {name!r} is not a dim of this call; its dims: "
                                  f"{', '.join(dims)} (gpuemu fuzz ... --show-schema prints them)")
        dims[name] = _dim(dims[name], d)
    args = list(sch.args)
    names = [a.name for a in args]
    for name, d in (declared.get("args") or {}).items():
        if name not in names:
            raise InvalidArgument(f"schema declaration: argument {name!r} is not an argument of this call; its "
                                  f"arguments: {', '.join(names)}")
        i = names.index(name)
        args[i] = _arg(args[i], d, dims)
    dtypes = sch.dtypes
    if declared.get("dtypes") is not None:
        from ..cases import canonical_dtype

        dts = declared["dtypes"]
        dtypes = tuple(canonical_dtype(x) for x in ([dts] if isinstance(dts, str) else dts))
        if not dtypes:
            raise InvalidArgument("schema declaration: dtypes is empty; list at least one of fp32, fp16, bf16")
    return sch.replace(dims=dims, args=tuple(args), dtypes=dtypes, declared=dict(declared))


def _dim(dim: Dim, d: Any) -> Dim:
    if isinstance(d, int) and not isinstance(d, bool):
        return dataclasses.replace(dim, lo=d, hi=d, multiple_of=1, why="declared")
    if not isinstance(d, Mapping):
        raise InvalidArgument(f"schema declaration: dim {dim.name}: give a size or a mapping with keys "
                              f"{', '.join(DIM_KEYS)}")
    bad = [k for k in d if k not in DIM_KEYS]
    if bad:
        raise InvalidArgument(f"schema declaration: dim {dim.name}: unknown key {bad[0]!r}; allowed: "
                              f"{', '.join(DIM_KEYS)}")
    if d.get("fixed"):
        return dataclasses.replace(dim, lo=dim.example, hi=dim.example, why="declared fixed")
    role = d.get("role", dim.role)
    from .model import ROLES

    if role not in ROLES:
        raise InvalidArgument(f"schema declaration: dim {dim.name}: role {role!r}; use one of {', '.join(ROLES)}")
    m = int(d.get("multiple_of", dim.multiple_of))
    lo, hi = int(d.get("min", dim.lo)), int(d.get("max", dim.hi))
    if m < 1 or lo < 1 or hi < lo:
        raise InvalidArgument(f"schema declaration: dim {dim.name}: need 1 <= min <= max and multiple_of >= 1")
    return dataclasses.replace(dim, role=role, lo=lo, hi=hi, multiple_of=m, why="declared")


def _arg(arg: Any, d: Any, dims: Mapping[str, Dim]) -> Any:
    if not isinstance(d, Mapping):
        raise InvalidArgument(f"schema declaration: argument {arg.name}: give a mapping with keys {', '.join(ARG_KEYS)}")
    bad = [k for k in d if k not in ARG_KEYS]
    if bad:
        raise InvalidArgument(f"schema declaration: argument {arg.name}: unknown key {bad[0]!r}; allowed: "
                              f"{', '.join(ARG_KEYS)}")
    ch: dict[str, Any] = {}
    if "kind" in d:
        if d["kind"] not in KINDS:
            raise InvalidArgument(f"schema declaration: argument {arg.name}: kind {d['kind']!r}; use one of "
                                  f"{', '.join(KINDS)}")
        ch["kind"] = d["kind"]
    if "of" in d:
        if d["of"] not in dims:
            raise InvalidArgument(f"schema declaration: argument {arg.name}: 'of: {d['of']}' is not a dim; dims: "
                                  f"{', '.join(dims)}")
        ch["index_of"] = d["of"]
    if "dtype" in d:
        dt = _DTYPES.get(str(d["dtype"]).lower())
        if dt is None:
            raise InvalidArgument(f"schema declaration: argument {arg.name}: dtype {d['dtype']!r} is not known; use "
                                  f"one of {', '.join(sorted(set(_DTYPES)))}")
        ch["dtype"] = dt
    if "range" in d:
        r = d["range"]
        if not isinstance(r, (list, tuple)) or len(r) != 2 or not all(
                isinstance(x, (int, float)) or (isinstance(x, str) and _EXPR.match(x.strip())) for x in r):
            raise InvalidArgument(f"schema declaration: argument {arg.name}: range is [low, high] (numbers, or sums "
                                  "and products of dims such as \"P*S\")")
        for x in r:
            if isinstance(x, str):
                for tok in re.findall(r"[A-Za-z_][\w.]*", x):
                    if tok not in dims:
                        raise InvalidArgument(f"schema declaration: argument {arg.name}: range names {tok!r}, not a "
                                              f"dim; dims: {', '.join(dims)}")
        ch["lo"], ch["hi"] = r[0], r[1]
        if (ch.get("kind") or arg.kind) == "float":
            ch["values"] = "range"
    for key in ("sorted", "density", "values", "value"):
        if key in d:
            ch[key] = d[key]
    kind = ch.get("kind", arg.kind)
    if kind in ("index", "offsets", "dim") and not (ch.get("index_of") or arg.index_of) \
            and not (kind == "dim" and arg.shape and "kind" not in ch):  # (a tuple of sizes keeps its elements)
        raise InvalidArgument(f"schema declaration: argument {arg.name}: kind {kind} needs 'of: DIM'")
    return dataclasses.replace(arg, **ch)
