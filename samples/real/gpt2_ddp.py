"""HuggingFace GPT-2 (the small config of ``gpt2.py``: 2 layers, width 128) in DistributedDataParallel, for
``inductor-lens compile samples/real/gpt2_ddp.py --nproc 2 --train`` (gloo on a CPU; on GPUs each rank's model
on ``cuda:<local rank>``, named by the tool in ``INDUCTOR_LENS_RANK_DEVICE``, before DDP wraps it, as torch's
DDP tutorial does). Each rank feeds its own batch (token ids seeded by its rank), as a data-parallel job does;
the weights are the same on every rank (DDP broadcasts rank 0's when it wraps the model).

What to look for: the landing page says all ranks compiled the same; each rank's report is GPT-2's
(``gpt2.py`` says what to look for there), its accuracy verdict judging gradients that DDP averaged across the
ranks (the float64 reference is wrapped in DDP too); the gradient all-reduce runs in DDP's reducer hooks, outside
the compiled graphs. The model is small enough for one DDP bucket, so DDP's optimizer keeps each graph whole.
"""

import os

import torch
import torch.distributed as dist
from gpt2 import VOCAB
from gpt2 import get_model as gpt2_model
from torch.nn.parallel import DistributedDataParallel


def get_model() -> torch.nn.Module:
    device = torch.device(os.environ.get("INDUCTOR_LENS_RANK_DEVICE", "cpu"))
    model = gpt2_model().to(device)
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def get_inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(dist.get_rank())
    input_ids = torch.randint(0, VOCAB, (2, 64), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": input_ids}
