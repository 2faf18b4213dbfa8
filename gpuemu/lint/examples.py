"""Example launches: the concrete (kernel, arguments) pairs the lint compiles.

A Triton kernel's machine code depends on its specialisation (argument dtypes, which integers are 1 or
divisible by 16, constexpr block sizes, num_warps), so the lint compiles what a real launch would. Three ways
to get one, in this order of preference:

1. a *launcher* (``file.py:launcher``) called once on example inputs built from its op's schema (``--op``,
   the corpus manifest, or ``lint.examples`` in a rule pack); its Triton launches are recorded and **not run**
   (a launch costs nothing, so recording the whole corpus takes well under a second);
2. a zero-argument function that launches the kernels itself;
3. a ``@triton.jit`` kernel with a declaration in ``lint.kernels`` (argument types and constexpr values).

Modules are loaded with the interpreter off, so ``@triton.jit`` yields real ``JITFunction`` objects that
``triton.compile`` accepts, even in a process (pytest) where ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import linecache
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import InvalidArgument, TargetError, one_line


@dataclass(frozen=True)
class SourceLocation:
    """Where a kernel is defined: a file and the lines of its ``def`` (1-based, inclusive)."""

    path: str
    start_line: int
    end_line: int

    def to_dict(self) -> dict:
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line}


@dataclass
class Specimen:
    """One kernel with one concrete launch: what is compiled for every target.

    ``kernel_id`` is stable across edits of block sizes (it names the launcher and the kernel, not the
    specialisation), so a baseline entry follows the kernel when its constexprs change.
    """

    kernel_id: str
    name: str
    fn: Any  # triton.runtime.jit.JITFunction
    args: tuple
    kwargs: dict
    grid: tuple[int, ...] | None = None
    location: SourceLocation | None = None
    origin: str = "launcher"  # "launcher" | "declaration"
    notes: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ loading


@contextlib.contextmanager
def _compiled_mode() -> Iterator[None]:
    """Triton decorators yield JITFunction (not the interpreter's) inside this block."""
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    scope = contextlib.nullcontext()
    knobs = None
    try:
        from triton import knobs as _knobs

        knobs = _knobs
        scope = knobs.runtime.scope()
    except Exception:  # triton < 3.4: the environment variable is all there is
        knobs = None
    try:
        with scope:
            if knobs is not None:
                knobs.runtime.interpret = False
            yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


def load_module(path: str | os.PathLike):
    """Import a Python file with Triton's interpreter off, as a fresh module (edits on disk are seen)."""
    p = Path(path)
    if not p.is_file():
        raise TargetError(f"lint target file {str(path)!r} does not exist; check the path")
    data = p.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    name = "gpuemu_lint_" + "".join(c if c.isalnum() else "_" for c in str(p.resolve())) + "_" + digest
    if name in sys.modules:
        return sys.modules[name]
    linecache.checkcache(str(p.resolve()))
    parent = str(p.resolve().parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)  # let the file import its neighbours, as gpuemu.target.load does
    spec = importlib.util.spec_from_file_location(name, p.resolve())
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    try:
        with _compiled_mode():
            spec.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as e:
        sys.modules.pop(name, None)
        raise TargetError(f"{path}: failed to import for linting: {type(e).__name__}: {e}") from None
    return module


def resolve_attr(module, attr: str, spec: str):
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            avail = sorted(n for n in dir(module) if not n.startswith("__") and callable(getattr(module, n)))[:12]
            raise TargetError(f"lint target {spec!r}: {module.__file__} has no {attr!r}; callables there: "
                              f"{', '.join(avail) or 'none'}")
        obj = getattr(obj, part)
    return obj


def is_jit_kernel(obj: Any) -> bool:
    """True for a ``@triton.jit`` function (or an autotuner/heuristics wrapping one)."""
    try:
        from triton.runtime.jit import JITFunction
    except Exception:
        return False
    while obj is not None and not isinstance(obj, JITFunction):
        obj = getattr(obj, "fn", None) if hasattr(obj, "configs") or hasattr(obj, "values") else None
    return obj is not None


def location_of(fn: Any) -> SourceLocation | None:
    """The file and lines of a JITFunction's (or a plain function's) definition."""
    py = getattr(fn, "fn", fn)
    try:
        file = inspect.getsourcefile(py)
        lines, start = inspect.getsourcelines(py)
    except (OSError, TypeError):
        return None
    if not file:
        return None
    return SourceLocation(file, start, start + len(lines) - 1)


def display_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """``path`` relative to ``root`` (default: the working directory) when inside it, else absolute, with '/'."""
    p = Path(path).resolve()
    base = Path(root or os.getcwd()).resolve()
    try:
        return p.relative_to(base).as_posix()
    except ValueError:
        return p.as_posix()


# ------------------------------------------------------------------------------------------ recording

_local = threading.local()
_installed = False


def _record(kernel, args, kwargs, grid, warmup, call_next):
    sink = getattr(_local, "sink", None)
    if sink is None:  # not recording on this thread: let the launch through
        return call_next(args, kwargs, grid, warmup)
    sink.append((kernel, tuple(args), dict(kwargs), grid, getattr(_local, "config", None)))
    return None  # recorded, not run: the lint only needs the specialisation


# the launch chain asks this first: outside a recording the recorder is skipped altogether
_record.wants = lambda kernel, args: getattr(_local, "sink", None) is not None  # type: ignore[attr-defined]


@contextlib.contextmanager
def _recording() -> Iterator[list]:
    from ..runners.launches import add_interceptor

    global _installed
    if not _installed:
        add_interceptor(_record)
        _installed = True
    sink: list = []
    _local.sink = sink
    try:
        with _autotune_expanded():
            yield sink
    finally:
        _local.sink = None


@contextlib.contextmanager
def _autotune_expanded() -> Iterator[None]:
    """While recording, an autotuned kernel launches every config once (no benchmarking on a GPU-less host)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:
        yield
        return
    original = Autotuner.run

    def run_every_config(self, *args, **kwargs):
        if getattr(_local, "sink", None) is None:
            return original(self, *args, **kwargs)
        for i, cfg in enumerate(self.configs):
            _local.config = i
            try:
                self.fn.run(*args, **{**kwargs, **cfg.all_kwargs()})
            finally:
                _local.config = None
        return None

    Autotuner.run = run_every_config
    try:
        yield
    finally:
        Autotuner.run = original


def record_launches(fn, args: list | tuple = (), kwargs: Mapping[str, Any] | None = None) -> list[tuple]:
    """Call ``fn(*args, **kwargs)``; its Triton launches as (kernel, args, kwargs, grid, autotune config index).

    The launches are recorded, not run.

    A launcher that needs a launch's results (it reads an output back) may fail after the first launch;
    what was recorded until then is returned, and nothing is returned only if nothing launched.
    """
    import numpy as np

    with _recording() as sink, _compiled_mode(), np.errstate(all="ignore"):
        try:
            fn(*args, **dict(kwargs or {}))
        except Exception as e:
            if not sink:
                raise TargetError(f"the example launch raised before launching a Triton kernel: {one_line(e)}"
                                  ) from None
    return list(sink)


def _grid_of(grid, kernel, args, kwargs) -> tuple[int, ...] | None:
    try:
        if callable(grid):
            bound = inspect.signature(kernel.fn).bind_partial(*args, **{k: v for k, v in kwargs.items()
                                                                       if k in kernel.arg_names})
            bound.apply_defaults()
            grid = grid(dict(bound.arguments))
        return tuple(int(g) for g in grid) if grid is not None else None
    except Exception:
        return None


def specimens_from_launches(label: str, launches: list[tuple]) -> list[Specimen]:
    """Name each recorded launch ``label>kernel`` (``#2``, ``#3`` for further launches of the same kernel,
    ``[config i]`` for the i-th config of an autotuned one)."""
    from triton.runtime.jit import JITFunction

    out: list[Specimen] = []
    seen: dict[str, int] = {}
    for kernel, args, kwargs, grid, config in launches:
        jit = kernel
        if not isinstance(jit, JITFunction):  # an InterpretedFunction loaded elsewhere: compile its Python
            jit = JITFunction(kernel.fn)
        name = jit.fn.__name__
        tag = f"{name}[config {config}]" if config is not None else name
        seen[tag] = seen.get(tag, 0) + 1
        kid = f"{label}>{tag}" + (f"#{seen[tag]}" if seen[tag] > 1 else "")
        out.append(Specimen(kernel_id=kid, name=name, fn=jit, args=args, kwargs=kwargs,
                            grid=_grid_of(grid, jit, args, kwargs), location=location_of(jit)))
    return out


# ------------------------------------------------------------------------------------ example inputs


def example_inputs(op: str, *, dtype: str = "fp16", dims: Mapping[str, int] | None = None) -> tuple[list, dict]:
    """Positional arguments and kwargs for a launcher of ``op``: the op's fixed, representative case.

    >>> args, kw = example_inputs("softmax", dtype="fp16")
    >>> tuple(args[0].shape), str(args[0].dtype)
    ((2, 256), 'torch.float16')
    """
    from .. import ops
    from ..cases import DTYPES, canonical_dtype, generate, materialize, with_dims

    spec = ops.get(op)
    dt = canonical_dtype(dtype)
    if DTYPES[dt] not in spec.dtypes:  # an op without this dtype: its first supported one
        dt = canonical_dtype(spec.dtypes[0])
    case = generate(op, 0, dtype=dt, strategy="fixed")
    if dims:
        unknown = sorted(set(dims) - set(spec.dims))
        if unknown:
            raise InvalidArgument(f"--dims {unknown[0]}=...: {op} has no dim {unknown[0]!r}; its dims are "
                                  f"{', '.join(spec.dims)}")
        case = with_dims(case, dims)
        err = spec.check_dims(case.dims, case.kwargs)
        if err:
            raise InvalidArgument(f"--dims {dims}: not a valid {op} call: {err}")
    inputs, kwargs = materialize(case)
    return [inputs[a.name] for a in spec.args], kwargs


def parse_dims(text: str | None) -> dict[str, int]:
    """``"N=4096,D=128"`` -> {"N": 4096, "D": 128}."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, value = part.partition("=")
        try:
            if not eq:
                raise ValueError
            out[name.strip()] = int(value)
        except ValueError:
            raise InvalidArgument(f"--dims {part!r}: write NAME=INT, e.g. --dims N=4096,D=128") from None
    return out


def declared_args(decl: Mapping[str, Any], fn, where: str) -> tuple[list, dict]:
    """Arguments for a ``lint.kernels`` declaration: ``"*fp16"`` -> a small aligned tensor, numbers as given."""
    import torch

    from ..cases import canonical_dtype, torch_dtype

    spec_args = decl.get("args", {}) or {}
    names = list(fn.arg_names)
    unknown = sorted(set(spec_args) - set(names))
    if unknown:
        raise InvalidArgument(f"{where}.args.{unknown[0]}: {fn.fn.__name__} has no parameter {unknown[0]!r}; "
                              f"its parameters are {', '.join(names)}")
    args: list = []
    params = inspect.signature(fn.fn).parameters
    for n in names:
        if n not in spec_args:
            if params[n].default is inspect.Parameter.empty:
                raise InvalidArgument(f"{where}.args: missing {n!r} (declare every parameter without a default)")
            args.append(params[n].default)
            continue
        v = spec_args[n]
        if isinstance(v, str) and v.startswith("*"):
            base = v[1:]
            try:
                dt = torch_dtype(canonical_dtype(base)) if base not in ("i32", "i64", "i8", "i16", "u8", "fp64") \
                    else {"i32": torch.int32, "i64": torch.int64, "i8": torch.int8, "i16": torch.int16,
                          "u8": torch.uint8, "fp64": torch.float64}[base]
            except Exception:
                raise InvalidArgument(f"{where}.args.{n}: pointer type {v!r} is not one of *fp32, *fp16, *bf16, "
                                      f"*fp64, *i8, *i16, *i32, *i64, *u8") from None
            args.append(torch.empty(64, dtype=dt))
        elif isinstance(v, bool) or isinstance(v, (int, float)) or v is None:
            args.append(v)
        else:
            raise InvalidArgument(f"{where}.args.{n}: {v!r} is neither a pointer type ('*fp16') nor a number")
    return args, dict(decl.get("options", {}) or {})
