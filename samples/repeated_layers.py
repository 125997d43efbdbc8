"""Four identical layers with a forced graph break after each (``torch._dynamo.graph_break()``).

What to look for: Dynamo compiles each layer's code as its own frame (``forward``, then one
``torch_dynamo_resume_in_forward_at_<line>`` per break), and layers 2 to 4 give the same graph: the first of them
is compiled, the others Inductor serves from its FX graph cache without compiling again. Layer 1's graph differs
(its input needs no gradient). A cache hit's debug folder is empty (no output_code.py); the report reads its output
code, kernels and provenance from the TORCH_TRACE log and labels it "cache hit". With ``--train`` (torch 2.13, CPU):
8 graphs, 4 of them cache hits (the forward graphs of layers 3 and 4, the backward graphs of layers 2 and 3: the
backward graphs are compiled last layer first).
"""

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.linear(x)) * 0.5


class Repeated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A break after each layer: one graph per layer, each resuming at its own line (a loop would
        # resume into the loop itself, one frame compiled again and again).
        x = self.layers[0](x)
        torch._dynamo.graph_break()
        x = self.layers[1](x)
        torch._dynamo.graph_break()
        x = self.layers[2](x)
        torch._dynamo.graph_break()
        return self.layers[3](x)


def get_model() -> nn.Module:
    return Repeated()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(32, 64),)
