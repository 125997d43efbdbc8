"""A two-layer MLP in tensor parallel (torch.distributed.tensor.parallel), for ``inductor-lens compile
samples/tp_mlp.py --nproc 2 --train`` (gloo on a CPU). As torch's tensor-parallel tutorial does it: the first
Linear split by its output features (``ColwiseParallel``), the second by its input features
(``RowwiseParallel``), over a one-dimensional device mesh of every rank on the rank's device
(``INDUCTOR_LENS_RANK_DEVICE``); the second returns a DTensor (``use_local_output=False``), replicated.

What to look for: each rank holds half of each weight, and its graphs hold the all-reduce that sums the second
layer's partial products (``_c10d_functional.all_reduce``). The accuracy verdict judges each DTensor by this
rank's part, the name saying which: ``grad of up.weight (this rank's shard: Shard(dim=0) of [64, 32])``,
``output (this rank's replica: Replicate() of [8, 32])``, against a float64 copy (a tensor-parallel model,
unlike an FSDP2 one, can be copied).
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(32, 64)
        self.down = nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def get_model() -> nn.Module:
    device = torch.device(os.environ.get("INDUCTOR_LENS_RANK_DEVICE", "cpu"))
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel(use_local_output=False)}
    return parallelize_module(MLP().to(device), mesh, plan)


def get_inputs() -> tuple[torch.Tensor, ...]:
    # tensor parallel: every rank computes on the same batch (each holds part of the weights)
    return (torch.randn(8, 32, generator=torch.Generator().manual_seed(0)),)
