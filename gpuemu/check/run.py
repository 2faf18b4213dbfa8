"""Fuzzing every launcher of a manifest, in parallel worker processes, into one :class:`CheckResult`.

A worker process runs one launcher at a time through the public ``gpuemu.fuzz`` and sends back plain
data (dicts), never live objects: a kernel that crashes its process is reported as that kernel's error.
Statuses are counted as the oracle names them: ``pass`` and ``rejected`` (the launcher refused an input
outside its declared preconditions with a clear exception) are passing; ``precondition`` counts as its policy
says (:func:`gpuemu.preconditions.counts_as`: fail, warn or ignore); every other status a verdict may carry
(``fail``, ``error``, and any added later) counts against the kernel.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import zlib
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .manifest import KernelEntry, Manifest

PASSING = frozenset({"pass", "rejected"})  # kernel statuses that pass
# case statuses that do not fail a kernel by themselves: a LIMIT (the GPU refuses the launch: loud, not wrong) fails
# it only inside the sizes declared supported, a refusal only under refusals: fail (fuzz_one sets those statuses)
CASE_PASSING = PASSING | {"limit"}
SCHEMA_VERSION = 1
MAX_FAILURES_KEPT = 20  # per kernel in the reports; the store keeps up to fuzzer.MAX_STORED
# the order in which a kernel's overall status is chosen when its cases disagree
_SEVERITY = ("error", "overflow", "fail", "precondition")


def kernel_status(statuses: dict[str, int]) -> str:
    """``pass`` when every case passed (or was rejected), else the most severe failing status seen."""
    bad = [s for s, n in statuses.items() if n and s not in CASE_PASSING]
    if not bad:
        return "pass" if statuses else "error"
    for s in _SEVERITY:
        if s in bad:
            return s if s != "error" or not {"fail", "overflow"} & set(bad) else \
                "overflow" if "overflow" in bad else "fail"
    return sorted(bad)[0]


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class KernelResult:
    """One launcher's outcome: counts by status, a dtype x strategy matrix, the worst case, the failures."""

    target: str
    op: str
    seed: int
    status: str = "error"
    iterations: int = 0
    passed: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    # dtype -> strategy facet (shape kind, layout, value distribution) -> status -> n
    matrix: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    worst: dict[str, dict] = field(default_factory=dict)  # dtype -> the failing case farthest beyond its bound
    failures: list[dict] = field(default_factory=list)  # Failure.to_dict() (+ replay with --store), first shrunk
    skipped: dict[str, str] = field(default_factory=dict)
    kernels: list[dict] = field(default_factory=list)  # the @triton.jit kernels it launched: name, path, lines
    sha256: str | None = None
    seconds: float = 0.0
    error: str | None = None  # the launcher could not be fuzzed at all (import error, worker crash)
    dtypes: list[str] = field(default_factory=list)
    strategy: str = "default"
    policy: str = "fail"  # the PRECONDITION policy this launcher ran under (gpuemu.preconditions)
    limits: int = 0  # cases whose launch the GPU refuses (LIMIT): shown; status "limit" when inside ``supports``
    envelope: str | None = None  # the sizes it launches at, from the refusals (gpuemu.envelope)
    refused: int = 0  # cases the launcher refused on the host before any launch; status "refused" when fatal
    rejected_reason: str = ""
    confirmed: dict | None = None  # gpuemu check --confirm-on: the first failure replayed on another device

    @property
    def level(self) -> str:
        """How the launcher counts: ``pass``, ``warn`` (a PRECONDITION under the warn policy) or ``fail``."""
        from ..preconditions import counts_as

        return counts_as(self.status, self.policy)

    @property
    def ok(self) -> bool:
        return self.level != "fail"

    @property
    def file(self) -> str:
        return self.target.rpartition(":")[0]

    @property
    def function(self) -> str:
        return self.target.rpartition(":")[2]

    def to_dict(self) -> dict:
        return {"target": self.target, "op": self.op, "seed": f"0x{self.seed:x}", "status": self.status,
                "ok": self.ok, "iterations": self.iterations, "passed": self.passed, "statuses": dict(self.statuses),
                "matrix": self.matrix, "worst": self.worst, "failures": self.failures, "skipped": self.skipped,
                "kernels": self.kernels, "sha256": self.sha256, "seconds": self.seconds, "error": self.error,
                "dtypes": self.dtypes, "strategy": self.strategy, "policy": self.policy, "level": self.level,
                "limits": self.limits, "envelope": self.envelope, "refused": self.refused,
                "rejected_reason": self.rejected_reason, "confirmed": self.confirmed}

    @classmethod
    def from_dict(cls, d: dict) -> "KernelResult":
        kw = dict(d)
        kw.pop("ok", None)
        kw.pop("level", None)
        kw["seed"] = int(kw["seed"], 16) if isinstance(kw["seed"], str) else int(kw["seed"])
        return cls(**kw)


@dataclass
class CheckResult:
    """Every launcher's result plus what the run was (versions, device, rule packs, seed)."""

    kernels: list[KernelResult]
    seed: int
    manifest: str
    root: str
    device: str
    rulepacks: list[str]
    store: str | None
    jobs: int
    seconds: float
    versions: dict[str, str | None]
    started: str
    provenance: dict = field(default_factory=dict)  # the git commit and CI run it checked (gpuemu.check.provenance)
    warmed: dict | None = None  # on CUDA: Triton's cache warmed on every core first (gpuemu.check.warm)

    @property
    def ok(self) -> bool:
        return all(k.ok for k in self.kernels)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for k in self.kernels:
            out[k.status] = out.get(k.status, 0) + 1
        return out

    def levels(self) -> dict[str, int]:
        """Launchers by how they count: pass, warn, fail."""
        out: dict[str, int] = {}
        for k in self.kernels:
            out[k.level] = out.get(k.level, 0) + 1
        return out

    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "tool": "gpuemu check", "ok": self.ok, "seed": f"0x{self.seed:x}",
                "manifest": self.manifest, "root": self.root, "device": self.device, "rulepacks": self.rulepacks,
                "store": self.store, "jobs": self.jobs, "seconds": self.seconds, "versions": self.versions,
                "started": self.started, "provenance": self.provenance, "counts": self.counts(),
                "levels": self.levels(), "warmed": self.warmed, "kernels": [k.to_dict() for k in self.kernels]}

    @classmethod
    def from_dict(cls, d: dict) -> "CheckResult":
        return cls(kernels=[KernelResult.from_dict(k) for k in d["kernels"]], seed=int(d["seed"], 16),
                   manifest=d["manifest"], root=d["root"], device=d["device"], rulepacks=list(d["rulepacks"]),
                   store=d.get("store"), jobs=int(d["jobs"]), seconds=float(d["seconds"]),
                   versions=dict(d["versions"]), started=d["started"], provenance=dict(d.get("provenance") or {}),
                   warmed=d.get("warmed"))


def strategy_facets(case) -> list[str]:
    """The columns of the report's matrix a case counts in: what the strategy drew for its shape, layout
    and values (the default strategy mixes all three), plus a named non-default strategy itself."""
    out = [f"shape:{case.shape_kind}", "layout:" + ("contiguous" if case.is_contiguous() else "strided"),
           f"values:{case.values}"]
    if case.strategy != "default":
        out.insert(0, f"strategy:{case.strategy}")
    return out


def against(entry: KernelEntry) -> str:
    """What the launcher is judged against, for tables and ids: its op, or ``reference file.py:name``."""
    if entry.op:
        return entry.op
    file, _, name = (entry.reference or "").rpartition(":")
    return f"reference {Path(file).name}:{name}"


def kernel_seed(run_seed: int, entry: KernelEntry) -> int:
    """Each launcher's seed: its own manifest seed, else the run seed mixed with its target (order-free)."""
    if entry.seed is not None:
        return entry.seed
    name = f"{Path(entry.file).name}:{entry.function}:{entry.op or against(entry)}"
    return (run_seed * 0x9E3779B1 + zlib.crc32(name.encode())) & 0xFFFFFFFF


# ------------------------------------------------------------------------------------------ one launcher


def locate_kernels(fn: Callable, names: list[str]) -> list[dict]:
    """Where each launched kernel is defined: its file and the lines from ``@triton.jit`` to the body's end.

    A Launch records the kernel's name; the JIT object is looked up in the launcher's module globals (and
    its closure), and the source lines come from ``inspect`` on the wrapped Python function.
    """
    import inspect

    scope: dict[str, Any] = dict(getattr(fn, "__globals__", {}))
    for cell_name, cell in zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()), getattr(fn, "__closure__", None) or ()):
        try:
            scope[cell_name] = cell.cell_contents
        except ValueError:
            pass
    out = []
    for name in dict.fromkeys(names):
        found = None
        for obj in scope.values():
            inner = getattr(obj, "fn", None)
            while inner is not None and getattr(inner, "fn", None) is not None and not inspect.isfunction(inner):
                inner = inner.fn  # autotuner -> heuristics -> JITFunction -> the Python function
            if inspect.isfunction(inner) and inner.__name__ == name:
                found = inner
                break
        if found is None:
            out.append({"name": name, "path": None, "start_line": None, "end_line": None})
            continue
        try:
            lines, start = inspect.getsourcelines(found)
            path = inspect.getsourcefile(found)
        except (OSError, TypeError):
            out.append({"name": name, "path": None, "start_line": None, "end_line": None})
            continue
        out.append({"name": name, "path": str(Path(path).resolve()) if path else None, "start_line": start,
                    "end_line": start + len(lines) - 1})
    return out


def fuzz_one(entry: KernelEntry, *, seed: int, iterations: int | None, dtypes: tuple[str, ...] | None,
             strategy: str | None, rulepacks: tuple[str, ...], store: str | None, device: str,
             compile_workers: int | None = None, requires: dict | None = None, preconditions: str = "fail",
             framework: str | None = None, limits: str | None = None, supports: Any = None,
             refusals: str | None = None) -> dict:
    """Fuzz one launcher; returns ``KernelResult.to_dict()``. Errors of the launcher are results, not raises.
    ``compile_workers``: see :func:`gpuemu.fuzzer.fuzz` (0 where the launchers already run in parallel).
    ``requires`` (a :class:`~gpuemu.preconditions.Requires` as a dict) and the ``preconditions`` policy come
    resolved from the driver, so a worker process or a Ray task fuzzes exactly what a local run does."""
    from ..errors import GpuemuError, one_line
    from ..preconditions import Requires

    if _cuda_context_lost(device):  # an earlier launcher in this process faulted: not this one's to answer for
        return {RERUN: True}
    t0 = time.perf_counter()
    res = KernelResult(target=entry.target, op=against(entry), seed=seed, strategy=strategy or "default",
                       policy=preconditions)
    try:
        res.sha256 = sha256_file(entry.file)
    except OSError as e:
        res.error = f"cannot read {entry.file}: {e.strerror or e}"
        return res.to_dict()
    try:
        from ..fuzzer import fuzz
        from ..target import load

        from ..frameworks import quiet_native_logs

        with quiet_native_logs():  # TensorFlow's load-time notices would mix into the check's lines
            fn = load(entry.target)

        def on_case(i: int, case, verdict) -> None:
            st = verdict.status
            res.statuses[st] = res.statuses.get(st, 0) + 1
            for facet in strategy_facets(case):
                cell = res.matrix.setdefault(case.dtype, {}).setdefault(facet, {})
                cell[st] = cell.get(st, 0) + 1
            if st in CASE_PASSING:
                return
            ratio = verdict.worst_ratio
            key = float("inf") if ratio is None or ratio != ratio else float(ratio)
            prev = res.worst.get(case.dtype)
            if prev is None or key > prev["_key"]:
                res.worst[case.dtype] = {"_key": key, "worst_ratio": ratio, "max_abs_err": verdict.max_abs_err,
                                         "tol": verdict.tol, "status": st, "kind": verdict.kind,
                                         "message": verdict.message, "seed": f"0x{case.seed:x}",
                                         "case": case.describe()}

        result = fuzz(fn, op=entry.op, reference=entry.reference, inputs=entry.inputs, schema=entry.schema,
                      iterations=iterations, seed=seed, dtypes=list(dtypes) if dtypes else None,
                      strategy=strategy, store=store, rulepack=list(rulepacks), device=device, target=entry.target,
                      on_case=on_case, compile_workers=compile_workers,
                      requires=Requires.from_dict(requires) if requires else None, preconditions=preconditions,
                      framework=framework, limits=limits, supports=supports, refusals=refusals)
    except GpuemuError as e:
        res.error = str(e)
        res.seconds = time.perf_counter() - t0
        return res.to_dict()
    except Exception as e:  # a launcher whose module raises on import is that kernel's error, not gpuemu's
        res.error = one_line(e)
        res.seconds = time.perf_counter() - t0
        return res.to_dict()
    for w in res.worst.values():
        w.pop("_key", None)
    res.iterations, res.passed, res.skipped = result.iterations, result.passed, dict(result.skipped)
    res.dtypes = sorted(res.matrix)
    for f in result.failures[:MAX_FAILURES_KEPT]:
        d = f.to_dict()
        d["replay"] = f.replay_line()  # run_check names the store and the target in every stored one
        d["case_text"] = f.case.describe()
        d["original_case_text"] = f.original.describe() if f.original else None
        res.failures.append(d)
    names = [lch.kernel for f in result.failures for lch in f.launches]
    if not names and entry.op:  # a passing launcher: record the kernels it launched on one plain case for reports
        names = _launched_names(fn, entry.op, seed, device)
    res.kernels = locate_kernels(fn, names)
    res.status = kernel_status(res.statuses) if res.iterations else "error"
    res.limits, res.envelope = result.limits, result.envelope.get("text") if result.envelope else None
    res.refused, res.rejected_reason = result.refused, result.rejected_reason
    if res.status == "pass" and result.fatal_limits:  # refused inside the sizes the launcher declares it supports
        res.status = "limit"
    elif res.status == "pass" and result.refused and (result.refusal_policy == "fail" or result.refused_every_case):
        res.status = "refused"
    if result.all_errored and res.failures:
        from ..frameworks import other_framework_hint

        hint = other_framework_hint(fn, framework or "torch")
        if hint and not res.failures[0].get("hint"):  # every case a TypeError: a JAX launcher taken for torch's
            res.failures[0]["hint"] = hint
            res.failures[0]["line"] += f" ({hint})"
    if not res.iterations:
        res.error = "; ".join(f"{k} skipped: {v}" for k, v in result.skipped.items()) or "no case ran"
    res.seconds = time.perf_counter() - t0
    return res.to_dict()


def _launched_names(fn: Callable, op: str, seed: int, device: str) -> list[str]:
    from ..cases import generate, materialize
    from ..runners import run_launcher

    try:
        case = generate(op, seed, dtype="fp32", strategy="fixed")
        inputs, kwargs = materialize(case, device)
        return [lch.kernel for lch in run_launcher(fn, [inputs[a.name] for a in case.spec.args], kwargs,
                                                   device=device).launches]
    except Exception:  # only for locating the source; the verdicts already stand
        return []


RERUN = "__rerun_in_a_fresh_process__"  # fuzz_one's answer when its process has no CUDA context left


def _cuda_context_lost(device: str) -> bool:
    """This process's CUDA context is gone (an earlier launcher's kernel made an illegal memory access here: every
    later CUDA call fails), so a launcher fuzzed in it would be blamed for another's fault."""
    if not device.startswith("cuda"):
        return False
    try:
        import torch

        torch.cuda.synchronize()
        torch.zeros(1, device=device).add_(1).item()
        return False
    except Exception as e:  # noqa: BLE001 - only a sticky CUDA error counts
        from ..engine.run import cuda_context_lost

        return bool(cuda_context_lost(e))


def _in_fresh_processes(tasks: list, indices: list[int], device: str, jobs: int, done: Callable) -> None:
    """Fuzz ``tasks[i]`` for ``i`` in ``indices`` each in a process of its own (their first worker's CUDA context
    was lost to another launcher's fault)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(indices))), mp_context=ctx, initializer=_worker_init,
                             initargs=(device,), max_tasks_per_child=1) as pool:
        futures = {pool.submit(fuzz_one, tasks[i][0], **tasks[i][1]): i for i in indices}
        for fut in futures:
            i = futures[fut]
            try:
                d = fut.result()
            except Exception as ex:  # noqa: BLE001 - the worker died: that launcher's error
                d = _error_result(tasks[i], f"worker process failed: {type(ex).__name__}: {ex}")
            if d.get(RERUN):  # (a fresh process whose context is gone: the device itself is unusable)
                d = _error_result(tasks[i], "the CUDA device is unusable in a fresh process too")
            done(i, d)


def _error_result(task: tuple, error: str) -> dict:
    """The result of a launcher (``task``: its entry and fuzz_one keyword arguments) that could not be fuzzed."""
    e, kw = task
    return KernelResult(target=e.target, op=against(e), seed=kw["seed"], policy=kw["preconditions"],
                        error=error).to_dict()


def _worker_init(device: str) -> None:
    if device == "cpu":  # Triton reads it when a kernel is decorated: before any launcher is imported
        os.environ["TRITON_INTERPRET"] = "1"


# ------------------------------------------------------------------------------------------ the whole run


def versions() -> dict[str, str | None]:
    from .. import __version__

    out: dict[str, str | None] = {"gpuemu": __version__, "python": sys.version.split()[0]}
    for mod in ("torch", "triton"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = None
    return out


def run_check(manifest: Manifest, *, device: str, jobs: int = 1, seed: int | None = None,
              iterations: int | None = None, store: str | None = None, rulepacks: tuple[str, ...] = (),
              on_done: Callable[[KernelResult], None] | None = None, ray: str | None = None,
              preconditions: str | None = None, on_start: Callable[[], None] | None = None,
              warm: bool = True) -> CheckResult:
    """Fuzz every launcher of ``manifest``; ``jobs`` > 1 runs them in that many worker processes, and ``ray``
    (``local`` for a cluster started here, ``auto`` for the ambient one, or an address) runs them as Ray tasks
    (:mod:`gpuemu.check.on_ray`): the same work units and seeds, so the same verdicts.

    Precedence for each run setting: the argument here (CLI flag) > the manifest entry > the manifest's
    top level > the rule pack default. Everything is resolved here, before any launcher runs: rule packs, the
    store, each launcher's preconditions (``requires:`` of the entry and of ``gpuemu.yaml``, globs included) and
    the PRECONDITION policy; a mistake is one line (exit 2 on the CLI). ``on_start()`` is called once all that
    is done, before the first launcher runs.
    """
    import datetime
    import random

    from .. import config, ops
    from ..errors import GpuemuError, RulePackError
    from ..preconditions import Requires, from_project, resolve_policy
    from ..store import Store

    run_seed = seed if seed is not None else manifest.seed if manifest.seed is not None else random.getrandbits(32)
    packs = tuple(_abs(p, manifest.root) for p in (manifest.rulepacks + tuple(rulepacks)))
    store = store or manifest.store
    if store is not None:
        store = _abs(store, os.getcwd())
    # a broken rule pack is the project's configuration error (exit 2), found before any worker starts
    resolved = config.resolve(rulepacks=packs, store=store)
    layers = list(resolved.layers)
    if ray is not None:
        from .on_ray import require_ray

        require_ray()
    # tasks and workers all write into this one store, named in full; every replay line points at it
    store = str(Path(resolved.store).resolve())
    Store(store).ensure_writable()
    tasks = []
    for e in manifest.kernels:
        own = packs + tuple(_abs(p, manifest.root) for p in e.rulepacks)
        settings = config.resolve(rulepacks=own, store=store) if e.rulepacks else resolved
        req = from_project(e.target, settings.requires).merge(Requires.from_dict(e.requires or None))
        try:
            if e.op:  # (a reference-defined launcher's names are checked once its schema is inferred)
                req.check_against(ops.get(e.op))  # gpuemu.yaml's requires: names the op lacks, before anything runs
        except GpuemuError as ex:
            raise RulePackError(f"{e.where or e.target}: {ex} (from requires: in gpuemu.yaml)") from None
        policy = resolve_policy(preconditions, manifest.setting(e, "preconditions"), settings)
        tasks.append((e, dict(seed=kernel_seed(run_seed, e), iterations=iterations or manifest.setting(e, "iterations"),
                              dtypes=manifest.setting(e, "dtypes"), strategy=manifest.setting(e, "strategy"),
                              rulepacks=own, store=store, device=device,
                              compile_workers=0 if jobs > 1 or ray is not None else None,
                              requires=req.to_dict() if req else None, preconditions=policy,
                              framework=manifest.setting(e, "framework"), limits=manifest.setting(e, "limits"),
                              supports=e.supports, refusals=manifest.setting(e, "refusals"))))
    if on_start:
        on_start()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    results: dict[int, KernelResult] = {}
    warmed = None
    if warm and device.startswith("cuda") and ray is None and tasks:  # compiles on every core first (check.warm)
        from .warm import warm as warm_compiles

        warmed = warm_compiles(tasks, device=device, workers=max(jobs, os.cpu_count() or 1))

    reruns: list[int] = []  # launchers that met a CUDA context another launcher's fault had lost

    def done(i: int, d: dict) -> None:
        if d.get(RERUN) and ray is None:
            reruns.append(i)
            return
        if d.get(RERUN):  # (a Ray worker: re-run on this machine it would not be the same device)
            d = _error_result(tasks[i], "its Ray worker's CUDA context was lost to another launcher's illegal "
                                        "memory access: re-run this launcher")
        _replay_lines(d, store)
        kr = KernelResult.from_dict(d)
        results[i] = kr
        if on_done:
            on_done(kr)

    if ray is not None:
        from .on_ray import execute

        jobs = execute(tasks, address=ray, root=manifest.root, store=store, device=device,
                       num_cpus=jobs, done=done)
    elif jobs <= 1:
        _worker_init(device)
        for i, (e, kw) in enumerate(tasks):
            done(i, fuzz_one(e, **kw))
    else:
        import multiprocessing

        # spawn: a fresh interpreter per worker (fork after torch/Triton threads start is unsafe)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init,
                                 initargs=(device,)) as pool:
            futures: dict[Future, int] = {pool.submit(fuzz_one, e, **kw): i for i, (e, kw) in enumerate(tasks)}
            from concurrent.futures import as_completed

            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    d = fut.result()
                except Exception as ex:  # the worker died (segfault, OOM): that launcher's error
                    d = _error_result(tasks[i], f"worker process failed: {type(ex).__name__}: {ex}")
                done(i, d)
    if reruns:
        _in_fresh_processes(tasks, sorted(reruns), device, jobs, done)
    from .provenance import provenance

    # reports name files relative to the working directory (the repository root in CI), as code scanning wants
    return CheckResult(kernels=[results[i] for i in range(len(tasks))], seed=run_seed, manifest=manifest.path,
                       root=os.getcwd(), device=device, rulepacks=layers, store=store, jobs=max(1, jobs),
                       seconds=time.perf_counter() - t0, versions=versions(), started=started,
                       provenance=provenance(os.getcwd()), warmed=warmed)


STORE_ARTIFACT = "gpuemu-store"  # the Action uploads the check's store under this name (action.yml)


def _replay_lines(d: dict, store: str) -> None:
    """Every stored failure's replay line names the launcher (``--target``, as the reports name it: a store
    shared by a manifest's launchers holds many) and the store. Here, the store in full, so that the line pastes in
    any directory; in GitHub Actions, the target relative to the checkout and the store as the artifact's folder,
    so that it replays from a clone of the same commit once the artifact is downloaded there
    (``gh run download RUN -n gpuemu-store -D gpuemu-store``, or its zip from the run's page)."""
    import re

    from ..store import replay_command

    file, _, fn = d["target"].rpartition(":")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from ..origin import portable

        rel = portable(d["target"]).get("relative")
        target, where = (f"{rel}:{fn}" if rel else f"{_display(file)}:{fn}"), STORE_ARTIFACT
    else:
        target, where = f"{_display(file)}:{fn}", str(Path(store).resolve())
    for f in d.get("failures", []):
        m = re.match(r"gpuemu reproduce (0x[0-9a-f]+)", f.get("replay") or "")
        if m and f.get("stored", f.get("record") is not None):
            f["replay"] = replay_command(int(m.group(1), 16), target=target, store=where)


def _display(path: str) -> str:
    """``path`` relative to the working directory when it is inside it, else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _abs(p: str, base: str) -> str:
    return p if os.path.isabs(p) else str((Path(base) / p).resolve())
