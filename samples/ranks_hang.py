"""A job that hangs, for ``compile --nproc 2 --timeout 40`` (gloo on a CPU): rank 1 skips the all-reduce that
rank 0 waits in.

Rank 1 goes on to other work instead (a long sleep stands for it; a rank that skipped the collective and
reached the end would leave the process group, and gloo would end rank 0's wait with an error rather than a
hang). Nothing compiles: both ranks are still in the eager run at the timeout.

What to look for: the one-line error names each rank and where it was when the timeout came, from the Python
stacks each rank wrote to its log just before the kill: rank 0 waiting in ``all_reduce`` (torch's
``distributed_c10d.py``) from this file's ``forward``, rank 1 at the ``time.sleep`` line of ``forward``.
"""

import time

import torch
import torch.distributed as dist
from torch import nn


class SkipsOnRank1(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rank = dist.get_rank()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.rank == 1:
            time.sleep(3600)  # rank 1 never issues the all-reduce: rank 0 waits in it
        else:
            dist.all_reduce(y)
        return y


def get_model() -> nn.Module:
    return SkipsOnRank1()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(4, 16),)
