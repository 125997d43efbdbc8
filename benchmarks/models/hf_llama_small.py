# The model file behind tests/fixtures/llama_small_bf16.tar.gz (shared/lab/models/real/hf_llama_small.py, unchanged).
"""HuggingFace Llama from a small config (2 layers, 512 wide, GQA), random weights (GPU fixture)."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def get_model():
    cfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=2, vocab_size=4096, max_position_embeddings=1024)
    return LlamaForCausalLM(cfg).eval()


def get_inputs():
    return (torch.randint(0, 4096, (8, 512)),)
