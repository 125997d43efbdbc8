"""HuggingFace transformers Llama (LlamaForCausalLM), random weights from a small config: 2 layers, width 128,
4 query heads sharing 2 key/value heads (grouped-query attention), a SwiGLU MLP of width 344, RMSNorm,
rotary position embeddings (RoPE), a 1024-token vocabulary; batch 2, sequence 64. Called with keywords,
``input_ids`` and ``attention_mask`` (all ones). Attention is ``attn_implementation="sdpa"``
(torch's scaled_dot_product_attention); attention dropout is 0 and ``use_cache=False``.

What to look for: one graph, no graph break, 10 C++ kernels around extern matmuls (``mm``: Llama's
projections have no bias). Each RMSNorm is one reduction kernel (mean of squares, rsqrt, the weight
multiply), with the residual add before it and even the embedding lookup fused in and recomputed
(``cpp_fused_..._add_embedding_mean_mul_pow_rsqrt_*``). RoPE: the rotate-half of q and of k (``cat_neg_slice``)
are two small kernels, and one larger kernel per layer computes cos/sin, applies them, repeats the 2
key/value heads to 4 (``repeat_kv``: expand and clone) and builds the causal mask, which eager skips but HF
builds explicitly under torch.compile, for one extern SDPA call per layer. SwiGLU's ``silu(gate) * up`` is one
pointwise kernel between the matmuls, shared by both layers. With ``--dtype bf16`` the same kernels
compute in float32 and round to bfloat16 at their stores.
"""

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

VOCAB = 1024


def get_model() -> torch.nn.Module:
    config = LlamaConfig(
        hidden_size=128,
        intermediate_size=344,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=256,
        bos_token_id=0,
        eos_token_id=0,
        attention_dropout=0.0,
        use_cache=False,
    )
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def get_inputs() -> dict[str, torch.Tensor]:
    input_ids = torch.randint(0, VOCAB, (2, 64))
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
