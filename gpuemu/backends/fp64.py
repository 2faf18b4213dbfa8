"""Running a graph "in fp64": a TorchFunctionMode that sends every floating dtype to float64.

Upcasting the inputs is not enough. A graph with explicit casts either crashes (``h.to(float16).float()``
meets an fp64 weight: "mat1 and mat2 must have the same dtype") or silently computes the "reference" in
the low precision (``x.half() @ w.half()`` gives fp16 with zero error against itself). While
:class:`Fp64Mode` is active, every floating dtype named in a call (``dtype=``, ``.to(dtype)``,
``.half()``/``.float()``/``.bfloat16()``, ``.type(dtype)``) becomes float64, factory calls without a
dtype make float64, and autocast regions are disabled; any floating result that still comes out in a
lower precision is upcast.

Fused attention kernels (flash, memory-efficient, cuDNN: the aten ops an AOTAutograd graph holds for
``scaled_dot_product_attention``) have no float64 version; under the mode their forward and backward
are computed by the textbook formulas in float64 (:func:`attention_fp64`). Their auxiliary outputs
(log-sum-exp, RNG state, debug mask) have kernel-specific layouts: those are listed in ``aux`` and a
graph shadow does not judge them.

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
        def __init__(self) -> None:
            super().__init__()
            self.aux: set[int] = set()  # ids of outputs with kernel-specific layouts (not judged)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = _name(func)
            packet = getattr(getattr(func, "_overloadpacket", None), "__name__", None)
            if packet in _ATTENTION:
                out, aux = _ATTENTION[packet](*args, **kwargs)
                self.aux.update(id(t) for t in aux)
                return out
            if packet in ("view", "_unsafe_view"):
                # a float64 path (a custom op's reference, a math kernel) may lay out its result otherwise
                # than the traced kernel did; a reference only needs the values, so reshape where view can't
                try:
                    return func(*args, **kwargs)
                except RuntimeError:
                    return torch.ops.aten.reshape.default(*args, **kwargs)
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


def attention_fp64(q: Any, k: Any, v: Any, *, bias: Any = None, causal: bool = False, scale: float | None = None,
                   dout: Any = None) -> tuple:
    """Attention in float64 by the formulas: (out, logsumexp) or, with ``dout``, (dq, dk, dv, dbias).

    ``s = q k^T * scale (+ bias, causal mask upper-left)``, ``p = softmax(s)``, ``out = p v``; backward
    ``dv = p^T dout``, ``ds = p * (dout v^T - rowsum(dout v^T * p))``, ``dq = ds k * scale``,
    ``dk = ds^T q * scale``.
    """
    import math

    import torch

    if bias is not None and bias.numel() == 0:  # an undefined bias arrives as an empty tensor
        bias = None
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    if k.shape[-3] != q.shape[-3]:  # grouped-query attention: each key head serves several query heads
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
    sc = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * sc
    if bias is not None:
        s = s + bias.to(torch.float64)
    if causal:
        keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    if dout is None:
        return p @ v, lse
    do = dout.to(torch.float64)
    dv = p.transpose(-2, -1) @ do
    dp = do @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ k * sc, ds.transpose(-2, -1) @ q * sc, dv, ds


def _empty_aux(q: Any, n: int) -> list:
    import torch

    return [torch.empty(0, dtype=torch.int64, device=q.device) for _ in range(n)]


def _eff_fwd(q, k, v, attn_bias=None, compute_log_sumexp=False, dropout_p=0.0, is_causal=False, *, scale=None):
    import torch

    out, lse = attention_fp64(q, k, v, bias=attn_bias, causal=is_causal, scale=scale)
    pad = -(-q.shape[-2] // 32) * 32 if compute_log_sumexp else 0  # the kernel's log-sum-exp rows: 32-aligned
    lse_k = torch.zeros(*lse.shape[:-1], pad, dtype=torch.float64, device=q.device)
    n = min(pad, lse.shape[-1])
    lse_k[..., :n] = lse[..., :n]
    aux = [lse_k] + _empty_aux(q, 2)
    return (out, *aux), aux


def _eff_bwd(grad_out, q, k, v, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p, grad_input_mask,
             is_causal=False, *, scale=None):
    dq, dk, dv, ds = attention_fp64(q, k, v, bias=attn_bias, causal=is_causal, scale=scale, dout=grad_out)
    has_bias = attn_bias is not None and attn_bias.numel() > 0
    db = ds if (has_bias and len(grad_input_mask) > 3 and grad_input_mask[3]) else None
    return (dq, dk, dv, db), []


def _flash_fwd(q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    out, lse = attention_fp64(q, k, v, causal=is_causal, scale=scale)
    e = _empty_aux(q, 5)
    aux = [lse] + e
    return (out, lse, e[0], e[1], q.shape[-2], k.shape[-2], e[2], e[3], e[4]), aux


def _flash_bwd(grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
               philox_seed, philox_offset, *, scale=None):
    dq, dk, dv, _ = attention_fp64(q, k, v, causal=is_causal, scale=scale, dout=grad_out)
    return (dq, dk, dv), []


def _cudnn_fwd(q, k, v, attn_bias=None, compute_log_sumexp=False, dropout_p=0.0, is_causal=False,
               return_debug_mask=False, *, scale=None):
    out, lse = attention_fp64(q, k, v, bias=attn_bias, causal=is_causal, scale=scale)
    e = _empty_aux(q, 5)
    aux = [lse] + e
    return (out, lse, e[0], e[1], q.shape[-2], k.shape[-2], e[2], e[3], e[4]), aux


def _cudnn_bwd(grad_out, q, k, v, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k,
               max_q, max_k, dropout_p, is_causal, *, scale=None):
    bias = attn_bias if attn_bias is not None and attn_bias.numel() else None
    dq, dk, dv, _ = attention_fp64(q, k, v, bias=bias, causal=is_causal, scale=scale, dout=grad_out)
    return (dq, dk, dv), []


_ATTENTION = {
    "_scaled_dot_product_efficient_attention": _eff_fwd,
    "_scaled_dot_product_efficient_attention_backward": _eff_bwd,
    "_scaled_dot_product_flash_attention": _flash_fwd,
    "_scaled_dot_product_flash_attention_backward": _flash_bwd,
    "_scaled_dot_product_cudnn_attention": _cudnn_fwd,
    "_scaled_dot_product_cudnn_attention_backward": _cudnn_bwd,
}

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
        if not value.is_floating_point():
            return value.detach().clone()
        # same sizes and strides: a graph's view ops assumed its inputs' layout (.to() would make a gapped
        # view contiguous); overlapping layouts (stride 0) cannot be written element-wise, so they are expanded
        if all(st != 0 or sz <= 1 for sz, st in zip(value.shape, value.stride())):
            out = torch.empty_strided(value.shape, value.stride(), dtype=torch.float64, device=value.device)
            return out.copy_(value.detach())
        return value.detach().to(torch.float64)
    if isinstance(value, (list, tuple)):
        return type(value)(to_fp64(v) for v in value)
    return value


# ------------------------------------------------------------------------------------ the TF32 control
_TF32_FUNCS = {"matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "linear", "einsum", "__matmul__", "__rmatmul__",
               "conv1d", "conv2d", "conv3d", "scaled_dot_product_attention", "tensordot", "dot", "mv", "addmv"}
_TF32_CLS = None


def _tf32(t: Any) -> Any:
    """An fp32 tensor as a TF32 tensor core reads it: the low 13 mantissa bits dropped (NaN kept)."""
    import torch

    if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
        return t
    c = t.contiguous()
    out = (c.view(torch.int32) & -8192).view(torch.float32)
    return torch.where(c.isnan(), c, out).view(t.shape) if t.is_contiguous() else torch.where(c.isnan(), c, out)


def Tf32Mode():  # noqa: N802 - reads as the class it returns an instance of
    """A TorchFunctionMode under which fp32 matrix products read their operands as TF32, as a GPU's do by default:
    the control of a kernel whose fp32 ``tl.dot`` ran in TF32 (the sm_80+ default) is the reference computed so."""
    global _TF32_CLS
    if _TF32_CLS is None:
        from torch.overrides import TorchFunctionMode

        class _Tf32Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if _name(func) in _TF32_FUNCS:
                    args = tuple(_tf32(a) for a in args)
                    kwargs = {k: _tf32(v) for k, v in kwargs.items()}
                return func(*args, **kwargs)

        _TF32_CLS = _Tf32Mode
    return _TF32_CLS()
