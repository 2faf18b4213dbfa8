import torch
import torch.nn as nn


class Model(nn.Module):
    """Per-channel affine transform of a [batch, channels, length] tensor, then ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.shift = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale.view(1, -1, 1) + self.shift.view(1, -1, 1))


batch_size = 16
channels = 64
length = 64


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [channels]
