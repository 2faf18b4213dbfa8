import torch
import torch.nn as nn


class Model(nn.Module):
    """Index of the maximum along one dimension (first occurrence on ties, as torch.argmax)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


batch_size = 16
dim1 = 1024
dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1)]


def get_init_inputs():
    return [dim]
