"""A 24-layer transformer (the block of block.py, repeated), small enough to compile on a CPU.

What to look for: a large graph. With --train the forward graph has over a thousand FX nodes and the
backward graph more; the report draws them at the kernel level (one box per launch, hundreds of
them) instead of op by op, and every page still renders in seconds.
"""

import torch
from block import Block
from torch import nn


class Transformer(nn.Module):
    def __init__(self, layers: int = 24, width: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


def get_model() -> nn.Module:
    return Transformer()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 32, 64),)
