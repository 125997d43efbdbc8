"""The 48-layer version of transformer24.py: the largest sample, for timing reports (benchmarks/report_speed.py).

What to look for: with --train, a backward graph of over 600 launches and 5,000 FX nodes, drawn in parts
with an overview, and text pages split where they pass 20,000 lines.
"""

import torch
from torch import nn
from transformer24 import Transformer


def get_model() -> nn.Module:
    return Transformer(layers=48)


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 32, 64),)
