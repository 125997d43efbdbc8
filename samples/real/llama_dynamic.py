"""The Llama of llama.py (HuggingFace transformers, random weights, sdpa attention) called three times with
sequences of 32, 48 and 80 tokens, as a server sees prompts of varying length: dynamic shapes without
``mark_dynamic`` or ``dynamic=True``, through Dynamo's automatic dynamic shapes.

What to look for: two compiles of the same frame. The first call compiles a graph specialised to
sequence length 32; the second fails its size guard (a recompile, with the guard on the length named
on the Compilation page) and compiles a graph with the sequence length as a symbol (``s0``-style sizes
in the kernels' loop bounds and in the buffer sizes of ``call()``); the third call, 80 tokens, reuses
that dynamic graph: no third compile. Compare the kernels of the two graphs: the same fusions, with
constant loop bounds in the first and symbolic ones in the second.
"""

import torch
from llama import VOCAB
from llama import get_model as llama_model

LENGTHS = (32, 48, 80)


def get_model() -> torch.nn.Module:
    return llama_model()


def get_inputs() -> list[dict[str, torch.Tensor]]:
    calls = []
    for length in LENGTHS:
        input_ids = torch.randint(0, VOCAB, (2, length))
        calls.append({"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)})
    return calls
