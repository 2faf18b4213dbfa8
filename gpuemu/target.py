"""Loading a launcher named on the command line: ``path/to/file.py:func`` or ``pkg.module:func``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable

from .errors import TargetError


def load(spec: str) -> Callable:
    """Import and return the callable named by ``spec``; one clear TargetError otherwise. On a machine without
    CUDA the import answers CUDA requests on the CPU (:mod:`gpuemu.runners.cuda_on_cpu`: a module-level
    ``DEVICE = triton.runtime.driver.active.get_active_torch_device()``)."""
    from .runners.cuda_on_cpu import cuda_on_cpu

    with cuda_on_cpu():
        return _load(spec)


def _load(spec: str) -> Callable:
    if ":" not in spec:
        raise TargetError(f"target {spec!r} must be 'path/to/file.py:function' or 'package.module:function'")
    mod_part, _, attr = spec.rpartition(":")
    if not mod_part or not attr:
        raise TargetError(f"target {spec!r} must be 'path/to/file.py:function' or 'package.module:function'")
    if mod_part.endswith(".py") or os.sep in mod_part or "/" in mod_part:
        path = Path(mod_part)
        if not path.is_file():
            raise TargetError(f"target file {mod_part!r} does not exist (from {spec!r}); check the path")
        name = "gpuemu_target_" + "".join(c if c.isalnum() else "_" for c in str(path.resolve()))
        module = sys.modules.get(name)
        if module is None:
            sys.path.insert(0, str(path.resolve().parent))  # let the file import its neighbours
            try:
                mspec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(mspec)  # type: ignore[arg-type]
                sys.modules[name] = module
                mspec.loader.exec_module(module)  # type: ignore[union-attr]
            except Exception as e:
                sys.modules.pop(name, None)
                raise TargetError(f"target {spec!r} failed to import: {type(e).__name__}: {e}") from None
    else:
        try:
            module = _import_module(mod_part)
        except Exception as e:
            raise TargetError(f"target {spec!r} failed to import: {type(e).__name__}: {e}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            avail = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))[:12]
            raise TargetError(f"target {spec!r}: {mod_part} has no attribute {attr!r}; callables there: "
                              f"{', '.join(avail) or 'none'}")
        obj = getattr(obj, part)
    if not callable(obj):
        kind = type(obj).__name__
        raise TargetError(f"target {spec!r} is {'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}, not a callable launcher")
    return obj


def _import_module(name: str):
    """``importlib.import_module``, finding a module of the working directory (or of the top of its git checkout) as
    ``python -m`` would: a replay line printed by pytest or a script names ``kernels.softmax:f`` relative to there."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not name.startswith(e.name.split(".")[0]):
            raise
        from .origin import checkout_of

        for base in dict.fromkeys([os.getcwd(), checkout_of(os.getcwd()) or os.getcwd()]):
            if base not in sys.path:
                sys.path.append(base)
        return importlib.import_module(name)


def describe(fn: Callable) -> str:
    """A target string for a callable (file:function when it came from a file)."""
    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    qual = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    f = getattr(mod, "__file__", None)
    if f and (mod.__name__.startswith("gpuemu_target_") or mod.__name__ == "__main__"):
        try:
            f = os.path.relpath(f)
        except ValueError:
            pass
        return f"{f}:{qual}"
    return f"{getattr(fn, '__module__', '?')}:{qual}"
