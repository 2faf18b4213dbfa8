"""Preconditions: what a launcher's callers guarantee, declared or found.

Many correct kernels assume what their callers guarantee one level up: contiguous rows (an autograd
Function that calls ``.contiguous()`` first), a dtype, a divisible size, a maximum size. Declared, gpuemu
draws no case outside them. Undeclared, a launcher that is right on a case with contiguous inputs and
silently wrong on the same case with strided ones gets its own verdict, ``PRECONDITION`` (not a numerical
FAIL), with the fix; one that refuses such input with a clear exception "rejects" it, which is good
behaviour: counted and shown, not a failure.

Declare in Python, on the CLI, or per launcher in ``gpuemu.yaml``::

    @gpuemu.requires(contiguous=["x"], dtypes=["fp16", "bf16"], divisible={"N": 8}, max_dims={"N": 8192})
    def softmax(x): ...

    gpuemu fuzz rows.py:softmax --op softmax --requires contiguous=x --requires divisible=N:8

    requires:
      "kernels/rows.py:softmax": {contiguous: [x], divisible: {N: 8}}

or per entry of the ``gpuemu check`` manifest (``requires = {contiguous = ["x"]}``). Project-file keys are
targets with globs, matched against the launcher's file however it was named (relative, absolute, or as a
module), so ``gpuemu fuzz``, ``gpuemu check`` (in worker processes or Ray tasks) and the pytest plugin draw the
same cases for the same launcher.

What an undeclared precondition does to a run is its *policy*, chosen once (:func:`resolve_policy`: argument >
manifest > ``oracle.preconditions`` of gpuemu.yaml or a rule pack > ``fail``) and rendered the same everywhere
through :func:`counts_as`: ``fail`` (the run fails: exit 1, red, a SARIF error), ``warn`` (the run passes; shown
amber, a SARIF warning, a pytest warning) or ``ignore`` (counted as passing; the count is still printed).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .errors import InvalidArgument

POLICIES = ("fail", "warn", "ignore")
ATTRIBUTE = "__gpuemu_requires__"


@dataclass(frozen=True)
class Requires:
    """What callers guarantee. ``contiguous``: argument names, or ``("*",)`` for every argument."""

    contiguous: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    divisible: Mapping[str, int] = field(default_factory=dict)
    max_dims: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.contiguous or self.dtypes or self.divisible or self.max_dims)

    def to_dict(self) -> dict:
        return {"contiguous": list(self.contiguous), "dtypes": list(self.dtypes), "divisible": dict(self.divisible),
                "max_dims": dict(self.max_dims)}

    @classmethod
    def from_dict(cls, d: Any) -> "Requires":
        """From ``gpuemu.yaml``; a malformed entry raises ValueError saying which key and why."""
        from .cases import canonical_dtype

        if d is None:
            return cls()
        if not isinstance(d, Mapping):
            raise ValueError(f"expected a mapping with contiguous, dtypes, divisible, max_dims; got {d!r}")
        unknown = set(d) - {"contiguous", "dtypes", "divisible", "max_dims"}
        if unknown:
            raise ValueError(f"unknown key {sorted(unknown)[0]!r}; allowed: contiguous, dtypes, divisible, max_dims")
        contiguous = d.get("contiguous", ())
        if contiguous is True or contiguous == "all":
            contiguous = ("*",)
        elif contiguous is False or contiguous is None:
            contiguous = ()
        elif isinstance(contiguous, str):
            contiguous = (contiguous,)
        try:
            dtypes = tuple(canonical_dtype(x) for x in (d.get("dtypes") or ()))
        except InvalidArgument as e:
            raise ValueError(f"dtypes: {e}") from None
        return cls(contiguous=tuple(str(c) for c in contiguous), dtypes=dtypes,
                   divisible=_sizes(d.get("divisible"), "divisible"), max_dims=_sizes(d.get("max_dims"), "max_dims"))

    def merge(self, other: "Requires") -> "Requires":
        """Both guarantees at once (the decorator's, the project file's and the command line's)."""
        return Requires(contiguous=tuple(dict.fromkeys(self.contiguous + other.contiguous)),
                        dtypes=tuple(d for d in self.dtypes if not other.dtypes or d in other.dtypes) or other.dtypes,
                        divisible={**self.divisible, **other.divisible}, max_dims={**self.max_dims, **other.max_dims})

    def check_against(self, spec) -> None:
        """Every name must be an argument or a dim of the op: a typo would silently declare nothing."""
        args = {a.name for a in spec.args}
        for name in self.contiguous:
            if name != "*" and name not in args:
                raise InvalidArgument(f"precondition contiguous={name!r}: {spec.name} has no argument {name!r} "
                                      f"(arguments: {', '.join(sorted(args))})")
        for key, sizes in (("divisible", self.divisible), ("max_dims", self.max_dims)):
            for dim in sizes:
                if dim not in spec.dims:
                    raise InvalidArgument(f"precondition {key}: {spec.name} has no dim {dim!r} "
                                          f"(dims: {', '.join(spec.dims)})")

    def contiguous_args(self, spec) -> set[str]:
        return {a.name for a in spec.args} if "*" in self.contiguous else set(self.contiguous)

    def apply(self, case):
        """``case`` moved inside the preconditions: declared-contiguous arguments contiguous, divisible dims
        rounded up, capped dims clamped (value parameters re-resolved for the new sizes)."""
        from .cases import dim_limits, with_dims

        spec = case.spec
        if self.contiguous:
            names = self.contiguous_args(spec)
            layouts = {k: ("contiguous" if k in names and v not in ("none", "contiguous") else v)
                       for k, v in case.layouts.items()}
            case = case.replace(layouts=layouts)
        dims = dict(case.dims)
        for d, cap in self.max_dims.items():
            dims[d] = min(dims[d], cap)
        for d, m in self.divisible.items():
            hi = min(self.max_dims.get(d, 1 << 30), max(dim_limits(spec, d)[1], m))
            up = -(-dims[d] // m) * m
            dims[d] = up if up <= hi else max(m, hi // m * m)
        if dims != dict(case.dims):
            case = with_dims(case, dims)
        return case


def _sizes(v: Any, key: str) -> dict[str, int]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ValueError(f"{key}: expected a mapping of dim -> positive integer, got {v!r}")
    out = {}
    for dim, n in v.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{key}.{dim}: expected a positive integer, got {n!r}")
        out[str(dim)] = n
    return out


def requires(*, contiguous: Iterable[str] | bool = (), dtypes: Iterable[str] = (),
             divisible: Mapping[str, int] | None = None, max_dims: Mapping[str, int] | None = None) -> Callable:
    """Declare what a launcher's callers guarantee; gpuemu then draws no case outside it.

    >>> import gpuemu
    >>> @gpuemu.requires(contiguous=["x"])
    ... def softmax(x): ...
    >>> gpuemu.preconditions.declared(softmax).contiguous
    ('x',)
    """
    if contiguous is True:
        contiguous = ("*",)
    elif contiguous is False:
        contiguous = ()
    elif isinstance(contiguous, str):
        contiguous = (contiguous,)
    try:
        req = Requires.from_dict({"contiguous": list(contiguous), "dtypes": list(dtypes),
                                  "divisible": dict(divisible or {}), "max_dims": dict(max_dims or {})})
    except ValueError as e:
        raise InvalidArgument(f"gpuemu.requires: {e}") from None

    def mark(fn: Callable) -> Callable:
        setattr(fn, ATTRIBUTE, req)
        return fn

    return mark


def declared(fn: Callable) -> Requires:
    """The preconditions declared on ``fn`` with :func:`requires` (none: an empty Requires)."""
    return getattr(fn, ATTRIBUTE, None) or Requires()


def parse_cli(items: Iterable[str]) -> Requires:
    """``--requires`` values: ``contiguous`` (every argument), ``contiguous=x,weight``, ``dtypes=fp16,bf16``,
    ``divisible=N:16``, ``max=N:8192`` (commas join several)."""
    req = Requires()
    for item in items:
        key, _, val = item.partition("=")
        key = key.strip()
        vals = [v.strip() for v in val.split(",") if v.strip()]
        try:
            if key == "contiguous":
                part = Requires.from_dict({"contiguous": vals or True})
            elif key == "dtypes" and vals:
                part = Requires.from_dict({"dtypes": vals})
            elif key in ("divisible", "max", "max_dims") and vals:
                sizes = {}
                for v in vals:
                    dim, _, n = v.partition(":")
                    sizes[dim.strip()] = int(n)
                part = Requires.from_dict({"max_dims" if key != "divisible" else "divisible": sizes})
            else:
                raise ValueError("use contiguous[=ARG,...], dtypes=fp16,..., divisible=DIM:N or max=DIM:N")
        except ValueError as e:
            raise InvalidArgument(f"--requires {item!r}: {e}") from None
        req = req.merge(part)
    return req


def target_forms(target: str | None, fn: Callable | None = None, cwd: str | None = None) -> set[str]:
    """Every spelling of a launcher a project file's key may use: the target as given, and for a launcher
    defined in a file, ``file.py:function`` with the file absolute and relative to ``cwd`` (a launcher fuzzed
    as ``kernels/rows.py:softmax``, checked as ``/abs/kernels/rows.py:softmax`` or collected by pytest as
    ``rows:softmax`` is the same launcher)."""
    import os

    cwd = cwd or os.getcwd()
    forms = {target} if target else set()
    names = [target.rpartition(":")[2]] if target and ":" in target else []
    files = []
    if target and target.rpartition(":")[0].endswith(".py"):
        files.append(target.rpartition(":")[0])
    code = getattr(getattr(fn, "__wrapped__", None) or fn, "__code__", None)
    if code is not None and code.co_filename.endswith(".py"):
        files.append(code.co_filename)
        names.append(getattr(fn, "__name__", code.co_name))
    for path in files:
        full = os.path.abspath(os.path.join(cwd, path))
        for name in names:  # the name it is reached by may differ from the def's name (an alias)
            forms.add(f"{full}:{name}")
            try:
                forms.add(f"{os.path.relpath(full, cwd)}:{name}")
            except ValueError:  # another drive (Windows)
                pass
    return forms


def _matches(pattern: str, forms: set[str], cwd: str) -> bool:
    import os

    pats = {pattern}
    path, sep, name = pattern.rpartition(":")
    if sep and path and not os.path.isabs(path):
        pats.add(f"{os.path.normpath(os.path.join(cwd, path))}:{name}")
    return any(f == p or fnmatch.fnmatchcase(f, p) or f.endswith("/" + p) for f in forms for p in pats)


def from_project(target: str | None, table: Mapping[str, Any], *, fn: Callable | None = None,
                 cwd: str | None = None) -> Requires:
    """The preconditions ``gpuemu.yaml`` declares for a launcher (keys are targets, relative to the project
    folder ``cwd``; globs allowed), matched against every spelling of it (:func:`target_forms`)."""
    import os

    req = Requires()
    if not target and fn is None:
        return req
    cwd = cwd or os.getcwd()
    forms = target_forms(target, fn, cwd)
    for pattern, spec in table.items():
        if _matches(str(pattern), forms, cwd):
            req = req.merge(Requires.from_dict(spec))
    return req


def check_policy(policy: Any, where: str = "preconditions") -> str:
    """``policy`` if it is one of :data:`POLICIES`; one line naming ``where`` otherwise."""
    if policy not in POLICIES:
        raise InvalidArgument(f"{where}={policy!r}: use one of {', '.join(POLICIES)}")
    return policy


def resolve_policy(argument: str | None = None, manifest: str | None = None, settings: Any = None) -> str:
    """The PRECONDITION policy, chosen in this one place: the argument (``--preconditions``, a pytest marker's
    ``preconditions=``) > the manifest (entry, then top level) > ``oracle.preconditions`` of ``gpuemu.yaml``
    or a rule pack > ``fail``."""
    if argument is not None:
        return check_policy(argument, "--preconditions")
    if manifest is not None:
        return check_policy(manifest, "manifest preconditions")
    configured = ((getattr(settings, "oracle", None) or {}).get("preconditions")) if settings is not None else None
    return check_policy(configured or "fail", "oracle.preconditions")


def counts_as(status: str, policy: str = "fail") -> str:
    """How a verdict status counts under ``policy``: ``pass``, ``warn`` or ``fail``. Every output (exit code,
    table, Markdown, JUnit, SARIF, HTML, pytest) renders this, so a PRECONDITION means one thing everywhere.

    >>> counts_as("precondition", "warn"), counts_as("rejected"), counts_as("fail", "ignore")
    ('warn', 'pass', 'fail')
    """
    if status in ("pass", "rejected"):
        return "pass"
    if status == "precondition":
        return {"fail": "fail", "warn": "warn", "ignore": "pass"}[check_policy(policy)]
    return "fail"


__all__ = ["POLICIES", "Requires", "requires", "declared", "parse_cli", "from_project", "target_forms",
           "check_policy", "resolve_policy", "counts_as"]
