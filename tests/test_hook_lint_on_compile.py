"""Lint on compile: with the hook installed, a kernel this process compiles is linted from the artifacts
Triton produced, and the finding reaches the log. Run in a fresh process: Triton's interpreter, used by
other tests, leaves triton.language patched in a way that breaks in-process compiles."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = r"""
import logging, os, sys
logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
sys.path.insert(0, sys.argv[1])
import triton
from triton.compiler import ASTSource
from gpuemu import hook
from gpuemu.lint import examples as E
from gpuemu.lint.specialize import specialize, triton_target
from gpuemu.lint.targets import get

module = E.load_module(sys.argv[2])
(sp,) = E.specimens_from_launches("x", E.record_launches(module.fp64_example))
spec = specialize(sp.fn, sp.args, sp.kwargs, get("sm_90"))
previous = []
triton.knobs.compilation.listener = lambda **kw: previous.append(1)  # another tool's listener
rt = hook.install(mode="shadow", sample_rate=0.0, store=sys.argv[3])
triton.compile(ASTSource(sp.fn, spec.signature, spec.constexprs, spec.attrs), target=triton_target(get("sm_90")),
               options=spec.options)
print("RULES", sorted({f.rule for f in rt.lint_findings}), "PREVIOUS", len(previous))
hook.uninstall()
print("RESTORED", triton.knobs.compilation.listener is not None and len(previous) == 1)
"""


def test_compiled_kernel_is_linted_and_the_previous_listener_still_fires(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, "-c", SCRIPT, ROOT, os.path.join(HERE, "data", "lint_kernels.py"),
                        str(tmp_path / "store")], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "RULES ['fp64-in-low-precision'] PREVIOUS 1" in p.stdout
    assert "RESTORED True" in p.stdout
    assert "gpuemu lint [fp64-in-low-precision" in p.stderr
