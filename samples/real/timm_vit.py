"""timm's ViT-S/16 (``timm.create_model("vit_small_patch16_224", pretrained=False)``: random weights, nothing
downloaded), in ``.eval()``, on a batch of 32 RGB images of 224x224: 196 patches and a class token, 12 layers,
width 384, 6 heads. For the GPU machine: there is no timm/torchvision build for this repository's CPU torch, so
on a CPU machine this file fails to import (``inductor-lens compile`` exits 3) and the tests skip it. Run it with
``inductor-lens compile samples/real/timm_vit.py --dtype bf16``.

What to look for: one graph; the patch embedding is a strided convolution (extern); timm's fused attention
calls ``F.scaled_dot_product_attention`` (one extern flash/efficient attention kernel per layer, no mask);
each LayerNorm is a persistent reduction fused with the residual add before it (and with LayerScale-free
blocks, nothing else); the erf-GELU is fused into the epilogue pointwise kernel after the first MLP matmul.
Compare with samples/real/vit.py (HuggingFace's ViT at a small size on CPU) for the same architecture from
another library.
"""

import torch

# timm needs torchvision, which has no build for this CPU torch: say so rather than ModuleNotFoundError.
try:
    import timm
except ImportError as exc:
    raise ImportError("this model file needs timm (installed on the GPU machine only)") from exc


def get_model() -> torch.nn.Module:
    return timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=1000).eval()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(32, 3, 224, 224),)
