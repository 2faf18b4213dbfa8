"""Static PTX/SASS lint without a GPU: ``gpuemu lint`` and lint on compile.

Kernels are compiled ahead of time for named targets (``sm_80``, ``sm_86``, ``sm_89``, ``sm_90``) from a
recorded example launch; registers, spills, shared/local memory, estimated occupancy and the PTX/SASS
instruction mix are read from the artifacts and checked by the rules of ``rulepacks/lint.yaml``, against a
baseline when one is given. Semantic bugs compile to the same machine code as correct kernels, so the lint
complements the oracle (``gpuemu fuzz``): it catches performance regressions, not wrong answers.

    >>> from gpuemu.lint import lint                                            # doctest: +SKIP
    >>> result = lint(["examples/kernels/matmul.py:matmul"], target="sm_80,sm_90")  # doctest: +SKIP
    >>> result.exit_code(), [f.message for f in result.findings]                # doctest: +SKIP

Lint on compile (for ``gpuemu.hook``): :func:`on_compile` / :func:`from_listener`.
"""

from __future__ import annotations

from .baseline import Baseline, BaselineError
from .engine import LintResult, corpus_sources, lint, write_baseline
from .metrics import KernelMetrics
from .oncompile import from_listener, measure_compiled, on_compile
from .rules import RULES, Finding
from .targets import TARGETS, Target

lint_compiled = on_compile  # the name the hook's design notes use

__all__ = ["lint", "LintResult", "write_baseline", "corpus_sources", "on_compile", "lint_compiled", "from_listener",
           "measure_compiled", "Finding", "KernelMetrics", "RULES", "Baseline", "BaselineError", "TARGETS", "Target"]
