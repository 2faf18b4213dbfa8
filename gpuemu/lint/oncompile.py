"""Lint on compile: the same rules on artifacts Triton already produced, with no second compile.

Entry points for the hook (``gpuemu/hook``), which decides where findings go (log, OpenTelemetry):

* :func:`on_compile` takes a kernel's cubin (and PTX/TTIR/metadata when at hand) as bytes, text or paths;
* :func:`from_listener` takes exactly what ``triton.knobs.compilation.listener`` receives
  (``src, metadata, metadata_group, times, cache_hit``; Triton 3.4+, fired on every ``triton.compile``,
  cache hits included) and finds the artifacts in ``metadata_group``.

What differs from ``gpuemu lint``: Triton discards the ptxas log, so spill bytes come from the SASS when
``sass=True`` (about half a second per kernel) and otherwise from the stack frame, which is what Triton's
own ``n_spills`` reports (stack bytes / 4).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from . import tools
from .baseline import Baseline
from .config import LintConfig, load
from .examples import SourceLocation, display_path, location_of
from .metrics import KernelMetrics, measure
from .rules import Finding, evaluate, is_hot
from .targets import Target, get


def _text(x: str | bytes | os.PathLike | None) -> str:
    if x is None:
        return ""
    if isinstance(x, bytes):
        return x.decode(errors="replace")
    if isinstance(x, str) and ("\n" in x or not os.path.exists(x)):
        return x
    return Path(x).read_text(errors="replace")


def _target_of(target: Any) -> Target:
    if isinstance(target, Target):
        return target
    if isinstance(target, Mapping):
        target = target.get("arch")
    arch = getattr(target, "arch", target)
    return get(arch)


def measure_compiled(*, kernel: str, target: str | int | Target | Any, cubin: bytes | str | os.PathLike,
                     ptx: str | bytes | os.PathLike | None = None, ttir: str | bytes | os.PathLike | None = None,
                     metadata: Mapping[str, Any] | str | os.PathLike | None = None, sass: bool = False) -> KernelMetrics:
    """:class:`KernelMetrics` of a compiled Triton kernel from its artifacts (what :func:`on_compile` rates)."""
    md: dict = {}
    if metadata is not None:
        md = dict(metadata) if isinstance(metadata, Mapping) else json.loads(Path(metadata).read_text())
    tgt = _target_of(target if target is not None else md.get("target"))
    res = tools.resource_usage(cubin)
    return measure(name=md.get("name", kernel) or kernel, target=tgt, cubin_resources=res, ptx=_text(ptx),
                   ttir=_text(ttir), num_warps=int(md.get("num_warps", 4)), num_stages=md.get("num_stages"),
                   shared_dynamic=int(md.get("shared", 0) or 0), sass=tools.disassemble(cubin) if sass else None,
                   tools={"cuobjdump": tools.nvidia_tool("cuobjdump").version, "triton": str(md.get("triton_version", ""))})


def on_compile(*, kernel: str, target: str | int | Target | Any, cubin: bytes | str | os.PathLike,
               ptx: str | bytes | os.PathLike | None = None, ttir: str | bytes | os.PathLike | None = None,
               metadata: Mapping[str, Any] | str | os.PathLike | None = None, source: Any = None,
               kernel_id: str | None = None, config: LintConfig | None = None, baseline: Baseline | None = None,
               sass: bool = False) -> list[Finding]:
    """Run the lint rules on one kernel Triton compiled in this process; returns the findings (maybe none).

    ``kernel``: the kernel's name; ``target``: ``"sm_90"``, ``90``, a ``GPUTarget`` or Triton's metadata
    ``target``; ``cubin``: bytes or a path; ``ptx``/``ttir``: text or paths (the PTX and TTIR feed the
    fp64, tensor-core and dot rules); ``metadata``: Triton's metadata dict or its ``.json`` path (num_warps,
    shared); ``source``: the JITFunction (or a :class:`SourceLocation`) for the finding's location;
    ``kernel_id``: the baseline key (default ``file.py:kernel``); ``config``: a preloaded
    :func:`gpuemu.lint.config.load` (default: load the rule packs now); ``baseline``: regressions are
    checked against it when given.

    >>> import triton                                                    # doctest: +SKIP
    >>> from triton.backends.compiler import GPUTarget                   # doctest: +SKIP
    >>> ck = triton.compile(src, target=GPUTarget("cuda", 90, 32))       # doctest: +SKIP
    >>> on_compile(kernel=ck.metadata.name, target="sm_90", cubin=ck.asm["cubin"], ptx=ck.asm["ptx"],
    ...            ttir=ck.asm["ttir"], metadata=ck.metadata._asdict(), source=jit_fn)  # doctest: +SKIP
    []
    """
    metrics = measure_compiled(kernel=kernel, target=target, cubin=cubin, ptx=ptx, ttir=ttir, metadata=metadata,
                               sass=sass)
    cfg = config or load()
    loc = source if isinstance(source, SourceLocation) else (location_of(source) if source is not None else None)
    kid = kernel_id or (f"{display_path(loc.path)}:{kernel}" if loc else kernel)
    tgt = get(metrics.target)
    entry = baseline.entry(kid, tgt.name) if baseline is not None else None
    found = evaluate(kernel_id=kid, name=kernel, target=tgt, metrics=metrics, error=None, settings=cfg.rules,
                     hot=is_hot(kernel, kid, cfg.hot_kernels), base=entry, location=loc)
    if baseline is not None:
        found = [f.with_state("unchanged" if f.fingerprint in baseline.accepted else "new") for f in found]
    return found


def artifacts_from_group(metadata_group: Mapping[str, str]) -> dict[str, str]:
    """Paths of ``cubin``, ``ptx``, ``ttir`` and ``json`` (metadata) in Triton's ``metadata_group``."""
    out: dict[str, str] = {}
    for name, path in metadata_group.items():
        ext = name.rsplit(".", 1)[-1]
        if ext in ("cubin", "ptx", "ttir", "json") and ext not in out:
            out[ext] = path
    return out


def from_listener(*, src: Any, metadata: Mapping[str, Any], metadata_group: Mapping[str, str], times: Any = None,
                  cache_hit: bool = False, **options: Any) -> list[Finding]:
    """:func:`on_compile` for a ``knobs.compilation.listener`` call (same keyword arguments, plus
    ``on_compile``'s options). A non-CUDA compile (AMD) returns no findings.

    >>> triton.knobs.compilation.listener = lambda **kw: log(from_listener(**kw))  # doctest: +SKIP
    """
    tgt = metadata.get("target")
    backend = getattr(tgt, "backend", None) or (tgt.get("backend") if isinstance(tgt, Mapping) else None)
    if backend not in (None, "cuda"):
        return []
    paths = artifacts_from_group(metadata_group)
    if "cubin" not in paths:
        return []
    fn = getattr(src, "fn", None)
    name = metadata.get("name") or getattr(getattr(fn, "fn", None), "__name__", "kernel")
    return on_compile(kernel=name, target=tgt, cubin=paths["cubin"], ptx=paths.get("ptx"), ttir=paths.get("ttir"),
                      metadata=metadata, source=fn, **options)
