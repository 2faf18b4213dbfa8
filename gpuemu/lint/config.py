"""The ``lint:`` section of rule packs: defaults in ``rulepacks/lint.yaml``, overrides in ``gpuemu.yaml``.

Layers come from :func:`gpuemu.config.resolve` (built-in packs < project file < ``GPUEMU_RULEPACK`` <
``--rulepack``); the generic loader checks the top level only, so this module validates the ``lint``
section of every layer and names file, key and reason on a mistake::

    lint:
      targets: [sm_80, sm_86, sm_89, sm_90]
      hot_kernels: ["*"]           # fnmatch patterns on kernel names or ids; spills elsewhere are notes
      fail_on: warning             # the least severe level that makes the exit code 1
      rules:
        register-pressure: {level: warning, max_registers: 128}
        fp64-in-low-precision: {enabled: false}
      examples:                    # example launches for launchers (paths relative to the pack's folder)
        "kernels/mine.py:my_softmax": {op: softmax, dtype: fp16, dims: {N: 4096}}
      kernels:                     # declared specialisations for @triton.jit kernels
        "kernels/mine.py:_kernel": {args: {x_ptr: "*fp16", N: 4096, BLOCK: 1024}, options: {num_warps: 4}}
      cuda: {block_size: 256, flags: ["-O3"]}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import RulePackError
from .rules import LEVELS, RULES

_TOP = {"targets", "hot_kernels", "fail_on", "rules", "examples", "kernels", "cuda"}
_EXAMPLE_KEYS = {"op", "dtype", "dims", "kwargs"}
_KERNEL_KEYS = {"args", "options"}
_CUDA_KEYS = {"block_size", "flags"}


@dataclass(frozen=True)
class RuleSetting:
    """One rule as configured: whether it runs, at which level, with which thresholds."""

    id: str
    enabled: bool
    level: str
    params: dict


@dataclass(frozen=True)
class LintConfig:
    """The merged ``lint`` section of every layer."""

    targets: tuple[str, ...]
    hot_kernels: tuple[str, ...]
    fail_on: str
    rules: dict[str, RuleSetting]
    examples: dict[tuple[str, str], dict] = field(default_factory=dict)  # (abs file, attr) -> declaration
    kernels: dict[tuple[str, str], dict] = field(default_factory=dict)
    cuda: dict = field(default_factory=dict)
    layers: tuple[str, ...] = ()
    store: Path | None = None  # the resolved failure store (the default lint cache lives under it)


def _fail(path: str, key: str, why: str) -> RulePackError:
    return RulePackError(f"{path}: lint.{key}: {why}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _check_rules(rules: Any, path: str) -> None:
    if not isinstance(rules, dict):
        raise _fail(path, "rules", "expected a mapping of rule id -> settings")
    for rid, setting in rules.items():
        if rid not in RULES:
            from difflib import get_close_matches

            near = get_close_matches(str(rid), list(RULES), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise _fail(path, f"rules.{rid}", f"unknown rule{hint} (rules: {', '.join(RULES)})")
        if not isinstance(setting, dict):
            raise _fail(path, f"rules.{rid}", "expected a mapping like {level: warning}")
        allowed = {"enabled", "level"} | set(RULES[rid].params)
        for k, v in setting.items():
            if k not in allowed:
                raise _fail(path, f"rules.{rid}.{k}", f"unknown key; allowed: {', '.join(sorted(allowed))}")
            if k == "enabled" and not isinstance(v, bool):
                raise _fail(path, f"rules.{rid}.enabled", f"expected true or false, got {v!r}")
            if k == "level" and v not in LEVELS:
                raise _fail(path, f"rules.{rid}.level", f"{v!r} is not one of {', '.join(LEVELS)}")
            if k in RULES[rid].params and (not _number(v) or v < 0):
                raise _fail(path, f"rules.{rid}.{k}", f"expected a number >= 0, got {v!r}")


def _check_decls(decls: Any, path: str, section: str, keys: set[str]) -> dict[tuple[str, str], dict]:
    if not isinstance(decls, dict):
        raise _fail(path, section, "expected a mapping of 'path/to/file.py:name' -> settings")
    out: dict[tuple[str, str], dict] = {}
    base = Path(path).resolve().parent
    for target, decl in decls.items():
        file, sep, attr = str(target).rpartition(":")
        if not sep or not file or not attr:
            raise _fail(path, f"{section}.{target}", "name it as 'path/to/file.py:function'")
        if not isinstance(decl, dict):
            raise _fail(path, f"{section}.{target}", "expected a mapping")
        for k in decl:
            if k not in keys:
                raise _fail(path, f"{section}.{target}.{k}", f"unknown key; allowed: {', '.join(sorted(keys))}")
        if section == "examples":
            if "op" not in decl:
                raise _fail(path, f"{section}.{target}", "missing 'op' (the op the launcher implements)")
            from .. import ops

            if decl["op"] not in ops.names():
                raise _fail(path, f"{section}.{target}.op", f"{decl['op']!r} is not a known op (see 'gpuemu ops')")
            dims = decl.get("dims", {}) or {}
            if not isinstance(dims, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                                     for v in dims.values()):
                raise _fail(path, f"{section}.{target}.dims", "expected a mapping of dim name -> positive integer")
        else:
            if not isinstance(decl.get("args", {}), dict):
                raise _fail(path, f"{section}.{target}.args", "expected a mapping of parameter -> type or value")
            opts = decl.get("options", {}) or {}
            if not isinstance(opts, dict) or not all(_number(v) for v in opts.values()):
                raise _fail(path, f"{section}.{target}.options", "expected a mapping like {num_warps: 4}")
        out[(str((base / file).resolve()), attr)] = dict(decl, _declared_in=path)
    return out


def validate(section: Any, path: str) -> dict:
    """Check one layer's ``lint`` section; returns it normalised (declaration keys resolved to files)."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise _fail(path, "<section>", f"expected a mapping, got {type(section).__name__}")
    for k in section:
        if k not in _TOP:
            raise _fail(path, str(k), f"unknown key; allowed: {', '.join(sorted(_TOP))}")
    out = dict(section)
    if "targets" in section:
        from .targets import parse

        t = section["targets"]
        if not isinstance(t, list) or not t:
            raise _fail(path, "targets", "expected a non-empty list like [sm_80, sm_90]")
        try:
            parse([str(x) for x in t])
        except Exception as e:
            raise _fail(path, "targets", str(e)) from None
    if "hot_kernels" in section and (not isinstance(section["hot_kernels"], list)
                                     or not all(isinstance(x, str) for x in section["hot_kernels"])):
        raise _fail(path, "hot_kernels", "expected a list of name patterns like ['*matmul*']")
    if "fail_on" in section and section["fail_on"] not in LEVELS:
        raise _fail(path, "fail_on", f"{section['fail_on']!r} is not one of {', '.join(LEVELS)}")
    if "rules" in section:
        _check_rules(section["rules"] or {}, path)
    if "examples" in section:
        out["examples"] = _check_decls(section["examples"] or {}, path, "examples", _EXAMPLE_KEYS)
    if "kernels" in section:
        out["kernels"] = _check_decls(section["kernels"] or {}, path, "kernels", _KERNEL_KEYS)
    if "cuda" in section:
        cu = section["cuda"] or {}
        if not isinstance(cu, dict) or set(cu) - _CUDA_KEYS:
            raise _fail(path, "cuda", f"expected a mapping with keys {', '.join(sorted(_CUDA_KEYS))}")
        bs = cu.get("block_size", 256)
        if not isinstance(bs, int) or isinstance(bs, bool) or bs < 32 or bs > 1024 or bs % 32:
            raise _fail(path, "cuda.block_size", f"expected a multiple of 32 in 32..1024, got {bs!r}")
        if not isinstance(cu.get("flags", []), list):
            raise _fail(path, "cuda.flags", "expected a list of nvcc flags")
    return out


def _lint_section(path: Path) -> Any:
    """The raw ``lint`` section of a layer that :func:`gpuemu.config.resolve` has already validated."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}
    return doc.get("lint") if isinstance(doc, dict) else None


def load(*, rulepacks: tuple[str, ...] | list[str] = (), env: Mapping[str, str] | None = None,
         cwd: str | os.PathLike | None = None) -> LintConfig:
    """Merge the ``lint`` sections of every layer :func:`gpuemu.config.resolve` reads.

    >>> load().rules["spills"].level
    'error'
    """
    from .. import config as gconfig

    settings = gconfig.resolve(rulepacks=rulepacks, env=env, cwd=cwd)  # validates every layer's top level
    merged: dict[str, Any] = {"rules": {}, "examples": {}, "kernels": {}, "cuda": {}}
    for layer in settings.layers:
        sec = validate(_lint_section(Path(layer)), str(layer))
        for k, v in sec.items():
            if k == "rules":
                for rid, s in (v or {}).items():
                    merged["rules"][rid] = {**merged["rules"].get(rid, {}), **s}
            elif k in ("examples", "kernels", "cuda"):
                merged[k] = {**merged[k], **(v or {})}
            else:
                merged[k] = v
    rules: dict[str, RuleSetting] = {}
    for rid, info in RULES.items():
        s = merged["rules"].get(rid, {})
        rules[rid] = RuleSetting(id=rid, enabled=bool(s.get("enabled", True)), level=s.get("level", info.level),
                                 params={**info.params, **{k: v for k, v in s.items() if k in info.params}})
    from .targets import DEFAULT_TARGETS

    return LintConfig(targets=tuple(merged.get("targets") or DEFAULT_TARGETS),
                      hot_kernels=tuple(merged.get("hot_kernels") or ("*",)),
                      fail_on=merged.get("fail_on", "warning"), rules=rules, examples=merged["examples"],
                      kernels=merged["kernels"], cuda=merged["cuda"], layers=settings.layers, store=settings.store)
