"""HuggingFace transformers GPT-2 (GPT2LMHeadModel), random weights from a small config: 2 layers, width 128,
4 heads, a 1024-token vocabulary; batch 2, sequence 64. Called with keywords: ``input_ids``,
``attention_mask`` (all ones) and ``labels``, so its output holds the loss as well as the logits.
Attention is ``attn_implementation="sdpa"`` (torch's scaled_dot_product_attention); dropout is 0 and
``use_cache=False`` (no key/value cache in the output), so eager, compiled and float64 runs agree.

What to look for: a graph break inside transformers, not in this file. GPT2LMHeadModel's class name does not
end in ``ForCausalLM``, so HF's ``loss_function`` logs a warning (``logger.warning_once``) on every call, and
Dynamo cannot trace logging: three break records (the wrapper frame that restarts, the model's
``forward``, ``loss_function``), five Dynamo frames, and two graphs, the model up to the logits and the
loss (``ForCausalLMLoss``: log-softmax and NLL over the shifted labels in one C++ kernel). In the model's
graph: the token and position embeddings summed and normalised by the first LayerNorm in one kernel; the
causal mask that eager skips (it sees no padding) is built explicitly under torch.compile (HF cannot look
at the mask's values while tracing) and passed to one extern SDPA call per layer; GPT-2's ``Conv1D``
projections are extern ``addmm`` calls; each LayerNorm a reduction with the residual add before it (the
embedding lookup recomputed inside rather than stored); the tanh-GELU ("gelu_new") one pointwise kernel,
shared by both layers; the LM head an extern ``mm`` on the embedding matrix it shares. With ``--train``:
a forward and a backward graph for each of the two compiled frames.
"""

import torch
from transformers import AutoModelForCausalLM, GPT2Config

VOCAB = 1024


def get_model() -> torch.nn.Module:
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
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def get_inputs() -> dict[str, torch.Tensor]:
    input_ids = torch.randint(0, VOCAB, (2, 64))
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": input_ids}
