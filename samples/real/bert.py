"""HuggingFace transformers BERT (BertModel with its pooler), random weights from a small config: 2 layers, width
128, 4 heads, an MLP of width 512, a 1024-token vocabulary; batch 2, sequence 48. Called with keywords:
``input_ids``, ``token_type_ids`` (two segments) and an ``attention_mask`` that pads the second
sequence after 30 tokens, the way a tokenizer pads a batch. Attention is ``attn_implementation="sdpa"``
(torch's scaled_dot_product_attention); dropout is 0 so eager, compiled and float64 runs agree.

What to look for: one graph of only 5 C++ kernels (the LayerNorm and GELU kernels are launched again by the
second layer) around extern ``addmm`` calls, which carry the biases. The three embeddings (word, position, token type) are summed and
normalised in one kernel; the 0/1 padding mask becomes an additive float mask over the keys in one kernel,
once, and both layers' extern SDPA calls take it as ``attn_mask``; each LayerNorm is a reduction fused with
the residual add before it; the erf-GELU of the MLP is a pointwise kernel between the matmuls; the pooler
is an ``addmm`` on the first token and a tanh kernel. With ``--train``: a forward and a backward graph.
"""

import torch
from transformers import AutoModel, BertConfig

VOCAB = 1024


def get_model() -> torch.nn.Module:
    config = BertConfig(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        vocab_size=VOCAB,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return AutoModel.from_config(config, attn_implementation="sdpa").eval()


def get_inputs() -> dict[str, torch.Tensor]:
    batch, seq = 2, 48
    input_ids = torch.randint(1, VOCAB, (batch, seq))
    attention_mask = torch.ones(batch, seq, dtype=torch.long)
    attention_mask[1, 30:] = 0  # the second sequence is 30 tokens, then padding
    input_ids[1, 30:] = 0  # the pad token
    token_type_ids = torch.zeros(batch, seq, dtype=torch.long)
    token_type_ids[:, seq // 2 :] = 1  # a second segment, as for a sentence pair
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
