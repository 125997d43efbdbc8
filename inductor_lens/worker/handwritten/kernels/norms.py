"""Stage 4 of the pipeline (bench), hand-written side: normalisations (LayerNorm, RMSNorm, their backwards).

Normalising a row is memory-bound, so every kernel here reads each input byte from DRAM once and keeps
the statistics in fp32. The forward kernel (shared by LayerNorm and RMSNorm through the ``IS_RMS``
switch) has two shapes. Whole rows in registers (rows up to 64 KiB: 16384 fp32 or 32768 half columns):
the mean, then the variance of ``x - mean`` straight from the registers, then the affine output, one read
and one write, with several short rows to a program so that each still has kilobytes in flight. Looped
(Inductor's shape of kernel, and the only one for longer rows): a first sweep over column blocks keeps a
Welford mean and M2 per lane (merged exactly by Chan's formula, so no E[x²] - E[x]² cancellation),
marking the bytes ``evict_last`` so that the second, normalising sweep reads them from L2. On an H200
neither wins everywhere (whole rows for half-precision rows, looped for many fp32 rows, whose smaller
register footprint keeps more rows per SM in flight), so on a GPU the autotuner picks shape and tile per
row length; the row length is a compile-time constant, as in Inductor's static-shape kernels, so masks
and trip counts fold away. The backward is deterministic, with no atomics: stage 1 gives each program a
group of rows, computes their grad_x (``dx = (w·dy - (x̂·c1 + c2))·rstd`` with ``c1 = mean(x̂·w·dy)``,
``c2 = mean(w·dy)``) and sums ``dy·x̂`` and ``dy`` over its rows in fp32 registers, writing one partial
row per program; stage 2 sums those partials per column. Two programs an SM is the most the registers
allow at 4096 columns (more per SM were slower on an H200: benchmarks/programs_per_sm.py), too few to hide
memory latency alone, so the autotuner may software-pipeline the row tiles' loads (``STAGES``). Rows too
long for registers (over 8192 columns) take one tile of rows per program, sweeping the columns twice: the
row constants c1 and c2 first, then grad_x and the tile's partial sums.

Pre-norm transformers (Llama) add the residual stream and normalise the sum in one step, ``h = x + residual;
y = rmsnorm(h) · w``, and need h again as the next residual: the forward's ``HAS_RESIDUAL`` switch reads x and
the residual, writes h once (in the sweep that first makes it) and normalises h as summed in fp32, as
Inductor's fused kernel does, not the h rounded to the input dtype; the looped shape's normalising sweep
re-adds x and residual (from L2) rather than reading back the rounded h, so both shapes give the same y.
RMSNorm's backward is LayerNorm's without the mean, ``c2`` and the bias gradient (``IS_RMS``:
``dx = (w·dy - x̂·c1)·rstd``, ``x̂ = x·rstd``), with one partial plane for the weight gradient; in a pre-norm
block h feeds both the norm and the residual stream, so ``HAS_GRAD_RESIDUAL`` adds the stream's incoming
gradient to dx in the same pass (``grad_h``, which is the gradient of x and of residual alike). For a row
of one column RMSNorm's dx is ``w·dy·(1 - x̂²)·rstd`` with ``x̂² = x²/(x² + eps)``: a cancellation that fp32
cannot resolve (nor can ATen's kernel); it is checked from three columns up.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreting

LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6
# Forward: whole rows in registers are an option up to this many input bytes a row (padded); longer loop.
# (64 KiB: a bf16 row of 32768 over 32 warps, 32 values a thread.)
MAX_FUSED_ROW_BYTES = 65536
# Backward: whole rows in registers up to this many columns (five fp32 values live per column).
MAX_FUSED_BACKWARD_COLS = 8192
# Backward, long rows: rows per program (the partial sums cost 8 / this many bytes per element).
LOOPED_BACKWARD_ROWS = 16
# Backward, short rows: programs per SM, each looping over a group of rows (a multiple of 16).
BACKWARD_PROGRAMS_PER_SM = 2
BACKWARD_GROUP_GRANULE = 16
# Stage 2 of the backward: the tile of partial rows x columns each program sums.
PARTIAL_BLOCK_GROUPS = 64
PARTIAL_BLOCK_COLS = 64
# Fixed configurations for Triton's interpreter, which must not autotune; its rows of 9000 and 20000
# columns (tests) take the looped shape.
INTERPRETER_MAX_FUSED_ROW_BYTES = 32768
INTERPRETER_LOOPED_BLOCK_COLS = 1024
INTERPRETER_LOOPED_BACKWARD_BLOCK_COLS = 256


# --- shared pieces -------------------------------------------------------------------------------


@triton.jit
def _load_affine(weight_ptr, bias_ptr, col, col_mask, IS_RMS: tl.constexpr):
    # evict_last: every program reads the same weight and bias.
    weight = tl.load(weight_ptr + col, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if IS_RMS:
        bias = tl.zeros_like(weight)
    else:
        bias = tl.load(bias_ptr + col, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    return weight, bias


@triton.jit
def _load_input(
    x_rows,
    residual_rows,
    h_rows,
    col,
    mask,
    EVICTION: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    STORE_H: tl.constexpr,
):
    """A tile of the rows to normalise in fp32: x, or with HAS_RESIDUAL h = x + residual, stored with STORE_H
    (the sum is written once, by the sweep that first makes it)."""
    x = tl.load(x_rows + col[None, :], mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    if HAS_RESIDUAL:
        residual = tl.load(residual_rows + col[None, :], mask=mask, other=0.0, eviction_policy=EVICTION)
        x += residual.to(tl.float32)
        if STORE_H:
            tl.store(h_rows + col[None, :], x.to(h_rows.dtype.element_ty), mask=mask)
    return x


@triton.jit
def _looped_row_moments(
    x_rows,
    residual_rows,
    h_rows,
    row_mask,
    cols,
    IS_RMS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    ROWS: tl.constexpr,
):
    """Mean and biased variance of rows longer than BLOCK_COLS: Welford per lane, then Chan's merge."""
    lane = tl.arange(0, BLOCK_COLS)
    lane_mean = tl.zeros([ROWS, BLOCK_COLS], tl.float32)
    lane_m2 = tl.zeros([ROWS, BLOCK_COLS], tl.float32)
    num_blocks = tl.cdiv(cols, BLOCK_COLS)
    for block in range(num_blocks):
        col = block * BLOCK_COLS + lane
        mask = row_mask[:, None] & (col < cols)[None, :]
        # evict_last: the normalising sweep reads these bytes again, from L2 if they are still there.
        x = _load_input(x_rows, residual_rows, h_rows, col, mask, "evict_last", HAS_RESIDUAL, True)
        if IS_RMS:
            lane_m2 += x * x
        else:
            # Only the last block has lanes past the row's end, so a valid lane's count is block + 1.
            delta = x - lane_mean
            updated_mean = lane_mean + delta * (1.0 / (block + 1))
            lane_m2 += tl.where(mask, delta * (x - updated_mean), 0.0)
            lane_mean = tl.where(mask, updated_mean, lane_mean)
    if IS_RMS:
        mean = tl.zeros([ROWS], tl.float32)
        variance = tl.sum(lane_m2, axis=1) / cols
    else:
        last_block_valid = (num_blocks - 1) * BLOCK_COLS + lane < cols
        lane_count = tl.where(last_block_valid, num_blocks, num_blocks - 1).to(tl.float32)[None, :]
        mean = tl.sum(lane_mean * lane_count, axis=1) / cols
        spread = lane_mean - mean[:, None]
        variance = tl.sum(lane_m2 + lane_count * spread * spread, axis=1) / cols
    return mean, variance


# --- forward: LayerNorm and RMSNorm ----------------------------------------------------------------


@triton.jit
def _norm_forward_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    bias_ptr,
    y_ptr,
    h_ptr,
    mean_ptr,
    rstd_ptr,
    rows,
    cols: tl.constexpr,
    x_row_stride,
    residual_row_stride,
    y_row_stride,
    h_row_stride,
    eps,
    IS_RMS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    STORE_STATS: tl.constexpr,
    SINGLE_PASS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    """y = norm(x) (or, with HAS_RESIDUAL, y = norm(h) and h = x + residual written out)."""
    row = tl.program_id(0) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    row_mask = row < rows
    row_offset = row[:, None].to(tl.int64)
    x_rows = x_ptr + row_offset * x_row_stride
    residual_rows = residual_ptr + row_offset * residual_row_stride
    y_rows = y_ptr + row_offset * y_row_stride
    h_rows = h_ptr + row_offset * h_row_stride
    lane = tl.arange(0, BLOCK_COLS)
    if SINGLE_PASS:
        col_mask = lane < cols
        mask = row_mask[:, None] & col_mask[None, :]
        weight, bias = _load_affine(weight_ptr, bias_ptr, lane, col_mask, IS_RMS)
        x = _load_input(x_rows, residual_rows, h_rows, lane, mask, "evict_first", HAS_RESIDUAL, True)
        if IS_RMS:
            mean = tl.zeros([ROWS_PER_PROGRAM], tl.float32)
            centred = x
        else:
            mean = tl.sum(x, axis=1) / cols
            centred = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.math.rsqrt(tl.sum(centred * centred, axis=1) / cols + eps)
        y = centred * rstd[:, None] * weight[None, :] + bias[None, :]
        tl.store(y_rows + lane[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        mean, variance = _looped_row_moments(
            x_rows, residual_rows, h_rows, row_mask, cols, IS_RMS, HAS_RESIDUAL, BLOCK_COLS, ROWS_PER_PROGRAM
        )
        rstd = tl.math.rsqrt(variance + eps)
        for block in range(tl.cdiv(cols, BLOCK_COLS)):
            col = block * BLOCK_COLS + lane
            col_mask = col < cols
            mask = row_mask[:, None] & col_mask[None, :]
            weight, bias = _load_affine(weight_ptr, bias_ptr, col, col_mask, IS_RMS)
            # h again from x and residual (not the rounded h stored): y is the same as in one pass.
            x = _load_input(x_rows, residual_rows, h_rows, col, mask, "evict_first", HAS_RESIDUAL, False)
            y = (x - mean[:, None]) * rstd[:, None] * weight[None, :] + bias[None, :]
            tl.store(y_rows + col[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    if STORE_STATS:
        tl.store(mean_ptr + row, mean, mask=row_mask)
        tl.store(rstd_ptr + row, rstd, mask=row_mask)


# --- backward: LayerNorm and RMSNorm --------------------------------------------------------------


@triton.jit
def _backward_tile(
    grad_out_rows, x_rows, col, mask, weight, mean, rstd, EVICTION: tl.constexpr, IS_RMS: tl.constexpr
):
    """dy, x̂ and w·dy of a tile of rows, in fp32 (zero outside the mask)."""
    dy = tl.load(grad_out_rows + col[None, :], mask=mask, other=0.0, eviction_policy=EVICTION)
    x = tl.load(x_rows + col[None, :], mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    dy = dy.to(tl.float32)
    # RMSNorm's masked x are zero already; LayerNorm's x - mean are not.
    x_hat = x * rstd[:, None] if IS_RMS else tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
    return dy, x_hat, dy * weight[None, :]


@triton.jit
def _grad_x(
    w_dy,
    x_hat,
    c1,
    c2,
    rstd,
    grad_residual_rows,
    col,
    mask,
    IS_RMS: tl.constexpr,
    HAS_GRAD_RESIDUAL: tl.constexpr,
):
    """grad_x of a tile from the row constants, plus the incoming residual gradient where there is one."""
    if IS_RMS:
        grad_x = (w_dy - x_hat * c1[:, None]) * rstd[:, None]
    else:
        grad_x = (w_dy - (x_hat * c1[:, None] + c2[:, None])) * rstd[:, None]
    if HAS_GRAD_RESIDUAL:
        grad_x += tl.load(grad_residual_rows + col[None, :], mask=mask, other=0.0).to(tl.float32)
    return grad_x


@triton.jit
def _layer_norm_backward_kernel(
    grad_out_ptr,
    x_ptr,
    weight_ptr,
    mean_ptr,
    rstd_ptr,
    grad_residual_ptr,
    grad_x_ptr,
    partial_ptr,
    rows,
    cols: tl.constexpr,
    grad_out_row_stride,
    x_row_stride,
    grad_residual_row_stride,
    grad_x_row_stride,
    rows_per_group,
    IS_RMS: tl.constexpr,
    HAS_GRAD_RESIDUAL: tl.constexpr,
    SINGLE_PASS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    ROWS_PER_TILE: tl.constexpr,
    STAGES: tl.constexpr,
):
    """LayerNorm's backward, or with IS_RMS RMSNorm's (no mean, no c2, no bias gradient); HAS_GRAD_RESIDUAL
    adds the gradient that reaches the normalised input by the residual path."""
    # partial_ptr is [planes, programs, cols] fp32: this program's sums of dy·x̂ (plane 0) and, for
    # LayerNorm, of dy (plane 1).
    group = tl.program_id(0)
    grad_weight_partial = partial_ptr + group.to(tl.int64) * cols
    grad_bias_partial = grad_weight_partial + tl.num_programs(0).to(tl.int64) * cols
    group_start = group * rows_per_group
    group_end = tl.minimum(group_start + rows_per_group, rows)
    tile = tl.arange(0, ROWS_PER_TILE)
    lane = tl.arange(0, BLOCK_COLS)
    if SINGLE_PASS:
        col_mask = lane < cols
        weight = tl.load(weight_ptr + lane, mask=col_mask, other=0.0).to(tl.float32)
        grad_weight_sum = tl.zeros([ROWS_PER_TILE, BLOCK_COLS], tl.float32)
        grad_bias_sum = tl.zeros([ROWS_PER_TILE, BLOCK_COLS], tl.float32)
        # STAGES > 1: the tiles' loads are software-pipelined (cp.async), so the next tiles are in flight
        # while this one is reduced; two programs an SM fit in registers, too few to hide latency alone.
        for tile_start in tl.range(group_start, group_end, ROWS_PER_TILE, num_stages=STAGES):
            row = tile_start + tile
            row_mask = row < group_end
            mask = row_mask[:, None] & col_mask[None, :]
            row_offset = row[:, None].to(tl.int64)
            rstd = tl.load(rstd_ptr + row, mask=row_mask, other=0.0)
            mean = rstd if IS_RMS else tl.load(mean_ptr + row, mask=row_mask, other=0.0)
            dy, x_hat, w_dy = _backward_tile(
                grad_out_ptr + row_offset * grad_out_row_stride,
                x_ptr + row_offset * x_row_stride,
                lane,
                mask,
                weight,
                mean,
                rstd,
                "evict_first",
                IS_RMS,
            )
            c1 = tl.sum(x_hat * w_dy, axis=1) / cols
            c2 = tl.sum(w_dy, axis=1) / cols
            grad_residual_rows = grad_residual_ptr + row_offset * grad_residual_row_stride
            grad_x = _grad_x(
                w_dy, x_hat, c1, c2, rstd, grad_residual_rows, lane, mask, IS_RMS, HAS_GRAD_RESIDUAL
            )
            grad_x_rows = grad_x_ptr + row_offset * grad_x_row_stride
            tl.store(grad_x_rows + lane[None, :], grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)
            grad_weight_sum += dy * x_hat
            if not IS_RMS:
                grad_bias_sum += dy
        tl.store(grad_weight_partial + lane, tl.sum(grad_weight_sum, axis=0), mask=col_mask)
        if not IS_RMS:
            tl.store(grad_bias_partial + lane, tl.sum(grad_bias_sum, axis=0), mask=col_mask)
    else:
        # The launcher makes each group one tile of rows, so the partial sums of a column block are final.
        row = group_start + tile
        row_mask = row < group_end
        row_offset = row[:, None].to(tl.int64)
        grad_out_rows = grad_out_ptr + row_offset * grad_out_row_stride
        x_rows = x_ptr + row_offset * x_row_stride
        grad_residual_rows = grad_residual_ptr + row_offset * grad_residual_row_stride
        grad_x_rows = grad_x_ptr + row_offset * grad_x_row_stride
        rstd = tl.load(rstd_ptr + row, mask=row_mask, other=0.0)
        mean = rstd if IS_RMS else tl.load(mean_ptr + row, mask=row_mask, other=0.0)
        num_blocks = tl.cdiv(cols, BLOCK_COLS)
        c1_sum = tl.zeros([ROWS_PER_TILE, BLOCK_COLS], tl.float32)
        c2_sum = tl.zeros([ROWS_PER_TILE, BLOCK_COLS], tl.float32)
        for block in range(num_blocks):
            col = block * BLOCK_COLS + lane
            col_mask = col < cols
            mask = row_mask[:, None] & col_mask[None, :]
            weight = tl.load(weight_ptr + col, mask=col_mask, other=0.0).to(tl.float32)
            dy, x_hat, w_dy = _backward_tile(
                grad_out_rows, x_rows, col, mask, weight, mean, rstd, "evict_last", IS_RMS
            )
            c1_sum += x_hat * w_dy
            c2_sum += w_dy
        c1 = tl.sum(c1_sum, axis=1) / cols
        c2 = tl.sum(c2_sum, axis=1) / cols
        for block in range(num_blocks):
            col = block * BLOCK_COLS + lane
            col_mask = col < cols
            mask = row_mask[:, None] & col_mask[None, :]
            weight = tl.load(weight_ptr + col, mask=col_mask, other=0.0).to(tl.float32)
            dy, x_hat, w_dy = _backward_tile(
                grad_out_rows, x_rows, col, mask, weight, mean, rstd, "evict_first", IS_RMS
            )
            grad_x = _grad_x(
                w_dy, x_hat, c1, c2, rstd, grad_residual_rows, col, mask, IS_RMS, HAS_GRAD_RESIDUAL
            )
            tl.store(grad_x_rows + col[None, :], grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)
            tl.store(grad_weight_partial + col, tl.sum(dy * x_hat, axis=0), mask=col_mask)
            if not IS_RMS:
                tl.store(grad_bias_partial + col, tl.sum(dy, axis=0), mask=col_mask)


@triton.jit
def _sum_partials_kernel(
    partial_ptr, out_ptr, groups, cols, BLOCK_GROUPS: tl.constexpr, BLOCK_COLS: tl.constexpr
):
    """out[plane, col] = sum over groups of partial[plane, group, col], cast to out's dtype."""
    col = tl.program_id(0) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    plane = tl.program_id(1)
    col_mask = col < cols
    plane_ptr = partial_ptr + plane.to(tl.int64) * groups * cols
    total = tl.zeros([BLOCK_GROUPS, BLOCK_COLS], tl.float32)
    for group_start in range(0, groups, BLOCK_GROUPS):
        group = group_start + tl.arange(0, BLOCK_GROUPS)
        mask = (group < groups)[:, None] & col_mask[None, :]
        total += tl.load(plane_ptr + group[:, None].to(tl.int64) * cols + col[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + plane * cols + col, tl.sum(total, axis=0).to(out_ptr.dtype.element_ty), mask=col_mask)


# --- autotuning (GPU only) -------------------------------------------------------------------------


def _per_thread(rows: int, block_cols: int, num_warps: int) -> float:
    return rows * block_cols / (32 * num_warps)


def _forward_configs() -> list[triton.Config]:
    """Whole-row tiles for each power-of-two row length, then looped tiles (Inductor's kernel shape)."""
    configs = []
    for block_cols in (1 << n for n in range(16)):
        tiles = [
            (r, w)
            for r in (1, 2, 4, 8, 16, 32)
            for w in (4, 8, 16, 32)
            if 4 <= _per_thread(r, block_cols, w) <= 32
        ]
        for rows, warps in tiles or [(32, 4)]:
            kwargs = {"SINGLE_PASS": True, "BLOCK_COLS": block_cols, "ROWS_PER_PROGRAM": rows}
            configs.append(triton.Config(kwargs, num_warps=warps))
    looped = ((1, 512, 4), (4, 512, 4), (1, 1024, 4), (2, 1024, 8), (1, 2048, 8), (2, 2048, 8), (1, 2048, 16))
    for rows, block_cols, warps in (*looped, (1, 4096, 8), (1, 4096, 16)):
        kwargs = {"SINGLE_PASS": False, "BLOCK_COLS": block_cols, "ROWS_PER_PROGRAM": rows}
        configs.append(triton.Config(kwargs, num_warps=warps))
    return configs


def _prune_forward(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    """Whole-row tiles of this row's length (if it fits), and looped tiles no longer than the row."""
    args = {**named_args, **kwargs}
    whole_row = triton.next_power_of_2(args["cols"])
    fits = whole_row * args["x_ptr"].element_size() <= MAX_FUSED_ROW_BYTES

    def keep(config: triton.Config) -> bool:
        block_cols = config.kwargs["BLOCK_COLS"]
        return block_cols == whole_row and fits if config.kwargs["SINGLE_PASS"] else block_cols <= whole_row

    return [c for c in configs if keep(c)]


def _prune_backward(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    """Keep the tiles that give each thread 4..16 elements (enough to vectorise, few enough not to spill)."""
    block_cols = {**named_args, **kwargs}["BLOCK_COLS"]
    load = {c: _per_thread(c.kwargs["ROWS_PER_TILE"], block_cols, c.num_warps) for c in configs}
    fitting = [c for c in configs if 4 <= load[c] <= 16]
    return fitting or [max(configs, key=lambda c: load[c])]


# Whole rows in registers win for half-precision rows; for fp32 rows the looped kernel (its second read
# served from L2) often wins, by running more rows per SM: so the autotuner picks, per row length.
_forward_tuned = TunedKernel(
    _norm_forward_kernel, _forward_configs(), key=["cols", "IS_RMS", "HAS_RESIDUAL"], prune=_prune_forward
)

_backward_fused_tuned = TunedKernel(
    _layer_norm_backward_kernel,
    [
        triton.Config({"ROWS_PER_TILE": r, "STAGES": stages}, num_warps=w)
        for r in (1, 2, 4, 8, 16)
        for w in (4, 8, 16)
        for stages in (1, 2)
    ],
    key=["cols", "IS_RMS", "HAS_GRAD_RESIDUAL"],
    prune=_prune_backward,
)

_backward_looped_tuned = TunedKernel(
    _layer_norm_backward_kernel,
    [
        triton.Config({"BLOCK_COLS": block, "STAGES": 1}, num_warps=warps)
        for block, warps in ((128, 4), (256, 4), (256, 8), (512, 8), (512, 16))
    ],
    key=["cols", "IS_RMS", "HAS_GRAD_RESIDUAL"],
)


# --- launchers -------------------------------------------------------------------------------------


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """t as [rows, last dim] with a unit column stride (a view where possible)."""
    rows = t.reshape(-1, t.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def _fused_rows_per_program(block_cols: int, rows: int) -> int:
    """Rows per program for a fixed (interpreter) config: about 4096 elements a tile, at most 16 rows."""
    return max(1, min(16, 4096 // block_cols, triton.next_power_of_2(rows)))


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2  # the interpreter: a few groups, so the group logic is exercised


def _norm_forward(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    eps: float,
    *,
    is_rms: bool,
    store_stats: bool,
    residual: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, rstd, h): with a residual, y normalises h = x + residual, returned too (else h is y)."""
    cols = x.shape[-1]
    x_rows = _as_rows(x)
    rows = x_rows.shape[0]
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    h = y if residual is None else torch.empty_like(y)
    mean = torch.empty(rows if store_stats else 0, dtype=torch.float32, device=x.device)
    rstd = torch.empty_like(mean)
    if y.numel() == 0:
        return y.view(x.shape), mean, rstd, h.view(x.shape)
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual of shape {tuple(residual.shape)}: expected x's {tuple(x.shape)}")
    # x stands in for a missing residual (and y for h): never read or written.
    residual_rows = x_rows if residual is None else _as_rows(residual)
    weight = weight.contiguous()
    bias = weight if bias is None else bias.contiguous()  # RMSNorm never reads it
    args = (
        x_rows, residual_rows, weight, bias, y, h, mean, rstd, rows, cols,
        x_rows.stride(0), residual_rows.stride(0), y.stride(0), h.stride(0), eps,
    )  # fmt: skip
    flags = {"IS_RMS": is_rms, "HAS_RESIDUAL": residual is not None, "STORE_STATS": store_stats}
    if interpreting():
        block_cols = triton.next_power_of_2(cols)
        if block_cols * x.element_size() <= INTERPRETER_MAX_FUSED_ROW_BYTES:
            single_pass, per_program = True, _fused_rows_per_program(block_cols, rows)
        else:
            single_pass, per_program, block_cols = False, 1, INTERPRETER_LOOPED_BLOCK_COLS
        _norm_forward_kernel[(cdiv(rows, per_program),)](
            *args, **flags, SINGLE_PASS=single_pass, BLOCK_COLS=block_cols, ROWS_PER_PROGRAM=per_program
        )
    else:

        def grid(meta: dict[str, Any]) -> tuple[int]:
            return (cdiv(rows, meta["ROWS_PER_PROGRAM"]),)

        _forward_tuned[grid](*args, **flags)
    return y.view(x.shape), mean, rstd, h.view(x.shape)


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float = LAYER_NORM_EPS,
    *,
    return_stats: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """F.layer_norm over the last dimension; with return_stats also the fp32 mean and rstd per row."""
    y, mean, rstd, _ = _norm_forward(x, weight, bias, eps, is_rms=False, store_stats=return_stats)
    return (y, mean, rstd) if return_stats else y


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = RMS_NORM_EPS) -> torch.Tensor:
    """F.rms_norm over the last dimension: x · rsqrt(mean(x²) + eps) · weight."""
    return _norm_forward(x, weight, None, eps, is_rms=True, store_stats=False)[0]


def rms_norm_residual(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = RMS_NORM_EPS
) -> tuple[torch.Tensor, torch.Tensor]:
    """A pre-norm block's residual add and RMSNorm in one pass: (rms_norm(h) · weight, h), h = x + residual.

    The norm is taken of h in fp32 as summed, before h is rounded to x's dtype to be stored (Inductor's fused
    kernel does the same)."""
    y, _, _, h = _norm_forward(x, weight, None, eps, is_rms=True, store_stats=False, residual=residual)
    return y, h


def _norm_backward(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    grad_residual: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_x, grad_weight and grad_bias stacked [2, cols]) of LayerNorm, or of RMSNorm where mean is None
    ([1, cols]: grad_weight alone); grad_residual, if given, is added to grad_x."""
    is_rms = mean is None
    planes = 1 if is_rms else 2
    cols = x.shape[-1]
    x_rows = _as_rows(x)
    grad_out_rows = _as_rows(grad_out)
    rows = x_rows.shape[0]
    grad_x = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    if grad_x.numel() == 0:
        return grad_x.view(x.shape), torch.zeros((planes, cols), dtype=weight.dtype, device=x.device)
    rstd = rstd.reshape(-1).to(torch.float32).contiguous()
    mean = rstd if mean is None else mean.reshape(-1).to(torch.float32).contiguous()  # RMSNorm never reads it
    # grad_out stands in for a missing grad_residual: never read.
    grad_residual_rows = grad_out_rows if grad_residual is None else _as_rows(grad_residual)
    single_pass = cols <= MAX_FUSED_BACKWARD_COLS
    if single_pass:
        programs = BACKWARD_PROGRAMS_PER_SM * _sm_count(x.device)
        rows_per_group = cdiv(cdiv(rows, programs), BACKWARD_GROUP_GRANULE)
        rows_per_group *= BACKWARD_GROUP_GRANULE
    else:
        rows_per_group = LOOPED_BACKWARD_ROWS
    groups = cdiv(rows, rows_per_group)
    partial = torch.empty((planes, groups, cols), dtype=torch.float32, device=x.device)
    args = (
        grad_out_rows, x_rows, weight.contiguous(), mean, rstd, grad_residual_rows, grad_x, partial,
        rows, cols, grad_out_rows.stride(0), x_rows.stride(0), grad_residual_rows.stride(0),
        grad_x.stride(0), rows_per_group,
    )  # fmt: skip
    flags = {"IS_RMS": is_rms, "HAS_GRAD_RESIDUAL": grad_residual is not None}
    block_cols = triton.next_power_of_2(cols)
    if interpreting():
        if single_pass:
            tile = _fused_rows_per_program(block_cols, rows_per_group)
        else:
            tile, block_cols = LOOPED_BACKWARD_ROWS, INTERPRETER_LOOPED_BACKWARD_BLOCK_COLS
        _layer_norm_backward_kernel[(groups,)](
            *args, **flags, SINGLE_PASS=single_pass, BLOCK_COLS=block_cols, ROWS_PER_TILE=tile, STAGES=1
        )
    elif single_pass:
        _backward_fused_tuned[(groups,)](*args, **flags, SINGLE_PASS=True, BLOCK_COLS=block_cols)
    else:
        _backward_looped_tuned[(groups,)](
            *args, **flags, SINGLE_PASS=False, ROWS_PER_TILE=LOOPED_BACKWARD_ROWS
        )
    grads = torch.empty((planes, cols), dtype=weight.dtype, device=x.device)
    _sum_partials_kernel[(cdiv(cols, PARTIAL_BLOCK_COLS), planes)](
        partial, grads, groups, cols, BLOCK_GROUPS=PARTIAL_BLOCK_GROUPS, BLOCK_COLS=PARTIAL_BLOCK_COLS
    )
    return grad_x.view(x.shape), grads


def layer_norm_backward(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(grad_x, grad_weight, grad_bias) of LayerNorm, from the forward's fp32 mean and rstd per row."""
    grad_x, grads = _norm_backward(grad_out, x, weight, mean, rstd, None)
    return grad_x, grads[0], grads[1]


def rms_norm_backward(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_x, grad_weight) of RMSNorm, from the fp32 rstd = rsqrt(mean(x²) + eps) per row."""
    grad_x, grads = _norm_backward(grad_out, x, weight, None, rstd, None)
    return grad_x, grads[0]


def rms_norm_residual_backward(
    grad_out: torch.Tensor,
    h: torch.Tensor,
    weight: torch.Tensor,
    rstd: torch.Tensor,
    grad_residual: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_h, grad_weight) where h = x + residual fed both the RMSNorm and the residual stream: grad_h, the
    gradient of x and of residual alike, is RMSNorm's grad_x plus grad_residual (the stream's gradient)."""
    grad_h, grads = _norm_backward(grad_out, h, weight, None, rstd, grad_residual)
    return grad_h, grads[0]


# --- references and inputs -------------------------------------------------------------------------


def _layer_norm_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=LAYER_NORM_EPS)


def _rms_norm_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps=RMS_NORM_EPS)


def _rms_norm_residual_reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    return _rms_norm_reference(h, weight), h


def _rms_norm_backward_reference(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    # The formula (tests check it against autograd through F.rms_norm); written out, torch.compile fuses it.
    x_hat = x * rstd[:, None]
    w_dy = grad_out * weight
    c1 = (x_hat * w_dy).mean(dim=-1, keepdim=True)
    return (w_dy - x_hat * c1) * rstd[:, None], (grad_out * x_hat).sum(dim=0)


def _rms_norm_residual_backward_reference(
    grad_out: torch.Tensor,
    h: torch.Tensor,
    weight: torch.Tensor,
    rstd: torch.Tensor,
    grad_residual: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    grad_x, grad_weight = _rms_norm_backward_reference(grad_out, h, weight, rstd)
    return grad_x + grad_residual, grad_weight


def _layer_norm_backward_reference(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    no_bias = torch.zeros_like(weight)
    return torch.ops.aten.native_layer_norm_backward(
        grad_out, x, [x.shape[-1]], mean, rstd, weight, no_bias, [True, True, True]
    )


def _randn(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, generator: Any) -> torch.Tensor:
    return torch.randn(shape, generator=generator, device=device, dtype=dtype)


def _weight(cols: int, dtype: torch.dtype, device: torch.device, generator: Any) -> torch.Tensor:
    return 1 + 0.1 * _randn((cols,), dtype, device, generator)


def _make_layer_norm_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    rows, cols = shape["rows"], shape["cols"]
    x = _randn((rows, cols), dtype, device, generator)
    return x, _weight(cols, dtype, device, generator), 0.1 * _randn((cols,), dtype, device, generator)


def _make_rms_norm_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    rows, cols = shape["rows"], shape["cols"]
    return _randn((rows, cols), dtype, device, generator), _weight(cols, dtype, device, generator)


def _make_layer_norm_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    rows, cols = shape["rows"], shape["cols"]
    x = _randn((rows, cols), dtype, device, generator)
    weight = _weight(cols, dtype, device, generator)
    grad_out = _randn((rows, cols), dtype, device, generator)
    x32 = x.float()
    mean = x32.mean(dim=-1)
    rstd = torch.rsqrt(x32.var(dim=-1, unbiased=False) + LAYER_NORM_EPS)
    return grad_out, x, weight, mean, rstd


def _make_rms_norm_residual_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    x, weight = _make_rms_norm_inputs(shape, dtype, device, generator)
    return x, _randn(tuple(x.shape), dtype, device, generator), weight


def _make_rms_norm_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    rows, cols = shape["rows"], shape["cols"]
    x, weight = _make_rms_norm_inputs(shape, dtype, device, generator)
    grad_out = _randn((rows, cols), dtype, device, generator)
    rstd = torch.rsqrt(x.float().square().mean(dim=-1) + RMS_NORM_EPS)
    return grad_out, x, weight, rstd


def _make_rms_norm_residual_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    inputs = _make_rms_norm_backward_inputs(shape, dtype, device, generator)
    return (*inputs, _randn(tuple(inputs[0].shape), dtype, device, generator))


IMPLEMENTATIONS: dict[str, Implementation] = {
    "layernorm": Implementation(
        run=layer_norm,
        reference=_layer_norm_reference,
        make_inputs=_make_layer_norm_inputs,
        kernels=(_norm_forward_kernel,),
    ),
    "layernorm_backward": Implementation(
        run=layer_norm_backward,
        reference=_layer_norm_backward_reference,
        make_inputs=_make_layer_norm_backward_inputs,
        kernels=(_layer_norm_backward_kernel, _sum_partials_kernel),
    ),
    "rmsnorm": Implementation(
        run=rms_norm,
        reference=_rms_norm_reference,
        make_inputs=_make_rms_norm_inputs,
        kernels=(_norm_forward_kernel,),
    ),
    "rmsnorm_residual": Implementation(
        run=rms_norm_residual,
        reference=_rms_norm_residual_reference,
        make_inputs=_make_rms_norm_residual_inputs,
        kernels=(_norm_forward_kernel,),
    ),
    "rmsnorm_backward": Implementation(
        run=rms_norm_backward,
        reference=_rms_norm_backward_reference,
        make_inputs=_make_rms_norm_backward_inputs,
        kernels=(_layer_norm_backward_kernel, _sum_partials_kernel),
    ),
    "rmsnorm_residual_backward": Implementation(
        run=rms_norm_residual_backward,
        reference=_rms_norm_residual_backward_reference,
        make_inputs=_make_rms_norm_residual_backward_inputs,
        kernels=(_layer_norm_backward_kernel, _sum_partials_kernel),
    ),
}
