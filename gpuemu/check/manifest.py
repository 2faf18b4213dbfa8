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
    iterations = 100                   # any run setting may be overridden per entry
    requires = {contiguous = ["x"]}    # what this launcher's callers guarantee

or under a ``check:`` key of ``gpuemu.yaml`` (same keys). A plain YAML list of ``{target, op, ...}`` entries,
such as ``examples/kernels/manifest.yaml``, is also a manifest: a corpus, whose entries may carry annotations of
their own (kept as labels for ``--select``); elsewhere annotations go under ``labels:``.

Everything is validated when the manifest loads, before any kernel runs: each key against :data:`KEYS` (one
table: where a key may appear, how its value is checked, what it means), ops and dtypes known, ``requires``
names real arguments and dims, targets name files that exist and functions those files define. A mistake is a
:class:`~gpuemu.errors.RulePackError` of one line naming the file, the entry and the key (exit 2 on the CLI).
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import GpuemuError, RulePackError

TOP, ENTRY, BOTH = "top", "entry", "both"


class _Bad(ValueError):
    """A value a key's check refuses; the loader adds the file, entry and key."""


@dataclass(frozen=True)
class Key:
    """One manifest key: where it may appear (``top``: the ``[tool.gpuemu.check]`` table, ``entry``: a
    ``kernels`` entry, ``both``: either, the entry's value winning), how its value is checked and normalised
    (``check(value, ctx) -> value``, raising ``_Bad(reason)``), and a line for the allowed-keys message."""

    name: str
    where: str
    check: Callable[[Any, "_Ctx"], Any]
    text: str
    required: bool = False


@dataclass
class _Ctx:
    path: str  # the manifest file
    root: Path  # its folder: targets and rule packs are relative to it


# --------------------------------------------------------------------------------------- value checks


def _str(v: Any, ctx: _Ctx) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _Bad(f"expected a non-empty string, got {v!r}")
    return v


def _positive_int(v: Any, ctx: _Ctx) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise _Bad(f"expected a positive integer, got {v!r}")
    return v


def _seed(v: Any, ctx: _Ctx) -> int:
    if isinstance(v, str):
        try:
            v = int(v.strip(), 0)
        except ValueError:
            raise _Bad(f"{v!r} is not an integer (decimal or 0x-hex)") from None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64:
        raise _Bad(f"expected an integer in [0, 2**64) (decimal or 0x-hex), got {v!r}")
    return v


def _str_list(v: Any, ctx: _Ctx) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise _Bad(f"expected a list of strings, got {v!r}")
    return tuple(v)


def _dtypes(v: Any, ctx: _Ctx) -> tuple[str, ...]:
    from ..cases import canonical_dtype

    names = _str_list(v, ctx)
    if not names:
        raise _Bad("is empty; list some of fp32, fp16, bf16")
    out = []
    for d in names:
        try:
            out.append(canonical_dtype(d))
        except GpuemuError:
            raise _Bad(f"{d!r} is not a dtype gpuemu fuzzes; use fp32, fp16 or bf16") from None
    return tuple(dict.fromkeys(out))


def _strategy(v: Any, ctx: _Ctx) -> str:
    from ..cases import STRATEGIES, is_production_strategy

    if v not in STRATEGIES and not is_production_strategy(str(v)):  # (production[:PRESET]: gpuemu/sizes.py)
        raise _Bad(f"{v!r} is not a strategy; use one of {', '.join(STRATEGIES)}")
    return v


def _rulepacks(v: Any, ctx: _Ctx) -> tuple[str, ...]:
    packs = _str_list(v, ctx)
    for p in packs:
        full = p if os.path.isabs(p) else str(ctx.root / p)
        if not os.path.isfile(full):
            raise _Bad(f"rule pack {p!r} does not exist (relative to {ctx.root})")
    return packs


def _op(v: Any, ctx: _Ctx) -> str:
    from .. import ops

    if not isinstance(v, str) or v not in ops.names():
        close = difflib.get_close_matches(str(v), ops.names(), n=1)
        raise _Bad(f"{v!r} is not a known op" + (f"; did you mean {close[0]!r}?" if close else "")
                   + " (see 'gpuemu ops')")
    return v


def _policy(v: Any, ctx: _Ctx) -> str:
    from ..preconditions import POLICIES

    if v not in POLICIES:
        raise _Bad(f"{v!r}: use one of {', '.join(POLICIES)}")
    return v


def _framework(v: Any, ctx: _Ctx) -> str:
    from ..frameworks import canonical

    try:
        return canonical(_str(v, ctx)) or "torch"
    except GpuemuError as e:
        raise _Bad(str(e)) from None


def _limits(v: Any, ctx: _Ctx) -> str:
    if v not in ("allow", "fail"):
        raise _Bad(f"{v!r}: use allow or fail")
    return v


_refusals = _limits


def _supports(v: Any, ctx: _Ctx) -> Any:
    from ..envelope import parse_supports

    try:
        return parse_supports(v)
    except ValueError as e:
        raise _Bad(str(e)) from None


def _device(v: Any, ctx: _Ctx) -> str:
    if v not in ("auto", "cpu", "cuda"):
        raise _Bad(f"{v!r}: use auto, cpu or cuda")
    return v


def _requires(v: Any, ctx: _Ctx) -> dict:
    from ..preconditions import Requires

    try:
        return Requires.from_dict(v).to_dict()
    except ValueError as e:
        raise _Bad(str(e)) from None


def _labels(v: Any, ctx: _Ctx) -> dict:
    if not isinstance(v, Mapping) or not all(isinstance(k, str) for k in v):
        raise _Bad(f"expected a mapping of your own annotations (name: value), got {v!r}")
    return dict(v)


def _target(v: Any, ctx: _Ctx) -> str:
    v = _str(v, ctx)
    file_pat, sep, fn_pat = v.rpartition(":")
    if not sep or not file_pat or not fn_pat:
        raise _Bad(f"{v!r} must be 'path/to/file.py:function' (globs allowed on both parts)")
    return v


def _reference_target(v: Any, ctx: _Ctx) -> str:
    """A file.py:name of a reference or an inputs function, resolved against the manifest's folder."""
    v = _str(v, ctx)
    file, sep, name = v.rpartition(":")
    if not sep or not file or not name:
        raise _Bad(f"{v!r} must be 'path/to/file.py:name'")
    if file.endswith(".py") or "/" in file or os.sep in file:
        for base in (ctx.root, Path.cwd()):
            cand = (base / file).resolve()
            if cand.is_file():
                return f"{cand}:{name}"
        raise _Bad(f"{file!r} does not exist (relative to {_short(str(ctx.root))})")
    return v


def _schema(v: Any, ctx: _Ctx) -> Any:
    if isinstance(v, str):
        f = (ctx.root / v).resolve()
        if not f.is_file():
            raise _Bad(f"schema file {v!r} does not exist (relative to {_short(str(ctx.root))})")
        return str(f)
    if not isinstance(v, dict):
        raise _Bad("a mapping (dims, args, dtypes, requires) or the path of a YAML file holding one")
    from ..errors import InvalidArgument
    from ..schema.declare import load_declaration

    try:
        return load_declaration(v)
    except InvalidArgument as e:
        raise _Bad(str(e)) from None


def _kernels(v: Any, ctx: _Ctx) -> list:
    if not isinstance(v, list) or not v:
        raise _Bad("expected a non-empty list of {target, op} entries")
    return v


# Every key a manifest may hold. To add one: a row here (its check normalises the value), a field of the same name
# on KernelEntry (and on Manifest for a top-level one), then read it where the launcher is fuzzed (run.fuzz_one).
KEYS: dict[str, Key] = {k.name: k for k in (
    Key("target", ENTRY, _target, "path/to/file.py:function, globs allowed on both parts", required=True),
    Key("op", ENTRY, _op, "the op the launcher implements ('gpuemu ops'); or reference:"),
    Key("reference", ENTRY, _reference_target, "the launcher's PyTorch reference, file.py:function (or a KernelBench "
                                                "problem's file.py:Model), instead of op:"),
    Key("inputs", ENTRY, _reference_target, "with reference: file.py:function returning an example call's arguments "
                                             "(default: the reference file's get_inputs)"),
    Key("schema", ENTRY, _schema, "with reference: a declaration correcting the inferred schema (or a YAML file)"),
    Key("iterations", BOTH, _positive_int, "cases per launcher"),
    Key("seed", BOTH, _seed, "run seed (on an entry: that launcher's own seed)"),
    Key("dtypes", BOTH, _dtypes, "dtypes to fuzz, of fp32, fp16, bf16"),
    Key("strategy", BOTH, _strategy, "case strategy"),
    Key("rulepacks", BOTH, _rulepacks, "extra rule packs, relative to the manifest"),
    Key("requires", ENTRY, _requires, "what the launcher's callers guarantee: contiguous, dtypes, divisible, max_dims"),
    Key("preconditions", BOTH, _policy, "PRECONDITION verdicts: fail (default), warn or ignore"),
    Key("limits", BOTH, _limits, "a launch the GPU refuses: allow (a LIMIT line, default) or fail"),
    Key("supports", ENTRY, _supports, "sizes the launcher is declared to launch at (all, or {D: 256}): a LIMIT "
                                      "inside them fails"),
    Key("refusals", BOTH, _refusals, "an input the launcher refuses on the host before any launch: allow "
                                     "(REJECTED, default) or fail"),
    Key("framework", BOTH, _framework, "what the launcher is written against: torch, jax or tf (default: detected)"),
    Key("labels", ENTRY, _labels, "your own annotations, for --select"),
    Key("kernels", TOP, _kernels, "the launchers: a list of {target, op, ...} entries", required=True),
    Key("store", TOP, _str, "failure store folder"),
    Key("jobs", TOP, _positive_int, "worker processes"),
    Key("device", TOP, _device, "auto, cpu or cuda"),
)}
_RUN_KEYS = [k for k in KEYS.values() if k.where == BOTH]  # settings an entry inherits from the top level


def allowed(where: str) -> list[str]:
    """The keys allowed at ``top`` or in an ``entry``, sorted."""
    return sorted(k.name for k in KEYS.values() if k.where in (where, BOTH))


@dataclass(frozen=True)
class KernelEntry:
    """One launcher to fuzz: ``target`` is ``/abs/path/file.py:function`` after glob expansion."""

    target: str
    op: str | None = None
    reference: str | None = None  # judged against a PyTorch reference instead of an op (gpuemu.schema)
    inputs: str | None = None
    schema: Any = None
    iterations: int | None = None
    seed: int | None = None
    dtypes: tuple[str, ...] | None = None
    strategy: str | None = None
    rulepacks: tuple[str, ...] = ()
    requires: Mapping[str, Any] = field(default_factory=dict)
    preconditions: str | None = None
    framework: str | None = None
    limits: str | None = None
    supports: Any = None  # gpuemu.envelope.parse_supports: None, {} (all) or {dim: largest size}
    refusals: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # labels (and a corpus's own keys), for --select
    where: str = ""  # the entry in its manifest, for messages: "pyproject.toml: tool.gpuemu.check.kernels[1]"

    @property
    def file(self) -> str:
        return self.target.rpartition(":")[0]

    @property
    def function(self) -> str:
        return self.target.rpartition(":")[2]

    def to_dict(self) -> dict:
        return {"target": self.target, "op": self.op, "reference": self.reference, "inputs": self.inputs,
                "iterations": self.iterations, "seed": self.seed,
                "dtypes": list(self.dtypes) if self.dtypes else None, "strategy": self.strategy,
                "rulepacks": list(self.rulepacks), "requires": dict(self.requires),
                "preconditions": self.preconditions, "framework": self.framework, "limits": self.limits,
                "supports": self.supports, "refusals": self.refusals}


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
    preconditions: str | None = None
    framework: str | None = None
    limits: str | None = None
    refusals: str | None = None

    def setting(self, entry: KernelEntry, name: str) -> Any:
        """A run setting for ``entry``: its own value, else the manifest's top-level one."""
        own = getattr(entry, name)
        return own if own not in (None, ()) else getattr(self, name)


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
        try:
            doc = _read_yaml(y)
        except RulePackError:
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
    except OSError as e:
        raise _fail(_short(str(path)), "<toml>", f"cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise _fail(_short(str(path)), "<toml>", f"not valid TOML ({e})") from None
    table = doc.get("tool", {}).get("gpuemu", {})
    if not isinstance(table, dict) or "check" not in table:
        return None
    return table["check"]


def _read_yaml(path: Path) -> Any:
    import yaml

    try:
        text = path.read_text()
    except OSError as e:
        raise _fail(_short(str(path)), "<yaml>", f"cannot read: {e.strerror or e}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:  # PyYAML's message is several lines with a drawing of the spot: one line here
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "<yaml>"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise _fail(_short(str(path)), where, f"not valid YAML ({problem})") from None


def load(path: str | os.PathLike | None = None, *, cwd: str | os.PathLike | None = None) -> Manifest:
    """Read and validate a manifest, expanding target globs into one entry per launcher.

    >>> load("pyproject.toml").kernels[0].op   # doctest: +SKIP
    'softmax'
    """
    if path is None:
        found = find(cwd)
        if found is None:
            raise RulePackError("no manifest: add a [tool.gpuemu.check] table to pyproject.toml or a 'check:' key to "
                                "gpuemu.yaml (or pass --manifest PATH); see 'gpuemu check --help'")
        path = found
    p = Path(path)
    if not p.is_file():
        raise RulePackError(f"--manifest {path}: no such file; give a pyproject.toml, a gpuemu.yaml or a corpus list")
    shown = _short(str(p))  # messages name the file as the user would (relative to the working directory)
    corpus = False  # a plain list of entries: their own extra keys are labels
    if p.suffix == ".toml":
        table = _check_table_of_pyproject(p)
        if table is None:
            raise _fail(shown, "tool.gpuemu.check", "missing; add [tool.gpuemu.check] with [[tool.gpuemu.check.kernels]]")
        where = "tool.gpuemu.check"
    else:
        doc = _read_yaml(p)
        if isinstance(doc, list):  # a corpus list: [{target, op, ...}, ...]
            table, where, corpus = {"kernels": doc}, "kernels", True
        elif isinstance(doc, dict) and "check" in doc:
            table, where = doc["check"], "check"
        else:
            raise _fail(shown, "check", "missing; a manifest is a 'check:' mapping or a list of {target, op} entries")
    if not isinstance(table, dict):
        raise _fail(shown, where, f"expected a mapping, got {type(table).__name__}")
    ctx = _Ctx(path=shown, root=p.resolve().parent)
    top = _keys(table, TOP, ctx, shown, where, corpus=False)
    kernels: list[KernelEntry] = []
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(top["kernels"]):
        key = f"{where}[{i}]" if corpus else f"{where}.kernels[{i}]"
        if not isinstance(raw, dict):
            raise _fail(shown, key, f"expected a mapping with 'target' (file.py:function, globs allowed) and 'op', "
                                    f"got {raw!r}")
        label = f"{key} ({raw['target']})" if isinstance(raw.get("target"), str) else key
        entry = _keys(raw, ENTRY, ctx, shown, label, corpus=corpus)
        _check_entry(entry, {n: top.get(n) for n in ("dtypes",)}, shown, label)
        extra = dict(entry.pop("_extra", {}))
        extra.update(entry.pop("labels", None) or {})
        for target in expand(entry["target"], ctx.root, shown, f"{label}.target"):
            against = entry.get("op") or entry.get("reference")
            if (target, against) in seen:
                continue
            seen.add((target, against))
            kernels.append(KernelEntry(**dict(entry, target=target), extra=extra, where=f"{shown}: {label}"))
    top.pop("kernels")
    top.pop("_extra", None)
    return Manifest(path=str(p), root=str(ctx.root), kernels=tuple(kernels), **top)


def _keys(table: Mapping, where_kind: str, ctx: _Ctx, path: str, where: str, *, corpus: bool) -> dict:
    """Every key of ``table`` checked against :data:`KEYS` for its place; returns the normalised values (and,
    for a corpus entry, its own keys under ``_extra``)."""
    names = allowed(where_kind)
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for k in table:
        if k in names:
            continue
        close = difflib.get_close_matches(str(k), names, n=1, cutoff=0.75)
        if corpus and not close:
            extra[k] = table[k]  # a corpus entry's own annotation (correct:, bug:, note:)
            continue
        misplaced = KEYS.get(str(k))
        if misplaced is not None:
            why = ("belongs on each [[kernels]] entry" if misplaced.where == ENTRY else "belongs at the top level")
            raise _fail(path, f"{where}.{k}", f"{why}; allowed here: {', '.join(names)}")
        hint = f"did you mean {close[0]!r}? " if close else ""
        labels = " (your own annotations go under labels:)" if where_kind == ENTRY else ""
        raise _fail(path, f"{where}.{k}", f"unknown key; {hint}allowed: {', '.join(names)}{labels}")
    for k in names:
        spec = KEYS[k]
        if k not in table or table[k] is None:
            if spec.required:
                raise _fail(path, f"{where}", f"missing {k!r} ({spec.text})")
            continue
        try:
            out[k] = spec.check(table[k], ctx)
        except _Bad as e:
            raise _fail(path, f"{where}.{k}", str(e)) from None
    if extra:
        out["_extra"] = extra
    return out


def _check_entry(entry: dict, top: dict, path: str, where: str) -> None:
    """What a key's check alone cannot see: dtypes the op supports, ``requires`` names the op has."""
    from .. import ops
    from ..cases import canonical_dtype
    from ..preconditions import Requires

    if ("op" in entry) == ("reference" in entry):
        raise _fail(path, where, "give op: (an op of the registry) or reference: (the launcher's PyTorch reference), "
                                 "one of the two")
    if "reference" not in entry:
        for k in ("inputs", "schema"):
            if k in entry:
                raise _fail(path, f"{where}.{k}", "goes with reference:")
    else:  # its op (dims, dtypes) exists once the reference is bound: the fuzz checks the rest
        ref_file, _, ref_name = entry["reference"].rpartition(":")
        if ref_file.endswith(".py"):
            _require_defined(ref_file, ref_name, path, f"{where}.reference", entry["reference"])
        if entry.get("inputs"):
            in_file, _, in_name = entry["inputs"].rpartition(":")
            if in_file.endswith(".py"):
                _require_defined(in_file, in_name, path, f"{where}.inputs", entry["inputs"])
        return
    spec = ops.get(entry["op"])
    supported = [canonical_dtype(d) for d in spec.dtypes]
    dtypes = entry.get("dtypes") or top.get("dtypes")
    if dtypes and not set(dtypes) & set(supported):
        raise _fail(path, f"{where}.dtypes", f"{spec.name} supports {', '.join(supported)}, none of "
                                             f"{', '.join(dtypes)}")
    req = Requires.from_dict(entry.get("requires") or None)
    try:
        req.check_against(spec)
    except GpuemuError as e:
        raise _fail(path, f"{where}.requires", str(e)) from None
    if req.dtypes and dtypes and not set(req.dtypes) & set(dtypes):
        raise _fail(path, f"{where}.requires", f"requires dtypes {', '.join(req.dtypes)} and dtypes "
                                               f"{', '.join(dtypes)} leave nothing to fuzz")


def expand(pattern: str, root: Path, path: str = "<manifest>", key: str = "target") -> list[str]:
    """``file-glob:function-glob`` -> absolute ``file.py:function`` targets, sorted.

    Files resolve against the manifest's folder, then the working directory. A named function must be
    defined at the top level of its file (read without importing it); a function glob lists the plain
    functions the module defines (not its kernels, not what it imports), so the module is imported.
    """
    file_pat, sep, fn_pat = pattern.rpartition(":")
    if not sep or not file_pat or not fn_pat:
        raise _fail(path, key, f"{pattern!r} must be 'path/to/file.py:function' (globs allowed)")
    files: list[str] = []
    for base in (root, Path.cwd()):
        full = file_pat if os.path.isabs(file_pat) else str(base / file_pat)
        files = sorted(str(Path(f).resolve()) for f in glob.glob(full, recursive=True) if f.endswith(".py"))
        if files:
            break
    if not files:
        raise _fail(path, key, f"{pattern!r}: no Python file matches {file_pat!r} (relative to {root})")
    if not glob.has_magic(fn_pat):
        if not glob.has_magic(file_pat):
            _require_defined(files[0], fn_pat, path, key, pattern)
            return [f"{files[0]}:{fn_pat}"]
        # a file glob and one name: the files that define it
        found = [f for f in files if _defines(f, fn_pat, path, key, pattern)]
        if not found:
            raise _fail(path, key, f"{pattern!r}: no file matching {file_pat!r} defines {fn_pat!r} "
                                   f"({', '.join(map(_short, files))})")
        return [f"{f}:{fn_pat}" for f in found]
    import inspect

    from ..errors import TargetError

    out = []
    for f in files:
        try:
            mod = _import_file(f)
        except TargetError as e:
            raise _fail(path, key, f"{pattern!r}: {e}") from None
        # a glob lists the plain public functions the file defines: not its kernels, not what it imports
        names = [n for n, obj in vars(mod).items() if inspect.isfunction(obj) and obj.__module__ == mod.__name__
                 and not n.startswith("_") and fnmatch.fnmatchcase(n, fn_pat)]
        out += [f"{f}:{n}" for n in sorted(names)]
    if not out:
        raise _fail(path, key, f"{pattern!r}: no function matches {fn_pat!r} in {', '.join(map(_short, files))}")
    return out


def _short(f: str) -> str:
    try:
        return os.path.relpath(f)
    except ValueError:
        return f


def _require_defined(file: str, name: str, path: str, key: str, pattern: str) -> None:
    """``name`` must be bound at the top level of ``file`` (a def, an assignment, an import): read with ``ast``,
    nothing runs. A file with ``from x import *`` or a module ``__getattr__`` may bind anything: accepted."""
    tree = _defines(file, name, path, key, pattern, tree=True)
    if tree is True:
        return
    funcs = sorted(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and not n.name.startswith("_"))
    close = difflib.get_close_matches(name, funcs, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise _fail(path, key, f"{pattern!r}: {_short(file)} defines no {name!r}; {hint}"
                           f"its functions: {', '.join(funcs) or 'none'}")


def _defines(file: str, name: str, path: str, key: str, pattern: str, tree: bool = False) -> Any:
    """Whether ``file`` binds ``name`` at its top level (see :func:`_require_defined`); with ``tree``, the parsed
    module instead of False."""
    try:
        parsed = ast.parse(Path(file).read_text(encoding="utf-8"), filename=file)
    except OSError as e:
        raise _fail(path, key, f"{pattern!r}: cannot read {_short(file)}: {e.strerror or e}") from None
    except SyntaxError as e:
        raise _fail(path, key, f"{pattern!r}: {_short(file)} line {e.lineno}: {e.msg}") from None
    bound: set[str] = set()
    open_ended = False

    def walk(body: list) -> None:  # top-level statements, and those under if/try/with/for (not inside a def)
        nonlocal open_ended
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    bound.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    open_ended |= a.name == "*"
                    bound.add(a.asname or a.name.split(".")[0])
            else:
                for field_name in ("body", "orelse", "finalbody"):
                    walk(getattr(node, field_name, None) or [])
                for h in getattr(node, "handlers", None) or []:
                    walk(h.body)

    walk(parsed.body)
    if name in bound or open_ended or "__getattr__" in bound:
        return True
    return parsed if tree else False


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
        from ..errors import one_line

        raise TargetError(f"{_short(f)} failed to import: {one_line(e)}") from None
    return mod
