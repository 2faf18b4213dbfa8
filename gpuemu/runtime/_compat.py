"""Every use of a Triton internal goes through here, gated by version.

The runtime reuses Triton's interpreter (its numpy builder, its language patches) and, for AOT compiles,
Triton's own binder. Those are internals: they moved between releases. Supported and tested: triton 3.6
and 3.8 (``make test`` and ``make test-triton36``). Anything else raises :class:`UnsupportedTriton` with
the version found, rather than failing somewhere deep inside a launch.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from ..errors import GpuemuError

SUPPORTED = ((3, 6), (3, 7), (3, 8), (3, 9))  # 3.6 and 3.8 tested; 3.7/3.9 share their internals


class UnsupportedTriton(GpuemuError, ImportError):
    """The installed Triton lacks an internal the runtime needs."""


@functools.lru_cache(maxsize=1)
def triton_version() -> tuple[int, int]:
    """(major, minor) of the installed Triton."""
    import triton

    parts = triton.__version__.split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def check_supported() -> None:
    """Raise UnsupportedTriton unless this Triton is one the runtime knows."""
    v = triton_version()
    if v not in SUPPORTED:
        raise UnsupportedTriton(f"the gpuemu runtime supports triton {', '.join('%d.%d' % s for s in SUPPORTED)}; "
                                f"found {'%d.%d' % v}. Pin a supported triton or run without the runtime.")


@functools.lru_cache(maxsize=1)
def interp():
    """Triton's interpreter module (triton.runtime.interpreter); same layout in 3.6-3.9."""
    check_supported()
    from triton.runtime import interpreter

    for name in ("interpreter_builder", "interpreter_semantic", "TensorHandle", "_patch_lang", "_implicit_cvt",
                 "_get_np_dtype", "ReduceOps", "ScanOps", "InterpretedFunction"):
        if not hasattr(interpreter, name):
            raise UnsupportedTriton(f"triton {triton_version()} interpreter lacks {name}; the runtime cannot run here")
    _language_snapshot()  # before the runtime's first launch: the language as Triton defined it
    return interpreter


# ---------------------------------------------------------------------- the language without interpreter patches
def _language_objects() -> tuple:
    import triton.language as tl

    objs = [tl, tl.core, tl.math, tl.tensor, tl.dtype]
    desc = getattr(tl.core, "tensor_descriptor_base", None)
    return tuple(objs + ([desc] if desc is not None else []))


def _is_interpreter_patch(value: Any) -> bool:
    """A value Triton's interpreter put into triton.language (its wrappers are defined in interpreter.py)."""
    f = value.func if isinstance(value, functools.partial) else value.fget if isinstance(value, property) else value
    code = getattr(f, "__code__", None)
    return code is not None and code.co_filename.replace("\\", "/").endswith("triton/runtime/interpreter.py")


@functools.lru_cache(maxsize=1)
def _language_snapshot() -> dict:
    """id(obj) -> {name: value} of the language's attributes, interpreter patches left out."""
    return {id(obj): {k: v for k, v in vars(obj).items() if not _is_interpreter_patch(v)}
            for obj in _language_objects()}


_MISSING = object()


def _original(obj: Any, name: str, patched: Any) -> Any:
    """What ``obj.name`` was before the interpreter patched it; _MISSING where it did not exist."""
    member = (getattr(patched, "__kwdefaults__", None) or {}).get("member")
    if member is not None and not _is_interpreter_patch(member):  # an _patch_attr wrapper of a builtin
        return member
    snap = _language_snapshot().get(id(obj), {})
    if name in snap:
        return snap[name]
    import triton.language as tl

    for twin in (tl, tl.core):  # triton.language re-exports core: one of the two may still hold it
        value = vars(twin).get(name, _MISSING)
        if twin is not obj and value is not _MISSING and not _is_interpreter_patch(value):
            return value
    return _MISSING if isinstance(obj, type) else None  # a class attribute the interpreter added


@contextlib.contextmanager
def unpatched_language():
    """For the duration, triton.language holds no interpreter patches.

    Triton's interpreter patches the modules visible from a @jit function when that function is called and
    restores them only at the end of a launch of the kernel whose globals it patched. A helper with other
    globals (tl.sum's, in triton/language/standard.py, sees ``core``) leaves triton.language.core patched
    for the rest of the process, and code generation then fails on the next uncached compile
    ("'ir.value' object has no attribute 'dtype'"). Run under the launch lock: no launch is in progress."""
    undo: list[tuple[Any, str, Any]] = []
    try:
        for obj in _language_objects():
            for name, value in list(vars(obj).items()):
                if not _is_interpreter_patch(value):
                    continue
                original = _original(obj, name, value)
                if original is None:
                    continue
                undo.append((obj, name, value))
                if original is _MISSING:
                    delattr(obj, name)
                else:
                    setattr(obj, name, original)
        yield
    finally:
        for obj, name, value in reversed(undo):
            setattr(obj, name, value)


def builder():
    """The interpreter's process-wide builder (one instance; the runtime patches its methods per launch)."""
    return interp().interpreter_builder


def semantic():
    return interp().interpreter_semantic


def jit_function_class():
    from triton.runtime.jit import JITFunction

    return JITFunction


def interpreted_function_class():
    return interp().InterpretedFunction


def is_constexpr_annotation(annotation: Any) -> bool:
    """Compiled Triton's rule (KernelParam.is_constexpr): the normalised annotation contains 'constexpr'.

    The interpreter instead compares it for equality, so ``BLOCK: "tl.constexpr"`` and friends differ.
    """
    if annotation is inspect.Parameter.empty or annotation is None or annotation == "":
        return False
    from triton.runtime.jit import _normalize_ty

    try:
        return "constexpr" in _normalize_ty(annotation)
    except Exception:  # an annotation Triton cannot normalise is not a constexpr
        return "constexpr" in str(annotation)


@dataclass(frozen=True)
class Source:
    """A kernel's source as Triton holds it (in memory: no re-read of the file) and where it lives."""

    text: str  # starts at 'def', dedented
    filename: str
    def_line: int  # 1-based line of 'def' in filename


def source_of(kernel: Any, fn) -> Source:
    """The source of ``fn`` (the Python function of ``kernel``), preferring Triton's in-memory copy."""
    src = getattr(kernel, "src", None) if kernel is not None else None
    filename = fn.__code__.co_filename
    if isinstance(src, str) and src.lstrip().startswith("def"):
        line = getattr(kernel, "def_file_line_number", None)
        if line is None:  # 3.6 keeps only the decorator line and the raw lines
            raw = getattr(kernel, "raw_src", None) or []
            start = getattr(kernel, "starting_line_number", fn.__code__.co_firstlineno)
            line = start + next((i for i, ln in enumerate(raw) if ln.strip().startswith("def ")), 0)
        return Source(src, filename, int(line))
    lines, start = inspect.getsourcelines(fn)
    idx = next(i for i, ln in enumerate(lines) if ln.strip().startswith("def "))
    return Source(textwrap.dedent("".join(lines[idx:])), filename, start + idx)


def input_precision_name(value: Any) -> str:
    """'tf32' / 'tf32x3' / 'ieee' / 'bf16x3' / 'bf16x6' from Triton's INPUT_PRECISION enum (or a string)."""
    if value is None:
        return "tf32"
    name = getattr(value, "name", None) or str(value).split(".")[-1]
    return str(name).lower()


def rounding_is_rtz(mode: Any) -> bool:
    name = getattr(mode, "name", None) or str(mode)
    return str(name).upper().endswith("RTZ")


def patch_builtin_module(module, scope) -> None:
    """Route the builtins of ``module`` (e.g. tl.extra.cuda.libdevice) through the interpreter's semantic,
    as Triton's interpreter does for tl / tl.math. ``scope`` restores them after the launch."""
    it = interp()
    it._patch_builtin(module, it.interpreter_builder, scope)


def new_patch_scope():
    return interp()._LangPatchScope()


def bf16_input_precisions() -> tuple[str, ...]:
    from triton._C.libtriton import ir

    return tuple(n.lower() for n in ("BF16x3", "BF16x6") if hasattr(ir.INPUT_PRECISION, n))
