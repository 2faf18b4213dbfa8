"""Rule packs and settings, resolved in one place.

Precedence: argument > environment > project file (``gpuemu.yaml`` in the working directory) >
rule packs (the built-in ``rulepacks/default.yaml``, then any named by ``--rulepack`` or
``GPUEMU_RULEPACK``). No module reads the environment at import time; everything goes through
:func:`resolve`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import RulePackError

SCHEMA_VERSION = 1
_DTYPES = ("fp32", "fp16", "bf16")
_TOP_KEYS = {"schema_version", "name", "tolerances", "device_tolerances", "fuzz", "hook", "lint", "bindings", "provenance",
             "check", "oracle", "requires",  # check: the manifest of `gpuemu check` (gpuemu/check/manifest.py reads it)
             "production"}  # the presets of --sizes production (gpuemu/sizes.py reads and checks them)
_FUZZ_KEYS = {"iterations": int, "dtypes": list, "strategy": str, "shrink_budget": int, "determinism_check": bool,
              "case_timeout": float, "targets": list, "compile_workers": int, "torch_threads": int, "limits": str,
              "supports": object, "refusals": str}
_ORACLE_KEYS = {"framework_factor": float, "preconditions": str}
_HOOK_KEYS = {"mode": str, "sample_rate": float, "budget": float, "store": str, "max_snapshot_mb": float,
              "max_store_mb": float}


def builtin_dir() -> Path:
    """The built-in rule packs' folder (in the wheel: gpuemu/rulepacks; in a checkout: ./rulepacks)."""
    from importlib import resources

    packaged = Path(str(resources.files("gpuemu"))) / "rulepacks"
    if (packaged / "default.yaml").is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / "rulepacks"


def builtin_rulepack() -> Path:
    """Path of the built-in rule pack's main file."""
    return builtin_dir() / "default.yaml"


def builtin_rulepacks() -> list[Path]:
    """Every built-in rule pack: default.yaml first, then the others (hook.yaml, lint.yaml, ...) by name."""
    others = sorted(p for p in builtin_dir().glob("*.yaml") if p.name != "default.yaml")
    return [builtin_rulepack()] + others


def _fail(path: str, key: str, why: str) -> RulePackError:
    return RulePackError(f"{path}: {key}: {why}")


_FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _number(v: Any) -> Any:
    """YAML 1.1 (PyYAML) reads ``1e-5`` as a string (it wants ``1.0e-5``); what everyone writes is a number."""
    if isinstance(v, str) and _FLOAT_TEXT.fullmatch(v.strip()):
        return float(v)
    return v


def _validate(doc: Any, path: str) -> dict:
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise _fail(path, "<top>", f"expected a mapping, got {type(doc).__name__}")
    if doc.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise _fail(path, "schema_version", f"is {doc.get('schema_version')!r}, this gpuemu reads {SCHEMA_VERSION}")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise _fail(path, sorted(unknown)[0], f"unknown key; allowed: {', '.join(sorted(_TOP_KEYS))}")
    _validate_tolerances(doc.get("tolerances", {}) or {}, path, "tolerances")
    by_device = doc.get("device_tolerances", {}) or {}
    if not isinstance(by_device, dict):
        raise _fail(path, "device_tolerances", "expected a mapping of device (cuda) -> op -> dtype -> {rtol, atol}")
    for dev, tols in by_device.items():
        if dev not in DEVICE_KINDS:
            raise _fail(path, f"device_tolerances.{dev}", f"device must be one of {', '.join(DEVICE_KINDS)} "
                                                          "(tolerances without a device are the CPU's)")
        _validate_tolerances(tols or {}, path, f"device_tolerances.{dev}")
    _validate_sections(doc, path)
    return doc


# devices with their own tolerances (``device_tolerances``): a CUDA GPU's arithmetic differs from the interpreter's
DEVICE_KINDS = ("cuda",)


def _validate_tolerances(tols: Any, path: str, where: str) -> None:
    if not isinstance(tols, dict):
        raise _fail(path, where, "expected a mapping of op -> dtype -> {rtol, atol}")
    for op, per_dtype in tols.items():
        if op != "default":
            from . import ops

            if op not in ops.names():
                raise _fail(path, f"{where}.{op}", f"{op!r} is not a known op (see 'gpuemu ops')")
        if not isinstance(per_dtype, dict):
            raise _fail(path, f"{where}.{op}", "expected a mapping of dtype -> {rtol, atol}")
        for dt, entry in per_dtype.items():
            key = f"{where}.{op}.{dt}"
            if dt not in _DTYPES:
                raise _fail(path, key, f"dtype must be one of {', '.join(_DTYPES)}")
            if not isinstance(entry, dict) or set(entry) - {"rtol", "atol"} or not {"rtol", "atol"} <= set(entry):
                raise _fail(path, key, "expected {rtol: number, atol: number}")
            for k in ("rtol", "atol"):
                v = entry[k] = _number(entry[k])
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != v:
                    raise _fail(path, f"{key}.{k}", f"must be a number >= 0, got {v!r}")


def _validate_sections(doc: dict, path: str) -> None:
    for section, keys in (("fuzz", _FUZZ_KEYS), ("hook", _HOOK_KEYS), ("oracle", _ORACLE_KEYS)):
        sec = doc.get(section, {}) or {}
        if not isinstance(sec, dict):
            raise _fail(path, section, "expected a mapping")
        for k, v in list(sec.items()):
            if k not in keys:
                raise _fail(path, f"{section}.{k}", f"unknown key; allowed: {', '.join(sorted(keys))}")
            want = keys[k]
            if want is float:
                v = sec[k] = _number(v)
            ok = isinstance(v, want) and not (want is int and isinstance(v, bool))
            if want is float and isinstance(v, (int, float)) and not isinstance(v, bool):
                ok = True
            if not ok:
                raise _fail(path, f"{section}.{k}", f"expected {want.__name__}, got {v!r}")
    fz = doc.get("fuzz") or {}
    if "iterations" in fz and fz["iterations"] < 1:
        raise _fail(path, "fuzz.iterations", f"must be >= 1, got {fz['iterations']!r}")
    if "shrink_budget" in fz and fz["shrink_budget"] < 0:
        raise _fail(path, "fuzz.shrink_budget", f"must be >= 0, got {fz['shrink_budget']!r}")
    if "case_timeout" in fz and not 0 < fz["case_timeout"] < float("inf"):
        raise _fail(path, "fuzz.case_timeout", f"must be a number of seconds > 0, got {fz['case_timeout']!r}")
    for i, d in enumerate(fz.get("dtypes", [])):
        if d not in _DTYPES + ("float32", "float16", "bfloat16"):
            raise _fail(path, f"fuzz.dtypes[{i}]", f"{d!r} is not one of {', '.join(_DTYPES)}")
    if "dtypes" in fz and not fz["dtypes"]:
        raise _fail(path, "fuzz.dtypes", f"is empty; list some of {', '.join(_DTYPES)}")
    if "strategy" in fz:
        from .cases import STRATEGIES

        if fz["strategy"] not in STRATEGIES:
            raise _fail(path, "fuzz.strategy", f"{fz['strategy']!r} is not one of {', '.join(STRATEGIES)}")
    oracle = doc.get("oracle") or {}
    from .preconditions import POLICIES

    if oracle.get("preconditions", "fail") not in POLICIES:
        raise _fail(path, "oracle.preconditions", f"must be one of {', '.join(POLICIES)}, got {oracle['preconditions']!r}")
    if float(oracle.get("framework_factor", 2.0)) < 0:
        raise _fail(path, "oracle.framework_factor", "must be >= 0 (0 turns the framework rule off)")
    requires = doc.get("requires", {}) or {}
    if not isinstance(requires, dict):
        raise _fail(path, "requires", "expected a mapping of launcher (file.py:function, globs allowed) -> precondition")
    from .preconditions import Requires

    for target, spec in requires.items():
        try:
            Requires.from_dict(spec)
        except ValueError as e:
            raise _fail(path, f"requires.{target}", str(e)) from None


def load_yaml(path: Path) -> dict:
    """Read and validate one rule pack or project file. Parsed packs are kept per (path, size, mtime): every
    ``fuzz()`` resolves its settings, and the built-in packs took ~1 s to parse each time with PyYAML's Python
    loader; a file that changes is read again. Callers get a copy (they may merge into it)."""
    import copy

    try:
        st = os.stat(path)
    except OSError as e:
        raise RulePackError(f"{path}: cannot read rule pack: {e.strerror or e}") from None
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    doc = _PARSED.get(key)
    if doc is None:
        doc = _PARSED[key] = _parse(path)
    return copy.deepcopy(doc)


_PARSED: dict = {}


def _parse(path: Path) -> dict:
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise RulePackError(f"{path}: cannot read rule pack: {e.strerror or e}") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's C parser where PyYAML was built with it
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "<yaml>"
        raise RulePackError(f"{path}: {where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    return _validate(doc, str(path))


def _merge(base: dict, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


@dataclass(frozen=True)
class Settings:
    """Resolved settings; ``sources`` says where each came from."""

    tolerances: dict
    fuzz: dict
    hook: dict
    bindings: dict
    store: Path
    layers: tuple[str, ...]
    sources: dict = field(default_factory=dict)
    oracle: dict = field(default_factory=dict)
    requires: dict = field(default_factory=dict)
    device_tolerances: dict = field(default_factory=dict)
    # the layers that hold tolerances: "" for the CPU's (tolerances:), a device kind for device_tolerances.<kind>
    tolerance_layers: dict = field(default_factory=dict)

    def tolerance_table(self):
        from .tolerance import ToleranceTable

        def names(kind: str) -> str:  # a tolerance's source names the files it could have come from, no others
            return "+".join(Path(p).name for p in self.tolerance_layers.get(kind, self.layers))

        return ToleranceTable(self.tolerances, source=names(""), by_device=self.device_tolerances,
                              device_sources={k: names(k) for k in self.device_tolerances})


def resolve(*, rulepacks: tuple[str, ...] | list[str] = (), store: str | os.PathLike | None = None,
            env: Mapping[str, str] | None = None, cwd: str | os.PathLike | None = None,
            overrides: Mapping[str, Any] | None = None) -> Settings:
    """Resolve settings: argument > environment > gpuemu.yaml > rule packs.

    >>> resolve().fuzz["iterations"]
    100
    """
    env = os.environ if env is None else env
    cwd = Path(cwd or os.getcwd())
    project = cwd / "gpuemu.yaml"
    env_packs = [Path(p) for p in env.get("GPUEMU_RULEPACK", "").split(os.pathsep) if p]
    # built-in < project file < rule packs named in the environment < rule packs named as arguments
    ordered = builtin_rulepacks() + ([project] if project.is_file() else []) + env_packs + [Path(p) for p in rulepacks]
    merged: dict = {}
    sources: dict = {}
    tolerance_layers: dict[str, list[str]] = {}
    for path in ordered:
        doc = load_yaml(path)
        if doc.get("tolerances"):
            tolerance_layers.setdefault("", []).append(str(path))
        for kind, table in (doc.get("device_tolerances") or {}).items():
            if table:  # a device's entry falls back to the CPU table: both sets of layers
                tolerance_layers.setdefault(kind, []).append(str(path))
        merged = _merge(merged, {k: v for k, v in doc.items() if k not in ("schema_version", "name", "provenance")})
    fuzz = dict(merged.get("fuzz", {}))
    hook = dict(merged.get("hook", {}))
    for key, var, conv in (("mode", "GPUEMU_MODE", str), ("sample_rate", "GPUEMU_SAMPLE_RATE", float),
                           ("budget", "GPUEMU_BUDGET", float)):
        if var in env and env[var] != "":
            try:
                hook[key] = conv(env[var])
            except ValueError:
                raise RulePackError(f"environment: {var}={env[var]!r} is not a valid {conv.__name__}") from None
            sources[key] = "environment"
    for k, v in (overrides or {}).items():
        if v is not None:
            (fuzz if k in _FUZZ_KEYS else hook)[k] = v
            sources[k] = "argument"
    if store is not None:
        store_path, sources["store"] = Path(store), "argument"
    elif env.get("GPUEMU_STORE"):
        store_path, sources["store"] = Path(env["GPUEMU_STORE"]), "environment"
    elif hook.get("store"):
        store_path, sources["store"] = Path(hook["store"]), "gpuemu.yaml"
    else:
        store_path, sources["store"] = cwd / ".gpuemu", "default"
    return Settings(tolerances=merged.get("tolerances", {}), fuzz=fuzz, hook=hook,
                    bindings=merged.get("bindings", {}) or {}, store=store_path,
                    layers=tuple(str(p) for p in ordered), sources=sources,
                    oracle=dict(merged.get("oracle", {}) or {}), requires=dict(merged.get("requires", {}) or {}),
                    device_tolerances=dict(merged.get("device_tolerances", {}) or {}),
                    tolerance_layers={k: tuple(v) for k, v in tolerance_layers.items()})
