"""RMSNorm over the last dim (KernelBench format): the PyTorch reference for solution.py's CUDA C++ kernels."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim) * 0.1 + 1.0)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


batch, dim, eps = 16, 4096, 1e-6


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return [dim, eps]
