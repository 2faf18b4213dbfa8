"""Host code written for a GPU, run on a machine without one: its CUDA requests answered on the CPU.

A kernel written for a GPU says so in its host code. ``torch.empty(n, device="cuda")``, ``x.cuda()``,
``x.to("cuda")``, ``torch.cuda.synchronize()``, ``with torch.cuda.device(x.device):``,
``torch.cuda.get_device_properties(0).multi_processor_count`` and Triton's
``triton.runtime.driver.active.get_active_torch_device()`` each raise on a machine without CUDA ("Torch not
compiled with CUDA enabled", "0 active drivers") before any kernel runs, in the launcher, in the example call's
``get_inputs()`` or when the kernel's module is imported. Inside :func:`cuda_on_cpu`, on such a machine:

- a tensor asked for on a CUDA device (a factory's ``device=``, ``Tensor.to``, ``Tensor.cuda``, a module's
  ``.cuda()``) is made on the CPU, where Triton's interpreter and gpuemu's runtime run its kernels;
- ``Tensor.is_cuda`` is True, so ``assert x.is_cuda`` holds and a launcher that falls back to PyTorch for CPU
  tensors runs its kernel (the kernel is what is judged);
- ``torch.cuda``'s ``synchronize``, ``device``, ``device_of``, ``set_device``, ``current_device``,
  ``device_count``, ``current_stream``, ``default_stream``, ``stream``, ``Stream``, ``Event`` and ``empty_cache``
  do nothing (one device, its streams already in order), and ``get_device_capability``, ``get_device_name``
  and ``get_device_properties`` describe the GPU CPU runs predict for (sm_90: an H100's 132 SMs);
- Triton's active driver is gpuemu's CPU stand-in (:mod:`gpuemu.runtime.driver`): the CPU as the torch device,
  sm_90 as the target.

``torch.cuda.is_available()`` stays False: gpuemu's own choice of device reads it. Where CUDA is available the
scope changes nothing (CUDA tensors are real there). Patches go through one :class:`gpuemu.scope.Scope` and are
undone on exit; the tensor rules are a ``TorchFunctionMode`` of the thread that entered.
"""

from __future__ import annotations

import contextlib
import threading
from types import SimpleNamespace
from typing import Any, Iterator

__all__ = ["cuda_on_cpu", "needed"]

_lock = threading.Lock()
_patched = 0  # scopes holding the torch.cuda patches (any thread)
_scope: Any = None
_driver_held = False  # the first scope's install_if_needed left the stand-in in place (its hold is released last)
_local = threading.local()  # .depth: this thread's nesting (its mode entered once)

CAPABILITY = (9, 0)  # what CPU runs predict for by default (gpuemu.resources: sm_90)
PROPERTIES = dict(name="NVIDIA H100 80GB HBM3 (gpuemu CPU stand-in)", major=9, minor=0, multi_processor_count=132,
                  total_memory=80 * 2**30, warp_size=32, regs_per_multiprocessor=65536,
                  max_threads_per_multi_processor=2048, max_shared_memory_per_block_optin=232448,
                  shared_memory_per_block=49152, shared_memory_per_block_optin=232448, L2_cache_size=50 * 2**20,
                  is_integrated=False, is_multi_gpu_board=False, uuid="gpuemu-cpu-stand-in")


def needed() -> bool:
    """True where CUDA requests cannot be met (no CUDA device): where :func:`cuda_on_cpu` does something."""
    import torch

    return not torch.cuda.is_available()


@contextlib.contextmanager
def cuda_on_cpu(active: bool = True) -> Iterator[None]:
    """For the duration, CUDA requests in host code are answered on the CPU (see the module docstring); nothing
    when ``active`` is False or CUDA is available. Nests, and may be entered by several threads."""
    depth = getattr(_local, "depth", 0)
    if depth:  # nested in this thread: the outer scope holds everything
        _local.depth = depth + 1
        try:
            yield
        finally:
            _local.depth = depth
        return
    if not active or not needed():
        yield
        return
    _hold()
    _local.depth = 1
    try:
        with _mode():
            yield
    finally:
        _local.depth = 0
        _release()


def _hold() -> None:
    global _patched, _scope, _driver_held
    from ..frameworks import preload_triton

    preload_triton()  # (Triton imported after TensorFlow crashes the process unless imported this way)
    with _lock:
        _patched += 1
        if _patched == 1:
            _scope = _patch_torch_cuda()
            with contextlib.suppress(Exception):  # (no Triton, or one without the driver slot: no stand-in)
                from ..runtime import driver

                driver.install_if_needed()
                _driver_held = driver._installed is not None


def _release() -> None:
    global _patched, _scope, _driver_held

    with _lock:
        _patched -= 1
        if _patched == 0:
            if _driver_held:
                from ..runtime import driver

                driver.uninstall()
                _driver_held = False
            if _scope is not None:
                _scope.undo()
                _scope = None


def _patch_torch_cuda() -> Any:
    import torch

    from ..scope import Scope

    scope = Scope()
    cuda = torch.cuda
    stream = _Stream()
    answers = {
        "synchronize": lambda device=None: None,
        "device": _NoContext,
        "device_of": _NoContext,
        "set_device": lambda device: None,
        "current_device": lambda: 0,
        "device_count": lambda: 1,
        "current_stream": lambda device=None: stream,
        "default_stream": lambda device=None: stream,
        "stream": lambda s=None: contextlib.nullcontext(s),
        "Stream": _Stream,
        "Event": _Event,
        "empty_cache": lambda: None,
        "get_device_capability": lambda device=None: CAPABILITY,
        "get_device_name": lambda device=None: PROPERTIES["name"],
        "get_device_properties": lambda device=None: SimpleNamespace(**PROPERTIES),
    }
    for name, value in answers.items():
        scope.set(cuda, name, value)
    return scope


class _NoContext:
    """``torch.cuda.device(d)`` / ``device_of(t)``: one device, nothing to switch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.idx = 0

    def __enter__(self) -> "_NoContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _Stream:
    """A stream that is always in order with every other (work on the CPU is done when its call returns)."""

    cuda_stream = 0
    device = "cpu"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        return None

    def wait_stream(self, other: Any) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> "_Event":
        return event or _Event()

    def query(self) -> bool:
        return True

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _Event:
    """An event that has always happened; no time passes between two (CPU timings say nothing of a GPU's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: Any) -> float:
        return 0.0


def _mode() -> Any:
    import torch
    from torch.overrides import TorchFunctionMode

    is_cuda = torch._C.TensorBase.__dict__["is_cuda"]
    to_cuda = {torch.Tensor.cuda, torch._C.TensorBase.cuda}
    tensor_to = {torch.Tensor.to, torch._C.TensorBase.to}

    def on_cuda(d: Any) -> bool:
        if isinstance(d, str):
            return d == "cuda" or d.startswith("cuda:")
        if type(d) is int:  # device=0, device=torch.cuda.current_device(): a CUDA ordinal
            return True
        return isinstance(d, torch.device) and d.type == "cuda"

    class CudaOnCpu(TorchFunctionMode):
        """Tensors asked for on CUDA are made on the CPU; ``is_cuda`` is True."""

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            if getattr(func, "__self__", None) is is_cuda:
                return True
            if func in to_cuda:
                return args[0]
            if "device" in kwargs and on_cuda(kwargs["device"]):
                kwargs = dict(kwargs, device="cpu")
            if func in tensor_to and len(args) > 1 and on_cuda(args[1]):  # x.to("cuda"), x.to(0, torch.half)
                args = (args[0], "cpu", *args[2:])
            return func(*args, **kwargs)

    return CudaOnCpu()
