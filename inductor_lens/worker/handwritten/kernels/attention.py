"""Stage 4 of the pipeline (bench), hand-written side: attention (flash-attention forward and backward, causal or not).

Forward, in the style of Triton's fused-attention tutorial. Each program owns BLOCK_M
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
through its four strides, so q, k and v may be strided views into one packed qkv buffer. With
``STORE_LSE`` (a compile-time switch, so the plain forward compiles without it) the kernel also writes
each row's log-sum-exp in natural-log units, ``m_i + log2(l_i)`` times ln 2, laid out [batch, heads, seq]
as SDPA's flash kernel returns it: all the backward needs besides O.

Backward, as the tutorial's: a small kernel first computes delta = rowsum(O * dO) in fp32 and the
log-sum-exp in base 2, both as contiguous [batch * heads, seq] rows (so the main kernel needs no lse
strides, and the efficient kernel's lse rows padded to a multiple of 32 are read as they are). The main
kernel then runs in two phases per program, with no atomics (deterministic, also in fp32): it owns a
key block of BLOCK_OWN keys and accumulates dK = scale * dS^T Q and dV = P^T dO over the query blocks
that see those keys, BLOCK_STEP queries at a time, recomputing P = exp2(S - lse) from the stored
log-sum-exp and dS = P * (dP - delta) with dP = dO V^T; then it owns the query block of the same index
and accumulates dQ = scale * dS K over key blocks of BLOCK_STEP. Each gradient is written once. With
``causal`` the pairing balances the work: key block i sees seq - i * BLOCK_OWN queries and query block i
sees (i + 1) * BLOCK_OWN keys, so every program visits about seq + BLOCK_OWN rows in all. The loops are
split as the forward's: only the steps on the diagonal apply the causal mask and only the last, partial
step masks its loads. Rows past seq load as zeros (dO and delta zero, lse zero), so they add nothing to
dK and dV without a mask, and keys past seq are masked out of P where they could overflow it.

Input precision of the dot products. Half types run on tensor cores with fp32 accumulation, casting P
and dS to the input dtype before their products as the tutorial does. float32 runs ``tf32x3`` on
Ampere and newer NVIDIA GPUs: each operand split into a TF32 high part and a TF32 remainder, three
tensor-core products (the remainder x remainder term, about 2**-22 relative, dropped), so errors stay at
float32's level (well inside the 1e-4 tolerance) at tensor-core speed. That is what the kernel is compared
against: SDPA's memory-efficient kernel, the backend torch picks for float32 (flash and cuDNN take half
types only), runs its float32 products as CUTLASS ``OpMultiplyAddFastF32`` (3xTF32 on tensor cores,
``DefaultGemmType`` in mem_eff_attention/gemm_kernel_utils.h) on compute capability 8.0 and above,
whatever ``torch.backends.cuda.matmul.allow_tf32`` says. The forward's exact ("ieee") products before
this ran as FMA loops in Triton, not on tensor cores: 2.3x slower than SDPA's kernel at the transformer
block's shape (8 x 8 x 256 x 64, fp32, H200). With ``allow_tf32`` set the kernels use plain TF32, as
torch's matmuls then do; older GPUs, AMD GPUs and Triton's interpreter use exact products.

On a GPU small autotune lists (the tutorial's block sizes, stages and warps) pick the configuration per
(seq, head_dim, causal, input precision), pruned to what fits in shared memory and to tiles whose fp32
scores and accumulators leave room in the registers: for the half types the tutorial's own filter, for
float32 on tensor cores about half of that (the fp32 operands, and tf32x3's two parts of each, take the
rest; an estimate, not yet measured on a GPU), and for exact float32 products (FMA units) eight-warp
tiles of at most 64 x 64, the ones that did not spill registers (measured with ptxas for sm_90). The
backward keeps the tutorial's four warps, eight only for blocks that four would spill. The expected
winners, not yet measured: for float32 at the block's shape the forward's 64 x 64 tile with four warps
(CUTLASS's memory-efficient kernel's tile, 256 programs for the 132 SMs of an H200, two per SM), and a
backward key block of 64 with query steps of 32 and four warps.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreter, interpreting

# Masked scores get this instead of -inf, so that a row whose block is fully masked computes
# exp2(-1e6 - m) = 0 rather than exp2(-inf - -inf) = NaN.
MASKED_SCORE: tl.constexpr = tl.constexpr(-1.0e6)
LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)
LN2: tl.constexpr = tl.constexpr(0.6931471805599453)


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
def _load_rows(pointers, rows, seq, MASK_ROWS: tl.constexpr):
    """Load one fp32 value per row (lse, delta), zero past seq only when the block may pass it."""
    return tl.load(pointers, mask=rows < seq, other=0.0) if MASK_ROWS else tl.load(pointers)
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
    lse_ptr,
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
    STORE_LSE: tl.constexpr,
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
    if STORE_LSE:
        # row_max is in base-2 units (log2(e) is folded into qk_scale): back to natural logs, as torch's.
        lse_pointers = lse_ptr + batch_head.to(tl.int64) * seq + offs_m
        tl.store(lse_pointers, (row_max + tl.math.log2(row_sum)) * LN2, mask=offs_m < seq)


@triton.jit
def _attention_backward_rows_kernel(
    o_ptr,
    do_ptr,
    lse_ptr,
    delta_ptr,
    lse2_ptr,
    stride_o_batch,
    stride_o_head,
    stride_o_seq,
    stride_o_dim,
    stride_do_batch,
    stride_do_head,
    stride_do_seq,
    stride_do_dim,
    stride_lse_batch,
    stride_lse_head,
    stride_lse_seq,
    heads,
    seq,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """delta = rowsum(o * do) and the log-sum-exp in base 2, as contiguous fp32 [batch * heads, seq] rows."""
    batch_head = tl.program_id(1)
    batch = (batch_head // heads).to(tl.int64)
    head = (batch_head % heads).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    o_base = o_ptr + batch * stride_o_batch + head * stride_o_head
    do_base = do_ptr + batch * stride_do_batch + head * stride_do_head
    o_pointers = o_base + offs_m[:, None] * stride_o_seq + offs_d[None, :] * stride_o_dim
    do_pointers = do_base + offs_m[:, None] * stride_do_seq + offs_d[None, :] * stride_do_dim
    o = _load_tile(o_pointers, offs_m, seq, offs_d, True, HEAD_DIM, HEAD_DIM_PADDED).to(tl.float32)
    do = _load_tile(do_pointers, offs_m, seq, offs_d, True, HEAD_DIM, HEAD_DIM_PADDED).to(tl.float32)
    lse_base = lse_ptr + batch * stride_lse_batch + head * stride_lse_head
    lse = tl.load(lse_base + offs_m * stride_lse_seq, mask=offs_m < seq, other=0.0)
    rows = batch_head.to(tl.int64) * seq + offs_m
    tl.store(delta_ptr + rows, tl.sum(o * do, axis=1), mask=offs_m < seq)
    tl.store(lse2_ptr + rows, lse * LOG2E, mask=offs_m < seq)


@triton.jit
def _attention_dkdv_steps(
    dk,
    dv,
    k,
    v,
    q_base,
    do_base,
    lse2_base,
    delta_base,
    stride_q_seq,
    stride_q_dim,
    stride_do_seq,
    stride_do_dim,
    offs_n,
    offs_step,
    offs_d,
    seq,
    query_start,
    query_end,
    qk_scale,
    CAUSAL_MASK: tl.constexpr,
    MASK_ROWS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    BLOCK_STEP: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """Fold the query blocks [query_start, query_end) into the key block's (dk, dv); dk still lacks the scale.

    Transposed scores (keys x queries), so that dV = P^T dO and dK = dS^T Q need no transposed result.
    """
    for start_m in range(query_start, query_end, BLOCK_STEP):
        start_m = tl.multiple_of(start_m, BLOCK_STEP)
        queries = start_m + offs_step
        q_pointers = q_base + queries[:, None] * stride_q_seq + offs_d[None, :] * stride_q_dim
        q = _load_tile(q_pointers, queries, seq, offs_d, MASK_ROWS, HEAD_DIM, HEAD_DIM_PADDED)
        lse2 = _load_rows(lse2_base + queries, queries, seq, MASK_ROWS)
        qk_t = tl.dot(k, tl.trans(q), input_precision=DOT_PRECISION)
        p_t = tl.math.exp2(qk_t * qk_scale - lse2[None, :])
        if CAUSAL_MASK:
            p_t = tl.where(queries[None, :] >= offs_n[:, None], p_t, 0.0)
        do_pointers = do_base + queries[:, None] * stride_do_seq + offs_d[None, :] * stride_do_dim
        do = _load_tile(do_pointers, queries, seq, offs_d, MASK_ROWS, HEAD_DIM, HEAD_DIM_PADDED)
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
        delta = _load_rows(delta_base + queries, queries, seq, MASK_ROWS)
        dp_t = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=DOT_PRECISION)
    return dk, dv


@triton.jit
def _attention_dq_steps(
    dq,
    q,
    do,
    lse2,
    delta,
    k_base,
    v_base,
    stride_k_seq,
    stride_k_dim,
    stride_v_seq,
    stride_v_dim,
    offs_m,
    offs_step,
    offs_d,
    seq,
    key_start,
    key_end,
    qk_scale,
    CAUSAL_MASK: tl.constexpr,
    KEY_MASK: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    BLOCK_STEP: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """Fold the key blocks [key_start, key_end) into the query block's dq, which still lacks the scale."""
    for start_n in range(key_start, key_end, BLOCK_STEP):
        start_n = tl.multiple_of(start_n, BLOCK_STEP)
        keys = start_n + offs_step
        k_pointers = k_base + keys[:, None] * stride_k_seq + offs_d[None, :] * stride_k_dim
        k = _load_tile(k_pointers, keys, seq, offs_d, KEY_MASK, HEAD_DIM, HEAD_DIM_PADDED)
        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        p = tl.math.exp2(qk * qk_scale - lse2[:, None])
        if CAUSAL_MASK:
            # Keys past seq only meet rows past seq here, whose dq is never stored.
            p = tl.where(offs_m[:, None] >= keys[None, :], p, 0.0)
        elif KEY_MASK:
            # A key past seq scores 0, and exp2(0 - lse) may overflow: inf times its zero k is NaN.
            p = tl.where(keys[None, :] < seq, p, 0.0)
        v_pointers = v_base + keys[:, None] * stride_v_seq + offs_d[None, :] * stride_v_dim
        v = _load_tile(v_pointers, keys, seq, offs_d, KEY_MASK, HEAD_DIM, HEAD_DIM_PADDED)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PRECISION)
    return dq


@triton.jit
def flash_attention_backward_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    do_ptr,
    dq_ptr,
    dk_ptr,
    dv_ptr,
    lse2_ptr,
    delta_ptr,
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
    stride_do_batch,
    stride_do_head,
    stride_do_seq,
    stride_do_dim,
    stride_g_batch,
    stride_g_head,
    stride_g_seq,
    stride_g_dim,
    heads,
    seq,
    sm_scale,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_OWN: tl.constexpr,
    BLOCK_STEP: tl.constexpr,
):
    tl.static_assert(BLOCK_OWN % BLOCK_STEP == 0)
    block = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = (batch_head // heads).to(tl.int64)
    head = (batch_head % heads).to(tl.int64)
    q_base = q_ptr + batch * stride_q_batch + head * stride_q_head
    k_base = k_ptr + batch * stride_k_batch + head * stride_k_head
    v_base = v_ptr + batch * stride_v_batch + head * stride_v_head
    do_base = do_ptr + batch * stride_do_batch + head * stride_do_head
    # dq, dk and dv share one layout.
    grad_offset = batch * stride_g_batch + head * stride_g_head
    lse2_base = lse2_ptr + batch_head.to(tl.int64) * seq
    delta_base = delta_ptr + batch_head.to(tl.int64) * seq
    qk_scale = sm_scale * LOG2E

    start = block * BLOCK_OWN
    offs_own = start + tl.arange(0, BLOCK_OWN)
    offs_step = tl.arange(0, BLOCK_STEP)
    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    grad_pointers = offs_own[:, None] * stride_g_seq + offs_d[None, :] * stride_g_dim
    grad_mask = (offs_own < seq)[:, None] & (offs_d < HEAD_DIM)[None, :]

    # Phase 1: the key block [start, start + BLOCK_OWN) against every query block that sees it.
    k_pointers = k_base + offs_own[:, None] * stride_k_seq + offs_d[None, :] * stride_k_dim
    k = _load_tile(k_pointers, offs_own, seq, offs_d, True, HEAD_DIM, HEAD_DIM_PADDED)
    v_pointers = v_base + offs_own[:, None] * stride_v_seq + offs_d[None, :] * stride_v_dim
    v = _load_tile(v_pointers, offs_own, seq, offs_d, True, HEAD_DIM, HEAD_DIM_PADDED)
    dk = tl.zeros([BLOCK_OWN, HEAD_DIM_PADDED], dtype=tl.float32)
    dv = tl.zeros([BLOCK_OWN, HEAD_DIM_PADDED], dtype=tl.float32)
    if CAUSAL:
        # Queries before the block see none of its keys; those on its diagonal see some.
        unmasked_start = tl.minimum(start + BLOCK_OWN, seq)
        dk, dv = _attention_dkdv_steps(
            dk, dv, k, v, q_base, do_base, lse2_base, delta_base, stride_q_seq, stride_q_dim,
            stride_do_seq, stride_do_dim, offs_own, offs_step, offs_d, seq, start, unmasked_start, qk_scale,
            True, True, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_STEP, DOT_PRECISION,
        )  # fmt: skip
    else:
        unmasked_start = 0
    full_steps_end = unmasked_start + (seq - unmasked_start) // BLOCK_STEP * BLOCK_STEP
    dk, dv = _attention_dkdv_steps(
        dk, dv, k, v, q_base, do_base, lse2_base, delta_base, stride_q_seq, stride_q_dim,
        stride_do_seq, stride_do_dim, offs_own, offs_step, offs_d, seq, unmasked_start, full_steps_end, qk_scale,
        False, False, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_STEP, DOT_PRECISION,
    )  # fmt: skip
    # At most one partial step; its rows past seq load as zeros and add nothing.
    dk, dv = _attention_dkdv_steps(
        dk, dv, k, v, q_base, do_base, lse2_base, delta_base, stride_q_seq, stride_q_dim,
        stride_do_seq, stride_do_dim, offs_own, offs_step, offs_d, seq, full_steps_end, seq, qk_scale,
        False, True, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_STEP, DOT_PRECISION,
    )  # fmt: skip
    tl.store(dk_ptr + grad_offset + grad_pointers, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=grad_mask)
    tl.store(dv_ptr + grad_offset + grad_pointers, dv.to(dv_ptr.dtype.element_ty), mask=grad_mask)

    # Phase 2: the query block [start, start + BLOCK_OWN) against every key block it sees.
    q_pointers = q_base + offs_own[:, None] * stride_q_seq + offs_d[None, :] * stride_q_dim
    q = _load_tile(q_pointers, offs_own, seq, offs_d, True, HEAD_DIM, HEAD_DIM_PADDED)
    do_pointers = do_base + offs_own[:, None] * stride_do_seq + offs_d[None, :] * stride_do_dim
    do = _load_tile(do_pointers, offs_own, seq, offs_d, True, HEAD_DIM, HEAD_DIM_PADDED)
    lse2 = _load_rows(lse2_base + offs_own, offs_own, seq, True)
    delta = _load_rows(delta_base + offs_own, offs_own, seq, True)
    dq = tl.zeros([BLOCK_OWN, HEAD_DIM_PADDED], dtype=tl.float32)
    if CAUSAL:
        # Keys before the block are visible to all of its rows and lie inside seq.
        dq = _attention_dq_steps(
            dq, q, do, lse2, delta, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq, stride_v_dim,
            offs_own, offs_step, offs_d, seq, 0, start, qk_scale,
            False, False, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_STEP, DOT_PRECISION,
        )  # fmt: skip
        dq = _attention_dq_steps(
            dq, q, do, lse2, delta, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq, stride_v_dim,
            offs_own, offs_step, offs_d, seq, start, tl.minimum(start + BLOCK_OWN, seq), qk_scale,
            True, True, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_STEP, DOT_PRECISION,
        )  # fmt: skip
    else:
        full_keys_end = seq // BLOCK_STEP * BLOCK_STEP
        dq = _attention_dq_steps(
            dq, q, do, lse2, delta, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq, stride_v_dim,
            offs_own, offs_step, offs_d, seq, 0, full_keys_end, qk_scale,
            False, False, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_STEP, DOT_PRECISION,
        )  # fmt: skip
        dq = _attention_dq_steps(
            dq, q, do, lse2, delta, k_base, v_base, stride_k_seq, stride_k_dim, stride_v_seq, stride_v_dim,
            offs_own, offs_step, offs_d, seq, full_keys_end, seq, qk_scale,
            False, True, HEAD_DIM, HEAD_DIM_PADDED, BLOCK_STEP, DOT_PRECISION,
        )  # fmt: skip
    tl.store(dq_ptr + grad_offset + grad_pointers, (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=grad_mask)


AUTOTUNE_CONFIGS = [
    triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_stages=stages, num_warps=warps)
    for block_m in (64, 128)
    for block_n in (32, 64, 128)
    for stages in (2, 3, 4)
    for warps in (4, 8)
]
# The backward's: the tutorial's key block of 128 with query steps of 32 (its one configuration, five
# stages and four warps), and the smaller blocks that give short sequences enough programs.
BACKWARD_AUTOTUNE_CONFIGS = [
    triton.Config({"BLOCK_OWN": block_own, "BLOCK_STEP": block_step}, num_stages=stages, num_warps=warps)
    for block_own in (64, 128)
    for block_step in (16, 32, 64)
    for stages in (2, 3, 5)
    for warps in (4, 8)
]

# Shared memory a config may plan for (Hopper has 227 KiB per block; leave room for layout conversions).
SHARED_MEMORY_BUDGET = 160 * 1024
# fp32 values (scores, their exponentials, accumulators) a thread may hold, by what runs the dot products.
# Half types: what the tutorial's tiles hold (backward: 128 keys x 32 queries, four warps, head_dim 64).
# float32 on tensor cores: half of that, as its operands take twice the registers and tf32x3 splits each
# in two (an estimate, not yet measured on a GPU).
FORWARD_VALUES_PER_THREAD = {"half": 256, "tf32": 128}
BACKWARD_VALUES_PER_THREAD = {"half": 224, "tf32": 112, "fma": 64}
# The backward's row kernel (delta, lse): rows x padded head_dim per program, as the tutorial's 128 x 64.
ROWS_KERNEL_VALUES = 128 * 64


def _dot_units(itemsize: int, precision: str) -> str:
    """What runs the dot products: "half" (tensor cores, 16-bit operands), "tf32" (tensor cores, fp32
    operands) or "fma" (exact fp32 products on the FMA units)."""
    if itemsize < 4:
        return "half"
    return "fma" if precision == "ieee" else "tf32"


def _suits_dot_units(config: triton.Config, units: str, head_dim_padded: int) -> bool:
    block_m, block_n = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    if units == "half":
        # The tutorial's filter for Hopper: eight warps only pay off on the largest tile.
        return not (block_m * block_n < 128 * 128 and config.num_warps == 8)
    if units == "fma":
        # Exact float32 products run on the FMA units with the operands spread over the threads: past a
        # 64 x 64 tile or under eight warps they spill registers (measured with ptxas for sm_90).
        return block_m * block_n <= 64 * 64 and config.num_warps == 8
    # The accumulator, and per score the score, P's TF32 high part and its remainder.
    values = block_m * (head_dim_padded + 3 * block_n) / (32 * config.num_warps)
    return values <= FORWARD_VALUES_PER_THREAD["tf32"]


def _prune_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    """Keep the configs that work (causal needs BLOCK_N | BLOCK_M), fit and can pay off for this call."""
    args = {**named_args, **kwargs}
    seq, head_dim_padded, causal = args["seq"], args["HEAD_DIM_PADDED"], args["CAUSAL"]
    itemsize = args["q_ptr"].element_size()
    units = _dot_units(itemsize, args["DOT_PRECISION"])
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
    chosen = [c for c in usable if fits(c) and _suits_dot_units(c, units, head_dim_padded)]
    if chosen:
        return chosen
    return [
        min(usable, key=lambda c: (c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"], c.num_stages, -c.num_warps))
    ]


def _prune_backward_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    """Keep the configs whose blocks suit seq, fit in shared memory and leave room in the registers."""
    args = {**named_args, **kwargs}
    seq, head_dim_padded = args["seq"], args["HEAD_DIM_PADDED"]
    itemsize = args["q_ptr"].element_size()
    units = _dot_units(itemsize, args["DOT_PRECISION"])
    useful_block = max(64, triton.next_power_of_2(seq))

    def fits(config: triton.Config) -> bool:
        block_own, block_step = config.kwargs["BLOCK_OWN"], config.kwargs["BLOCK_STEP"]
        # Per stage two streamed tiles (q and do, or k and v) and two rows; the owned k and v stay.
        streamed = (2 * block_step * head_dim_padded * itemsize + 8 * block_step) * config.num_stages
        return streamed + 2 * block_own * head_dim_padded * itemsize <= SHARED_MEMORY_BUDGET

    def registers(config: triton.Config, warps: int) -> bool:
        block_own, block_step = config.kwargs["BLOCK_OWN"], config.kwargs["BLOCK_STEP"]
        # dk and dv, and per transposed score the score, dP and dS.
        values = block_own * (2 * head_dim_padded + 3 * block_step) / (32 * warps)
        return values <= BACKWARD_VALUES_PER_THREAD[units]

    def warps_suit(config: triton.Config) -> bool:
        # Four warps, as the tutorial's; eight only for blocks four would spill (as its forward's filter).
        if config.num_warps == 4:
            return registers(config, 4)
        return registers(config, config.num_warps) and not registers(config, 4)

    usable = [
        c for c in configs if c.kwargs["BLOCK_STEP"] <= c.kwargs["BLOCK_OWN"] <= useful_block
    ]
    chosen = [c for c in usable if fits(c) and warps_suit(c)]
    if chosen:
        return chosen
    return [
        min(usable, key=lambda c: (c.kwargs["BLOCK_OWN"] * c.kwargs["BLOCK_STEP"], c.num_stages, -c.num_warps))
    ]


flash_attention_tuned = TunedKernel(
    flash_attention_kernel,
    AUTOTUNE_CONFIGS,
    key=["seq", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"],
    prune=_prune_configs,
)
flash_attention_backward_tuned = TunedKernel(
    flash_attention_backward_kernel,
    BACKWARD_AUTOTUNE_CONFIGS,
    key=["seq", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"],
    prune=_prune_backward_configs,
)

# Small configs under the interpreter, where every program costs CPU time; the backward's owned block
# spans two steps, so the diagonal's several steps are exercised too.
INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16}
INTERPRETER_BACKWARD_CONFIG = {"BLOCK_OWN": 32, "BLOCK_STEP": 16}
INTERPRETER_ROWS_BLOCK = 16


@functools.cache
def _tensor_cores_take_tf32(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index) >= (8, 0)


def _dot_precision(q: torch.Tensor) -> str:
    """``tl.dot``'s input precision for these inputs (see the module's docstring): tf32x3 for float32 on
    NVIDIA GPUs from Ampere on, TF32 where torch allows it, exact products elsewhere."""
    if q.dtype != torch.float32 or interpreting() or q.device.type != "cuda" or torch.version.hip:
        return "ieee"
    if _torch_allows_tf32():
        return "tf32"
    index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    return "tf32x3" if _tensor_cores_take_tf32(index) else "ieee"


def _torch_allows_tf32() -> bool:
    """Whether torch's own float32 matmuls may run in TF32 (``torch.backends.cuda.matmul.allow_tf32``)."""
    return bool(torch.backends.cuda.matmul.allow_tf32)


def _head_dim(q: torch.Tensor, others: Mapping[str, torch.Tensor]) -> int:
    """The head dimension, once every tensor is checked to have q's [batch, heads, seq, head_dim] shape."""
    for name, tensor in others.items():
        if tensor.shape != q.shape:
            raise ValueError(f"{name} must have q's shape {tuple(q.shape)}, got {tuple(tensor.shape)}")
    head_dim = q.shape[-1]
    if head_dim > 256:
        raise ValueError(f"head_dim {head_dim} is above the 256 this kernel supports")
    return int(head_dim)


def _forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None, with_lse: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, heads, seq, _ = q.shape
    head_dim = _head_dim(q, {"k": k, "v": v})
    o = torch.empty((batch, heads, seq, head_dim), device=q.device, dtype=q.dtype)
    # Without STORE_LSE the kernel never touches its lse argument: o stands in.
    lse = torch.empty((batch, heads, seq), device=q.device, dtype=torch.float32) if with_lse else o
    if o.numel() == 0:
        return o, lse
    sm_scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    launch_args = (
        q, k, v, o, lse, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        heads, seq, sm_scale * 1.4426950408889634,
    )  # fmt: skip
    constants = dict(
        HEAD_DIM=head_dim,
        HEAD_DIM_PADDED=max(16, triton.next_power_of_2(head_dim)),
        CAUSAL=causal,
        DOT_PRECISION=_dot_precision(q),
        STORE_LSE=with_lse,
    )
    if interpreting():
        programs = (cdiv(seq, INTERPRETER_CONFIG["BLOCK_M"]), batch * heads)
        flash_attention_kernel[programs](*launch_args, **constants, **INTERPRETER_CONFIG)
    else:

        def grid(meta: Mapping[str, Any]) -> tuple[int, int]:
            return (cdiv(seq, meta["BLOCK_M"]), batch * heads)

        flash_attention_tuned[grid](*launch_args, **constants)
    return o, lse


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None
) -> torch.Tensor:
    """softmax(q k^T * scale) v for q, k, v of shape [batch, heads, seq, head_dim], any strides; scale
    defaults to 1/sqrt(head_dim)."""
    return _forward(q, k, v, causal, scale, with_lse=False)[0]


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse): ``attention``'s output and each row's natural log-sum-exp of the scaled scores, fp32
    [batch, heads, seq], as SDPA's flash kernel returns them for its backward."""
    return _forward(q, k, v, causal, scale, with_lse=True)


def attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    grad_out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of ``attention`` from its output and natural log-sum-exp per row: [batch, heads, seq]
    (flash's), rows padded past seq (the efficient kernel's, to a multiple of 32) or [batch, heads, seq, 1]
    (cuDNN's), any strides. The gradients are contiguous, in q's dtype."""
    batch, heads, seq, _ = q.shape
    head_dim = _head_dim(q, {"k": k, "v": v, "out": out, "grad_out": grad_out})
    if lse.dim() == 4 and lse.shape[-1] == 1:
        lse = lse.squeeze(-1)
    if lse.dim() != 3 or tuple(lse.shape[:2]) != (batch, heads) or lse.shape[2] < seq:
        raise ValueError(f"lse must be [batch, heads, seq] for q of shape {tuple(q.shape)}, got {tuple(lse.shape)}")
    grads = torch.empty((3, batch, heads, seq, head_dim), device=q.device, dtype=q.dtype)
    dq, dk, dv = grads.unbind(0)
    if dq.numel() == 0:
        return dq, dk, dv
    rows = torch.empty((2, batch * heads, seq), device=q.device, dtype=torch.float32)
    delta, lse2 = rows.unbind(0)
    head_dim_padded = max(16, triton.next_power_of_2(head_dim))
    grad_out, lse = grad_out.to(q.dtype), lse.to(torch.float32)
    block_rows = INTERPRETER_ROWS_BLOCK if interpreting() else max(16, ROWS_KERNEL_VALUES // head_dim_padded)
    _attention_backward_rows_kernel[(cdiv(seq, block_rows), batch * heads)](
        out, grad_out, lse, delta, lse2, *out.stride(), *grad_out.stride(), *lse.stride(),
        heads, seq, HEAD_DIM=head_dim, HEAD_DIM_PADDED=head_dim_padded, BLOCK_M=block_rows,
    )  # fmt: skip
    launch_args = (
        q, k, v, grad_out, dq, dk, dv, lse2, delta, *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(),
        *dq.stride(), heads, seq, 1.0 / math.sqrt(head_dim) if scale is None else scale,
    )  # fmt: skip
    constants = dict(
        HEAD_DIM=head_dim, HEAD_DIM_PADDED=head_dim_padded, CAUSAL=causal, DOT_PRECISION=_dot_precision(q)
    )
    if interpreting():
        programs = (cdiv(seq, INTERPRETER_BACKWARD_CONFIG["BLOCK_OWN"]), batch * heads)
        flash_attention_backward_kernel[programs](*launch_args, **constants, **INTERPRETER_BACKWARD_CONFIG)
    else:

        def grid(meta: Mapping[str, Any]) -> tuple[int, int]:
            return (cdiv(seq, meta["BLOCK_OWN"]), batch * heads)

        flash_attention_backward_tuned[grid](*launch_args, **constants)
    return dq, dk, dv


def _attention_backward_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    grad_out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool = False,
) -> tuple[torch.Tensor, ...]:
    """(dq, dk, dv) by autograd through SDPA, which recomputes the forward: out and lse are not read."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return tuple(torch.autograd.grad(o, (q, k, v), grad_out))


def make_qkv(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v as strided [batch, heads, seq, head_dim] views into one packed qkv buffer, as models pass them."""
    batch, heads, seq, head_dim = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
    qkv = torch.randn((batch, seq, 3, heads, head_dim), generator=generator, device=device, dtype=dtype)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v


def make_backward_inputs(
    shape: Mapping[str, int],
    dtype: torch.dtype,
    device: torch.device,
    generator: torch.Generator,
    causal: bool = False,
) -> tuple[torch.Tensor, ...]:
    """(q, k, v, out, grad_out, lse): out and lse from the hand-written forward, on the same device."""
    q, k, v = make_qkv(shape, dtype, device, generator)
    grad_out = torch.randn(q.shape, generator=generator, device=device, dtype=dtype)
    # Inputs are made outside the check's interpreter block: the forward needs it where the kernels run there.
    with interpreter(interpreting()):
        out, lse = attention_with_lse(q, k, v, causal)
    return q, k, v, out, grad_out, lse


BACKWARD_KERNELS = (
    _attention_backward_rows_kernel,
    flash_attention_backward_kernel,
    _attention_dkdv_steps,
    _attention_dq_steps,
    _load_tile,
    _load_rows,
)

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
    "flash_attention_backward": Implementation(
        run=attention_backward,
        reference=_attention_backward_reference,
        make_inputs=make_backward_inputs,
        kernels=BACKWARD_KERNELS,
    ),
    "flash_attention_causal_backward": Implementation(
        run=functools.partial(attention_backward, causal=True),
        reference=functools.partial(_attention_backward_reference, causal=True),
        make_inputs=functools.partial(make_backward_inputs, causal=True),
        kernels=BACKWARD_KERNELS,
    ),
}
