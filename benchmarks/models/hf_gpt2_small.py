# The model file behind tests/fixtures/gpt2_small_ro.tar.gz (shared/lab/models/real/hf_gpt2_small.py, unchanged).
"""HuggingFace GPT-2 from a small config (2 layers, 256 wide), random weights (GPU fixture)."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def get_model():
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=2048, n_positions=512)).eval()


def get_inputs():
    return (torch.randint(0, 2048, (4, 256)),)
