"""Stage 4 of the pipeline (bench), hand-written side: what one launch computes, as *concepts* (step 1 of
problem.py's).

The ATen ops a kernel's origins name become concepts ("softmax", "layernorm", "convolution", "batchnorm", ...):
layout ops (views, transposes, dtype conversions) are dropped and the pieces of a decomposed op (softmax's exp,
sub, amax) fold into the op. Here are the words of that vocabulary and ``concepts_of``, which applies them.
"""

from __future__ import annotations

import re

from ..records import KernelRecord

# ATen ops that only move or reinterpret data, and dtype conversions: nothing to hand-write.
LAYOUT_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "t", "permute", "transpose", "select", "slice", "expand",
    "unsqueeze", "squeeze", "clone", "as_strided", "alias", "contiguous", "convert_element_type",
    "_to_copy", "copy", "copy_", "detach", "lift_fresh_copy", "full", "empty", "zeros", "split", "cat",
    "split_with_sizes", "arange",
})  # fmt: skip
CONCEPTS = {
    "_softmax": "softmax", "softmax": "softmax", "prepare_softmax_online": "softmax", "amax": "softmax",
    "_softmax_backward_data": "softmax_backward",
    "native_layer_norm": "layernorm", "layer_norm": "layernorm", "var_mean": "layernorm",
    "native_layer_norm_backward": "layernorm_backward",
    "_fused_rms_norm": "rmsnorm", "rms_norm": "rmsnorm",
    "gelu": "gelu", "relu": "relu", "add": "add", "silu": "silu",
    "gelu_backward": "gelu_backward", "threshold_backward": "relu_backward",
    "mm": "matmul", "addmm": "matmul", "bias_addmm": "matmul",
    "_native_batch_norm_legit_no_training": "batchnorm", "_native_batch_norm_legit_functional": "batchnorm_train",
    "_native_batch_norm_legit": "batchnorm_train", "native_batch_norm": "batchnorm_train",
    "native_batch_norm_backward": "batchnorm_backward",
    "max_pool2d_with_indices": "max_pool2d", "max_pool2d_with_indices_backward": "max_pool2d_backward",
    "_low_memory_max_pool_with_offsets": "max_pool2d", "_low_memory_max_pool_offsets_to_indices": "max_pool2d",
    "embedding": "embedding", "embedding_dense_backward": "embedding_backward",
}  # fmt: skip
# Ops that are steps of a decomposed op when that op is in the kernel too.
PARTS_OF = {"softmax": {"exp", "sub", "sum", "div", "amax"}, "rmsnorm": {"pow", "mean", "rsqrt", "mul", "add"},
            "softmax_backward": {"mul", "sum", "sub"},
            "rotary": {"bmm", "cat", "cos", "sin", "mul", "neg", "add"}}  # fmt: skip
# Ops that give a decomposed op away, and the ops around them that belong to it. torch 2.13's C++ kernels
# record GELU and LayerNorm as their pieces (mul, add, erf; var_mean, sub, rsqrt, ...), where Triton kernels
# (torch 2.11) record aten.gelu and aten.native_layer_norm. An add next to them (a residual) is then hidden.
DECOMPOSED = {
    "erf": ("gelu", {"mul", "add"}),
    "tanh": ("gelu_tanh", {"mul", "add", "pow"}),
    "var_mean": ("layernorm", {"sub", "rsqrt", "mul", "add"}),
    # RMSNorm as models write it (HF Llama: w * x * rsqrt(mean(x**2) + eps)); after var_mean, which takes a
    # LayerNorm's rsqrt first
    "rsqrt": ("rmsnorm", {"pow", "mean", "mul", "add"}),
    # rotary embedding as HF models write it: x * cos + cat(-x2, x1) * sin, with cos and sin of positions x
    # inverse frequencies (a bmm Inductor computes inside the pointwise kernel)
    "cos": ("rotary", {"sin", "cat", "neg", "mul", "add", "bmm"}),
    # SiLU as torch 2.13's C++ kernels record it (seen 2.13.0, CPU): x / (1 + exp(-x)), its mul kept (SwiGLU's gate)
    "neg": ("silu", {"exp", "add", "div", "reciprocal"}),
}
# Ops that must come with a marker for it to give its op away: a negation alone is no SiLU, a tanh or erf alone
# (``torch.tanh(linear(x))``) no GELU.
DECOMPOSED_WITH = {"neg": frozenset({"exp"}), "tanh": frozenset({"mul", "add"}), "erf": frozenset({"mul", "add"})}
# A formula the model wrote out (GPT-2's NewGELU: 0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3))); Llama's
# RMSNorm with its eps add) leaves its own adds and muls among the kernel's source nodes and name. Per marker
# op found in the source nodes: the adds that belong to the formula rather than to a residual.
FORMULA_ADDS = {"tanh": 2, "erf": 1, "rsqrt": 1, "cos": 1}
# Ops a generated kernel's origins name although the work is an extern call's (a convolution's input made
# in the layout cuDNN wants, the ops of a chain that feeds attention): the kernel only moves data for them.
EXTERN_ORIGINS = frozenset({
    "convolution", "convolution_backward", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
})  # fmt: skip
# Building a mask from indices (arange, compare, where): part of the attention it feeds.
MASK_OPS = frozenset({
    "arange", "le", "lt", "ge", "gt", "scalar_tensor", "where",
    "new_ones", "bitwise_and", "bitwise_or", "index",  # transformers 5's vmapped mask functions
})  # fmt: skip
# What a matmul template's code computes besides the product: a concept its origins name stays only where
# its math is in the code (the origins of the view A is read through name the ops that made A, such as the
# RMSNorm or SwiGLU before a projection, which ran in a kernel of their own).
TEMPLATE_MARKERS = {"gelu": "erf", "gelu_tanh": "tanh", "silu": "sigmoid", "relu": "maximum", "rmsnorm": "rsqrt",
                    "layernorm": "rsqrt", "softmax": "exp", "rotary": "cos("}  # fmt: skip
# Math a concept needs in a Triton kernel's source: a kernel whose source lacks it does not compute it.
SOURCE_MARKERS = {"rotary": "cos(", "gelu": "erf", "gelu_tanh": "tanh"}
# Ops of batch norm that the concept of a backward kernel absorbs (the saved statistics recomputed).
BATCHNORM_FORWARD = frozenset({"batchnorm", "batchnorm_train"})
# Vectors of the row width that a norm reads for itself (its weight, and LayerNorm's bias).
NORM_VECTORS = {"rmsnorm": 1, "layernorm": 2}


def op_name(aten_op: str) -> str:
    """``aten.native_layer_norm.default`` -> ``native_layer_norm``."""
    parts = aten_op.split(".")
    if parts[0] in ("aten", "prims", "torch", "ops") and len(parts) > 1:
        parts = parts[1:] if parts[0] != "torch" else parts[2:] if parts[1] == "ops" else parts[1:]
    if parts and parts[0] in ("aten", "prims"):
        parts = parts[1:]
    return parts[0] if parts else aten_op


def concepts_of(
    aten_ops: tuple[str, ...], *, template: bool, source: str = "", extern: bool = False
) -> list[str]:
    names = [op_name(op) for op in aten_ops]
    if not extern:
        names = [n for n in names if n not in EXTERN_ORIGINS]
        if "where" in names and "arange" in names:
            names = [n for n in names if n not in MASK_OPS]
    for marker, (activation, parts) in DECOMPOSED.items():
        if (marker in names and DECOMPOSED_WITH.get(marker, frozenset()) <= set(names)
                and not any(CONCEPTS.get(n) == activation for n in names if n != marker)):
            names = [activation if n == marker else n for n in names if n not in parts]
    found: list[str] = []
    for name in names:
        if name in LAYOUT_OPS:
            continue
        concept = CONCEPTS.get(name, name)
        if concept == "matmul" and not (template or extern):
            concept = "add"  # a pointwise kernel fused with an addmm does its bias add
        if concept == "gelu" and "tanh" in source and "erf" not in source:
            concept = "gelu_tanh"
        if concept not in found:
            found.append(concept)
    if source and not template:
        found = [c for c in found if c not in SOURCE_MARKERS or SOURCE_MARKERS[c] in source]
    absorbed = set().union(*(PARTS_OF.get(c, set()) for c in found))
    kept = [c for c in found if c not in absorbed or c in PARTS_OF]
    if template and "addmm" in names and "add" not in kept:
        kept.append("add")  # the addmm template fuses its bias add
    return kept


def written_formulas(kernel: KernelRecord) -> list[str]:
    """The decomposed ops (FORMULA_ADDS' markers) whose formula the model's own code wrote out, once per time
    it is written (a kernel launched once per layer lists every layer's nodes)."""
    return [m for m in FORMULA_ADDS for node in kernel.source_nodes if re.fullmatch(rf"{m}(_\d+)?", node)]
