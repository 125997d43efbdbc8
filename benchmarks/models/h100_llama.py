"""HuggingFace Llama, random weights: 4 layers, 1,024 wide, 16 query heads sharing 4 key/value heads, SwiGLU of
2,816, a 32,000-token vocabulary; batch 4 x 1,024 tokens, eval. Run with ``--dtype bf16 --mode
max-autotune-no-cudagraphs``: the GPU fixture ``h100-llama-bf16-max-autotune-nocg`` (issue 31)."""

import torch
from transformers import AutoModelForCausalLM, LlamaConfig


def get_model() -> torch.nn.Module:
    config = LlamaConfig(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=4,
        num_attention_heads=16,
        num_key_value_heads=4,
        vocab_size=32000,
        max_position_embeddings=2048,
        use_cache=False,
    )
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, 32000, (4, 1024)),)
