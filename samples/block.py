"""A pre-norm transformer block: LayerNorm -> QKV -> causal attention -> projection, then LayerNorm -> MLP,
with residuals. Batch 8, sequence 256, width 512, 8 heads.

What to look for: attention runs as one extern kernel (scaled_dot_product_attention); each LayerNorm
is a persistent reduction fused with the residual add before it; the bias adds and GELU are fused
into pointwise kernels around the matmuls.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int = 512, heads: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        qkv = self.qkv(self.ln1(x)).view(batch, seq, 3, self.heads, width // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_model() -> nn.Module:
    return Block()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(8, 256, 512),)
