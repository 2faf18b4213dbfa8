"""Running a graph "in fp64": a TorchFunctionMode that sends every floating dtype to float64.

Upcasting the inputs is not enough. A graph with explicit casts either crashes (``h.to(float16).float()``
meets an fp64 weight: "mat1 and mat2 must have the same dtype") or silently computes the "reference" in
the low precision (``x.half() @ w.half()`` gives fp16 with zero error against itself). While
:class:`Fp64Mode` is active, every floating dtype named in a call (``dtype=``, ``.to(dtype)``,
``.half()``/``.float()``/``.bfloat16()``, ``.type(dtype)``) becomes float64, factory calls without a
dtype make float64, and autocast regions are disabled; any floating result that still comes out in a
lower precision is upcast.

>>> import torch
>>> with Fp64Mode():
...     (torch.ones(2, dtype=torch.float64).half() @ torch.ones(2, dtype=torch.float64)).dtype
torch.float64
"""

from __future__ import annotations

from typing import Any

_LOW = None  # set of floating dtypes to redirect, built lazily (keeps torch import lazy)
_CAST_METHODS = {"half", "float", "bfloat16", "double"}
_FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "arange", "linspace", "logspace", "eye",
              "tensor", "as_tensor", "empty_strided", "scalar_tensor", "zeros_like", "ones_like", "empty_like",
              "full_like", "rand_like", "randn_like", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}


def _low():
    global _LOW
    if _LOW is None:
        import torch

        _LOW = {torch.float16, torch.bfloat16, torch.float32, torch.half, torch.float}
        for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
            if hasattr(torch, name):
                _LOW.add(getattr(torch, name))
    return _LOW


def _up(v: Any) -> Any:
    import torch

    if isinstance(v, torch.dtype) and v in _low():
        return torch.float64
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.dtype) for x in v):
        return type(v)(_up(x) for x in v)
    return v


def _name(func: Any) -> str:
    return getattr(func, "__name__", "") or ""


def _make_mode():
    import torch
    from torch.overrides import TorchFunctionMode

    class _Fp64Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = _name(func)
            if name in _CAST_METHODS and args and isinstance(args[0], torch.Tensor):
                t = args[0]
                return t.to(torch.float64) if t.is_floating_point() or name != "double" else t.double()
            if name in ("_enter_autocast", "autocast_increment_nesting") or "autocast" in name:
                if name == "_enter_autocast" and len(args) >= 3:
                    args = (args[0], None, False) + tuple(args[3:])
                    kwargs.pop("dtype", None)
                    kwargs.pop("enabled", None)
                elif name == "_enter_autocast":
                    kwargs["enabled"] = False
                    kwargs.pop("dtype", None)
            else:
                args = tuple(_up(a) for a in args)
                if "dtype" in kwargs:
                    kwargs["dtype"] = _up(kwargs["dtype"])
                elif name in _FACTORIES and not name.endswith("_like") and not name.startswith("new_"):
                    if name not in ("tensor", "as_tensor", "arange", "scalar_tensor"):
                        kwargs["dtype"] = torch.float64
            out = func(*args, **kwargs)
            return _upcast_result(out, args)

    return _Fp64Mode


def _upcast_result(out: Any, args: tuple) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        if out.dtype in _low() and not any(out is a for a in args):
            return out.to(torch.float64)
        return out
    if isinstance(out, tuple) and out and all(isinstance(x, torch.Tensor) for x in out) and type(out) is tuple:
        return tuple(_upcast_result(x, args) for x in out)
    return out


_MODE_CLS = None


def Fp64Mode():  # noqa: N802 - reads as the class it returns an instance of
    """A fresh fp64 TorchFunctionMode (see the module docstring)."""
    global _MODE_CLS
    if _MODE_CLS is None:
        _MODE_CLS = _make_mode()
    return _MODE_CLS()


def to_fp64(value: Any) -> Any:
    """Floating tensors (and containers of them) as float64 copies; anything else as is."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64) if value.is_floating_point() else value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(to_fp64(v) for v in value)
    return value
