"""Stage 4 of the pipeline (bench), hand-written side: row softmax, forward and backward.

Softmax is a row reduction followed by an elementwise pass, and memory-bound: the fastest kernel reads
each row from device memory once. When the padded row fits in registers (up to
``MAX_SINGLE_PASS_ELEMENTS`` float32 values a program, over up to 32 warps) the single-pass kernel loads
a tile of whole rows, takes the row max, ``exp(x - max)`` and its sum in float32, and writes the
quotient, as Triton's fused-softmax tutorial does; short rows are packed several to a program so a
program still moves a few thousand elements, and ``num_warps`` grows with the tile so each thread keeps
a bounded number of values. Longer rows use the online (looped) kernel: a first pass over column blocks
keeps a running max and a sum rescaled to it, per lane, so the loop has no cross-thread reductions; a
second pass writes ``exp(x - max) / sum``. That second read should come from L2, not device memory, so the
second pass walks the row backwards, starting with the blocks the first pass read last; one row per
program (a persistent grid of 1 to 4 programs per SM measured no faster on an H200). The backward, ``y * (g - sum(g * y))`` from the saved output ``y``, has the same shape
of work (a row dot product, then an elementwise pass), so each kernel takes a ``BACKWARD`` switch rather
than being written twice. Rows are addressed through a row stride, so any tensor whose last dimension is
contiguous is read in place, and lengths and strides are passed in units of their largest power-of-two
divisor (up to 16) so Triton can prove row starts aligned and keep vector loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from . import Implementation, cdiv

# Most float32 working values a single-pass program holds (one padded row forward, two backward): at
# 32 warps, 32 a thread, which fits the 64 registers a thread has when 1024 threads share an SM.
# Measured on an H200, one pass beat the looped kernel by 14% (forward) and 29% (backward) on float32
# rows of 16384, and by 39% (float32) and 5% (bf16) on forward rows of 32768.
MAX_SINGLE_PASS_ELEMENTS = 32768
# Elements of a single-pass tile when short rows are packed several to a program.
PACKED_TILE_ELEMENTS = 4096
# Column block of the looped kernel, forward and backward (measured best on an H200 at 2048 x 32768).
LOOPED_BLOCK_COLS = {False: 4096, True: 8192}


@triton.jit
def _softmax_rows_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    n_rows,
    cols_in_units,
    a_row_stride_in_units,
    b_row_stride_in_units,
    out_row_stride_in_units,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    BACKWARD: tl.constexpr,
    ALIGN: tl.constexpr,
):
    """Whole rows in registers. Forward: a = x. Backward: a = grad_out, b = out (the saved softmax)."""
    cols = cols_in_units * ALIGN
    a_row_stride = a_row_stride_in_units * ALIGN
    b_row_stride = b_row_stride_in_units * ALIGN
    out_row_stride = out_row_stride_in_units * ALIGN
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_index = rows.to(tl.int64)[:, None]
    col = tl.arange(0, BLOCK_COLS)[None, :]
    row_valid = rows < n_rows
    mask = row_valid[:, None] & (col < cols)
    if BACKWARD:
        grad = tl.load(a_ptr + row_index * a_row_stride + col, mask=mask, other=0.0).to(tl.float32)
        out = tl.load(b_ptr + row_index * b_row_stride + col, mask=mask, other=0.0).to(tl.float32)
        dot = tl.sum(grad * out, axis=1)
        result = out * (grad - dot[:, None])
    else:
        x = tl.load(a_ptr + row_index * a_row_stride + col, mask=mask, other=-float("inf")).to(tl.float32)
        # Rows past the end (never stored) get max 0 and sum 1, to keep them free of inf and nan.
        row_max = tl.where(row_valid, tl.max(x, axis=1), 0.0)
        numerator = tl.exp(x - row_max[:, None])
        row_sum = tl.where(row_valid, tl.sum(numerator, axis=1), 1.0)
        result = numerator * (1.0 / row_sum)[:, None]
    tl.store(out_ptr + row_index * out_row_stride + col, result.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_looped_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    cols_in_units,
    a_row_stride_in_units,
    b_row_stride_in_units,
    out_row_stride_in_units,
    BLOCK_COLS: tl.constexpr,
    BACKWARD: tl.constexpr,
    ALIGN: tl.constexpr,
):
    """One row per program, in column blocks: a reduction pass, then a pass writing the result."""
    cols = cols_in_units * ALIGN
    lanes = tl.arange(0, BLOCK_COLS)
    n_blocks = tl.cdiv(cols, BLOCK_COLS)
    row_index = tl.program_id(0).to(tl.int64)
    a_row = a_ptr + row_index * (a_row_stride_in_units * ALIGN)
    b_row = b_ptr + row_index * (b_row_stride_in_units * ALIGN)
    out_row = out_ptr + row_index * (out_row_stride_in_units * ALIGN)

    if BACKWARD:
        dot_lanes = tl.zeros([BLOCK_COLS], dtype=tl.float32)
        for block in range(0, n_blocks):
            col = block * BLOCK_COLS + lanes
            mask = col < cols
            grad = tl.load(a_row + col, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            out = tl.load(b_row + col, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            dot_lanes += grad * out
        dot = tl.sum(dot_lanes, axis=0)
    else:
        # Per-lane running max and sum rescaled to it; a lane that has seen only masked (-inf)
        # values keeps max -inf and sum 0 (the where avoids exp(-inf - -inf) = nan).
        max_lanes = tl.full([BLOCK_COLS], -float("inf"), dtype=tl.float32)
        sum_lanes = tl.zeros([BLOCK_COLS], dtype=tl.float32)
        for block in range(0, n_blocks):
            col = block * BLOCK_COLS + lanes
            x = tl.load(a_row + col, mask=col < cols, other=-float("inf"), eviction_policy="evict_last")
            x = x.to(tl.float32)
            new_max = tl.maximum(max_lanes, x)
            safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
            sum_lanes = sum_lanes * tl.exp(max_lanes - safe_max) + tl.exp(x - safe_max)
            max_lanes = new_max
        row_max = tl.max(max_lanes, axis=0)
        safe_lanes_max = tl.where(max_lanes == -float("inf"), row_max, max_lanes)
        inverse_sum = 1.0 / tl.sum(sum_lanes * tl.exp(safe_lanes_max - row_max), axis=0)

    # Backwards over the row: the blocks read last by the first pass are the likeliest in L2.
    for reverse_block in range(0, n_blocks):
        col = (n_blocks - 1 - reverse_block) * BLOCK_COLS + lanes
        mask = col < cols
        if BACKWARD:
            grad = tl.load(a_row + col, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            out = tl.load(b_row + col, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            result = out * (grad - dot)
        else:
            x = tl.load(a_row + col, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            result = tl.exp(x - row_max) * inverse_sum
        tl.store(out_row + col, result.to(out_ptr.dtype.element_ty), mask=mask)


def _as_rows(tensor: torch.Tensor) -> torch.Tensor:
    """A 2-D (rows, cols) view of ``tensor`` with a contiguous last dimension (copying only if needed)."""
    rows = tensor.reshape(-1, tensor.shape[-1])
    return rows if rows.stride(-1) == 1 or rows.shape[-1] == 1 else rows.contiguous()


def _warps(tile_elements: int) -> int:
    # 8 elements a thread up to 8192-element tiles (two 16-byte float32 vectors), then 16 or 32 warps
    # for the longest rows, so a thread holds at most 32 float32 values.
    return max(4, tile_elements // 512) if tile_elements <= 8192 else min(32, tile_elements // 1024)


def _alignment(*values: int) -> int:
    """The largest power of two, up to 16, dividing every value.

    The kernels take lengths and strides in units of it and multiply by it as a constexpr: Triton then
    knows that row starts and the row-end mask are aligned to it and issues vector loads, which it
    otherwise does only for values it sees are divisible by 16 (a row of 1000 bf16 elements ran at a
    third of the bandwidth with 2-byte loads).
    """
    align = 16
    while align > 1 and any(value % align for value in values):
        align //= 2
    return align


def _launch(
    a: torch.Tensor, b: torch.Tensor | None, *, backward: bool, block_cols: int | None
) -> torch.Tensor:
    if a.dim() < 1:
        raise ValueError("softmax needs a tensor of at least one dimension")
    if a.numel() == 0:
        return torch.empty_like(a, memory_format=torch.contiguous_format)
    a_rows = _as_rows(a)
    b_rows = _as_rows(b) if b is not None else a_rows
    n_rows, cols = a_rows.shape
    out = torch.empty((n_rows, cols), dtype=a.dtype, device=a.device)
    padded_cols = triton.next_power_of_2(cols)
    align = _alignment(cols, a_rows.stride(0), b_rows.stride(0), out.stride(0))
    in_units = (cols // align, a_rows.stride(0) // align, b_rows.stride(0) // align, out.stride(0) // align)
    rows_held = 2 if backward else 1
    if block_cols is None and padded_cols * rows_held <= MAX_SINGLE_PASS_ELEMENTS:
        block_rows = min(max(1, PACKED_TILE_ELEMENTS // padded_cols), triton.next_power_of_2(n_rows))
        _softmax_rows_kernel[(cdiv(n_rows, block_rows),)](
            a_rows,
            b_rows,
            out,
            n_rows,
            *in_units,
            BLOCK_ROWS=block_rows,
            BLOCK_COLS=padded_cols,
            BACKWARD=backward,
            ALIGN=align,
            num_warps=_warps(block_rows * padded_cols),
        )
    else:
        block = block_cols or LOOPED_BLOCK_COLS[backward]
        _softmax_looped_kernel[(n_rows,)](
            a_rows,
            b_rows,
            out,
            *in_units,
            BLOCK_COLS=block,
            BACKWARD=backward,
            ALIGN=align,
            num_warps=_warps(block),
        )
    return out.view(a.shape)


def softmax(x: torch.Tensor, *, block_cols: int | None = None) -> torch.Tensor:
    """``torch.softmax(x, -1)``; ``block_cols`` (a power of two) forces the looped kernel with that block."""
    return _launch(x, None, backward=False, block_cols=block_cols)


def softmax_backward(
    grad_out: torch.Tensor, out: torch.Tensor, *, block_cols: int | None = None
) -> torch.Tensor:
    """The gradient of softmax over the last dimension, from the upstream gradient and the saved output."""
    if grad_out.shape != out.shape:
        raise ValueError(f"grad_out {tuple(grad_out.shape)} and out {tuple(out.shape)} differ in shape")
    return _launch(grad_out, out, backward=True, block_cols=block_cols)


def _softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _softmax_backward_reference(grad_out: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return torch._softmax_backward_data(grad_out, out, -1, grad_out.dtype)


def _make_softmax_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    x = torch.randn(shape["rows"], shape["cols"], generator=generator, device=device) * 3
    return (x.to(dtype),)


def _make_softmax_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    size = (shape["rows"], shape["cols"])
    out = torch.softmax(torch.randn(size, generator=generator, device=device), dim=-1)
    grad_out = torch.randn(size, generator=generator, device=device)
    return grad_out.to(dtype), out.to(dtype)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "softmax": Implementation(
        softmax, _softmax_reference, _make_softmax_inputs, (_softmax_rows_kernel, _softmax_looped_kernel)
    ),
    "softmax_backward": Implementation(
        softmax_backward,
        _softmax_backward_reference,
        _make_softmax_backward_inputs,
        (_softmax_rows_kernel, _softmax_looped_kernel),
    ),
}
