"""A small Llama-style model in plain torch whose RMSNorm and rotary embedding are Triton kernels, forward
and backward, for the hook's real-model proof (bench/hook_real_model.py) and its CPU tests.

The Triton kernels are wrapped as ``torch.library`` custom ops with autograd, so ``torch.compile`` keeps
them opaque (no graph break) and Inductor calls them as extern kernels: every launch goes through
``JITFunction.run``, where ``import gpuemu.hook`` sees it. Their float64 path is the plain-torch
reference (a graph's fp64 shadow needs an fp64 result, and it should not come from the kernel under
test).

Two planted bugs, off by default (``set_bug("forward")`` / ``set_bug("backward")``): masked-off tail
lanes of the row are loaded as 1.0 instead of 0.0 (``other=PAD``), so rows whose width is not a power of
two get a wrong norm (forward) or a wrong gradient (backward).

    TRITON_INTERPRET=1 python examples/llama_tiny.py     # a few CPU training steps
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

_BUG = {"forward": False, "backward": False}


def set_bug(where: str | None) -> None:
    """Plant the tail-mask bug in the RMSNorm ``forward`` or ``backward`` kernel (None: both correct)."""
    _BUG["forward"] = where == "forward"
    _BUG["backward"] = where == "backward"


# ------------------------------------------------------------------------------------------ RMSNorm


@triton.jit
def _rmsnorm_fwd(x_ptr, w_ptr, y_ptr, rstd_ptr, N, eps, stride, BLOCK_N: tl.constexpr, PAD: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=PAD).to(tl.float32)  # PAD=1.0: the planted bug
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * stride + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rmsnorm_bwd(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dwp_ptr, N, stride, BLOCK_N: tl.constexpr,
                 PAD: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < N
    dy = tl.load(dy_ptr + row * stride + offs, mask=m, other=PAD).to(tl.float32)  # PAD=1.0: the planted bug
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=PAD).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=PAD).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    xhat = x * rstd
    wdy = w * dy
    c = tl.sum(xhat * wdy, axis=0) / N
    dx = (wdy - xhat * c) * rstd
    tl.store(dx_ptr + row * stride + offs, dx.to(dx_ptr.dtype.element_ty), mask=m)
    tl.store(dwp_ptr + row * N + offs, dy * xhat, mask=m)


def _rms_ref(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@torch.library.custom_op("llama_tiny::rmsnorm", mutates_args=())
def rmsnorm_op(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).contiguous()
    if x.dtype == torch.float64:  # the fp64 shadow's path: the reference, not the kernel under test
        rstd = torch.rsqrt(x2.pow(2).mean(-1) + eps)
        return _rms_ref(x2, w.to(x2.dtype), eps).reshape(shape), rstd
    m, n = x2.shape
    y = torch.empty_like(x2)
    rstd = torch.empty(m, device=x.device, dtype=torch.float32)
    _rmsnorm_fwd[lambda meta: (m,)](x2, w.contiguous(), y, rstd, n, eps, x2.stride(0),
                                     BLOCK_N=triton.next_power_of_2(n), PAD=1.0 if _BUG["forward"] else 0.0)
    return y.reshape(shape), rstd


@rmsnorm_op.register_fake
def _(x, w, eps):
    return torch.empty_like(x), x.new_empty(x.numel() // x.shape[-1], dtype=torch.float64 if x.dtype == torch.float64
                                            else torch.float32)


@torch.library.custom_op("llama_tiny::rmsnorm_bwd", mutates_args=())
def rmsnorm_bwd_op(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor,
                   eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).contiguous()
    dy2 = dy.reshape(-1, shape[-1]).contiguous().to(x2.dtype)
    if x.dtype == torch.float64:  # the reference gradient, in torch (autograd is off inside a custom op)
        r = torch.rsqrt(x2.pow(2).mean(-1, keepdim=True) + eps)
        xhat, wdy = x2 * r, w.to(x2.dtype) * dy2
        dx = (wdy - xhat * (xhat * wdy).mean(-1, keepdim=True)) * r
        return dx.reshape(shape), (dy2 * xhat).sum(0).to(w.dtype)
    m, n = x2.shape
    dx = torch.empty_like(x2)
    dwp = torch.empty(m, n, device=x.device, dtype=torch.float32)
    _rmsnorm_bwd[lambda meta: (m,)](dy2, x2, w.contiguous(), rstd, dx, dwp, n, x2.stride(0),
                                     BLOCK_N=triton.next_power_of_2(n), PAD=1.0 if _BUG["backward"] else 0.0)
    return dx.reshape(shape), dwp.sum(0).to(w.dtype)


@rmsnorm_bwd_op.register_fake
def _(dy, x, w, rstd, eps):
    return torch.empty_like(x), torch.empty_like(w)


def _rms_setup(ctx, inputs, output):
    x, w, eps = inputs
    ctx.save_for_backward(x, w, output[1])
    ctx.eps = eps


def _rms_backward(ctx, dy, _drstd):
    x, w, rstd = ctx.saved_tensors
    dx, dw = rmsnorm_bwd_op(dy, x, w, rstd, ctx.eps)
    return dx, dw, None


rmsnorm_op.register_autograd(_rms_backward, setup_context=_rms_setup)


class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_op(x, self.weight, self.eps)[0]


# ------------------------------------------------------------------------------------------ rotary


@triton.jit
def _rope_fwd(x_ptr, cos_ptr, sin_ptr, out_ptr, N, H, HALF, BLOCK_D: tl.constexpr):
    r = tl.program_id(0)  # one (b, n, h) row of a contiguous [B, N, H, D] tensor
    n = (r // H) % N
    offs = tl.arange(0, BLOCK_D)
    m = offs < HALF
    base = r * 2 * HALF
    x1 = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + HALF + offs, mask=m, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + n * HALF + offs, mask=m, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + n * HALF + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + offs, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=m)
    tl.store(out_ptr + base + HALF + offs, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rope_bwd(dy_ptr, cos_ptr, sin_ptr, dx_ptr, N, H, HALF, BLOCK_D: tl.constexpr):
    r = tl.program_id(0)
    n = (r // H) % N
    offs = tl.arange(0, BLOCK_D)
    m = offs < HALF
    base = r * 2 * HALF
    d1 = tl.load(dy_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
    d2 = tl.load(dy_ptr + base + HALF + offs, mask=m, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + n * HALF + offs, mask=m, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + n * HALF + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(dx_ptr + base + offs, (d1 * c + d2 * s).to(dx_ptr.dtype.element_ty), mask=m)
    tl.store(dx_ptr + base + HALF + offs, (d2 * c - d1 * s).to(dx_ptr.dtype.element_ty), mask=m)


def _rope_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sign: float = 1.0) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :].to(x.dtype), sign * sin[None, :, None, :].to(x.dtype)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def _rope_launch(kernel, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    b, n, h, d = x.shape
    out = torch.empty_like(x)
    kernel[lambda meta: (b * n * h,)](x, cos.contiguous(), sin.contiguous(), out, n, h, d // 2,
                                      BLOCK_D=triton.next_power_of_2(d // 2))
    return out


@torch.library.custom_op("llama_tiny::rope", mutates_args=())
def rope_op(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.float64:
        return _rope_ref(x, cos, sin)
    return _rope_launch(_rope_fwd, x, cos, sin)


@rope_op.register_fake
def _(x, cos, sin):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("llama_tiny::rope_bwd", mutates_args=())
def rope_bwd_op(dy: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    if dy.dtype == torch.float64:
        return _rope_ref(dy, cos, sin, sign=-1.0)
    return _rope_launch(_rope_bwd, dy, cos, sin)


@rope_bwd_op.register_fake
def _(dy, cos, sin):
    return torch.empty_like(dy, memory_format=torch.contiguous_format)


def _rope_setup(ctx, inputs, output):
    _, cos, sin = inputs
    ctx.save_for_backward(cos, sin)


def _rope_backward(ctx, dy):
    cos, sin = ctx.saved_tensors
    return rope_bwd_op(dy, cos, sin), None, None


rope_op.register_autograd(_rope_backward, setup_context=_rope_setup)


# ------------------------------------------------------------------------------------------ the model


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 512
    dim: int = 384  # not a power of two: RMSNorm rows have a masked tail (BLOCK_N = 512)
    layers: int = 4
    heads: int = 6
    hidden: int = 1024
    max_seq: int = 256

    @classmethod
    def tiny(cls) -> "LlamaConfig":
        """The CPU version (tests): width 48, so BLOCK_N = 64 and the tail is masked."""
        return cls(vocab=64, dim=48, layers=2, heads=2, hidden=96, max_seq=16)


class Block(torch.nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        d = cfg.dim
        self.heads = cfg.heads
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1 = torch.nn.Linear(d, cfg.hidden, bias=False)
        self.w3 = torch.nn.Linear(d, cfg.hidden, bias=False)
        self.w2 = torch.nn.Linear(cfg.hidden, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.norm1(x)
        q = rope_op(self.wq(h).view(b, t, self.heads, d // self.heads), cos, sin)
        k = rope_op(self.wk(h).view(b, t, self.heads, d // self.heads), cos, sin)
        v = self.wv(h).view(b, t, self.heads, d // self.heads)
        a = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                             v.transpose(1, 2), is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.w2(torch.nn.functional.silu(self.w1(h)) * self.w3(h))


class LlamaTiny(torch.nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = torch.nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = torch.nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim)
        self.head = torch.nn.Linear(cfg.dim, cfg.vocab, bias=False)
        half = cfg.dim // cfg.heads // 2
        inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float64) / half))
        ang = torch.arange(cfg.max_seq, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        x = self.embed(ids)
        cos, sin = self.cos[:t], self.sin[:t]
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))


def loss_fn(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))


def batches(cfg: LlamaConfig, *, batch: int, seq: int, steps: int, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, cfg.vocab, (batch, seq + 1), generator=g).to(device) for _ in range(steps)]


def main() -> None:
    torch.manual_seed(0)
    cfg = LlamaConfig.tiny()
    model = LlamaTiny(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for i, ids in enumerate(batches(cfg, batch=2, seq=12, steps=3, device="cpu")):
        loss = loss_fn(model, ids)
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {i}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
