"""``lint()``: from source targets to findings.

collect example launches (:mod:`.examples`) -> specialise and key them per target (:mod:`.specialize`,
:mod:`.compile`) -> read the cache or compile -> measure (:mod:`.metrics`) -> rules (:mod:`.rules`) with the
baseline (:mod:`.baseline`) -> :class:`LintResult`.
"""

from __future__ import annotations

import inspect
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import InvalidArgument, TargetError
from . import baseline as B
from . import examples as E
from .cache import ArtifactCache
from .compile import Job, Outcome, cuda_job, outcomes, run_jobs, triton_job
from .config import LintConfig, load
from .rules import LEVELS, Finding, evaluate, is_hot
from .targets import Target, parse


@dataclass(frozen=True)
class LintResult:
    """Everything one lint run measured and found."""

    reports: tuple[Outcome, ...]
    findings: tuple[Finding, ...]
    targets: tuple[Target, ...]
    fail_on: str = "warning"
    baseline: B.Baseline | None = None
    diff: tuple[B.DiffRow, ...] = ()
    timings: dict = field(default_factory=dict)
    labels: tuple[str, ...] = ()

    @property
    def gating(self) -> list[Finding]:
        """Findings that make the run fail (at or above ``fail_on``, not accepted by the baseline)."""
        return [f for f in self.findings if f.gates(self.fail_on)]

    def exit_code(self) -> int:
        """0 when nothing gates, 1 otherwise (usage errors never get this far: they raise)."""
        return 1 if self.gating else 0

    def to_dict(self) -> dict:
        from .. import __version__

        return {
            "schema_version": 1, "tool": "gpuemu lint", "gpuemu_version": __version__,
            "targets": [t.name for t in self.targets], "fail_on": self.fail_on,
            "kernels": [{"kernel": r.kernel_id, "name": r.name, "target": r.target.name,
                         "location": r.location.to_dict() if r.location else None,
                         "specialization": r.specialization, "grid": list(r.grid) if r.grid else None,
                         "cache_hit": r.cache_hit, "compile_seconds": round(r.seconds, 3), "error": r.error,
                         "metrics": r.metrics.to_dict() if r.metrics else None} for r in self.reports],
            "findings": [f.to_dict() for f in self.findings],
            "baseline": ({"path": self.baseline.path, "diff": [d.to_dict() for d in self.diff]}
                         if self.baseline else None),
            "summary": {"kernels": len({r.kernel_id for r in self.reports}), "compiles": len(self.reports),
                        "findings": len(self.findings), "gating": len(self.gating),
                        "by_level": {lv: sum(f.level == lv for f in self.findings) for lv in LEVELS}},
            "timings": {k: round(v, 3) if isinstance(v, float) else v for k, v in self.timings.items()},
        }


# ------------------------------------------------------------------------------------------ collection


def _split(source: str) -> tuple[str, list[str]]:
    """``file.py:a,b`` -> ("file.py", ["a", "b"]); ``file.py`` -> ("file.py", [])."""
    file, sep, names = source.rpartition(":")
    if sep and (file.endswith((".py", ".cu", ".cuh")) or "/" in file or os.sep in file) and not names.startswith(os.sep):
        return file, [n for n in names.split(",") if n]
    return source, []


_MANIFESTS: dict[tuple[str, int], list[tuple[str, str]]] = {}


def _manifest_targets(manifest: str | os.PathLike | None) -> list[tuple[str, str]]:
    """(absolute ``file.py:launcher``, op) of every manifest entry; parsed once per file version."""
    from .. import corpus

    path = Path(corpus.default_manifest() if manifest is None else manifest).resolve()
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        raise InvalidArgument(f"--manifest {str(manifest)!r} does not exist") from None
    if key not in _MANIFESTS:
        import yaml

        root = path.parent.parent.parent  # manifests live at <root>/examples/kernels/manifest.yaml
        try:  # only target and op are needed: libyaml's loader reads the 50-entry manifest ~10x faster
            doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or []
            entries = [corpus.Entry(target=d["target"], op=d["op"], correct=bool(d.get("correct", True)))
                       for d in doc]
        except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
            raise InvalidArgument(f"{path}: cannot read the corpus manifest ({type(e).__name__}: {e}); every entry "
                                  f"needs 'target' and 'op'") from None
        if entries and not (root / entries[0].target.rpartition(":")[0]).is_file():  # a manifest deeper down
            root = next((a for a in path.parents if (a / entries[0].target.rpartition(":")[0]).is_file()), root)
        _MANIFESTS[key] = [(corpus.resolve_target(e, root), e.op) for e in entries]
    return _MANIFESTS[key]


def _manifest_ops(manifest: str | os.PathLike | None) -> dict[tuple[str, str], str]:
    try:
        entries = _manifest_targets(manifest)
    except InvalidArgument:
        if manifest is not None:
            raise
        return {}  # no manifest here: launchers need --op or a declaration
    out = {}
    for target, op in entries:
        file, _, fn = target.rpartition(":")
        out[(str(Path(file).resolve()), fn)] = op
    return out


def corpus_sources(manifest: str | os.PathLike | None = None) -> list[str]:
    """Every launcher of the example corpus (``examples/kernels/manifest.yaml``) as ``file.py:launcher``."""
    return [t for t, _ in _manifest_targets(manifest)]


def _required_params(fn: Callable) -> int:
    try:
        return sum(1 for p in inspect.signature(fn).parameters.values()
                   if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    except (TypeError, ValueError):
        return 1


def collect(sources: Sequence[str], *, config: LintConfig, op: str | None = None, dtype: str = "fp16",
            dims: Mapping[str, int] | None = None, manifest: str | os.PathLike | None = None,
            root: str | os.PathLike | None = None) -> tuple[list[E.Specimen], list[Path], list[str]]:
    """(Triton specimens, .cu files, labels linted) for the command line's sources."""
    specimens: list[E.Specimen] = []
    cu_files: list[Path] = []
    labels: list[str] = []
    ops_by_target: dict | None = None

    def manifest_ops() -> dict:
        nonlocal ops_by_target
        if ops_by_target is None:
            ops_by_target = _manifest_ops(manifest)
        return ops_by_target

    seen: set[str] = set()
    for source in sources:
        file, names = _split(source)
        path = Path(file)
        if not path.is_file():
            raise TargetError(f"lint target {source!r}: file {file!r} does not exist; check the path")
        absf = str(path.resolve())
        label_file = E.display_path(path, root)
        if path.suffix in (".cu", ".cuh"):
            from .tools import nvcc

            if nvcc() is None:
                raise InvalidArgument(f"{file}: linting CUDA C needs nvcc on PATH (install the CUDA toolkit)")
            if absf not in seen:
                seen.add(absf)
                cu_files.append(path)
                labels.append(label_file)
            continue
        if not names:
            names = sorted({a for (f, a) in list(config.examples) + list(config.kernels) + list(manifest_ops())
                            if f == absf})
            if not names:
                raise InvalidArgument(f"{file}: which kernels? Name them ({file}:LAUNCHER --op OP, or "
                                      f"{file}:KERNEL declared under lint.kernels in gpuemu.yaml)")
        module = E.load_module(path)
        for name in names:
            label = f"{label_file}:{name}"
            if label in seen:
                continue
            seen.add(label)
            labels.append(label)
            obj = E.resolve_attr(module, name, f"{file}:{name}")
            specimens.extend(_specimens_for(obj, absf, name, label, file, config=config, op=op, dtype=dtype,
                                            dims=dims, manifest=manifest, ops_cache=manifest_ops))
    return specimens, cu_files, labels


def _specimens_for(obj, absf: str, name: str, label: str, file: str, *, config: LintConfig, op, dtype, dims,
                   manifest, ops_cache) -> list[E.Specimen]:
    if E.is_jit_kernel(obj):
        decl = config.kernels.get((absf, name))
        jit = obj
        while not hasattr(jit, "_pack_args") and hasattr(jit, "fn"):
            jit = jit.fn
        if decl is None:
            raise InvalidArgument(
                f"{file}:{name} is a @triton.jit kernel, so lint needs its specialisation: name the launcher that "
                f"calls it ({file}:LAUNCHER --op OP), or declare it in gpuemu.yaml under lint.kernels, e.g. "
                f"'{file}:{name}': {{args: {{x_ptr: '*fp16', N: 4096, BLOCK: 1024}}, options: {{num_warps: 4}}}}")
        args, options = E.declared_args(decl, jit, f"{decl['_declared_in']}: lint.kernels.{file}:{name}")
        return [E.Specimen(kernel_id=label, name=jit.fn.__name__, fn=jit, args=tuple(args), kwargs=options,
                           location=E.location_of(jit), origin="declaration")]
    if not callable(obj):
        raise TargetError(f"lint target {file}:{name} is a {type(obj).__name__}, not a launcher or kernel")
    decl = config.examples.get((absf, name))
    if decl is not None:
        args, kwargs = E.example_inputs(decl["op"], dtype=decl.get("dtype", dtype), dims=decl.get("dims"))
        kwargs = {**kwargs, **(decl.get("kwargs") or {})}
    elif op is not None:
        args, kwargs = E.example_inputs(op, dtype=dtype, dims=dims)
    elif (absf, name) in (ops := ops_cache()):
        args, kwargs = E.example_inputs(ops[(absf, name)], dtype=dtype, dims=dims)
    elif _required_params(obj) == 0:
        args, kwargs = [], {}
    else:
        raise InvalidArgument(
            f"{file}:{name} needs example inputs to record its launch: pass --op OP ('gpuemu ops' lists them), "
            f"declare it in gpuemu.yaml under lint.examples ('{file}:{name}': {{op: OP}}), or point at a "
            f"zero-argument function that launches the kernel")
    launches = E.record_launches(obj, args, kwargs)
    if not launches:
        raise InvalidArgument(f"{file}:{name} launched no Triton kernel when called with the example inputs; "
                              f"is it the launcher (the function that does kernel[grid](...))?")
    return E.specimens_from_launches(label, launches)


# ------------------------------------------------------------------------------------------------ lint


def default_cache_dir(*, cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Path:
    """``<store>/lint-cache``: beside the failure store (``.gpuemu`` or ``GPUEMU_STORE``)."""
    from .. import config as gconfig

    return gconfig.resolve(env=env, cwd=cwd).store / "lint-cache"


def lint(sources: Sequence[str], *, target: str | Sequence[str] | None = None, op: str | None = None,
         dtype: str = "fp16", dims: Mapping[str, int] | None = None, baseline: str | os.PathLike | None = None,
         rulepacks: Sequence[str] = (), cache_dir: str | os.PathLike | None = None, use_cache: bool = True,
         workers: int | None = None, sass: bool = False, manifest: str | os.PathLike | None = None,
         fail_on: str | None = None, root: str | os.PathLike | None = None,
         progress: Callable[[int, int], None] | None = None) -> LintResult:
    """Compile ``sources`` for each target ahead of time and run the lint rules on what was compiled.

    ``sources``: ``file.py:launcher``, ``file.py:kernel`` (declared in a rule pack), ``file.py`` (every
    launcher of it that the corpus manifest or a rule pack names) or ``file.cu``. ``target``: e.g.
    ``"sm_80,sm_90"`` (default: the rule pack's, sm_80/86/89/90).

    >>> r = lint(["examples/kernels/softmax.py:softmax"], target="sm_90")  # doctest: +SKIP
    >>> r.exit_code(), [f.rule for f in r.findings]  # doctest: +SKIP
    (0, [])
    """
    t0 = time.perf_counter()
    config = load(rulepacks=tuple(rulepacks), cwd=root)
    targets = parse(target if target is not None else list(config.targets))
    fail_on = fail_on or config.fail_on
    if fail_on not in LEVELS:
        raise InvalidArgument(f"--fail-on {fail_on!r}: use one of {', '.join(LEVELS)}")
    base = B.load(baseline) if baseline is not None else None
    specimens, cu_files, labels = collect(sources, config=config, op=op, dtype=dtype, dims=dims,
                                          manifest=manifest, root=root)
    t_collect = time.perf_counter()
    jobs: list[Job] = [triton_job(s, t, sass=sass) for s in specimens for t in targets]
    cu = config.cuda or {}
    jobs += [cuda_job(p, t, sass=sass, flags=tuple(cu.get("flags", [])), num_warps=cu.get("block_size", 256) // 32)
             for p in cu_files for t in targets]
    unique: dict[str, Job] = {}
    for j in jobs:
        unique.setdefault(j.key, j)
    if cache_dir is None and use_cache:
        cache_dir = (config.store / "lint-cache") if config.store is not None else default_cache_dir(cwd=root)
    cache = ArtifactCache(cache_dir if use_cache else None)
    t_keys = time.perf_counter()
    n_workers = workers if workers is not None else max(1, min(8, os.cpu_count() or 1))
    uniq_jobs = list(unique.values())
    results = run_jobs(uniq_jobs, cache, workers=n_workers, progress=progress)
    by_key = dict(zip(unique, results))
    reports = outcomes(jobs, [by_key[j.key] for j in jobs], root=root)
    t_compile = time.perf_counter()
    config_rules = config.rules
    findings: list[Finding] = []
    for r in reports:
        entry = base.entry(r.kernel_id, r.target.name) if base else None
        fs = evaluate(kernel_id=r.kernel_id, name=r.name, target=r.target, metrics=r.metrics, error=r.error,
                      settings=config_rules, hot=is_hot(r.name, r.kernel_id, config.hot_kernels), base=entry,
                      location=r.location)
        if base is not None:
            fs = [f.with_state("unchanged" if f.fingerprint in base.accepted else "new") for f in fs]
        findings.extend(fs)
    diff = B.diff(base, reports, targets={t.name for t in targets}, prefixes=set(labels)) if base else []
    hits = sum(1 for r in results if r.get("cache_hit"))
    timings = {"collect_s": t_collect - t0, "keys_s": t_keys - t_collect, "compile_s": t_compile - t_keys,
               "total_s": time.perf_counter() - t0, "jobs": len(uniq_jobs), "cache_hits": hits,
               "compiled": len(uniq_jobs) - hits, "workers": n_workers}
    return LintResult(reports=tuple(reports), findings=tuple(findings), targets=tuple(targets), fail_on=fail_on,
                      baseline=base, diff=tuple(diff), timings=timings, labels=tuple(labels))


def write_baseline(result: LintResult, path: str | os.PathLike) -> dict:
    """Write ``result`` as the baseline at ``path``, every current finding accepted; returns the document.

    Kernels this run did not lint keep their old entries, so updating after linting one file does not
    drop the rest of the project from the baseline.
    """
    previous = B.read_document(path) if Path(path).is_file() else None
    doc = B.build(result.reports, result.findings, previous=previous)
    B.write(path, doc)
    return doc
