"""libdevice on the CPU: numpy equivalents of the CUDA libdevice functions Triton kernels call.

Under Triton's interpreter ``tl.extra.libdevice.*`` are stubs that return None and
``tl.extra.cuda.libdevice.*`` end in ``create_extern_elementwise``, which raises. The runtime routes both
to :func:`evaluate`, keyed by the libdevice symbol Triton's own dispatch picked (``__nv_expf``,
``__nv_tanh``, ...). Float results are computed in float64 and rounded once to the result type, so they are
at least as accurate as libdevice (whose functions are within a few ulp); ``fast_*`` variants, which are
approximations on the GPU, are computed exactly here (see docs/runtime.md, "What still differs").
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

_F = np.float64


def _vec(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    v = np.vectorize(lambda x: _safe(fn, x), otypes=[np.float64])
    return lambda x: v(np.asarray(x, dtype=_F))


def _safe(fn, x):
    try:
        return fn(float(x))
    except (ValueError, OverflowError):
        if math.isnan(x):
            return math.nan
        return math.inf if fn in (math.gamma,) and x > 0 else math.nan


def _erfinv_scalar(y: float) -> float:
    if math.isnan(y) or y < -1 or y > 1:
        return math.nan
    if y in (-1.0, 1.0):
        return math.copysign(math.inf, y)
    # Giles' single-precision approximation, then Newton steps on math.erf to double precision
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941):
            p = c + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                  0.00943887047, 1.00167406, 2.83297682):
            p = c + p * w
    x = p * y
    for _ in range(3):
        err = math.erf(x) - y
        x -= err / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


_erf = _vec(math.erf)
_erfc = _vec(math.erfc)
_erfinv = _vec(_erfinv_scalar)


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _bits(x, width):
    return np.asarray(x).astype({32: np.uint32, 64: np.uint64}[width])


def _clz(x, width):
    u = _bits(x, width).astype(np.uint64)
    out = np.full(u.shape, width, dtype=np.int32)
    for i in range(width):
        hit = (out == width) & (((u >> np.uint64(width - 1 - i)) & np.uint64(1)) == 1)
        out = np.where(hit, i, out)
    return out


def _popc(x, width):
    u = _bits(x, width).astype(np.uint64)
    c = np.zeros(u.shape, dtype=np.int32)
    for i in range(width):
        c += ((u >> np.uint64(i)) & np.uint64(1)).astype(np.int32)
    return c


def _brev(x, width):
    u = _bits(x, width).astype(np.uint64)
    r = np.zeros(u.shape, dtype=np.uint64)
    for i in range(width):
        r |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(width - 1 - i)
    return r


def _ffs(x, width):
    u = _bits(x, width).astype(np.uint64)
    out = np.zeros(u.shape, dtype=np.int32)
    for i in reversed(range(width)):
        out = np.where(((u >> np.uint64(i)) & np.uint64(1)) == 1, i + 1, out)
    return out


def _mulhi_vec(a, b, width):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    out = np.array([(int(x) * int(y)) >> width for x, y in zip(a.ravel(), b.ravel())], dtype=object)
    return out.reshape(a.shape)


def _directed(r64: np.ndarray, mode: str, dtype) -> np.ndarray:
    """Round a float64 result to ``dtype`` in a directed mode (rn/rz/rd/ru)."""
    f = r64.astype(dtype)
    if mode == "rn" or dtype == np.float64:
        return f
    back = f.astype(np.float64)
    if mode == "rd":
        return np.where(back > r64, np.nextafter(f, dtype(-np.inf)), f)
    if mode == "ru":
        return np.where(back < r64, np.nextafter(f, dtype(np.inf)), f)
    return np.where(np.abs(back) > np.abs(r64), np.nextafter(f, dtype(0)), f)  # rz


_UNARY = {
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan,
    "atanh": np.arctanh, "cbrt": np.cbrt, "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh,
    "cospi": lambda x: np.cos(np.pi * x), "erf": _erf, "erfc": _erfc, "erfinv": _erfinv,
    "erfcinv": lambda x: _erfinv(1.0 - x), "erfcx": lambda x: np.exp(x * x) * _erfc(x), "exp": np.exp,
    "exp10": lambda x: np.power(10.0, x), "exp2": np.exp2, "expm1": np.expm1, "fabs": np.abs, "abs": np.abs,
    "floor": np.floor, "lgamma": _vec(math.lgamma), "log": np.log, "log10": np.log10, "log1p": np.log1p,
    "log2": np.log2, "logb": lambda x: np.floor(np.log2(np.abs(x))), "nearbyint": np.rint, "rint": np.rint,
    "rcbrt": lambda x: 1.0 / np.cbrt(x), "round": _round_half_away, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sin": np.sin, "sinh": np.sinh, "sinpi": lambda x: np.sin(np.pi * x), "sqrt": np.sqrt, "tan": np.tan,
    "tanh": np.tanh, "tgamma": _vec(math.gamma), "trunc": np.trunc,
    "normcdf": lambda x: 0.5 * _erfc(-x / math.sqrt(2.0)),
    "normcdfinv": lambda p: -math.sqrt(2.0) * _erfinv(1.0 - 2.0 * p),
    "saturate": lambda x: np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0)),
    "fast_exp": np.exp, "fast_exp10": lambda x: np.power(10.0, x), "fast_log": np.log, "fast_log2": np.log2,
    "fast_log10": np.log10, "fast_sin": np.sin, "fast_cos": np.cos, "fast_tan": np.tan,
    "rcp": lambda x: 1.0 / x, "rcp64h": lambda x: 1.0 / x,
}
_BINARY = {
    "atan2": np.arctan2, "copysign": np.copysign, "fdim": lambda a, b: np.where(a > b, a - b, 0.0),
    "fmod": np.fmod, "hypot": np.hypot, "nextafter": None, "pow": np.power, "fast_pow": np.power,
    "remainder": np.vectorize(lambda a, b: _safe2(math.remainder, a, b), otypes=[np.float64]),
    "rhypot": lambda a, b: 1.0 / np.hypot(a, b), "fast_fdivide": np.divide, "fmax": np.fmax, "fmin": np.fmin,
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
}
_PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "finite": np.isfinite, "isfinite": np.isfinite,
               "signbit": np.signbit}


def _safe2(fn, a, b):
    try:
        return fn(float(a), float(b))
    except (ValueError, OverflowError):
        return math.nan


class UnsupportedLibdevice(Exception):
    """A libdevice symbol the runtime does not emulate."""


def _split(symbol: str) -> tuple[str, str]:
    """'__nv_fadd_rz' -> ('add', 'rz'); '__nv_expf' -> ('exp', ''); '__nv_fast_expf' -> ('fast_exp', '')."""
    name = symbol[5:] if symbol.startswith("__nv_") else symbol
    mode = ""
    for m in ("_rn", "_rz", "_rd", "_ru"):
        if name.endswith(m):
            name, mode = name[: -len(m)], m[1:]
            break
    return name, mode


def evaluate(symbol: str, args: list[np.ndarray], out_dtype: np.dtype, arg_dtypes: list[np.dtype]) -> np.ndarray:
    """Compute libdevice ``symbol`` on numpy ``args``; the result has ``out_dtype``.

    >>> evaluate("__nv_tanhf", [np.array([0.5], np.float32)], np.dtype(np.float32), [np.dtype(np.float32)]).dtype
    dtype('float32')
    """
    name, mode = _split(symbol)
    out = _evaluate(name, mode, args, np.dtype(out_dtype), arg_dtypes)
    out = np.asarray(out)
    if out.dtype == object:
        out = np.array([int(v) & ((1 << (8 * np.dtype(out_dtype).itemsize)) - 1) for v in out.ravel()],
                       dtype=np.uint64).reshape(out.shape).astype(out_dtype)
    return out.astype(out_dtype, copy=False) if out.dtype != out_dtype else out


def _evaluate(name: str, mode: str, args, out_dtype, arg_dtypes):
    x = args[0] if args else None
    is_int_arg = bool(arg_dtypes) and np.dtype(arg_dtypes[0]).kind in "iub"
    width = 8 * np.dtype(arg_dtypes[0]).itemsize if arg_dtypes else 32
    # integer bit tricks
    for base in ("clz", "popc", "brev", "ffs"):
        if name in (base, base + "ll"):
            w = 64 if name.endswith("ll") else 32
            fn = {"clz": _clz, "popc": _popc, "brev": _brev, "ffs": _ffs}[base]
            return fn(x, w)
    if name in ("mulhi", "umulhi", "mul64hi", "umul64hi"):
        return _mulhi_vec(x, args[1], width)
    if name in ("mul24", "umul24"):
        return (np.asarray(x).astype(np.int64) & 0xFFFFFF) * (np.asarray(args[1]).astype(np.int64) & 0xFFFFFF)
    if name in ("sad", "usad"):
        return np.abs(np.asarray(x).astype(np.int64) - np.asarray(args[1]).astype(np.int64)) + args[2]
    if name in ("hadd", "uhadd"):
        return (np.asarray(x).astype(np.int64) + np.asarray(args[1]).astype(np.int64)) >> 1
    if name in ("rhadd", "urhadd"):
        return (np.asarray(x).astype(np.int64) + np.asarray(args[1]).astype(np.int64) + 1) >> 1
    if name == "llabs":
        return np.abs(x)
    if name == "abs" and is_int_arg:
        return np.abs(x)
    if name == "byte_perm":
        a, b, s = (np.asarray(v).astype(np.uint64) for v in args)
        src = a | (b << np.uint64(32))
        out = np.zeros(np.broadcast(a, b, s).shape, dtype=np.uint64)
        for i in range(4):
            sel = (s >> np.uint64(4 * i)) & np.uint64(7)
            out |= ((src >> (sel * np.uint64(8))) & np.uint64(0xFF)) << np.uint64(8 * i)
        return out
    # bit casts
    if name in ("float_as_int", "float_as_uint", "int_as_float", "uint_as_float", "double_as_longlong",
                "longlong_as_double"):
        return np.ascontiguousarray(x).view(out_dtype)
    if name == "double2hiint":
        return (np.ascontiguousarray(x, dtype=np.float64).view(np.uint64) >> np.uint64(32)).astype(np.uint32).view(np.int32)
    if name == "double2loint":
        return (np.ascontiguousarray(x, dtype=np.float64).view(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
    if name == "hiloint2double":
        hi = np.asarray(x).astype(np.uint32).astype(np.uint64)
        lo = np.asarray(args[1]).astype(np.uint32).astype(np.uint64)
        return ((hi << np.uint64(32)) | lo).view(np.float64)
    # conversions: float2int_rn, ll2float_rz, int2double_rn, double2float_rd, ...
    if "2" in name and name.split("2")[0] in ("float", "double", "int", "uint", "ll", "ull"):
        v = np.asarray(x, dtype=np.float64)
        if out_dtype.kind in "iu":
            r = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil, "": np.trunc}[mode](v)
            info = np.iinfo(out_dtype)
            r = np.where(np.isnan(r), 0, np.clip(r, info.min, info.max))
            return r.astype(out_dtype)
        return _directed(v, mode or "rn", out_dtype.type)
    if name in ("llrint", "llround", "llrintf", "llroundf"):
        v = np.asarray(x, dtype=np.float64)
        return (np.rint(v) if name.startswith("llrint") else _round_half_away(v)).astype(np.int64)
    if name in ("ilogb", "ilogbf"):
        v = np.asarray(x, dtype=np.float64)
        return np.floor(np.log2(np.abs(v))).astype(np.int32)
    # predicates (isnanf, isinfd, finitef, signbitd ...)
    for pname, fn in _PREDICATES.items():
        if name in (pname, pname + "f", pname + "d"):
            return fn(np.asarray(x)).astype(out_dtype)
    base = name[:-1] if name.endswith("f") and name[:-1] in (*_UNARY, *_BINARY, "fma", "powi", "ldexp", "scalbn",
                                                               "norm3d", "norm4d", "rnorm3d", "rnorm4d") else name
    # arithmetic with an explicit rounding mode: fadd_rz, dmul_ru, fdiv_rn, frcp_rd, fsqrt_rn, frsqrt_rn, fma_rz
    if mode and base[:1] in ("f", "d") and base[1:] in ("add", "sub", "mul", "div", "rcp", "sqrt", "rsqrt"):
        op = base[1:]
        vals = [np.asarray(a, dtype=np.float64) for a in args]
        r = {"add": lambda: vals[0] + vals[1], "sub": lambda: vals[0] - vals[1], "mul": lambda: vals[0] * vals[1],
             "div": lambda: vals[0] / vals[1], "rcp": lambda: 1.0 / vals[0], "sqrt": lambda: np.sqrt(vals[0]),
             "rsqrt": lambda: 1.0 / np.sqrt(vals[0])}[op]()
        return _directed(r, mode, out_dtype.type)
    if base in ("fma", "fmaf"):
        vals = [np.asarray(a, dtype=np.float64) for a in args]
        return _directed(vals[0] * vals[1] + vals[2], mode or "rn", out_dtype.type)
    vals = [np.asarray(a, dtype=np.float64) for a in args]
    if base in ("powi",):
        return _directed(np.power(vals[0], vals[1]), "rn", out_dtype.type)
    if base in ("ldexp", "scalbn"):
        return _directed(np.ldexp(vals[0], np.asarray(args[1]).astype(np.int32)), "rn", out_dtype.type)
    if base in ("norm3d", "norm4d"):
        return _directed(np.sqrt(sum(v * v for v in vals)), "rn", out_dtype.type)
    if base in ("rnorm3d", "rnorm4d"):
        return _directed(1.0 / np.sqrt(sum(v * v for v in vals)), "rn", out_dtype.type)
    if base == "nextafter":
        t = out_dtype.type
        return np.nextafter(np.asarray(args[0]).astype(t), np.asarray(args[1]).astype(t))
    if base in _UNARY:
        return _directed(np.asarray(_UNARY[base](vals[0]), dtype=np.float64), "rn", out_dtype.type)
    if base in _BINARY and _BINARY[base] is not None:
        return _directed(np.asarray(_BINARY[base](vals[0], vals[1]), dtype=np.float64), "rn", out_dtype.type)
    raise UnsupportedLibdevice(name)


def stub_names() -> list[str]:
    """The generic ``tl.extra.libdevice`` stubs that have a CUDA implementation to route to."""
    try:
        from triton.language.extra import libdevice as generic
        from triton.language.extra.cuda import libdevice as cuda
    except Exception:  # pragma: no cover - a triton without extra libdevice
        return []
    return [n for n in dir(generic) if not n.startswith("_") and callable(getattr(generic, n))
            and hasattr(cuda, n)]
