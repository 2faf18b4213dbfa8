"""``gpuemu check``: fuzz every launcher a project's manifest lists, and report it for CI.

>>> from gpuemu.check import load_manifest, run_check
>>> result = run_check(load_manifest("pyproject.toml"), device="cpu", jobs=2)   # doctest: +SKIP
>>> result.ok                                                                   # doctest: +SKIP
True
"""

from __future__ import annotations

from .manifest import KernelEntry, Manifest
from .manifest import load as load_manifest
from .run import PASSING, CheckResult, KernelResult, run_check

__all__ = ["CheckResult", "KernelEntry", "KernelResult", "Manifest", "PASSING", "load_manifest", "run_check"]
