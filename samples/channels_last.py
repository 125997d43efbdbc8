"""A convolution on a channels-last image with a scaled skip connection, then attention over its pixels.
Input 2 x 8 x 16 x 16 stored channels-last (strides 2048, 1, 128, 8); 2 heads over 256 positions; returned
in eval mode.

What to look for: the convolution stays an extern kernel that reads the image in its channels-last layout,
and so does the kernel that adds the scaled image back (call() checks each input's sizes and strides before
the first kernel that reads it, several inputs in one grouped check in torch 2.14); attention runs as one
extern kernel (scaled_dot_product_attention, the CPU flash kernel on CPU).
"""

import torch
import torch.nn.functional as F
from torch import nn


class ConvAttention(nn.Module):
    def __init__(self, width: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.conv = nn.Conv2d(width, width, kernel_size=3, padding=1)
        self.scale = nn.Parameter(torch.full((1, width, 1, 1), 0.5))
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv(x) + x * self.scale)
        batch, width, height, breadth = y.shape
        tokens = y.flatten(2).transpose(1, 2)
        qkv = self.qkv(tokens).view(batch, height * breadth, 3, self.heads, width // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v)
        return tokens + self.proj(attended.transpose(1, 2).reshape(batch, height * breadth, width))


def get_model() -> nn.Module:
    return ConvAttention().eval()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 8, 16, 16).to(memory_format=torch.channels_last),)
