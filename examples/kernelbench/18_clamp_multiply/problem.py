import torch
import torch.nn as nn


class Model(nn.Module):
    """Clamp to [min_val, max_val], then multiply by a learnable per-feature multiplier."""

    def __init__(self, features: int, min_val: float, max_val: float):
        super().__init__()
        self.multiplier = nn.Parameter(torch.randn(features))
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, self.min_val, self.max_val) * self.multiplier


batch_size = 16
features = 1024
min_val = -0.5
max_val = 0.5


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, min_val, max_val]
