# The model file of tests/fixtures/cpu-torch2.13-gated-mlps.tar.gz (unchanged), for GPU runs of the hand-written verification.
"""Four gated feed-forward blocks in a row, 64 tokens x width 32, hidden 96, each ``down(act(x @ Wg) * (x @ Wu))``:
HF T5 v1.1's gated GELU with its NewGELU written out (``0.5 * a * (1 + tanh(...))``), the tanh GELU of
F.gelu, the exact (erf) GELU (GEGLU), and Llama/Qwen3's SwiGLU (silu)."""

import math

import torch
from torch import nn

ACTIVATIONS = ("new_gelu", "tanh", "none", "silu")


class GatedMLPs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gates = nn.ModuleList(nn.Linear(32, 96, bias=False) for _ in ACTIVATIONS)
        self.ups = nn.ModuleList(nn.Linear(32, 96, bias=False) for _ in ACTIVATIONS)
        self.downs = nn.ModuleList(nn.Linear(96, 32, bias=False) for _ in ACTIVATIONS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for activation, gate_proj, up_proj, down_proj in zip(ACTIVATIONS, self.gates, self.ups, self.downs):  # noqa: B905 (as in the fixture)
            a = gate_proj(x)
            if activation == "new_gelu":
                gate = 0.5 * a * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * torch.pow(a, 3.0))))
            elif activation == "silu":
                gate = nn.functional.silu(a)
            else:
                gate = nn.functional.gelu(a, approximate=activation)
            x = down_proj(gate * up_proj(x))
        return x


def get_model() -> nn.Module:
    return GatedMLPs()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 32, 32),)
