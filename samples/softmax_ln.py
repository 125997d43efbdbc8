"""Softmax then LayerNorm with a residual: LayerNorm(softmax(x * 0.125 + bias)) + x, on 2048 x 4096.

What to look for: two row reductions (softmax's max and sum, LayerNorm's mean and variance) and the
elementwise work around them end up in a single reduction kernel; on a GPU Inductor uses an
online softmax for it.
"""

import torch
from torch import nn


class SoftmaxLayerNorm(nn.Module):
    def __init__(self, width: int = 4096) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width) * 0.02)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.softmax(x * 0.125 + self.bias, dim=-1)) + x


def get_model() -> nn.Module:
    return SoftmaxLayerNorm()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2048, 4096),)
