"""A CPU stand-in for Triton's driver, so ``@triton.autotune`` works on a machine with no GPU.

``Autotuner.do_bench`` asks ``triton.runtime.driver.active`` for a benchmarker; with no GPU driver that
raises "0 active drivers". While the runtime is active on such a machine this stand-in is the active
driver. Its benchmarker times nothing (CPU timings say nothing about a GPU): every config gets the same
time, so the autotuner keeps its first config, and the runtime's interceptor then runs every config itself
and compares their results (:mod:`gpuemu.runtime.autotune`).

Weighed against a full stand-in driver whose launcher interprets (Triton's JIT path end to end, real
specialisation and compile per launch): that couples every launch to compile internals that move between
releases and costs a 0.1-0.4 s compile per specialisation on the fuzzing hot path. The runtime instead
intercepts launches and compiles only on request, from the same binding (:mod:`gpuemu.runtime.aot`).
"""

from __future__ import annotations

from typing import Any

_installed: Any = None
_previous: Any = None
_holders = 0  # install_if_needed calls that found or put the stand-in in place, less uninstall calls


def _driver_config():
    from triton.runtime.driver import driver

    if not hasattr(driver, "_active"):
        from ._compat import UnsupportedTriton

        raise UnsupportedTriton("triton.runtime.driver has no _active slot; cannot install the CPU stand-in")
    return driver


def _make_class():
    from triton.backends.driver import DriverBase
    from triton.backends.compiler import GPUTarget

    class CPUStandInDriver(DriverBase):
        """Target sm_90 for anything that asks; a benchmarker that times nothing."""

        target = GPUTarget("cuda", 90, 32)

        @classmethod
        def is_active(cls) -> bool:
            return False  # never picked by Triton's own driver discovery

        def map_python_to_cpp_type(self, ty: str) -> str:
            return ty

        def get_current_target(self):
            return self.target

        def get_active_torch_device(self):
            import torch

            return torch.device("cpu")

        def get_benchmarker(self):
            def bench(kernel_call, *, quantiles=None, **kwargs):
                return [1.0, 1.0, 1.0] if quantiles else 1.0

            return bench

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

    return CPUStandInDriver


def install_if_needed() -> bool:
    """Make the stand-in the active driver when no real one exists; True if installed now. Each call that finds
    or installs it holds it until a matching :func:`uninstall` (the runtime and a ``cuda_on_cpu`` scope nest)."""
    global _installed, _previous, _holders
    if _installed is not None:
        _holders += 1
        return False
    cfg = _driver_config()
    try:
        _ = cfg.active
        return False  # a real driver (GPU) is there: leave it
    except Exception:
        pass
    _previous = cfg._active
    _installed = _make_class()()
    _holders = 1
    cfg.set_active(_installed)
    return True


def uninstall() -> None:
    """Release one hold on the stand-in; the last one puts the previous driver back."""
    global _installed, _previous, _holders
    if _installed is None:
        return
    _holders -= 1
    if _holders > 0:
        return
    cfg = _driver_config()
    if cfg._active is _installed:
        cfg._active = _previous
    _installed, _previous = None, None
