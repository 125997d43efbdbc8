"""A small convolutional network: two Conv-BatchNorm-ReLU stages, global average pooling, a classifier.
Input 32 x 3 x 64 x 64; the model is returned in eval mode (BatchNorm uses its running statistics).

What to look for: convolutions stay extern kernels; Inductor folds BatchNorm and ReLU into the
pointwise kernel after each convolution, and the pooling becomes a reduction kernel.
"""

import torch
from torch import nn


def get_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, kernel_size=3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).eval()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(32, 3, 64, 64),)
