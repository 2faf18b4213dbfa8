"""The hook's settings, resolved once per install: argument > environment > gpuemu.yaml > rule packs.

Every setting, where it comes from and its default (``rulepacks/hook.yaml`` holds the shipped defaults):

=================  =====================  =========================================================
setting            environment            meaning
=================  =====================  =========================================================
mode               GPUEMU_MODE            ``off`` (nothing installed), ``shadow`` (check, never raise),
                                          ``strict`` (check, raise :class:`ShadowDivergence` after the
                                          real result is computed; for CI and debugging)
sample_rate        GPUEMU_SAMPLE_RATE     probability that a call is checked, after the first call of
                                          each (kernel or graph, dtype, shape bucket), which always is
budget             GPUEMU_BUDGET          most fraction of wall time spent on shadow work (0 < b <= 1)
store              GPUEMU_STORE           failure store directory (default ``.gpuemu``)
rulepack           GPUEMU_RULEPACK        extra rule packs (tolerances, ``hook`` and ``bindings`` sections)
=================  =====================  =========================================================

Limits that are arguments of :func:`gpuemu.hook.install` only: ``max_snapshot_bytes`` (per
divergence), ``max_store_bytes`` (the whole store), ``max_capture_bytes`` (tensors copied for one
check), ``max_scratch_bytes`` (the poisoned output buffers an Inductor kernel too large to copy is re-run
into, allocated for the re-run and freed right after it; on CUDA also at most a quarter of the device's free
memory at that moment; default 4 GiB), ``snapshots_per_key`` (divergences stored per kernel/graph, dtype and
shape bucket).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import InvalidArgument, RulePackError
from .bindings import Binding, parse_bindings

MODES = ("off", "shadow", "strict")
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
MAX_STORE_BYTES = 1024 * 1024 * 1024
MAX_CAPTURE_BYTES = 1024 * 1024 * 1024
MAX_SCRATCH_BYTES = 4 * 1024 * 1024 * 1024
SNAPSHOTS_PER_KEY = 1


@dataclass(frozen=True)
class HookSettings:
    """Resolved hook settings; ``sources`` says where mode, sample_rate, budget and store came from."""

    mode: str = "shadow"
    sample_rate: float = 0.01
    budget: float = 0.05
    store: Path = Path(".gpuemu")
    bindings: Mapping[str, Binding] = field(default_factory=dict)
    tolerances: Any = field(default=None, compare=False, repr=False)
    rulepacks: tuple[str, ...] = ()
    max_snapshot_bytes: int = MAX_SNAPSHOT_BYTES
    max_store_bytes: int = MAX_STORE_BYTES
    max_capture_bytes: int = MAX_CAPTURE_BYTES
    max_scratch_bytes: int = MAX_SCRATCH_BYTES
    snapshots_per_key: int = SNAPSHOTS_PER_KEY
    seed: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def active(self) -> bool:
        return self.mode != "off"

    def describe(self) -> str:
        """One line: the settings and where each came from."""
        src = dict(self.sources)
        return (f"mode={self.mode} ({src.get('mode', 'rule pack')}), sample_rate={self.sample_rate:g} "
                f"({src.get('sample_rate', 'rule pack')}), budget={self.budget:g} ({src.get('budget', 'rule pack')}), "
                f"store={self.store} ({src.get('store', 'default')}), bindings={len(self.bindings)}")


def _where(sources: Mapping[str, str], key: str, env_name: str) -> str:
    s = sources.get(key)
    if s == "environment":
        return f"environment: {env_name}"
    if s == "argument":
        return f"install({key}=...)"
    return f"gpuemu.yaml / rule pack: hook.{key}"


def _check(ok: bool, sources: Mapping[str, str], key: str, env_name: str, value: Any, want: str) -> None:
    if ok:
        return
    msg = f"{_where(sources, key, env_name)}: {key}={value!r} is not valid; {want}"
    if sources.get(key) == "argument":
        raise InvalidArgument(msg)
    raise RulePackError(msg)


def resolve_settings(*, mode: str | None = None, sample_rate: float | None = None, budget: float | None = None,
                     store: str | os.PathLike | None = None, rulepack: tuple[str, ...] | list[str] = (),
                     env: Mapping[str, str] | None = None, cwd: str | os.PathLike | None = None,
                     max_snapshot_bytes: int = MAX_SNAPSHOT_BYTES, max_store_bytes: int = MAX_STORE_BYTES,
                     max_capture_bytes: int = MAX_CAPTURE_BYTES, max_scratch_bytes: int = MAX_SCRATCH_BYTES,
                     snapshots_per_key: int = SNAPSHOTS_PER_KEY, seed: int | None = None) -> HookSettings:
    """Resolve and validate the hook's settings through :func:`gpuemu.config.resolve`.

    >>> resolve_settings(mode="off").active
    False
    """
    from .. import config

    if isinstance(rulepack, (str, os.PathLike)):
        rulepack = (str(rulepack),)
    s = config.resolve(rulepacks=tuple(str(p) for p in rulepack), store=store, env=env, cwd=cwd,
                       overrides={"mode": mode, "sample_rate": sample_rate, "budget": budget})
    hook = s.hook
    src = dict(s.sources)
    m = str(hook.get("mode", "shadow")).strip().lower()
    _check(m in MODES, src, "mode", "GPUEMU_MODE", hook.get("mode"), "use off, shadow or strict")
    rate = hook.get("sample_rate", 0.01)
    _check(isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0.0 <= float(rate) <= 1.0, src,
           "sample_rate", "GPUEMU_SAMPLE_RATE", rate, "use a probability between 0 and 1")
    bud = hook.get("budget", 0.05)
    _check(isinstance(bud, (int, float)) and not isinstance(bud, bool) and 0.0 < float(bud) <= 1.0, src,
           "budget", "GPUEMU_BUDGET", bud, "use a fraction of wall time, 0 < budget <= 1 (0.05 = 5%)")
    for name, v in (("max_snapshot_bytes", max_snapshot_bytes), ("max_store_bytes", max_store_bytes),
                    ("max_capture_bytes", max_capture_bytes), ("max_scratch_bytes", max_scratch_bytes),
                    ("snapshots_per_key", snapshots_per_key)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidArgument(f"install({name}={v!r}): expected an integer >= 0")
    bindings = parse_bindings(s.bindings, source="+".join(Path(p).name for p in s.layers))
    return HookSettings(mode=m, sample_rate=float(rate), budget=float(bud), store=Path(s.store), bindings=bindings,
                        tolerances=s.tolerance_table(), rulepacks=tuple(str(p) for p in rulepack),
                        max_snapshot_bytes=max_snapshot_bytes, max_store_bytes=max_store_bytes,
                        max_capture_bytes=max_capture_bytes, max_scratch_bytes=max_scratch_bytes,
                        snapshots_per_key=snapshots_per_key, seed=seed,
                        sources=src)
