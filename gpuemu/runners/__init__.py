"""Running a launcher: on the CPU on gpuemu's runtime (Triton's interpreter with GPU semantics), or on
CUDA when present.

:func:`run_launcher` calls a launcher once with hygiene around it: output allocations made inside the
call are poisoned, Triton launches are observed, exceptions are captured (a kernel that raises is a
verdict, not a crash of gpuemu), and the time spent is measured. On the CPU the launches run on
:mod:`gpuemu.runtime` (bounds-checked memory, bf16, TF32 dots, every autotune config); what it reports
(dot precision, chosen autotune config) is merged into each ``Launch.options``. On CUDA the dot precision
comes from the compiled kernel's IR (:mod:`gpuemu.runners.dots`). A launch a GPU target would refuse
(shared memory, threads; :mod:`gpuemu.resources`) is refused on the CPU before it runs, and a real
``OutOfResources`` on CUDA becomes the same :class:`gpuemu.resources.LaunchRefused`.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import one_line
from .launches import Launch, guarding, observe_launches
from .poison import poison_allocations

__all__ = ["Launch", "RunOutcome", "bf16_unfaithful", "default_device", "interpreting", "observe_launches", "ran_on_runtime",
           "run_launcher"]


def interpreting() -> bool:
    """True when Triton kernels run under the interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0", "false", "False")


def default_device() -> str:
    """'cuda' when a GPU is present and the interpreter is off, else 'cpu'."""
    if interpreting():
        return "cpu"
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover - torch broken
        return "cpu"


@dataclass
class RunOutcome:
    output: Any = None
    error: BaseException | None = None
    error_text: str = ""
    launches: list[Launch] = field(default_factory=list)
    seconds: float = 0.0
    launched: bool = False  # a kernel launch had started when ``error`` was raised (else: raised on the host first)
    internal: bool = False  # ``error`` is a failure of gpuemu's own code, not of the launcher or its kernels


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def run_launcher(fn: Callable, args: list, kwargs: dict, *, device: str = "cpu", poison: bool = True,
                 runtime: bool | None = None) -> RunOutcome:
    """Call ``fn(*args, **kwargs)``; never raises for what the launcher does.

    ``runtime``: run CPU launches on gpuemu's runtime (default: yes when ``device`` is the CPU).
    """
    import contextlib
    import warnings

    import numpy as np

    use_runtime = (device == "cpu") if runtime is None else runtime
    from ..frameworks import preload_triton

    preload_triton()  # the launch observer imports Triton: after TensorFlow that must be done with care
    out = RunOutcome()
    t0 = time.perf_counter()
    try:
        # the interpreter evaluates kernels with numpy: an exp that overflows is the kernel's business
        with contextlib.ExitStack() as stack:
            launches = stack.enter_context(observe_launches())
            if use_runtime:  # what a GPU would refuse to launch is refused here too, before the CPU runs it
                from ..resources import guard

                stack.enter_context(guarding(guard))
            reports = stack.enter_context(_runtime_scope()) if use_runtime else None
            stack.enter_context(poison_allocations(enabled=poison))
            stack.enter_context(np.errstate(all="ignore"))
            # nor is a max over a block of NaNs (Triton's interpreter reduces with np.nanmax, which warns): the
            # verdict judges the NaN; the warning only reached the user's stderr
            stack.enter_context(warnings.catch_warnings())
            warnings.filterwarnings("ignore", message="All-NaN (slice|axis) encountered", category=RuntimeWarning)
            try:
                out.output = fn(*args, **kwargs)
                _sync(device)
            finally:
                out.launches = _merge(launches, reports)
    except Exception as e:  # the kernel's failure is the verdict
        from ..resources import block_too_large, from_out_of_resources, is_out_of_resources

        kernel = out.launches[-1].kernel if out.launches else "kernel"
        if is_out_of_resources(e):  # a real launch refused: the same LaunchRefused the CPU run predicts
            e = from_out_of_resources(e, kernel=kernel, device=device if device.startswith("cuda") else None)
        else:  # a block past Triton's largest: its compiler refuses it, on the CPU runtime and on a GPU alike
            e = block_too_large(e, kernel=kernel) or e
        out.error = e
        out.launched = bool(out.launches) or _device_fault(e)
        out.internal = _internal(e)
        frame = _user_frame(traceback.extract_tb(e.__traceback__))
        out.error_text = one_line(e) + (f" ({frame.filename}:{frame.lineno})" if frame else "")
    out.seconds = time.perf_counter() - t0
    return out


def _device_fault(e: BaseException) -> bool:
    """A CUDA error surfacing on the host (an illegal address, a device assert): a kernel ran and failed, whatever
    launched it (a Triton kernel, a C++ extension's, a library's)."""
    text = f"{type(e).__name__}: {e}"
    return "AcceleratorError" in text or "CUDA error" in text or "device-side assert" in text


def _internal(e: BaseException) -> bool:
    """Raised by gpuemu's own code: the innermost frame is gpuemu's, and the exception is none of the verdicts
    gpuemu raises from inside a launch on purpose (a finding, a refusal by the GPU, the kernel's own error)."""
    import os.path

    from ..errors import GpuemuError, KernelFinding
    from ..resources import LaunchRefused

    if isinstance(e, (KernelFinding, LaunchRefused, GpuemuError)) or type(e).__name__ == "KernelError":
        return False
    frames = traceback.extract_tb(e.__traceback__)
    if not frames or frames[-1].name in ("__torch_function__", "__torch_dispatch__"):
        return False  # a torch op raised (C++ adds no frame) under gpuemu's poisoning mode: the launcher's call
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.abspath(frames[-1].filename).startswith(here + os.sep)


def _user_frame(tb):
    """Where the launcher's own code raised: the deepest frame outside gpuemu, torch and triton (an
    IndexError from ``out.stride(-2)`` passes through gpuemu's poisoning mode and torch; the user's line
    is the one to show) and, where loaded, JAX and TensorFlow (a Pallas or tf.function launcher's error is
    raised deep inside them), else the deepest frame outside gpuemu, else the deepest."""
    import os.path
    import sys

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    libs = [here]
    for mod in ("torch", "triton", "jax", "jaxlib", "tensorflow", "keras", "tf_keras"):
        try:
            m = sys.modules.get(mod) or (__import__(mod) if mod in ("torch", "triton") else None)
            if m is not None:
                libs.append(os.path.dirname(os.path.abspath(m.__file__)))
        except Exception:  # pragma: no cover - not installed
            pass
    # a harness's TorchFunctionMode (or dispatch mode) sits between the launcher's line and torch: not the user's line
    frames = [fr for fr in tb if fr.name not in ("__torch_function__", "__torch_dispatch__")] or list(tb)
    for skip in (libs, [here]):
        for fr in reversed(frames):
            if not any(os.path.abspath(fr.filename).startswith(d + os.sep) for d in skip):
                return fr
    return frames[-1] if frames else None


def _runtime_scope():
    """gpuemu's runtime active for the block (unless it already was); yields its launch reports."""
    import contextlib

    @contextlib.contextmanager
    def scope():
        try:
            from .. import runtime
        except Exception:  # pragma: no cover - no triton: nothing to run on the runtime
            yield None
            return
        was = runtime.active()
        if not was:
            runtime.activate()
        try:
            with runtime.observe() as reports:
                yield reports
        finally:
            if not was:
                runtime.deactivate()

    return scope()


def _merge(launches: list[Launch], reports: list | None) -> list[Launch]:
    """Launch records with what the runtime reported for the same launch (in order) in ``options``. When the
    runtime was active every launch ran on it, also one that raised before reporting (an out-of-bounds
    finding): such a call is still evidence about bf16, and must not make the fuzzer drop bf16."""
    import dataclasses

    if reports is None:
        return list(launches)
    out = []
    for i, lch in enumerate(launches):
        extra = reports[i].launch_options() if len(reports) == len(launches) else {}
        out.append(dataclasses.replace(lch, options={**lch.options, "runtime": "gpuemu", **extra}))
    return out


def ran_on_runtime(launches: list[Launch]) -> bool:
    """True when gpuemu's runtime ran these launches (bf16 and the rest as on a GPU)."""
    return bool(launches) and all(lch.options.get("runtime") == "gpuemu" for lch in launches)


def bf16_unfaithful(dtype: str, launches: list[Launch]) -> bool:
    """True for a bf16 call whose Triton launches ran on the plain interpreter, which mishandles bf16
    (truncating casts, no bf16 arithmetic): such a run is evidence of nothing, so callers skip it."""
    return dtype == "bf16" and interpreting() and bool(launches) and not ran_on_runtime(launches)
