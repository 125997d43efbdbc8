"""A model whose ranks compile differently, for ``compile --nproc 2`` (gloo on a CPU).

Rank 1 takes another branch (``if self.rank == 1``) and, on its second call, a batch of another size, so it
compiles other code for the same frame and recompiles; both ranks all-reduce the same 32 column sums in
the forward pass, traced into the graphs as ``_c10d_functional.all_reduce``. One divergence alone:
``RANKS_DIVERGE=branch`` (the branch; every batch of 8 rows) or ``RANKS_DIVERGE=shape`` (the recompile; the
same branch on every rank), set in the environment of ``inductor-lens compile``, which the ranks inherit.

What to look for: the landing page names where the ranks diverged: the compile ids (rank 1's ``0/1``,
with the failed size guard), the graph of ``0/0`` compiled to other kernels (rank 1's fuses the ReLU),
the guards (``L['self'].rank == 1`` against ``== 0``: Dynamo guards on the attribute the branch read), and
the collectives rank 1's extra graph holds.
"""

import os

import torch
import torch.distributed as dist
from torch import nn

DIVERGE = os.environ.get("RANKS_DIVERGE", "branch,shape").split(",")


class RankBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rank = dist.get_rank() if "branch" in DIVERGE else 0
        self.first = nn.Linear(32, 64)
        self.second = nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.second(torch.tanh(self.first(x)))
        column_sums = y.sum(0)
        dist.all_reduce(column_sums)  # the same size on every rank, whatever the batch
        if self.rank == 1:
            y = torch.relu(y)
        return y * column_sums


def get_model() -> nn.Module:
    return RankBranch()


def get_inputs() -> list[tuple[torch.Tensor, ...]]:
    # every rank makes the same number of calls (each all-reduces once), rank 1 the second at another size
    second = 16 if dist.get_rank() == 1 and "shape" in DIVERGE else 8
    return [(torch.randn(8, 32),), (torch.randn(second, 32),)]
