"""torchvision's ResNet-50 (``torchvision.models.resnet50(weights=None)``: random weights, nothing downloaded), in
``.eval()``, on a batch of 32 RGB images of 224x224. For the GPU machine: there is no torchvision build for this
repository's CPU torch, so on a CPU machine this file fails to import (``inductor-lens compile`` exits 3) and
the tests skip it. Run it with ``inductor-lens compile samples/real/torchvision_resnet50.py --dtype bf16``.

What to look for: one graph of 53 convolutions, each an extern cuDNN call (or, in max-autotune modes, an
AUTOTUNE table choosing between cuDNN and Triton convolution templates); in eval mode each BatchNorm is an
affine per-channel scale and shift that Inductor fuses with the ReLU, and with the residual add at the end of
each bottleneck, into one pointwise Triton kernel after the convolution; the stem's max-pool is a pointwise
kernel of its own; the global average pool a reduction; the classifier an addmm.
"""

import torch

# torchvision has no build for this CPU torch: say so rather than a bare ModuleNotFoundError.
try:
    import torchvision
except ImportError as exc:
    raise ImportError("this model file needs torchvision (installed on the GPU machine only)") from exc


def get_model() -> torch.nn.Module:
    return torchvision.models.resnet50(weights=None).eval()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(32, 3, 224, 224),)
