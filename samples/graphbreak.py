"""A model with a data-dependent branch: ``if y.sum().item() > 0`` cannot be traced into one graph.

What to look for: Dynamo breaks the graph at ``.item()``, so Inductor compiles two graphs (before
and after the break, the second in a ``torch_dynamo_resume_in_forward`` frame), each with its own
kernels; the report shows two compile ids.
"""

import torch
from torch import nn


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(256, 256)
        self.second = nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.first(x))
        if y.sum().item() > 0:  # data-dependent Python control flow: a graph break
            y = y * 2
        return torch.tanh(self.second(y))


def get_model() -> nn.Module:
    return Branchy()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(64, 256),)
