import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Residual MLP step: x + GELU(Linear(x)) with a square Linear layer."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.gelu(self.linear(x))


batch_size = 16
features = 512


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
