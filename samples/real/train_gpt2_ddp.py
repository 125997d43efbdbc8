"""Train a small HuggingFace GPT-2 with DistributedDataParallel under torch.compile: an ordinary torchrun script
(no get_model/get_inputs), as a data-parallel job is written. Run it directly, or under inductor-lens:

    torchrun --standalone --nproc-per-node 2 samples/real/train_gpt2_ddp.py --steps 5
    inductor-lens run -- torchrun --standalone --nproc-per-node 2 samples/real/train_gpt2_ddp.py --steps 5

Each rank joins the process group from torchrun's environment (NCCL on GPUs, one per local rank; gloo on a CPU),
builds GPT2LMHeadModel from a small config (4 layers, width 256, 4 heads, a 4096-token vocabulary, random weights,
nothing downloaded, dropout 0) with the same seed on every rank, moves it to its device, wraps it in DDP and
compiles it with ``torch.compile(model)``; it then trains ``--steps`` steps of AdamW on random tokens seeded by
the rank (each rank its own batch, as in data-parallel training) and prints each step's loss and time on rank 0.

What a capture of it should show: every rank compiles the same graphs (DDP's optimizer splits the model's frame
at its buckets, so a frame gives several graphs sharing one compile id), the gradient all-reduce runs in DDP's
hooks outside the compiled graphs, and the ranks' step times side by side.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import GPT2Config, GPT2LMHeadModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()

    torch.manual_seed(0)  # the same initial weights on every rank
    config = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=4096, n_positions=args.length,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    model = GPT2LMHeadModel(config).to(device)
    model = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    compiled = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(rank)  # each rank its own batch

    for step in range(args.steps):
        tokens = torch.randint(0, config.vocab_size, (args.batch, args.length), generator=generator).to(device)
        started = time.perf_counter()
        loss = compiled(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}, {time.perf_counter() - started:.3f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
