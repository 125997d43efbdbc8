"""Stage 4 of the pipeline (bench), hand-written side: rotary position embedding (RoPE), forward and backward.

HF Llama rotates queries and keys by ``x * cos + rotate_half(x) * sin``, where ``rotate_half`` swaps the two
halves of the head dimension and negates the new first half, and cos/sin are ``[seq, head_dim]`` tables
(``cat(freqs, freqs)``: each half repeats the angles, which the kernel does not assume). Per half that is
``out1 = x1·cos1 - x2·sin1`` and ``out2 = x2·cos2 + x1·sin2``, so a program loads the two halves of its rows
as two contiguous vectors and never gathers. The backward is the transpose,
``grad·cos + rotate_half^T(grad·sin)`` with ``rotate_half^T(y) = cat(y2, -y1)``:
``dx1 = g1·cos1 + g2·sin2`` and ``dx2 = g2·cos2 - g1·sin1``, the same kernel behind a ``BACKWARD`` switch.
The work is memory-bound: x is read once and the output written once. The tables are small ([seq, head_dim]
against [batch, heads, seq, head_dim]), but read again for every head they would double the kernel's L2
traffic (x, cos, sin in, out), and an H100's L2 bandwidth is under twice its DRAM bandwidth (argued, not
measured); so a program takes a block of positions of one batch entry and keeps their cos/sin rows in
registers while it walks its heads (Liger-Kernel's RoPE likewise reuses a position's cos/sin over all heads),
one at a time in a loop or ``BLOCK_HEADS`` at a time as a 3-D tile whose loads are all in flight together
(the autotuner picks; on an H200 the tiles took the kernel from 2% slower than Inductor's to a tie). x is
addressed through its strides (models pass q and k as ``[batch, seq, heads, head_dim]`` projections
viewed as ``[batch, heads, seq, head_dim]``, which the input maker reproduces), with the head dimension
contiguous; the output takes x's layout. Inductor fuses q's and
k's rotation, and the cos/sin computation from the position ids, into one kernel; this one rotates one
tensor from given tables, so Inductor's kernel does the work of two of its launches. The block sizes are
autotuned on a GPU from a short list around 4-32 KiB of x per program; the interpreter runs one small fixed
configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreting

ROPE_BASE = 10000.0
# The interpreter's fixed configuration: small, and fewer heads a program than the checks' head counts, so
# the head loop's bound is exercised.
INTERPRETER_CONFIG = {"BLOCK_SEQ": 16, "BLOCK_HEADS": 2, "HEAD_BLOCKS_PER_PROGRAM": 2}


@triton.jit
def _rotary_kernel(
    x_ptr,
    cos_ptr,
    sin_ptr,
    out_ptr,
    heads,
    seq,
    x_stride_batch,
    x_stride_head,
    x_stride_seq,
    out_stride_batch,
    out_stride_head,
    out_stride_seq,
    cos_stride_seq,
    sin_stride_seq,
    HALF: tl.constexpr,
    HALF_PADDED: tl.constexpr,
    BACKWARD: tl.constexpr,
    BLOCK_SEQ: tl.constexpr,
    BLOCK_HEADS: tl.constexpr,
    HEAD_BLOCKS_PER_PROGRAM: tl.constexpr,
):
    """Rotate (or, BACKWARD, rotate back) BLOCK_SEQ positions of BLOCK_HEADS heads at a time, for
    HEAD_BLOCKS_PER_PROGRAM blocks of heads, with the positions' cos/sin rows loaded once."""
    heads_per_program = BLOCK_HEADS * HEAD_BLOCKS_PER_PROGRAM
    head_groups = tl.cdiv(heads, heads_per_program)
    batch = tl.program_id(1) // head_groups
    head_start = (tl.program_id(1) % head_groups) * heads_per_program
    position = (tl.program_id(0) * BLOCK_SEQ + tl.arange(0, BLOCK_SEQ))[:, None, None]
    head_lane = tl.arange(0, BLOCK_HEADS)[None, :, None]
    lane = tl.arange(0, HALF_PADDED)[None, None, :]
    table_mask = (position < seq) & (lane < HALF)
    # [BLOCK_SEQ, 1, HALF_PADDED], broadcast over the heads; evict_last: every batch entry and head group
    # re-reads them.
    cos_rows = cos_ptr + position * cos_stride_seq + lane
    sin_rows = sin_ptr + position * sin_stride_seq + lane
    cos1 = tl.load(cos_rows, mask=table_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    cos2 = tl.load(cos_rows + HALF, mask=table_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    sin1 = tl.load(sin_rows, mask=table_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    sin2 = tl.load(sin_rows + HALF, mask=table_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    x_rows = x_ptr + batch.to(tl.int64) * x_stride_batch + head_start.to(tl.int64) * x_stride_head
    x_rows += position.to(tl.int64) * x_stride_seq + head_lane * x_stride_head + lane
    out_rows = out_ptr + batch.to(tl.int64) * out_stride_batch + head_start.to(tl.int64) * out_stride_head
    out_rows += position.to(tl.int64) * out_stride_seq + head_lane * out_stride_head + lane
    for block in range(0, tl.cdiv(tl.minimum(heads_per_program, heads - head_start), BLOCK_HEADS)):
        mask = table_mask & (head_start + block * BLOCK_HEADS + head_lane < heads)
        x1 = tl.load(x_rows, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x_rows + HALF, mask=mask, other=0.0).to(tl.float32)
        if BACKWARD:
            out1 = x1 * cos1 + x2 * sin2
            out2 = x2 * cos2 - x1 * sin1
        else:
            out1 = x1 * cos1 - x2 * sin1
            out2 = x2 * cos2 + x1 * sin2
        tl.store(out_rows, out1.to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(out_rows + HALF, out2.to(out_ptr.dtype.element_ty), mask=mask)
        x_rows += BLOCK_HEADS * x_stride_head
        out_rows += BLOCK_HEADS * out_stride_head


# About 4 to 32 KiB of x per program at head_dim 128 in bf16 (the shapes of Llama): one head a step with the
# tables' block reused over 4 to 32 heads in a loop, or a tile of 2 to 8 heads a step, whose loads are all in
# flight at once (a loop's next loads wait for its stores: x and out may alias as far as the compiler knows).
CONFIGS = [
    triton.Config({"BLOCK_SEQ": block_seq, "BLOCK_HEADS": 1, "HEAD_BLOCKS_PER_PROGRAM": heads}, num_warps=warps)
    for block_seq, heads, warps in (
        (8, 4, 4), (16, 4, 4), (16, 8, 4), (32, 4, 8), (32, 8, 8), (8, 32, 4), (16, 32, 8), (64, 4, 8),
    )
] + [
    triton.Config({"BLOCK_SEQ": block_seq, "BLOCK_HEADS": tile, "HEAD_BLOCKS_PER_PROGRAM": steps}, num_warps=warps)
    for block_seq, tile, steps, warps in (
        (4, 8, 1, 4), (8, 4, 1, 4), (8, 8, 1, 8), (16, 4, 1, 8), (4, 8, 4, 4), (8, 4, 4, 4), (16, 8, 1, 8),
    )
]  # fmt: skip
_rotary_tuned = TunedKernel(_rotary_kernel, CONFIGS, key=["heads", "seq", "HALF", "BACKWARD"])


def _grid(batch: int, heads: int, seq: int, meta: Mapping[str, Any]) -> tuple[int, int]:
    heads_per_program = meta["BLOCK_HEADS"] * meta["HEAD_BLOCKS_PER_PROGRAM"]
    return cdiv(seq, meta["BLOCK_SEQ"]), batch * cdiv(heads, heads_per_program)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, backward: bool) -> torch.Tensor:
    if x.dim() != 4:
        raise ValueError(f"x of shape {tuple(x.shape)}: expected [batch, heads, seq, head_dim]")
    batch, heads, seq, head_dim = x.shape
    if head_dim % 2:
        raise ValueError(f"head_dim {head_dim} must be even")
    for name, table in (("cos", cos), ("sin", sin)):
        if table.shape != (seq, head_dim):
            raise ValueError(
                f"{name} of shape {tuple(table.shape)}: expected [seq, head_dim] = ({seq}, {head_dim})"
            )
    if x.stride(-1) != 1:
        x = x.contiguous()
    cos = cos if cos.stride(-1) == 1 else cos.contiguous()
    sin = sin if sin.stride(-1) == 1 else sin.contiguous()
    out = torch.empty_like(x)
    if out.numel() == 0:
        return out
    half = head_dim // 2
    args = (
        x, cos, sin, out, heads, seq, x.stride(0), x.stride(1), x.stride(2),
        out.stride(0), out.stride(1), out.stride(2), cos.stride(0), sin.stride(0),
    )  # fmt: skip
    constants = {"HALF": half, "HALF_PADDED": triton.next_power_of_2(half), "BACKWARD": backward}
    if interpreting():
        _rotary_kernel[_grid(batch, heads, seq, INTERPRETER_CONFIG)](*args, **constants, **INTERPRETER_CONFIG)
    else:

        _rotary_tuned[lambda meta: _grid(batch, heads, seq, meta)](*args, **constants)
    return out


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` for x [batch, heads, seq, head_dim] (any strides) and
    [seq, head_dim] tables, as HF Llama's ``apply_rotary_pos_emb`` does to q and to k."""
    return _rotate(x, cos, sin, backward=False)


def rotary_backward(grad: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The gradient of ``rotary`` with respect to x: ``grad * cos + rotate_half^T(grad * sin)``."""
    return _rotate(grad, cos, sin, backward=True)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate_half_transposed(y: torch.Tensor) -> torch.Tensor:
    y1, y2 = y.chunk(2, dim=-1)
    return torch.cat((y2, -y1), dim=-1)


def _rotary_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


def _rotary_backward_reference(grad: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return grad * cos + _rotate_half_transposed(grad * sin)


def _make_rotary_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    """x as the [batch, heads, seq, head_dim] view of a [batch, seq, heads, head_dim] projection, and Llama's
    cos/sin tables (base 10000) in x's dtype."""
    batch, heads, seq, head_dim = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
    x = torch.randn((batch, seq, heads, head_dim), generator=generator, device=device, dtype=dtype)
    exponents = torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim
    angles = torch.arange(seq, device=device, dtype=torch.float32)[:, None] / ROPE_BASE**exponents
    angles = torch.cat((angles, angles), dim=-1)
    return x.transpose(1, 2), angles.cos().to(dtype), angles.sin().to(dtype)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "rotary": Implementation(rotary, _rotary_reference, _make_rotary_inputs, (_rotary_kernel,)),
    "rotary_backward": Implementation(
        rotary_backward, _rotary_backward_reference, _make_rotary_inputs, (_rotary_kernel,)
    ),
}
