"""The project manifest ``gpuemu check`` reads: which launchers implement which ops, and how to fuzz them.

It lives in ``pyproject.toml``::

    [tool.gpuemu.check]
    iterations = 30          # per launcher (default: the rule pack's fuzz.iterations)
    seed = 1                 # the run seed; each launcher gets its own seed derived from it and its target
    dtypes = ["fp32", "fp16"]
    rulepacks = ["ci/tolerances.yaml"]

    [[tool.gpuemu.check.kernels]]
    target = "kernels/*.py:softmax*"   # globs on the file and on the function name
    op = "softmax"
    iterations = 100                     # any run setting may be overridden per entry

or under a ``check:`` key of ``gpuemu.yaml`` (same keys). A plain YAML list of ``{target, op, ...}`` entries,
such as ``examples/kernels/manifest.yaml``, is also a manifest (extra keys are kept for ``--select``).
"""

from __future__ import annotations

import fnmatch
import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import RulePackError

_RUN_KEYS = {"iterations": int, "seed": int, "dtypes": list, "strategy": str, "rulepacks": list}
_TOP_KEYS = set(_RUN_KEYS) | {"kernels", "store", "jobs", "device"}
_ENTRY_KEYS = set(_RUN_KEYS) | {"target", "op"}


@dataclass(frozen=True)
class KernelEntry:
    """One launcher to fuzz: ``target`` is ``/abs/path/file.py:function`` after glob expansion."""

    target: str
    op: str
    iterations: int | None = None
    seed: int | None = None
    dtypes: tuple[str, ...] | None = None
    strategy: str | None = None
    rulepacks: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys gpuemu does not read (kept for --select)

    @property
    def file(self) -> str:
        return self.target.rpartition(":")[0]

    @property
    def function(self) -> str:
        return self.target.rpartition(":")[2]

    def to_dict(self) -> dict:
        return {"target": self.target, "op": self.op, "iterations": self.iterations, "seed": self.seed,
                "dtypes": list(self.dtypes) if self.dtypes else None, "strategy": self.strategy,
                "rulepacks": list(self.rulepacks)}


@dataclass(frozen=True)
class Manifest:
    path: str
    root: str  # targets and rule packs are relative to this folder
    kernels: tuple[KernelEntry, ...]
    iterations: int | None = None
    seed: int | None = None
    dtypes: tuple[str, ...] | None = None
    strategy: str | None = None
    rulepacks: tuple[str, ...] = ()
    store: str | None = None
    jobs: int | None = None
    device: str | None = None


def _fail(path: str, key: str, why: str) -> RulePackError:
    return RulePackError(f"{path}: {key}: {why}")


def find(cwd: str | os.PathLike | None = None) -> Path | None:
    """The project's manifest: pyproject.toml with [tool.gpuemu.check], else gpuemu.yaml with check:."""
    here = Path(cwd or os.getcwd())
    py = here / "pyproject.toml"
    if py.is_file() and _check_table_of_pyproject(py) is not None:
        return py
    y = here / "gpuemu.yaml"
    if y.is_file():
        import yaml

        try:
            doc = yaml.safe_load(y.read_text())
        except (OSError, yaml.YAMLError):
            return y  # load() reports the error with the file name
        if isinstance(doc, dict) and "check" in doc:
            return y
    return None


def _check_table_of_pyproject(path: Path) -> dict | None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise _fail(str(path), "<toml>", f"cannot read: {e}") from None
    table = doc.get("tool", {}).get("gpuemu", {})
    if not isinstance(table, dict) or "check" not in table:
        return None
    return table["check"]


def load(path: str | os.PathLike | None = None, *, cwd: str | os.PathLike | None = None) -> Manifest:
    """Read and validate a manifest, expanding target globs into one entry per launcher.

    >>> load("pyproject.toml").kernels[0].op   # doctest: +SKIP
    'softmax'
    """
    import yaml

    if path is None:
        found = find(cwd)
        if found is None:
            raise RulePackError("no manifest: add a [tool.gpuemu.check] table to pyproject.toml or a 'check:' key to "
                                "gpuemu.yaml (or pass --manifest PATH); see 'gpuemu check --help'")
        path = found
    p = Path(path)
    if not p.is_file():
        raise RulePackError(f"--manifest {path}: no such file")
    if p.suffix == ".toml":
        table = _check_table_of_pyproject(p)
        if table is None:
            raise _fail(str(p), "tool.gpuemu.check", "missing; add [tool.gpuemu.check] with [[tool.gpuemu.check.kernels]]")
        where = "tool.gpuemu.check"
    else:
        try:
            doc = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise _fail(str(p), "<yaml>", f"cannot read: {e}") from None
        if isinstance(doc, list):  # a corpus list: [{target, op, ...}, ...]
            table, where = {"kernels": doc}, "kernels"
        elif isinstance(doc, dict) and "check" in doc:
            table, where = doc["check"], "check"
        else:
            raise _fail(str(p), "check", "missing; a manifest is a 'check:' mapping or a list of {target, op} entries")
    if not isinstance(table, dict):
        raise _fail(str(p), where, f"expected a mapping, got {type(table).__name__}")
    unknown = set(table) - _TOP_KEYS
    if unknown:
        raise _fail(str(p), f"{where}.{sorted(unknown)[0]}", f"unknown key; allowed: {', '.join(sorted(_TOP_KEYS))}")
    root = p.resolve().parent
    top = _run_settings(table, str(p), where)
    raw = table.get("kernels")
    if not isinstance(raw, list) or not raw:
        raise _fail(str(p), f"{where}.kernels", "expected a non-empty list of {target, op} entries")
    kernels: list[KernelEntry] = []
    seen: set[tuple[str, str]] = set()
    for i, e in enumerate(raw):
        key = f"{where}.kernels[{i}]"
        if not isinstance(e, dict) or "target" not in e or "op" not in e:
            raise _fail(str(p), key, "expected a mapping with 'target' (file.py:function, globs allowed) and 'op'")
        from .. import ops

        if e["op"] not in ops.names():
            raise _fail(str(p), f"{key}.op", f"{e['op']!r} is not a known op (see 'gpuemu ops')")
        run = _run_settings({k: v for k, v in e.items() if k in _RUN_KEYS}, str(p), key)
        extra = {k: v for k, v in e.items() if k not in _ENTRY_KEYS}
        for target in expand(str(e["target"]), root, str(p), key):
            if (target, e["op"]) in seen:
                continue
            seen.add((target, e["op"]))
            kernels.append(KernelEntry(target=target, op=e["op"], extra=extra, **run))
    return Manifest(path=str(p), root=str(root), kernels=tuple(kernels), store=_opt_str(table, "store", p, where),
                    jobs=_opt_int(table, "jobs", p, where), device=_opt_str(table, "device", p, where), **top)


def _opt_str(t: dict, k: str, p: Path, where: str) -> str | None:
    v = t.get(k)
    if v is not None and not isinstance(v, str):
        raise _fail(str(p), f"{where}.{k}", f"expected a string, got {v!r}")
    return v


def _opt_int(t: dict, k: str, p: Path, where: str) -> int | None:
    v = t.get(k)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise _fail(str(p), f"{where}.{k}", f"expected a positive integer, got {v!r}")
    return v


def _run_settings(t: Mapping[str, Any], path: str, where: str) -> dict:
    out: dict[str, Any] = {}
    for k, typ in _RUN_KEYS.items():
        if k not in t or t[k] is None:
            continue
        v = t[k]
        if k == "seed" and isinstance(v, str):
            try:
                v = int(v, 0)
            except ValueError:
                raise _fail(path, f"{where}.{k}", f"{v!r} is not an integer (decimal or 0x-hex)") from None
        if isinstance(v, bool) or not isinstance(v, typ):
            raise _fail(path, f"{where}.{k}", f"expected {typ.__name__}, got {v!r}")
        if k == "iterations" and v < 1:
            raise _fail(path, f"{where}.{k}", f"must be >= 1, got {v}")
        if typ is list:
            if not all(isinstance(x, str) for x in v):
                raise _fail(path, f"{where}.{k}", "expected a list of strings")
            v = tuple(v)
        out[k] = v
    return out


def expand(pattern: str, root: Path, path: str = "<manifest>", key: str = "target") -> list[str]:
    """``file-glob:function-glob`` -> absolute ``file.py:function`` targets, sorted.

    Files resolve against the manifest's folder, then the working directory. A function glob lists the
    plain functions the module defines (not its kernels, not what it imports), so the module is imported.
    """
    file_pat, sep, fn_pat = pattern.rpartition(":")
    if not sep or not file_pat or not fn_pat:
        raise _fail(path, key, f"target {pattern!r} must be 'path/to/file.py:function' (globs allowed)")
    files: list[str] = []
    for base in (root, Path.cwd()):
        full = file_pat if os.path.isabs(file_pat) else str(base / file_pat)
        files = sorted(str(Path(f).resolve()) for f in glob.glob(full, recursive=True) if f.endswith(".py"))
        if files:
            break
    if not files:
        raise _fail(path, key, f"target {pattern!r}: no Python file matches {file_pat!r} (relative to {root})")
    if not glob.has_magic(fn_pat) and not glob.has_magic(file_pat):
        return [f"{f}:{fn_pat}" for f in files]  # one named launcher: a typo fails loudly when it loads
    import inspect

    out = []
    for f in files:
        mod = _import_file(f)
        # a glob lists the plain public functions the file defines: not its kernels, not what it imports
        names = [n for n, obj in vars(mod).items() if inspect.isfunction(obj) and obj.__module__ == mod.__name__
                 and (not n.startswith("_") or not glob.has_magic(fn_pat)) and fnmatch.fnmatchcase(n, fn_pat)]
        out += [f"{f}:{n}" for n in sorted(names)]
    if not out:
        raise _fail(path, key, f"target {pattern!r}: no function matches {fn_pat!r} in {', '.join(files)}")
    return out


def _import_file(f: str):
    """Import a launcher file under the module name gpuemu.target gives it, so a later load() reuses it."""
    import importlib.util
    import sys

    from ..errors import TargetError

    name = "gpuemu_target_" + "".join(c if c.isalnum() else "_" for c in str(Path(f).resolve()))
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(Path(f).resolve().parent))  # as target.load does: the file may import its neighbours
    spec = importlib.util.spec_from_file_location(name, f)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except Exception as e:
        sys.modules.pop(name, None)
        raise TargetError(f"{f} failed to import: {type(e).__name__}: {e}") from None
    return mod
