"""Stage 1 of the pipeline (capture), in the model process: scaled-dot-product attention in a GPU preview.

On a CPU build, ``scaled_dot_product_attention`` always picks its math form. ``sdpa_for_cuda`` (registered for
AutogradCUDA by ``gpu_preview_device.install``) chooses the backend as CUDA's ``sdp_utils`` does on sm_90
(``sdp_choice``) and writes the composite as attention.cpp does; the fused kernels it leads to run on the CPU
(``efficient_on_cpu``, ``flash_on_cpu``, ``cudnn_on_cpu``) when the previewed graph runs. How and why:
``gpu_preview.py``'s docstring.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from .compat import alloc_with_matching_layout, sdp_priority_order

FLASH, EFFICIENT, MATH, CUDNN = 1, 2, 0, 3  # torch's SDPBackend values
DEFAULT_SDP_ORDER = [FLASH, EFFICIENT, MATH, CUDNN, 4]


def sdp_order(major: int, minor: int) -> list[int]:
    """The backends CUDA's ``sdp_utils.priority_order`` tries, in order: the user's order if they set one, else
    cuDNN first on sm 9.0 / 10.0 (``check_prefer_cudnn_attention``: the cuDNN of torch 2.11/2.13's CUDA wheels
    qualifies; ``TORCH_CUDNN_SDPA_DEPRIORITIZED`` keeps the default)."""
    order = sdp_priority_order()
    deprioritized = os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "0") not in ("", "0")
    if order == DEFAULT_SDP_ORDER and (major, minor) in ((9, 0), (10, 0)) and not deprioritized:
        return [CUDNN, FLASH, EFFICIENT, MATH]
    return order


def sdp_choice(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, enable_gqa: bool,
               dropout_p: float = 0.0, is_causal: bool = False, major: int = 9, minor: int = 0) -> int:  # fmt: skip
    """The backend CUDA's ``select_sdp_backend`` picks on the GPU for these inputs (the common dense cases)."""
    flags = torch.backends.cuda
    dense = q.dim() == k.dim() == v.dim() == 4 and not (q.is_nested or k.is_nested or v.is_nested)
    head = q.size(-1)
    same_heads = dense and q.size(1) == k.size(1) == v.size(1)
    gqa = dense and enable_gqa and k.size(1) == v.size(1) and q.size(1) % k.size(1) == 0  # grouped query heads
    half = q.dtype in (torch.float16, torch.bfloat16) and q.dtype == k.dtype == v.dtype
    deterministic = torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
    for backend in sdp_order(major, minor):
        if backend == CUDNN and flags.cudnn_sdp_enabled() and dense and half and (same_heads or gqa) \
                and head == k.size(-1) and head <= 256 and v.size(-1) <= 256 and head % 8 == 0 \
                and v.size(-1) % 8 == 0 and k.size(-2) != 1 and not (q.size(-2) == 1 and dropout_p) \
                and not deterministic:  # fmt: skip
            return CUDNN
        if backend == FLASH and flags.flash_sdp_enabled() and dense and mask is None and half and head <= 256 \
                and head == k.size(-1) == v.size(-1) and (same_heads or gqa) \
                and not (is_causal and q.size(-2) != k.size(-2)):  # fmt: skip
            return FLASH
        if backend == EFFICIENT and flags.mem_efficient_sdp_enabled() and same_heads \
                and (half or q.dtype == torch.float32) and head == k.size(-1) and head % 8 == 0 \
                and v.size(-1) % 8 == 0:  # fmt: skip
            return EFFICIENT
        if backend == MATH and flags.math_sdp_enabled():
            return MATH
    return MATH


def sdpa_for_cuda(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
          is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:  # fmt: skip
    """aten::scaled_dot_product_attention for CUDA tensors, as attention.cpp's composite writes it (torch 2.11, whose
    graphs in tests/fixtures/{gpt2_small_ro,llama_small_bf16} show ``where(mask, 0.0, -inf)``):
    the backend's choice, the boolean mask turned additive (cuDNN's with -65504 for -inf), memory-efficient
    attention's mask padded and expanded, flash's head dim padded to 8."""
    aten = torch.ops.aten
    choice = sdp_choice(q, k, v, attn_mask, enable_gqa, dropout_p, is_causal)
    lse = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    attn_mask = _additive_mask(attn_mask, q.dtype, -65504.0 if choice == CUDNN else -math.inf)
    if choice == CUDNN:
        return aten._scaled_dot_product_cudnn_attention(q, k, v, attn_mask, lse, dropout_p, is_causal, False,
                                                        scale=scale)[0]  # fmt: skip
    if choice == EFFICIENT:
        if attn_mask is not None:
            attn_mask = _preprocess_mask(attn_mask, q, k)
        return aten._scaled_dot_product_efficient_attention(q, k, v, attn_mask, lse, dropout_p, is_causal,
                                                            scale=scale)[0]  # fmt: skip
    if choice == FLASH:
        width = q.size(-1)
        pad = (8 - width % 8) % 8
        softmax_scale = scale if scale is not None else 1.0 / math.sqrt(width)
        if pad:
            q, k, v = (torch.nn.functional.pad(t, (0, pad)) for t in (q, k, v))
        out = aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, False, scale=softmax_scale)[0]
        return out[..., :width] if pad else out
    return aten.scaled_dot_product_attention.default.decompose(q, k, v, attn_mask, dropout_p, is_causal,
                                                               scale=scale, enable_gqa=enable_gqa)  # fmt: skip


def _additive_mask(mask: torch.Tensor | None, dtype: torch.dtype, masked: float) -> torch.Tensor | None:
    """attention.cpp's ``convert_boolean_attn_mask`` (``masked``: -inf; cuDNN's variant: -65504): a boolean mask
    as ``where(mask, 0, masked)``; any other mask as it is."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask, torch.scalar_tensor(0.0, dtype=dtype, device=mask.device), masked)


def _preprocess_mask(mask: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """attention.cpp's ``preprocess_mask``: a mask whose strides are not multiples of 8 is padded (and sliced
    back), then expanded to (batch, heads, queries, keys)."""
    aligned = all(mask.stride(i) % 8 == 0 for i in range(mask.dim() - 1)) and mask.stride(-1) == 1
    if not aligned:
        size = mask.size(-1)
        mask = torch.nn.functional.pad(mask, (0, 8 - size % 8))[..., :size]
    return mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))


def efficient_on_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, compute_lse: bool,
                     dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, ...]:  # fmt: skip
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, bias, dropout_p, is_causal, scale=scale)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.int64)
    return out, lse, zero, zero


def flash_on_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0, is_causal: bool = False,
                 return_debug_mask: bool = False, scale: float | None = None) -> tuple[Any, ...]:  # fmt: skip
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, None, dropout_p, is_causal, scale=scale)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.int64)
    empty = torch.empty(0)
    return out, lse, None, None, q.size(-2), k.size(-2), zero, zero, empty


def cudnn_on_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, compute_lse: bool,
                 dropout_p: float = 0.0, is_causal: bool = False, return_debug_mask: bool = False,
                 scale: float | None = None) -> tuple[Any, ...]:  # fmt: skip
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, bias, dropout_p, is_causal, scale=scale)
    laid_out = alloc_with_matching_layout(q, tuple(out.shape))  # the layout cuDNN's meta function promises
    laid_out.copy_(out)
    lse = torch.empty((q.size(0), q.size(1), q.size(2), 1), dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.int64)
    empty = torch.empty(0)
    return laid_out, lse, empty, empty, q.size(2), k.size(2), zero, zero, empty
