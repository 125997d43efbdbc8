"""A two-layer MLP wrapped in DistributedDataParallel, for ``compile --nproc 2 --train`` (gloo on a CPU).

Run it with ``inductor-lens compile samples/ddp_mlp.py --nproc 2 --train``: each rank joins the process
group before this file is loaded, so ``get_model()`` can wrap the model in DDP, after moving it to the rank's
device (``INDUCTOR_LENS_RANK_DEVICE``: ``cpu``, or ``cuda:<local rank>`` on GPUs). Each rank feeds its own
batch (seeded by its rank), as a data-parallel job does.

What to look for: the landing page says that both ranks compiled the same (same compile ids, graphs,
guards and kernels); DDP's gradient all-reduce runs in its reducer hooks outside the compiled graphs,
so the graphs hold no collective. Each rank's report is the ordinary report of one process.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class MLP(nn.Module):
    # a module of this file, not nn.Sequential: compiling DDP breaks the graph at its forward (DDP's own
    # bookkeeping), and Dynamo then compiles the wrapped module's forward as a frame of its own, which it
    # does for user code only (torch.nn's own modules are traced only when inlined)
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(64, 256)
        self.down = nn.Linear(256, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


def get_model() -> nn.Module:
    # as torch's DDP tutorial does: the module on the rank's device first, then wrapped (DDP never moves later);
    # the tool names the rank's device, cuda:<local rank> on GPUs
    device = torch.device(os.environ.get("INDUCTOR_LENS_RANK_DEVICE", "cpu"))
    model = MLP().to(device)
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def get_inputs() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(dist.get_rank())
    return (torch.randn(32, 64, generator=generator),)
