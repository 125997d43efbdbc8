"""HuggingFace Llama (the small config of ``llama.py``: 2 layers, width 128) sharded with FSDP2, for
``inductor-lens compile samples/real/llama_fsdp2.py --nproc 2 --train`` (gloo on a CPU). As torch's FSDP2
documentation does it: ``fully_shard`` on each decoder layer, then on the root, over a one-dimensional device
mesh of every rank on the rank's device (``INDUCTOR_LENS_RANK_DEVICE``: ``cpu``, or ``cuda:<local rank>`` on
GPUs, where FSDP2 moves the parameters). Each rank feeds its own batch (token ids seeded by its rank).

What to look for: the landing page says all ranks compiled the same. Each parameter is a DTensor sharded on
dimension 0 (``Shard(dim=0)``): every rank holds half of each weight, all-gathered before a layer runs and its
gradient reduce-scattered after the backward, in FSDP2's hooks. The accuracy verdict judges each gradient
shard by shard (the rank's own half, ``to_local()``, named "this rank's shard"), against eager's tolerances:
torch cannot copy an FSDP2 model, so there is no float64 run.
"""

import os

import torch
import torch.distributed as dist
from llama import VOCAB
from llama import get_model as llama_model
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def get_model() -> torch.nn.Module:
    device = torch.device(os.environ.get("INDUCTOR_LENS_RANK_DEVICE", "cpu"))
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    model = llama_model()
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def get_inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(dist.get_rank())
    input_ids = torch.randint(0, VOCAB, (2, 64), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
