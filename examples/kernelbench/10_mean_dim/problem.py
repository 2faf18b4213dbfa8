import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over one dimension of a [batch, features] tensor."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 16
features = 1024
dim = 1


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [dim]
