"""GPU numerics for the interpreter's builder: bf16 done right, TF32 dots, fused FMA, saturating casts.

Triton's interpreter evaluates every op with numpy on the operands' storage dtype. For bf16 that storage is
the uint16 bit pattern, so casts truncate and arithmetic adds bit patterns. :func:`overrides` returns
replacements for the builder's methods that decode bf16 to fp32, compute, and round back to nearest even
where the GPU rounds; fp32 ``tl.dot`` emulates TF32 tensor cores unless the kernel (or the runtime's
``dot_precision="ieee"``) asks for full fp32.

TF32 model: the tensor core reads an fp32 operand's sign, exponent and top 10 mantissa bits and ignores the
low 13 (truncation). Products of two TF32 values are exact in fp32 and accumulate in fp32. On an H200 the
measured max error of a correct fp32 64^3 matmul against fp64 was 2.5e-2; truncation predicts ~3e-2, nearest
rounding ~1.2e-2 (see docs/runtime.md).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import bf16
from ._compat import input_precision_name, interp, rounding_is_rtz

_TF32_MASK = np.uint32(0xFFFFE000)


def tf32(x: np.ndarray) -> np.ndarray:
    """fp32 -> the value a TF32 tensor core sees (low 13 mantissa bits dropped; NaN kept NaN).

    >>> tf32(np.array([1.0 + 2**-11], dtype=np.float32)).tolist()
    [1.0]
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    t = (x.view(np.uint32) & _TF32_MASK).view(np.float32)
    return np.where(np.isnan(x), x, t)


def _bf16_round(x: np.ndarray) -> np.ndarray:
    return bf16.to_f32(bf16.from_f32(x))


def _split_bf16(x: np.ndarray, parts: int) -> list[np.ndarray]:
    out, rest = [], np.asarray(x, dtype=np.float32)
    for _ in range(parts):
        hi = _bf16_round(rest)
        out.append(hi)
        rest = (rest - hi).astype(np.float32)
    return out


def _dot_f32(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray:
    """a @ b for fp32 operands as the GPU computes it with ``input_precision``."""
    if precision == "tf32":
        return np.matmul(tf32(a), tf32(b), dtype=np.float32)
    if precision == "tf32x3":
        ab, bb = tf32(a), tf32(b)
        asml, bsml = tf32((a - ab).astype(np.float32)), tf32((b - bb).astype(np.float32))
        return (np.matmul(ab, bsml, dtype=np.float32) + np.matmul(asml, bb, dtype=np.float32)
                + np.matmul(ab, bb, dtype=np.float32))
    if precision in ("bf16x3", "bf16x6"):
        pa, pb = _split_bf16(a, 3), _split_bf16(b, 3)
        pairs = [(0, 1), (1, 0), (0, 0)] if precision == "bf16x3" else [(1, 1), (0, 2), (2, 0), (0, 1), (1, 0), (0, 0)]
        acc = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1])), dtype=np.float32)
        for i, j in pairs:
            acc = acc + np.matmul(pa[i], pb[j], dtype=np.float32)
        return acc
    return np.matmul(a, b, dtype=np.float32)  # ieee


_LOW29 = np.uint64((1 << 29) - 1)  # the fp64 mantissa bits an fp32 rounding drops
_HALF29 = 1 << 28  # their pattern at a rounding midpoint


def erf_f32(x: np.ndarray) -> np.ndarray:
    """``erf`` of an fp32 array as Triton's interpreter computes it (``math.erf`` of each value in fp64, rounded
    to fp32), whole-array: torch's fp64 erf (within an ulp or so of the C library's) rounded to fp32, and
    ``math.erf`` again for every value where that could round differently -- within 16 fp64 ulps of an fp32
    rounding midpoint, below fp32's normal range or NaN (Triton gives the C library's NaN); erf(+-0) = +-0.
    The interpreter's element-by-element loop took ~150 ns a value."""
    import math

    import torch

    x64 = np.asarray(x, dtype=np.float64)
    r = torch.special.erf(torch.from_numpy(np.ascontiguousarray(x64))).numpy()
    out = r.astype(np.float32)
    low = (r.view(np.uint64) & _LOW29).view(np.int64)
    redo = np.abs(low - _HALF29) <= 16
    small = ~(np.abs(r) >= 2.0**-125)  # (NaN compares False: redone)
    if small.any():
        zero = x64 == 0  # erf(+-0) is +-0 exactly (C99 F.9.5.1): kept, not redone (masked lanes are often 0)
        out[zero] = x64[zero]
        redo |= small & ~zero
    if redo.any():
        idx = np.flatnonzero(redo)
        flat_x, flat_out = x64.reshape(-1), out.reshape(-1)
        flat_out[idx] = np.array([math.erf(float(v)) for v in flat_x[idx]], dtype=np.float64).astype(np.float32)
    return out


def overrides(state: Any, original: Callable[[str], Callable]) -> dict[str, Callable]:
    """Builder method replacements. ``original(name)`` gives the interpreter's own method (bound);
    ``state`` receives the dot precisions used (``state.dot_precisions``) and the runtime settings."""
    it = interp()
    TH = it.TensorHandle
    import triton.language as tl

    BF16, F32 = tl.bfloat16, tl.float32
    plain_dtype = tl.core.dtype

    def is_bf16(h) -> bool:
        d = getattr(h, "dtype", None)
        if d is BF16:
            return True
        if type(d) is plain_dtype:  # compared by name; most handles are fp32 or an int
            return d.name == "bf16"
        return d is not None and d == BF16

    def f32(h):
        return TH(bf16.to_f32(h.data), F32) if is_bf16(h) else h

    def np_dtype(ty):
        return it._get_np_dtype(ty)

    out: dict[str, Callable] = {}

    erf0 = original("create_erf")

    def create_erf(arg):
        data = arg.data
        if type(data) is np.ndarray and data.dtype == np.float32:  # Triton's fp32 branch, whole-array
            return TH(erf_f32(data), arg.dtype.scalar)
        return erf0(arg)

    def arith(name: str) -> None:
        orig = original(name)
        if orig is None:
            return
        if name == "create_erf":
            orig = create_erf

        def fn(*hs, _orig=orig):
            for h in hs:
                if is_bf16(h):
                    r = _orig(*(f32(h) for h in hs))
                    return TH(bf16.from_f32(np.asarray(r.data, dtype=np.float32)), BF16)
            return _orig(*hs)

        out[name] = fn

    def compare(name: str) -> None:
        orig = original(name)
        if orig is None:
            return

        def fn(lhs, rhs, _orig=orig):
            if is_bf16(lhs) or is_bf16(rhs):
                return _orig(f32(lhs), f32(rhs))
            return _orig(lhs, rhs)

        out[name] = fn

    for n in ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_precise_divf",
              "create_minimumf", "create_maximumf", "create_minnumf", "create_maxnumf", "create_fneg",
              "create_exp", "create_exp2", "create_log", "create_log2", "create_sin", "create_cos", "create_sqrt",
              "create_precise_sqrt", "create_rsqrt", "create_floor", "create_ceil", "create_erf"):
        arith(n)
    for n in ("create_fcmpOLT", "create_fcmpOGT", "create_fcmpOLE", "create_fcmpOGE", "create_fcmpOEQ",
              "create_fcmpONE", "create_fcmpULT", "create_fcmpUGT", "create_fcmpULE", "create_fcmpUGE",
              "create_fcmpUEQ", "create_fcmpUNE"):
        compare(n)

    clampf = original("create_clampf")
    if clampf is not None:
        def create_clampf(arg, lo, hi, propagate_nans):
            if is_bf16(arg):
                r = clampf(f32(arg), f32(lo), f32(hi), propagate_nans)
                return TH(bf16.from_f32(np.asarray(r.data, dtype=np.float32)), BF16)
            return clampf(arg, lo, hi, propagate_nans)
        out["create_clampf"] = create_clampf

    def create_fma(x, y, z):
        # the GPU fuses: one rounding of the exact x*y+z (float64 holds the fp32/fp16 product exactly)
        vals = [np.asarray(f32(h).data, dtype=np.float64) for h in (x, y, z)]
        r = vals[0] * vals[1] + vals[2]
        if is_bf16(z):
            return TH(bf16.from_f64(r), BF16)
        return TH(r.astype(np.asarray(z.data).dtype), z.dtype)
    out["create_fma"] = create_fma

    def get_bf16(value):
        return TH(bf16.from_f64(np.array([value], dtype=np.float64)), BF16)
    out["get_bf16"] = get_bf16

    # ------------------------------------------------------------------ casts
    def to_int(values: np.ndarray, np_out) -> np.ndarray:
        # cvt.rzi.sat: truncate, saturate at the integer range, NaN -> 0
        info = np.iinfo(np_out)
        v = np.trunc(np.asarray(values, dtype=np.float64))
        v = np.where(np.isnan(v), 0.0, np.clip(v, float(info.min), float(info.max)))
        return v.astype(np_out)

    def cast(name: str) -> None:
        orig = original(name)
        if orig is None:
            return

        def fn(src, dst_type, *rest, _orig=orig):
            dst = getattr(dst_type, "scalar", dst_type)
            src_ty = src.dtype
            if dst == BF16:
                if getattr(src_ty, "is_fp8", lambda: False)():
                    return _orig(src, dst_type, *rest)
                return TH(bf16.from_any(np.asarray(f32(src).data)), BF16)
            if is_bf16(src):
                vals = bf16.to_f32(src.data)
                npd = np_dtype(dst)
                if np.dtype(npd).kind in "iu":
                    return TH(to_int(vals, npd), dst)
                if getattr(dst, "is_fp8", lambda: False)():
                    return _orig(TH(vals, F32), dst_type, *rest)
                return TH(vals.astype(npd), dst)
            npd = np_dtype(dst) if not hasattr(dst, "element_ty") else None
            if npd is not None and np.dtype(npd).kind in "iu" and np.asarray(src.data).dtype.kind == "f" \
                    and dst != tl.int1:
                return TH(to_int(src.data, npd), dst)
            return _orig(src, dst_type, *rest)

        out[name] = fn

    for n in ("create_fp_trunc", "create_fp_ext", "create_si_to_fp", "create_ui_to_fp", "create_fp_to_si",
              "create_fp_to_ui"):
        cast(n)

    fp_to_fp = original("create_fp_to_fp")

    def create_fp_to_fp(src, dst_type, rounding_mode):
        dst = getattr(dst_type, "scalar", dst_type)
        fp8 = lambda t: getattr(t, "is_fp8", lambda: False)()  # noqa: E731
        rtz = rounding_mode is not None and rounding_is_rtz(rounding_mode)
        if fp8(src.dtype) and src.dtype.name in FP8_TYPES and not fp8(dst):
            vals = fp8_decode(src.data, src.dtype.name)
            return TH(bf16.from_f32(vals) if dst == BF16 else vals.astype(np_dtype(dst)), dst)
        if fp8(dst) and dst.name in FP8_TYPES and not fp8(src.dtype) and not rtz:
            return TH(fp8_encode(np.asarray(f32(src).data), dst.name), dst)
        if (dst == BF16 or is_bf16(src)) and not fp8(dst) and not fp8(src.dtype):
            if dst == BF16:
                data = np.asarray(f32(src).data)
                rtz = rounding_is_rtz(rounding_mode) if rounding_mode is not None else False
                if data.dtype == np.float64 and rtz:
                    data = _rtz_f32(data)
                return TH(bf16.from_any(data, rtz=rtz), BF16)
            return TH(bf16.to_f32(src.data).astype(np_dtype(dst)), dst)
        if is_bf16(src) and fp8(dst):
            return fp_to_fp(f32(src), dst_type, rounding_mode)
        return fp_to_fp(src, dst_type, rounding_mode)
    out["create_fp_to_fp"] = create_fp_to_fp

    # ------------------------------------------------------------------ dot
    dot = original("create_dot")

    def create_dot(a, b, d, input_precision, max_num_imprecise_acc):
        ta = a.dtype
        if getattr(ta, "is_fp8", lambda: False)() and ta.name in FP8_TYPES and b.dtype.name in FP8_TYPES:
            # fp8 operands, exact in fp32, products accumulated in fp32 (the tensor core's accumulator)
            state.note_dot(str(ta))
            prod = np.matmul(fp8_decode(a.data, ta.name), fp8_decode(b.data, b.dtype.name), dtype=np.float32)
            acc = np.asarray(d.data)
            return TH((prod + acc.astype(np.float32)).astype(acc.dtype), d.dtype)
        if getattr(ta, "is_fp8", lambda: False)() or ta in (tl.float64, tl.int8, tl.uint8):
            state.note_dot(str(ta))
            return dot(a, b, d, input_precision, max_num_imprecise_acc)
        if ta == BF16:
            A, B, used = bf16.to_f32(a.data), bf16.to_f32(b.data), "bf16"
            prod = np.matmul(A, B, dtype=np.float32)
        elif ta == tl.float16:
            A, B, used = a.data.astype(np.float32), b.data.astype(np.float32), "fp16"
            prod = np.matmul(A, B, dtype=np.float32)
        else:
            asked = input_precision_name(input_precision)
            used = "ieee" if state.dot_precision == "ieee" else asked
            prod = _dot_f32(np.asarray(a.data, np.float32), np.asarray(b.data, np.float32), used)
        state.note_dot(used)
        acc = np.asarray(d.data)
        if acc.dtype == np.float16:
            return TH((prod + acc.astype(np.float32)).astype(np.float16), d.dtype)
        return TH((prod + acc.astype(np.float32)).astype(acc.dtype), d.dtype)
    out["create_dot"] = create_dot

    scaled = original("create_dot_scaled")
    if scaled is not None and hasattr(it, "_prepare_dot_scaled_operand") and hasattr(it, "_e8m0_to_f32"):
        from triton._C.libtriton import ir as _ir

        fp8_formats = {getattr(_ir.ScaleDotElemTypeTY, n) for n in ("E4M3", "E5M2")
                       if hasattr(_ir.ScaleDotElemTypeTY, n)}

        def operand(h, scale, fmt, k_pack, is_rhs):
            """tl.dot_scaled's operand as the GPU reads it: fp8 decoded exactly (Triton's interpreter decodes e5m2
            subnormals as 0), times its e8m0 scale per group of K."""
            if fmt not in fp8_formats or getattr(h.dtype, "name", "") not in FP8_TYPES:
                return it._prepare_dot_scaled_operand(h, scale, fmt, k_pack, is_rhs)
            value = fp8_decode(h.data, h.dtype.name)
            if scale is None:
                return value
            sc = it._e8m0_to_f32(scale.data)
            if is_rhs:  # rhs is [K, N], its scale [N, K / group]
                sc = np.swapaxes(np.repeat(sc, value.shape[-2] // sc.shape[-1], axis=-1), -1, -2)
            else:
                sc = np.repeat(sc, value.shape[-1] // sc.shape[-1], axis=-1)
            return value * sc

        def create_dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math, lhs_k_pack,
                              rhs_k_pack, acc):
            if lhs_format not in fp8_formats and rhs_format not in fp8_formats:
                return scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math, lhs_k_pack,
                              rhs_k_pack, acc)
            a = operand(lhs, lhs_scale, lhs_format, lhs_k_pack, False)
            b = operand(rhs, rhs_scale, rhs_format, rhs_k_pack, True)
            return TH(np.matmul(a, b) + acc.data, tl.float32)

        out["create_dot_scaled"] = create_dot_scaled
    return out


# fp8 as sm_89+/sm_90 converts it: decoding is exact (NaN and, for e5m2, Inf kept); encoding from fp32/fp16
# (cvt.rn.satfinite.e4m3x2 / e5m2x2) rounds to nearest even and saturates at the largest finite value (Inf
# included), NaN stays NaN. Triton's interpreter decodes NaN/Inf as finite numbers and rounds some values wrong
# (1.96 -> 1.0, 500 -> 256 in e4m3): torch's float8 types do the bit work here.
FP8_TYPES = {"fp8e4nv": ("float8_e4m3fn", 448.0), "fp8e5": ("float8_e5m2", 57344.0),
             "fp8e4b8": ("float8_e4m3fnuz", 240.0), "fp8e5b16": ("float8_e5m2fnuz", 57344.0)}


def fp8_decode(bits: np.ndarray, name: str) -> np.ndarray:
    """uint8 storage of an fp8 value (Triton's type name ``name``) -> its exact float32 value."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(bits, dtype=np.uint8)).view(getattr(torch, FP8_TYPES[name][0]))
    return t.to(torch.float32).numpy()


def fp8_encode(values: np.ndarray, name: str) -> np.ndarray:
    """float values -> uint8 storage of Triton's fp8 type ``name``: nearest even, saturating, NaN kept."""
    import torch

    kind, top = FP8_TYPES[name]
    v = np.asarray(values)
    v = np.clip(v.astype(np.float32 if v.dtype != np.float64 else np.float64), -top, top)  # (NaN stays NaN)
    return torch.from_numpy(np.ascontiguousarray(v)).to(getattr(torch, kind)).view(torch.uint8).numpy()


def _rtz_f32(x: np.ndarray) -> np.ndarray:
    f = x.astype(np.float32)
    back = f.astype(np.float64)
    return np.where(np.abs(back) > np.abs(x), np.nextafter(f, np.float32(0)), f).astype(np.float32)


# ---------------------------------------------------------------------- reductions and scans
def _tree_sum(x: np.ndarray, axis: int, rnd: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Sum along ``axis`` pairwise by halves, rounding every partial sum (a warp-shuffle tree)."""
    x = np.moveaxis(np.asarray(x, dtype=np.float32), axis, -1)
    while x.shape[-1] > 1:
        n = x.shape[-1]
        if n % 2:
            x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), np.float32)], axis=-1)
            n += 1
        x = rnd(x[..., : n // 2] + x[..., n // 2:])
    return x[..., 0]


def reduce_wrapper(orig_reduce: Callable) -> Callable:
    """Wrap the interpreter's ``tl.reduce``: bf16 inputs are decoded for max/min/arg reductions, and bf16 /
    fp16 sums round every partial sum as the GPU's adds do (the interpreter sums bit patterns, or in one
    wide accumulator)."""
    import triton.language as tl

    it = interp()
    std = tl.standard
    # identities, not a set of JITFunctions: hashing one computes its cache key (not while tl is patched)
    minmax = {id(getattr(std, n)) for n in ("_elementwise_max", "_elementwise_min", "_argmax_combine_tie_break_left",
                                            "_argmin_combine_tie_break_left", "_argmax_combine_tie_break_fast",
                                            "_argmin_combine_tie_break_fast") if hasattr(std, n)}

    def lowp(t) -> bool:
        return isinstance(t, tl.tensor) and t.dtype in (tl.bfloat16, tl.float16)

    def _reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
        single = not isinstance(input, tuple)
        inputs = (input,) if single else input
        if not any(lowp(t) for t in inputs):
            return orig_reduce(input, axis, combine_fn, keep_dims=keep_dims, **kwargs)
        axis_v = axis.value if isinstance(axis, tl.constexpr) else axis
        ops = it.ReduceOps(axis_v, combine_fn, keep_dims)
        if combine_fn is std._sum_combine and single:
            t = input
            is_bf = t.dtype == tl.bfloat16
            data = bf16.to_f32(t.handle.data) if is_bf else t.handle.data.astype(np.float32)
            rnd = _bf16_round if is_bf else (lambda v: v.astype(np.float16).astype(np.float32))
            ax = 0 if axis_v is None else int(axis_v)
            if axis_v is None:
                data = data.reshape(-1)
            s = _tree_sum(data, ax, rnd)
            if keep_dims:
                s = np.expand_dims(s, ax) if axis_v is not None else s.reshape((1,) * t.handle.data.ndim)
            enc = bf16.from_f32(s) if is_bf else s.astype(np.float16)
            res = enc if (axis_v is not None or keep_dims) else enc.reshape(()).item()
            return ops.to_tensor(res if not isinstance(res, (int, float)) else np.array(res, enc.dtype), t.dtype)
        if id(combine_fn) in minmax and any(t.dtype == tl.bfloat16 for t in inputs):
            dec = tuple(_decode_tensor(t) for t in inputs)
            r = orig_reduce(dec[0] if single else dec, axis, combine_fn, keep_dims=keep_dims, **kwargs)
            rs = r if isinstance(r, tuple) else (r,)
            fixed = tuple(_encode_tensor(x) if x.dtype == tl.float32 and i == 0 else x for i, x in enumerate(rs))
            return fixed if isinstance(r, tuple) else fixed[0]
        return orig_reduce(input, axis, combine_fn, keep_dims=keep_dims, **kwargs)

    return _reduce


def scan_wrapper(orig_scan: Callable) -> Callable:
    """Wrap ``tl.associative_scan``: a bf16 / fp16 cumsum rounds after every add."""
    import triton.language as tl

    it = interp()

    def _scan(input, axis, combine_fn, reverse=False, **kwargs):
        if isinstance(input, tl.tensor) and input.dtype in (tl.bfloat16, tl.float16) \
                and combine_fn is tl.standard._sum_combine:
            is_bf = input.dtype == tl.bfloat16
            ax = int(axis.value if isinstance(axis, tl.constexpr) else axis)
            data = bf16.to_f32(input.handle.data) if is_bf else input.handle.data.astype(np.float32)
            rnd = _bf16_round if is_bf else (lambda v: v.astype(np.float16).astype(np.float32))
            x = np.moveaxis(data, ax, -1)
            if reverse:
                x = x[..., ::-1]
            outp = np.empty_like(x)
            acc = np.zeros(x.shape[:-1], np.float32)
            for i in range(x.shape[-1]):
                acc = rnd(acc + x[..., i]) if i else x[..., 0]
                outp[..., i] = acc
            if reverse:
                outp = outp[..., ::-1]
            outp = np.moveaxis(outp, -1, ax)
            enc = bf16.from_f32(outp) if is_bf else outp.astype(np.float16)
            return it.ScanOps(ax, combine_fn, reverse).to_tensor(enc, input.dtype)
        return orig_scan(input, axis, combine_fn, reverse=reverse, **kwargs)

    return _scan


def _decode_tensor(t):
    import triton.language as tl

    if t.dtype != tl.bfloat16:
        return t
    it = interp()
    data = bf16.to_f32(t.handle.data)
    ty = tl.block_type(tl.float32, list(data.shape)) if data.ndim and t.type.is_block() else tl.float32
    return tl.tensor(it.TensorHandle(data, tl.float32), ty)


def _encode_tensor(t):
    import triton.language as tl

    it = interp()
    data = bf16.from_f32(np.asarray(t.handle.data, dtype=np.float32))
    ty = tl.block_type(tl.bfloat16, list(t.type.shape)) if t.type.is_block() else tl.bfloat16
    return tl.tensor(it.TensorHandle(data, tl.bfloat16), ty)
