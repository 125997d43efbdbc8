"""Stage 4 of the pipeline (bench), hand-written side: attention (flash-attention forward, causal or not).

One kernel in the style of Triton's fused-attention tutorial (forward only). Each program owns BLOCK_M
query rows of one (batch, head), keeps them in registers and walks over the keys and values in blocks
of BLOCK_N: scores S = Q K^T for the block, a running row maximum m_i and row sum l_i (online softmax,
``exp2`` with log2(e) folded into the 1/sqrt(head_dim) scale, so each score costs one FMA before the
exponential) and an fp32 accumulator acc = P V rescaled whenever the maximum grows. The seq x seq score
matrix never leaves registers, so the kernel reads Q, K, V once per query block and writes O once.
The key loop is split by what it must mask, so the common blocks pay for no mask at all: full key
blocks run unmasked, and only the last, partial block (seq not a multiple of BLOCK_N) masks keys past
the end; with ``causal`` the blocks entirely below the diagonal run unmasked, the blocks above it are
never visited (about half the work), and only the blocks on the diagonal apply the causal mask (the
tutorial's two-stage loop, which needs BLOCK_N to divide BLOCK_M). The head dimension is padded to a
power of two of at least 16 (what ``tl.dot`` needs) with masked loads, and every tensor is addressed
through its four strides, so q, k and v may be strided views into one packed qkv buffer. Half types
run both products on tensor cores with fp32 accumulation, casting P to V's dtype before P V as the
tutorial does; float32 uses exact ("ieee") products unless torch allows TF32. On a GPU a small
autotune list (the tutorial's) picks the block sizes, stages and warps per (seq, head_dim, causal),
pruned to what fits in shared memory and, for exact float32 products (FMA units, not tensor cores),
to eight-warp tiles of at most 64 x 64, the ones that do not spill registers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, interpreting

# Masked scores get this instead of -inf, so that a row whose block is fully masked computes
# exp2(-1e6 - m) = 0 rather than exp2(-inf - -inf) = NaN.
MASKED_SCORE: tl.constexpr = tl.constexpr(-1.0e6)


@triton.jit
def _load_tile(
    pointers,
    rows,
    seq,
    offs_d,
    MASK_ROWS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
):
    """Load a [rows, HEAD_DIM_PADDED] tile, masking rows past seq and padded columns only when needed."""
    if MASK_ROWS and HEAD_DIM != HEAD_DIM_PADDED:
        tile = tl.load(pointers, mask=(rows < seq)[:, None] & (offs_d < HEAD_DIM)[None, :], other=0.0)
    elif MASK_ROWS:
        tile = tl.load(pointers, mask=(rows < seq)[:, None], other=0.0)
    elif HEAD_DIM != HEAD_DIM_PADDED:
        tile = tl.load(pointers, mask=(offs_d < HEAD_DIM)[None, :], other=0.0)
    else:
        tile = tl.load(pointers)
    return tile


@triton.jit
def _attention_key_blocks(
    acc,
    row_sum,
    row_max,
    q,
    k_base,
    v_base,
    stride_k_seq,
    stride_k_dim,
    stride_v_seq,
    stride_v_dim,
    offs_m,
    offs_n,
    offs_d,
    seq,
    key_start,
    key_end,
    qk_scale,
    CAUSAL_MASK: tl.constexpr,
    KEY_MASK: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """Fold the key blocks [key_start, key_end) into (acc, row_sum, row_max) by online softmax."""
    for start_n in range(key_start, key_end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        keys = start_n + offs_n
        k_pointers = k_base + keys[:, None] * stride_k_seq + offs_d[None, :] * stride_k_dim
        k = _load_tile(k_pointers, keys, seq, offs_d, KEY_MASK, HEAD_DIM, HEAD_DIM_PADDED)
        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        if CAUSAL_MASK:
            # Keys past seq only meet rows past seq here, whose output is never stored.
            qk = tl.where(offs_m[:, None] >= keys[None, :], qk * qk_scale, MASKED_SCORE)
            new_max = tl.maximum(row_max, tl.max(qk, 1))
            qk -= new_max[:, None]
        elif KEY_MASK:
            qk = tl.where(keys[None, :] < seq, qk * qk_scale, MASKED_SCORE)
            new_max = tl.maximum(row_max, tl.max(qk, 1))
            qk -= new_max[:, None]
        else:
            new_max = tl.maximum(row_max, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - new_max[:, None]
        p = tl.math.exp2(qk)
        correction = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p, 1)
        acc = acc * correction[:, None]
        v_pointers = v_base + keys[:, None] * stride_v_seq + offs_d[None, :] * stride_v_dim
        v = _load_tile(v_pointers, keys, seq, offs_d, KEY_MASK, HEAD_DIM, HEAD_DIM_PADDED)
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        row_max = new_max
    return acc, row_sum, row_max


@triton.jit
def flash_attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    stride_q_batch,
    stride_q_head,
    stride_q_seq,
    stride_q_dim,
    stride_k_batch,
    stride_k_head,
    stride_k_seq,
    stride_k_dim,
    stride_v_batch,
    stride_v_head,
    stride_v_seq,
    stride_v_dim,
    stride_o_batch,
    stride_o_head,
    stride_o_seq,
    stride_o_dim,
    heads,
    seq,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    if CAUSAL:
        tl.static_assert(BLOCK_M % BLOCK_N == 0)
        # The blocks nearest the end of seq have the most keys to visit: launch them first.
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = (batch_head // heads).to(tl.int64)
    head = (batch_head % heads).to(tl.int64)
    q_base = q_ptr + batch * stride_q_batch + head * stride_q_head
    k_base = k_ptr + batch * stride_k_batch + head * stride_k_head
    v_base = v_ptr + batch * stride_v_batch + head * stride_v_head
    o_base = o_ptr + batch * stride_o_batch + head * stride_o_head

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    q_pointers = q_base + offs_m[:, None] * stride_q_seq + offs_d[None, :] * stride_q_dim
    q = _load_tile(q_pointers, offs_m, seq, offs_d, True, HEAD_DIM, HEAD_DIM_PADDED)

    row_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PADDED], dtype=tl.float32)
    if CAUSAL:
        # Below the diagonal every key is visible to every row of the block and lies inside seq.
        diagonal_start = start_m * BLOCK_M
        acc, row_sum, row_max = _attention_key_blocks(
            acc, row_sum, row_max, q, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq,
            stride_v_dim, offs_m, offs_n, offs_d, seq, 0, diagonal_start, qk_scale,
            False, False, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_N, DOT_PRECISION,
        )  # fmt: skip
        acc, row_sum, row_max = _attention_key_blocks(
            acc, row_sum, row_max, q, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq,
            stride_v_dim, offs_m, offs_n, offs_d, seq, diagonal_start, tl.minimum(diagonal_start + BLOCK_M, seq),
            qk_scale, True, True, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_N, DOT_PRECISION,
        )  # fmt: skip
    else:
        full_blocks_end = (seq // BLOCK_N) * BLOCK_N
        acc, row_sum, row_max = _attention_key_blocks(
            acc, row_sum, row_max, q, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq,
            stride_v_dim, offs_m, offs_n, offs_d, seq, 0, full_blocks_end, qk_scale,
            False, False, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_N, DOT_PRECISION,
        )  # fmt: skip
        # At most one partial block, masked; the loop is empty when BLOCK_N divides seq.
        acc, row_sum, row_max = _attention_key_blocks(
            acc, row_sum, row_max, q, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq,
            stride_v_dim, offs_m, offs_n, offs_d, seq, full_blocks_end, seq, qk_scale,
            False, True, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_N, DOT_PRECISION,
        )  # fmt: skip

    out = acc / row_sum[:, None]
    o_pointers = o_base + offs_m[:, None] * stride_o_seq + offs_d[None, :] * stride_o_dim
    o_mask = (offs_m < seq)[:, None] & (offs_d < HEAD_DIM)[None, :]
    tl.store(o_pointers, out.to(o_ptr.dtype.element_ty), mask=o_mask)


AUTOTUNE_CONFIGS = [
    triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_stages=stages, num_warps=warps)
    for block_m in (64, 128)
    for block_n in (32, 64, 128)
    for stages in (2, 3, 4)
    for warps in (4, 8)
]

# Shared memory a config may plan for (Hopper has 227 KiB per block; leave room for layout conversions).
SHARED_MEMORY_BUDGET = 160 * 1024


def _suits_dot_units(config: triton.Config, tensor_cores: bool) -> bool:
    tile = config.kwargs["BLOCK_M"] * config.kwargs["BLOCK_N"]
    if tensor_cores:
        # The tutorial's filter for Hopper: eight warps only pay off on the largest tile.
        return not (tile < 128 * 128 and config.num_warps == 8)
    # Exact float32 products run on the FMA units with the operands spread over the threads: past a
    # 64 x 64 tile or under eight warps they spill registers (measured with ptxas for sm_90).
    return tile <= 64 * 64 and config.num_warps == 8


def _prune_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    """Keep the configs that work (causal needs BLOCK_N | BLOCK_M), fit and can pay off for this call."""
    args = {**named_args, **kwargs}
    seq, head_dim_padded, causal = args["seq"], args["HEAD_DIM_PADDED"], args["CAUSAL"]
    itemsize = args["q_ptr"].element_size()
    tensor_cores = itemsize < 4 or args["DOT_PRECISION"] != "ieee"
    useful_block_m = max(64, triton.next_power_of_2(seq))

    def fits(config: triton.Config) -> bool:
        block_m, block_n = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
        kv_stages = 2 * block_n * head_dim_padded * itemsize * config.num_stages
        return kv_stages + block_m * head_dim_padded * itemsize <= SHARED_MEMORY_BUDGET

    usable = [
        c
        for c in configs
        if (not causal or c.kwargs["BLOCK_N"] <= c.kwargs["BLOCK_M"])
        and c.kwargs["BLOCK_M"] <= useful_block_m
    ]
    chosen = [c for c in usable if fits(c) and _suits_dot_units(c, tensor_cores)]
    if chosen:
        return chosen
    return [
        min(usable, key=lambda c: (c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"], c.num_stages, -c.num_warps))
    ]


flash_attention_tuned = TunedKernel(
    flash_attention_kernel,
    AUTOTUNE_CONFIGS,
    key=["seq", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"],
    prune=_prune_configs,
)

# One small config under the interpreter, where every program costs CPU time.
INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(head_dim)) v for q, k, v of shape [batch, heads, seq, head_dim], any strides."""
    batch, heads, seq, head_dim = q.shape
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k, v must share one shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if head_dim > 256:
        raise ValueError(f"head_dim {head_dim} is above the 256 this kernel supports")
    o = torch.empty((batch, heads, seq, head_dim), device=q.device, dtype=q.dtype)
    if o.numel() == 0:
        return o
    tf32 = q.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32 and not interpreting()
    launch_args = (
        q, k, v, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        heads, seq, 1.0 / math.sqrt(head_dim) * 1.4426950408889634,
    )  # fmt: skip
    constants = dict(
        HEAD_DIM=head_dim,
        HEAD_DIM_PADDED=max(16, triton.next_power_of_2(head_dim)),
        CAUSAL=causal,
        DOT_PRECISION="tf32" if tf32 else "ieee",
    )
    if interpreting():
        programs = (triton.cdiv(seq, INTERPRETER_CONFIG["BLOCK_M"]), batch * heads)
        flash_attention_kernel[programs](*launch_args, **constants, **INTERPRETER_CONFIG)
    else:

        def grid(meta: Mapping[str, Any]) -> tuple[int, int]:
            return (triton.cdiv(seq, meta["BLOCK_M"]), batch * heads)

        flash_attention_tuned[grid](*launch_args, **constants)
    return o


def make_qkv(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v as strided [batch, heads, seq, head_dim] views into one packed qkv buffer, as models pass them."""
    batch, heads, seq, head_dim = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
    qkv = torch.randn((batch, seq, 3, heads, head_dim), generator=generator, device=device, dtype=dtype)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v


IMPLEMENTATIONS: dict[str, Implementation] = {
    "flash_attention": Implementation(
        run=lambda q, k, v: attention(q, k, v),
        reference=lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        make_inputs=make_qkv,
        kernels=(flash_attention_kernel, _attention_key_blocks, _load_tile),
    ),
    "flash_attention_causal": Implementation(
        run=lambda q, k, v: attention(q, k, v, causal=True),
        reference=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        make_inputs=make_qkv,
        kernels=(flash_attention_kernel, _attention_key_blocks, _load_tile),
    ),
}
