"""A two-layer MLP: Linear(1024, 4096) -> GELU -> Linear(4096, 1024), batch 256.

What to look for: the matmuls stay library calls (extern kernels: cuBLAS on GPU, oneDNN/MKL on CPU)
and Inductor fuses the bias add and the GELU into one pointwise kernel between them. Under
max-autotune on a GPU the matmuls may become Triton templates with the GELU fused as an epilogue.
"""

import torch
from torch import nn


def get_model() -> nn.Module:
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(256, 1024),)
