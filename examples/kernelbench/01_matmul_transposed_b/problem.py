import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B.T with A [M, K] and B [N, K] (B given in nn.Linear's weight layout)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.T)


M = 256
K = 128
N = 192


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(N, K)
    return [A, B]


def get_init_inputs():
    return []
