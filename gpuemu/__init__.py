"""gpuemu: catch GPU kernels that are silently wrong, without a GPU.

Public API (imports are lazy, so ``import gpuemu`` stays cheap)::

    gpuemu.fuzz(fn, op="softmax")        -> FuzzResult
    gpuemu.reproduce("0x6f3a91")          -> Replay
    gpuemu.ops.get("softmax")             -> OpSpec
    gpuemu.Oracle, gpuemu.Verdict, gpuemu.Case
    @gpuemu.requires(contiguous=["x"])    what a launcher's callers guarantee
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "fuzz", "reproduce", "ops", "shadow", "Oracle", "Verdict", "Case", "FuzzResult", "Failure",
           "GpuemuError", "requires", "Requires"]


def __getattr__(name: str):
    if name in ("fuzz", "reproduce", "FuzzResult", "Failure"):
        # the module is fuzzer.py, not fuzz.py: a submodule named fuzz would shadow gpuemu.fuzz()
        from . import fuzzer

        return getattr(fuzzer, name)
    if name in ("Oracle", "Verdict"):
        from . import oracle

        return getattr(oracle, name)
    if name in ("requires", "Requires", "preconditions"):
        import importlib

        module = importlib.import_module(".preconditions", __name__)  # not `from . import`: it re-enters here
        return module if name == "preconditions" else getattr(module, name)
    if name == "Case":
        from .cases import Case

        return Case
    if name == "shadow":  # importing the hook installs it from the environment, as `import gpuemu.hook` does
        from .hook.decorator import shadow

        return shadow
    if name == "GpuemuError":
        from .errors import GpuemuError

        return GpuemuError
    if name in ("ops", "jax", "tf"):  # gpuemu.jax / gpuemu.tf: shadow decorators; neither imports its framework
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'gpuemu' has no attribute {name!r}")
