"""Train a small HuggingFace GPT-2 for a few steps under torch.compile: an ordinary training script, not a
model file (no get_model/get_inputs). Run it directly, or under inductor-lens's script runner:

    python samples/real/train_gpt2.py --steps 3
    python samples/real/train_gpt2.py --steps 3 --lengths 32 64 --batch 4 --recompile --compile-optimizer

It builds GPT2LMHeadModel from a small config (2 layers, width 128, 4 heads, a 1024-token vocabulary,
random weights, nothing downloaded, ``attn_implementation="sdpa"``, dropout 0 so every run prints the same
losses), compiles it with ``torch.compile(model)``, trains ``--steps`` steps of AdamW on random tokens of the
first sequence length, then ``--steps`` more at the second, and prints each step's loss and time.

What a capture of it should show:
  - the model's frame compiled into a forward and a backward graph. HF computes the loss of ``labels=``
    inside the model, and GPT2LMHeadModel's name does not end in ``ForCausalLM``, so its ``loss_function``
    logs a warning through ``logging`` on every call: Dynamo cannot trace that, so there is a graph break
    and the cross-entropy is a graph (forward and backward) of its own;
  - the sequence length: by default the sequence dimension of the token ids is marked dynamic
    (``torch._dynamo.mark_dynamic``), so the first compile has it as a symbol and the second length runs
    the same graphs; with ``--recompile`` nothing is marked, the first compile is specialised to the first
    length and the second length fails its size guard: a recompile into graphs with a symbolic length
    (Dynamo's automatic dynamic shapes), one more compile of every graph (about 30 s more on 2 CPU cores);
  - with ``--compile-optimizer`` (the default with CUDA) the AdamW update is ``torch.compile(optimizer.step)``:
    one more frame, the update of every parameter as a few horizontally fused kernels, compiled once (on
    2 CPU cores about 30 s of compile for an update of a few milliseconds, hence off by default on CPU).

On 2 CPU cores, ``--steps 3`` takes 45-55 s from a cold Inductor cache, most of it compiling, and about 15 s
once the cache (``TORCHINDUCTOR_CACHE_DIR``, default ``/tmp/torchinductor_$USER``) holds the kernels.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import AutoModelForCausalLM, GPT2Config

VOCAB = 1024


def build_model() -> torch.nn.Module:
    config = GPT2Config(
        n_layer=2,
        n_embd=128,
        n_head=4,
        n_positions=256,
        vocab_size=VOCAB,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
    )
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=5, help="steps at each sequence length (default 5)")
    parser.add_argument("--lengths", type=int, nargs=2, default=(32, 64), metavar=("A", "B"),
                        help="the two sequence lengths (default 32 64)")  # fmt: skip
    parser.add_argument("--batch", type=int, default=4, help="sequences per step (default 4)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--recompile", action="store_true",
                        help="mark nothing dynamic: the second length recompiles (automatic dynamic shapes)")  # fmt: skip
    parser.add_argument("--compile-optimizer", action=argparse.BooleanOptionalAction, default=None,
                        help="torch.compile the optimizer step too (default: with CUDA only)")  # fmt: skip
    parser.add_argument(
        "--eager", action="store_true", help="compile nothing (the same losses, for comparison)"
    )
    args = parser.parse_args(argv)
    if args.compile_optimizer is None:
        args.compile_optimizer = args.device.startswith("cuda")
    return args


def main(argv: list[str] | None = None) -> list[float]:
    args = parse_args(argv)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = build_model().to(device).train()
    # lr as a tensor: a scheduler changing it would not recompile a compiled optimizer step
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3), weight_decay=0.01)
    forward = model if args.eager else torch.compile(model)
    optimizer_step = (
        torch.compile(optimizer.step) if args.compile_optimizer and not args.eager else optimizer.step
    )

    losses: list[float] = []
    for length in args.lengths:
        for step in range(args.steps):
            start = time.perf_counter()
            input_ids = torch.randint(0, VOCAB, (args.batch, length), device=device)
            if not args.recompile and not args.eager:
                torch._dynamo.mark_dynamic(input_ids, 1)
            loss = forward(input_ids=input_ids, labels=input_ids).loss
            loss.backward()
            optimizer_step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            took = time.perf_counter() - start
            print(
                f"length {length} step {step + 1}/{args.steps}: loss {losses[-1]:.4f} ({took:.2f} s)",
                flush=True,
            )
    return losses


if __name__ == "__main__":
    main()
