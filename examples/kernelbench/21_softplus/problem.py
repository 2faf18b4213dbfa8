import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Softplus activation, log(1 + exp(beta * x)) / beta, linear above the threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


batch_size = 16
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [1.0, 20.0]
