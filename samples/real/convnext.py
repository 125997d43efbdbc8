"""HuggingFace transformers ConvNeXt (ConvNextForImageClassification), random weights from a small config: four
stages of widths 32, 64, 128 and 256, one block each, 10 classes; batch 2 of 64x64 RGB images. Dropout and stochastic
depth are 0, so eager, compiled and float64 runs agree.

What to look for: the stem is a 4x4 stride-4 patchify convolution (an extern call) to 2x32x16x16; each block is a
depthwise 7x7 convolution (padding 3, groups = channels: an extern ``convolution``), a channels-last LayerNorm (a
reduction kernel fused with the permute), the MLP's two ``addmm`` calls around an erf-GELU pointwise kernel, and
the layer scale fused with the residual add; between stages a LayerNorm and a 2x2 stride-2 convolution halve the
pixels and double the channels; the head is a mean over the pixels, a LayerNorm and an ``addmm``. With ``--train``
the backward graph has a ``convolution_backward`` per convolution: the depthwise 7x7 ones are what the
hand-written ``conv2d_backward`` checks stand in for, and under Triton's interpreter on a CPU they are the slowest
checks of the hand-written stage (``benchmarks/results/2026-11-27-cpu-convnext-train.md``).
"""

import torch
from transformers import ConvNextConfig, ConvNextForImageClassification

IMAGE = 64


def get_model() -> torch.nn.Module:
    config = ConvNextConfig(
        num_channels=3,
        patch_size=4,
        num_stages=4,
        hidden_sizes=[32, 64, 128, 256],
        depths=[1, 1, 1, 1],
        image_size=IMAGE,
        num_labels=10,
        drop_path_rate=0.0,
    )
    return ConvNextForImageClassification(config).eval()


def get_inputs() -> dict[str, torch.Tensor]:
    return {"pixel_values": torch.randn(2, 3, IMAGE, IMAGE)}
