"""HuggingFace transformers ViT (ViTForImageClassification), random weights from a small config: 32x32 RGB images
cut into 8x8 patches (16 patches and a class token), 2 layers, width 128, 4 heads, an MLP of width 256,
10 classes; batch 4. Called with the keyword ``pixel_values``. Attention is
``attn_implementation="sdpa"`` (torch's scaled_dot_product_attention); dropout is 0.

What to look for: one graph. The patch embedding is a strided convolution: an extern convolution call (after a
small kernel copying the images and its weight to channels-last); its output is flattened, prefixed with the
class token, added to the position embeddings and normalised by the first LayerNorm in one kernel. No mask is
passed and eager uses none, but under torch.compile HF builds an all-zeros float mask anyway (it cannot look
at the padding while tracing): a small kernel per layer before each extern SDPA call. Each LayerNorm is a
reduction fused with the residual add before it; the erf-GELU a pointwise kernel between the MLP's ``addmm``
calls; the classifier an ``addmm`` reading the class token only. With ``--train``: a forward and a backward
graph, the convolution's gradients as extern calls.
"""

import torch
from transformers import ViTConfig, ViTForImageClassification


def get_model() -> torch.nn.Module:
    config = ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        num_labels=10,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return ViTForImageClassification._from_config(config, attn_implementation="sdpa").eval()


def get_inputs() -> dict[str, torch.Tensor]:
    return {"pixel_values": torch.randn(4, 3, 32, 32)}
