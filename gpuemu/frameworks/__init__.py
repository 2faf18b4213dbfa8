"""Launchers outside PyTorch: JAX (with Pallas) and TensorFlow.

A case is materialised exactly as for a torch launcher (same RNG, same bytes, :func:`gpuemu.cases.materialize`);
:func:`adapt` wraps a JAX or TensorFlow launcher in a torch-facing callable that hands those tensors over by
DLPack (no copy where the framework allows it), calls the launcher, and brings its output back as a torch
tensor for the same :class:`gpuemu.oracle.Oracle`. Everything downstream (shrinking, hints, the store,
``gpuemu reproduce``) sees an ordinary launcher.

Neither framework's arrays have strides or a storage offset: a non-contiguous layout cannot be expressed,
so the fuzzer runs every case of such a launcher with contiguous inputs and says so (:data:`NO_STRIDES`).

>>> detect(lambda x: x)   # a plain function in a module without jax or tensorflow
'torch'

jax and tensorflow are imported only when a launcher needs them (``import gpuemu`` stays cheap).
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
from typing import Any, Callable

from ..errors import InvalidArgument

FRAMEWORKS = ("torch", "jax", "tf")
_ALIASES = {"torch": "torch", "pytorch": "torch", "jax": "jax", "pallas": "jax", "tf": "tf", "tensorflow": "tf"}
_LABEL = {"jax": "JAX", "tf": "TensorFlow"}
_EXTRA = {"jax": "jax", "tf": "tf"}
_PACKAGE = {"jax": "jax", "tf": "tensorflow"}


def canonical(name: str | None) -> str | None:
    """'tensorflow' -> 'tf'; None stays None (detect it); an unknown name raises InvalidArgument."""
    if name is None:
        return None
    try:
        return _ALIASES[str(name).strip().lower()]
    except KeyError:
        raise InvalidArgument(f"framework {name!r} is not known; use one of {', '.join(FRAMEWORKS)} "
                              "(or leave it out to detect it from the launcher's module)") from None


def _roots(obj: Any) -> set[str]:
    """Top-level package names that an object's type or module comes from."""
    names = {(getattr(type(obj), "__module__", "") or "").split(".")[0]}
    names.add((getattr(obj, "__module__", "") or "").split(".")[0])
    return names


def detect(fn: Callable) -> str:
    """The framework a launcher is written against: 'jax', 'tf' or 'torch'.

    A jitted JAX function or a ``tf.function`` says so by its type. Otherwise the launcher's module decides:
    one that imports jax (jax.numpy, Pallas) or tensorflow and neither torch nor triton is that framework's;
    anything else is torch, as before. A module importing both jax and tensorflow is ambiguous: pass
    ``framework=``.
    """
    inner = fn
    for _ in range(8):  # decorators (functools.wraps) keep the original under __wrapped__
        roots = _roots(inner)
        if roots & {"jax", "jaxlib"}:
            return "jax"
        if "tensorflow" in roots:
            return "tf"
        nxt = getattr(inner, "__wrapped__", None) or getattr(inner, "python_function", None)
        if nxt is None or nxt is inner:
            break
        inner = nxt
    mod = sys.modules.get(getattr(inner, "__module__", "") or "")
    if mod is None:
        return "torch"
    seen = set()
    for v in list(vars(mod).values()):
        try:
            name = getattr(v, "__name__", "") if isinstance(v, type(sys)) else (getattr(v, "__module__", "") or "")
        except Exception:  # a lazy proxy whose attribute access raises says nothing about frameworks
            continue
        if isinstance(name, str) and name:
            seen.add(name.split(".")[0])
    if seen & {"torch", "triton"}:
        return "torch"
    has_jax, has_tf = bool(seen & {"jax", "jaxlib"}), "tensorflow" in seen
    if has_jax and has_tf:
        raise InvalidArgument(f"{getattr(mod, '__name__', 'the module')} imports both jax and tensorflow: "
                              "pass --framework jax|tf (framework= in gpuemu.fuzz)")
    return "jax" if has_jax else "tf" if has_tf else "torch"


def resolve(fn: Callable, framework: str | None) -> str:
    """``framework`` when given (checked), else :func:`detect`."""
    return canonical(framework) or detect(fn)


def preload_triton() -> None:
    """Import Triton now, so that TensorFlow and Triton can share the process.

    libtriton loaded after TensorFlow crashes the process (segmentation fault: the two ship clashing LLVM
    symbols), and gpuemu imports Triton lazily (launch observation, the hook, record metadata). Loaded before
    TensorFlow it is fine; loaded after it, RTLD_DEEPBIND makes libtriton bind its own symbols first. No-op
    without Triton or when it is already imported."""
    import importlib.util
    import os

    if "triton" in sys.modules or importlib.util.find_spec("triton") is None:
        return
    old = sys.getdlopenflags()
    if "tensorflow" in sys.modules and hasattr(os, "RTLD_DEEPBIND"):
        sys.setdlopenflags(old | os.RTLD_DEEPBIND)
    try:
        import triton  # noqa: F401
    except Exception:  # a broken Triton is the torch path's business, reported there
        pass
    finally:
        sys.setdlopenflags(old)


def backend(framework: str):
    """The conversion module of a framework ('jax' or 'tf'); one clear line when it is not installed."""
    import importlib

    if framework == "tf":
        preload_triton()
        if "tensorflow" not in sys.modules:  # gpuemu imports it: its C++ INFO lines (oneDNN, CPU features) would
            import os  # mix into gpuemu's report; a level the user set is kept

            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        importlib.import_module(_PACKAGE[framework])
    except ImportError as e:
        raise InvalidArgument(f"the launcher is written against {_LABEL[framework]}, which is not installed here "
                              f"({e}); install it with: pip install 'gpuemu[{_EXTRA[framework]}]'") from None
    return importlib.import_module(f"gpuemu.frameworks._{framework}")


def no_strides_reason(framework: str, flattened: int, total: int) -> str:
    """Why a framework's launcher got no strided case (the fuzz summary prints it)."""
    return (f"{_LABEL[framework]} arrays have no strides; {flattened} of {total} cases drawn with a view ran with "
            "contiguous inputs (same seed, same values)")


def adapt(fn: Callable, framework: str, *, index_output: bool = False) -> Callable:
    """A torch-facing launcher around ``fn`` (a JAX or TensorFlow launcher): torch tensors in by DLPack, the
    framework's output back as a torch tensor that owns its memory. ``index_output``: the op returns int64
    indices, which JAX without x64 returns as int32; those are widened (exactly) to int64.
    ``framework='torch'`` returns ``fn`` itself."""
    if framework == "torch":
        return fn
    conv = backend(framework)
    quiet = _quiet_tf if framework == "tf" else _nothing

    @functools.wraps(fn)
    def launcher(*args: Any, **kwargs: Any) -> Any:
        try:
            with quiet():
                out = fn(*[conv.to_native(a) for a in args], **kwargs)
        except Exception as e:
            explain(e)
            raise
        return conv.to_torch(out, index_output=index_output)

    launcher.__gpuemu_framework__ = framework  # type: ignore[attr-defined]
    return launcher


# what an exception a framework raises means for a gpuemu run, added to its message (the verdict shows it)
_EXPLAIN = {
    "Only interpret mode is supported on CPU backend":
        "a Pallas kernel with interpret=False runs only on a GPU or TPU; on this CPU pass interpret=True to "
        "pl.pallas_call (e.g. interpret=jax.default_backend() == 'cpu')",
}


def explain(e: BaseException) -> None:
    """Add what gpuemu knows about ``e`` to its message, in place (its traceback, the user's line, is kept)."""
    text = str(e)
    for needle, why in _EXPLAIN.items():
        if needle in text and why not in text and e.args and isinstance(e.args[0], str):
            e.args = (f"{e.args[0]} ({why})",) + tuple(e.args[1:])


def other_framework_hint(fn: Callable, used: str) -> str | None:
    """For a launcher run as ``used`` whose every case raised: the other framework its module imports, as a hint
    to say which (a module importing torch and jax is taken for a torch launcher)."""
    if used != "torch":
        return None
    mod = sys.modules.get(getattr(getattr(fn, "__wrapped__", None) or fn, "__module__", "") or "")
    names = set()
    for v in list(vars(mod).values()) if mod is not None else []:
        try:
            name = getattr(v, "__name__", "") if isinstance(v, type(sys)) else (getattr(v, "__module__", "") or "")
        except Exception:
            continue
        if isinstance(name, str) and name:
            names.add(name.split(".")[0])
    other = "jax" if names & {"jax", "jaxlib"} else "tf" if "tensorflow" in names else None
    if other is None:
        return None
    return (f"its module imports {_LABEL[other]} as well as torch, so it ran as a torch launcher: if it takes "
            f"{_LABEL[other]} arrays, pass --framework {other} (framework: {other} in a gpuemu check manifest, "
            f"framework='{other}' in gpuemu.fuzz and the pytest marker)")


# lines TensorFlow's native code prints to stderr when it loads, whatever TF_CPP_MIN_LOG_LEVEL says (absl logs
# before its own initialisation): the oneDNN notice (printed by two of its libraries), the CPU-feature notice
_NATIVE_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
                           r"|[IW]\d{4} [\d:. ]+\d+ (port|cpu_feature_guard)\.cc:\d+\] .*"
                           r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate "
                           r"compiler flags\.)$")


@contextlib.contextmanager
def quiet_native_logs():
    """While a launcher's module is imported (and imports TensorFlow): what native code writes to stderr is held,
    and written back without TensorFlow's load-time notices. Python's own output is untouched. Anything else
    (an error of the module, a C library's warning) comes through, in order, when the block ends."""
    import os
    import tempfile

    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (pytest capture, a notebook): nothing to filter
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+b") as held:
        os.dup2(held.fileno(), fd)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except Exception:
                pass
            os.dup2(saved, fd)
            os.close(saved)
            held.seek(0)
            text = held.read().decode("utf-8", "replace")
            kept = [ln for ln in text.splitlines(keepends=True) if not _NATIVE_NOISE.match(ln.rstrip("\n"))]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class _quiet_tf:
    """TensorFlow's Python warnings (tf.function retracing: gpuemu calls with new shapes on purpose) held back for
    the call, the logger's level restored after."""

    def __enter__(self) -> None:
        import logging

        self.log = logging.getLogger("tensorflow")
        self.level = self.log.level
        self.log.setLevel(logging.ERROR)

    def __exit__(self, *exc: Any) -> None:
        self.log.setLevel(self.level)


__all__ = ["FRAMEWORKS", "adapt", "backend", "canonical", "detect", "explain", "no_strides_reason", "other_framework_hint",
           "preload_triton", "quiet_native_logs", "resolve"]
