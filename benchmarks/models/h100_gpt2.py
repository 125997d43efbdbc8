"""HuggingFace GPT-2 at GPT-2 small's width (4 of its 12 layers, 768 wide, 12 heads, the 50,257-token vocabulary),
random weights, fp32, batch 8 x 512 tokens, eval: the GPU fixture ``h100-gpt2-fp32-default`` (issue 31). At this
size nine of ten device microseconds are cuBLAS matmuls (the four projections per layer and the LM head), so
the report's answer is about matmul precision, not fusion."""

import torch
from transformers import AutoModelForCausalLM, GPT2Config


def get_model() -> torch.nn.Module:
    config = GPT2Config(n_layer=4, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024, use_cache=False)
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, 50257, (8, 512)),)
