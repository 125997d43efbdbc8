"""Stage 4 of the pipeline (bench), hand-written side: a layout copy (a transposed view made contiguous).

Inductor emits kernels that only move data: a weight put in channels-last order before a convolution, the
query, key and value split out of one projection and laid out per head, a key repeated for grouped-query
attention. Each reads a strided view and writes it contiguous. The hand-written stand-in is the hardest
common case of that job, a 2-D transpose: ``out = x.t().contiguous()``. Reading along a row and writing
along a column cannot both be coalesced from registers alone, so each program loads a ``BLOCK_R x BLOCK_C``
tile with loads contiguous along ``x``'s rows and stores its transpose (``tl.trans``), which Triton lowers
through shared memory so the stores are contiguous along ``out``'s rows too. Square 64 x 64 tiles keep
both sides' accesses 256 bytes long in float32 (128 in 16-bit types); on a GPU a short autotune list picks
the tile and warps per size and dtype (not yet measured on a GPU against the list's alternatives). The
kernel moves ``2 * rows * cols`` elements and is bandwidth-bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreting

# The interpreter's fixed tile.
INTERPRETER_BLOCK = 32


@triton.jit
def _transpose_copy_kernel(
    x_ptr,
    out_ptr,
    rows,
    cols,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    row_block = tl.program_id(0)
    col_block = tl.program_id(1)
    row_offsets = row_block * BLOCK_R + tl.arange(0, BLOCK_R)
    col_offsets = col_block * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (row_offsets[:, None] < rows) & (col_offsets[None, :] < cols)
    # x is rows x cols, row-major: the tile's loads run along its columns
    tile = tl.load(x_ptr + row_offsets[:, None].to(tl.int64) * cols + col_offsets[None, :], mask=mask)
    # out is cols x rows: the transposed tile's stores run along out's rows (x's row index)
    out_offsets = col_offsets[:, None].to(tl.int64) * rows + row_offsets[None, :]
    tl.store(out_ptr + out_offsets, tl.trans(tile), mask=tl.trans(mask))


CONFIGS = [
    triton.Config({"BLOCK_R": r, "BLOCK_C": c}, num_warps=w)
    for r, c in ((32, 32), (64, 64), (32, 128), (128, 32))
    for w in (4, 8)
]
_transpose_copy_tuned = TunedKernel(_transpose_copy_kernel, CONFIGS, key=["rows", "cols"])


def transpose_copy(x: torch.Tensor) -> torch.Tensor:
    """``x.t().contiguous()`` for a 2-D ``x``, in one pass."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D, got {x.dim()} dimensions")
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty((cols, rows), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    if interpreting():
        block = INTERPRETER_BLOCK
        _transpose_copy_kernel[(cdiv(rows, block), cdiv(cols, block))](
            x, out, rows, cols, BLOCK_R=block, BLOCK_C=block, num_warps=4
        )
    else:
        _transpose_copy_tuned[lambda meta: (cdiv(rows, meta["BLOCK_R"]), cdiv(cols, meta["BLOCK_C"]))](
            x, out, rows, cols
        )
    return out


def _reference(x: torch.Tensor) -> torch.Tensor:
    return x.t().contiguous()


def _make_inputs(shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any) -> tuple[torch.Tensor]:
    return (torch.randn(shape["rows"], shape["cols"], generator=generator, device=device, dtype=dtype),)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "copy": Implementation(transpose_copy, _reference, _make_inputs, (_transpose_copy_kernel,)),
}
