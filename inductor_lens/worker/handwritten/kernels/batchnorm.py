"""Stage 4 of the pipeline (bench), hand-written side: batch norm (eval and training forms, forward and backward).

BatchNorm2d normalises each channel of an [N, C, H, W] tensor: every kernel here is memory-bound, so each
reads every input byte from DRAM once and keeps per-channel arithmetic out of the per-element path. Two
kernels do the full-size work, plus a tiny one for the per-channel results:

* ``_batchnorm_pointwise_kernel`` (every pointwise form: the eval forward with its optional residual add
  and ReLU, the training forward's normalising pass, and grad_input in its eval and training forms, with
  the ReLU mask from the saved output). It sees the tensor as a matrix whose one axis carries the channel:
  NCHW as [N*C planes, H*W] (a row's channel is ``row % C``: one remainder per row, not per element),
  channels-last as [N*H*W pixels, C] (a column's channel is the column). A program takes a
  [BLOCK_ROWS, BLOCK_COLS] tile, loads the per-channel vectors once for the tile (``evict_last``: every
  program re-reads them), folds them into a scale (``weight * rsqrt(var + eps)``) per channel, and spends
  one subtract and one FMA per element. Inductor's flat kernels instead compute ``(i // (H*W)) % C`` per
  element and gather four per-channel values and an ``rsqrt`` (or a sqrt and a division) per element. Loads are contiguous along the
  columns; the tile shape is autotuned per (rows, cols) class, because H*W in a ResNet runs from 12544
  down to 49 (an NCHW 7x7 plane fills 49 of 64 lanes; its rows are not 16-byte aligned, so there a flat
  kernel would vectorise better: not yet measured on a GPU).
* ``_channel_sums_kernel`` (per-channel sums over N, H, W: the training forward's statistics, and the
  backward's sum(dy) and sum(dy * (x - mean))). One channel's elements are spread over the whole tensor, so
  the reduction is split like Inductor's split reductions: the reduction axis (pixels for channels-last,
  images for NCHW) is cut into splits so that about four programs run per SM; each program sums a
  [BLOCK_ROWS, BLOCK_COLS] tile in fp32 registers over its rows (channels-last: BLOCK_COLS adjacent
  channels, contiguous loads along C; NCHW: one channel, rows are images and columns H*W, so a 7x7 plane
  tile still holds many images in flight) and writes one fp32 partial per channel and split, no atomics,
  so the result is deterministic; the autotuner may software-pipeline the row loop's loads (``STAGES``).
  ``_channel_finish_kernel`` then sums the partials per channel and
  finishes: mean and rstd, or grad_weight = sum(dy * x̂) and grad_bias = sum(dy).

Training statistics use shifted sums: each channel's sums of ``x - K`` and ``(x - K)²`` with K the channel's
first element, then ``var = E[(x-K)²] - E[x-K]²``. Unshifted sums cancel catastrophically when |mean| >> std
(an activation channel with a large offset); shifting by a sample of the channel bounds the cancellation by
``(mean - K)² / var``, which is of order one, while keeping the sums one pass and mergeable by plain
addition across splits (Welford would cost a division per element and Chan's merge of the partials; a true
two-pass variance would read x a third time). The training forward therefore reads x twice (statistics,
then normalising), as Inductor's does. Offsets are int64 per row, so tensors past 2**31 elements work.
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

EPS = 1e-5
# Reductions: about this many programs per SM in all, and at least this many elements a program.
REDUCE_PROGRAMS_PER_SM = 4
MIN_SPLIT_ELEMENTS = 4096
# Channels per program assumed when choosing the splits of a channels-last reduction (its tile is tuned).
SPLIT_CHANNEL_BLOCK = 64
# The finishing kernel's tile of splits x channels.
FINISH_BLOCK_SPLITS = 32
FINISH_BLOCK_CHANNELS = 64
# Fixed tiles for Triton's interpreter, which must not autotune.
INTERPRETER_TILE_ELEMENTS = 1024
INTERPRETER_BLOCK_COLS = 64


# --- shared pieces -------------------------------------------------------------------------------


@triton.jit
def _channel_vector(ptr, channel, channel_mask, CHANNELS_LAST: tl.constexpr):
    """A per-channel vector as fp32, shaped to broadcast over the tile (a row, or a column)."""
    value = tl.load(ptr + channel, mask=channel_mask, other=1.0, eviction_policy="evict_last").to(tl.float32)
    return value[None, :] if CHANNELS_LAST else value[:, None]


# --- pointwise: eval forward, training normalisation, grad_input -------------------------------------


@triton.jit
def _batchnorm_pointwise_kernel(
    x_ptr,
    grad_ptr,
    other_ptr,
    out_ptr,
    mean_ptr,
    inv_ptr,
    weight_ptr,
    bias_ptr,
    sum_dy_ptr,
    sum_dy_xhat_ptr,
    rows,
    cols,
    channels,
    count,
    eps,
    MODE: tl.constexpr,
    FROM_VARIANCE: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    RELU: tl.constexpr,
    CHANNELS_LAST: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    # MODE "forward": relu((x - mean) * inv * weight + bias + residual), inv = rstd or rsqrt(var + eps);
    # "backward": dy * weight * inv; "train_backward": weight * inv * (dy - sum(dy)/M - x̂ sum(dy x̂)/M).
    # other_ptr is the residual (forward) or the saved ReLU output that masks dy (backward).
    row = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    col = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    row_mask = row < rows
    col_mask = col < cols
    mask = row_mask[:, None] & col_mask[None, :]
    offsets = row[:, None].to(tl.int64) * cols + col[None, :]
    if CHANNELS_LAST:
        channel = col
        channel_mask = col_mask
    else:
        channel = row % channels
        channel_mask = row_mask
    inv = _channel_vector(inv_ptr, channel, channel_mask, CHANNELS_LAST)
    if FROM_VARIANCE:
        inv = tl.math.rsqrt(inv + eps)
    scale = inv * _channel_vector(weight_ptr, channel, channel_mask, CHANNELS_LAST)

    if MODE == "forward":
        mean = _channel_vector(mean_ptr, channel, channel_mask, CHANNELS_LAST)
        bias = _channel_vector(bias_ptr, channel, channel_mask, CHANNELS_LAST)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        value = (x - mean) * scale + bias
        if HAS_RESIDUAL:
            value += tl.load(other_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        if RELU:
            value = tl.where(value < 0, 0.0, value)  # NaN stays NaN, as torch.relu keeps it
    else:
        grad = tl.load(grad_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        if RELU:
            # threshold_backward: no gradient where the saved ReLU output is <= 0
            saved = tl.load(other_ptr + offsets, mask=mask, other=0.0)
            grad = tl.where(saved <= 0, 0.0, grad)
        if MODE == "train_backward":
            mean = _channel_vector(mean_ptr, channel, channel_mask, CHANNELS_LAST)
            mean_dy = _channel_vector(sum_dy_ptr, channel, channel_mask, CHANNELS_LAST) / count
            slope = inv * _channel_vector(sum_dy_xhat_ptr, channel, channel_mask, CHANNELS_LAST) / count
            x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            value = (grad - mean_dy - (x - mean) * slope) * scale
        else:
            value = grad * scale
    tl.store(out_ptr + offsets, value.to(out_ptr.dtype.element_ty), mask=mask)


# --- per-channel sums: training statistics, backward reductions --------------------------------------


@triton.jit
def _channel_sums_kernel(
    a_ptr,
    x_ptr,
    saved_ptr,
    mean_ptr,
    partial_ptr,
    rows,
    cols,
    channels,
    rows_per_split,
    STATS: tl.constexpr,
    RELU_MASK: tl.constexpr,
    CHANNELS_LAST: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    STAGES: tl.constexpr,
):
    # STATS: a is x, sums of (x - K) and (x - K)² with K the channel's first element. Else a is dy (masked by
    # the saved ReLU output with RELU_MASK): sums of dy and dy * (x - mean).
    # Channels-last: rows are pixels, columns channels (BLOCK_COLS channels a program). NCHW: one channel a
    # program, rows are images (stride C*H*W), columns the channel's H*W plane.
    # partial_ptr is [2, splits, channels] fp32.
    split = tl.program_id(1)
    row_start = split * rows_per_split
    row_end = tl.minimum(row_start + rows_per_split, rows)
    tile_row = tl.arange(0, BLOCK_ROWS)
    lane = tl.arange(0, BLOCK_COLS)
    if CHANNELS_LAST:
        channel = tl.program_id(0) * BLOCK_COLS + lane
        channel_mask = channel < channels
        base = 0
        row_stride = channels
        col_blocks = 1
        centre_ptr = a_ptr + channel if STATS else mean_ptr + channel
        centre = tl.load(centre_ptr, mask=channel_mask, other=0.0).to(tl.float32)[None, :]
    else:
        channel = tl.program_id(0)
        base = channel.to(tl.int64) * cols
        row_stride = channels * cols
        col_blocks = tl.cdiv(cols, BLOCK_COLS)
        centre = tl.load(a_ptr + base if STATS else mean_ptr + channel).to(tl.float32)
    first_sum = tl.zeros([BLOCK_ROWS, BLOCK_COLS], tl.float32)
    second_sum = tl.zeros([BLOCK_ROWS, BLOCK_COLS], tl.float32)
    # STAGES > 1: the tiles' loads are software-pipelined (cp.async), several tiles in flight a program.
    for row_block in tl.range(row_start, row_end, BLOCK_ROWS, num_stages=STAGES):
        row = row_block + tile_row
        row_offsets = base + row[:, None].to(tl.int64) * row_stride
        for col_block in range(col_blocks):
            if CHANNELS_LAST:
                col = channel
                col_mask = channel_mask
            else:
                col = col_block * BLOCK_COLS + lane
                col_mask = col < cols
            mask = (row < row_end)[:, None] & col_mask[None, :]
            offsets = row_offsets + col[None, :]
            a = tl.load(a_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            if STATS:
                shifted = tl.where(mask, a - centre, 0.0)
                first_sum += shifted
                second_sum += shifted * shifted
            else:
                if RELU_MASK:
                    saved = tl.load(saved_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
                    a = tl.where(saved <= 0, 0.0, a)
                x = tl.load(x_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
                first_sum += a
                second_sum += a * (x.to(tl.float32) - centre)  # a is 0 outside the mask
    first_partial = partial_ptr + split * channels + channel
    second_partial = first_partial + tl.num_programs(1) * channels
    if CHANNELS_LAST:
        tl.store(first_partial, tl.sum(first_sum, axis=0), mask=channel_mask)
        tl.store(second_partial, tl.sum(second_sum, axis=0), mask=channel_mask)
    else:
        tl.store(first_partial, tl.sum(tl.sum(first_sum, axis=1), axis=0))
        tl.store(second_partial, tl.sum(tl.sum(second_sum, axis=1), axis=0))


@triton.jit
def _channel_finish_kernel(
    partial_ptr,
    x_ptr,
    rstd_ptr,
    first_ptr,
    second_ptr,
    splits,
    channels,
    shift_stride,
    count,
    eps,
    STATS: tl.constexpr,
    BLOCK_SPLITS: tl.constexpr,
    BLOCK_CHANNELS: tl.constexpr,
):
    """Sum the partials of each channel over the splits; STATS: first = mean, second = rstd (x's element at
    channel * shift_stride was the shift); else first = grad_weight = sum(dy (x-mean)) * rstd, second =
    grad_bias = sum(dy)."""
    channel = tl.program_id(0) * BLOCK_CHANNELS + tl.arange(0, BLOCK_CHANNELS)
    channel_mask = channel < channels
    first_total = tl.zeros([BLOCK_SPLITS, BLOCK_CHANNELS], tl.float32)
    second_total = tl.zeros([BLOCK_SPLITS, BLOCK_CHANNELS], tl.float32)
    for split_start in range(0, splits, BLOCK_SPLITS):
        split = split_start + tl.arange(0, BLOCK_SPLITS)
        mask = (split < splits)[:, None] & channel_mask[None, :]
        offsets = split[:, None] * channels + channel[None, :]
        first_total += tl.load(partial_ptr + offsets, mask=mask, other=0.0)
        second_total += tl.load(partial_ptr + splits * channels + offsets, mask=mask, other=0.0)
    first = tl.sum(first_total, axis=0)
    second = tl.sum(second_total, axis=0)
    if STATS:
        shift = tl.load(x_ptr + channel.to(tl.int64) * shift_stride, mask=channel_mask, other=0.0).to(tl.float32)
        shifted_mean = first / count
        variance = tl.maximum(second / count - shifted_mean * shifted_mean, 0.0)
        tl.store(first_ptr + channel, shift + shifted_mean, mask=channel_mask)
        tl.store(second_ptr + channel, tl.math.rsqrt(variance + eps), mask=channel_mask)
    else:
        rstd = tl.load(rstd_ptr + channel, mask=channel_mask, other=0.0)
        tl.store(first_ptr + channel, (second * rstd).to(first_ptr.dtype.element_ty), mask=channel_mask)
        tl.store(second_ptr + channel, first.to(second_ptr.dtype.element_ty), mask=channel_mask)


# --- autotuning (GPU only) -------------------------------------------------------------------------


def _tile_configs(elements: tuple[int, ...]) -> list[triton.Config]:
    """Tiles of BLOCK_ROWS x BLOCK_COLS holding one of ``elements`` elements, columns 16 to 1024 wide."""
    configs = []
    for total in elements:
        for block_cols in (16, 32, 64, 128, 256, 512, 1024):
            if block_cols <= total:
                for warps in (4, 8):
                    kwargs = {"BLOCK_ROWS": total // block_cols, "BLOCK_COLS": block_cols}
                    configs.append(triton.Config(kwargs, num_warps=warps))
    return configs


def _prune_tiles(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """Tiles as wide as the columns (or the widest that fits) but no wider, and no taller than the rows."""
    args = {**named_args, **kwargs}
    widths = sorted({c.kwargs["BLOCK_COLS"] for c in configs})
    widest = max([w for w in widths if w <= triton.next_power_of_2(args["cols"])], default=widths[0])
    narrowest = min(widest, 64)
    rows = triton.next_power_of_2(args.get("rows_per_split", args["rows"]))
    fitting = [c for c in configs if narrowest <= c.kwargs["BLOCK_COLS"] <= widest]
    kept = [c for c in fitting if c.kwargs["BLOCK_ROWS"] <= rows]
    smallest = min(c.kwargs["BLOCK_ROWS"] for c in fitting)
    return kept or [c for c in fitting if c.kwargs["BLOCK_ROWS"] == smallest]


# A pointwise tile of 1024 to 4096 elements (Triton's tutorials' pointwise blocks); the reductions keep two
# fp32 accumulators a tile element, so their tiles stay at 1024 to 2048.
_pointwise_tuned = TunedKernel(
    _batchnorm_pointwise_kernel,
    _tile_configs((1024, 2048, 4096)),
    key=["rows", "cols", "MODE", "FROM_VARIANCE", "HAS_RESIDUAL", "RELU", "CHANNELS_LAST"],
    prune=_prune_tiles,
)
_sums_tuned = TunedKernel(
    _channel_sums_kernel,
    [
        triton.Config({**config.kwargs, "STAGES": stages}, num_warps=config.num_warps)
        for config in _tile_configs((1024, 2048))
        for stages in (1, 3)
    ],
    key=["rows", "cols", "rows_per_split", "STATS", "RELU_MASK", "CHANNELS_LAST"],
    prune=_prune_tiles,
)


# --- launchers -------------------------------------------------------------------------------------


def _memory_format(channels_last: bool) -> torch.memory_format:
    return torch.channels_last if channels_last else torch.contiguous_format


def _layout(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """x dense in NCHW or channels-last order, and whether channels-last (NCHW when it is both)."""
    if x.dim() != 4:
        raise ValueError(f"expected an [N, C, H, W] tensor, got {tuple(x.shape)}")
    if x.is_contiguous():
        return x, False
    if x.is_contiguous(memory_format=torch.channels_last):
        return x, True
    return x.contiguous(), False


def _same_layout(t: torch.Tensor, x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    if t.shape != x.shape:
        raise ValueError(f"tensor of shape {tuple(t.shape)}: expected x's {tuple(x.shape)}")
    return t.contiguous(memory_format=_memory_format(channels_last))


def _matrix(x: torch.Tensor, channels_last: bool) -> tuple[int, int]:
    """(rows, cols) of the pointwise kernel's view: [N*H*W, C] channels-last, [N*C, H*W] NCHW."""
    n, c, h, w = x.shape
    return (n * h * w, c) if channels_last else (n * c, h * w)


def _vector(t: torch.Tensor, channels: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    t = t.reshape(-1)
    if t.numel() != channels:
        raise ValueError(f"per-channel vector of {t.numel()} elements: expected {channels}")
    return (t if dtype is None else t.to(dtype)).contiguous()


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2  # the interpreter: a few splits, so the split logic is exercised


def _interpreter_tile(cols: int, rows: int) -> dict[str, int]:
    block_cols = min(triton.next_power_of_2(cols), INTERPRETER_BLOCK_COLS)
    block_rows = min(triton.next_power_of_2(rows), INTERPRETER_TILE_ELEMENTS // block_cols)
    return {"BLOCK_ROWS": block_rows, "BLOCK_COLS": block_cols}


def _pointwise(
    out: torch.Tensor,
    channels_last: bool,
    *,
    mode: str,
    x: torch.Tensor | None = None,
    grad: torch.Tensor | None = None,
    other: torch.Tensor | None = None,
    mean: torch.Tensor | None = None,
    inv: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    sum_dy: torch.Tensor | None = None,
    sum_dy_xhat: torch.Tensor | None = None,
    from_variance: bool = False,
    has_residual: bool = False,
    relu: bool = False,
) -> torch.Tensor:
    rows, cols = _matrix(out, channels_last)
    n, channels, h, w = out.shape
    if out.numel() == 0:
        return out
    # out stands in for a switched-off tensor: never read.
    args = (
        x if x is not None else out, grad if grad is not None else out, other if other is not None else out, out,
        mean if mean is not None else inv, inv, weight, bias if bias is not None else inv,
        sum_dy if sum_dy is not None else inv, sum_dy_xhat if sum_dy_xhat is not None else inv,
        rows, cols, channels, float(n * h * w), EPS,
    )  # fmt: skip
    switches = dict(
        MODE=mode, FROM_VARIANCE=from_variance, HAS_RESIDUAL=has_residual, RELU=relu, CHANNELS_LAST=channels_last
    )
    if interpreting():
        tile = _interpreter_tile(cols, rows)
        grid = (cdiv(rows, tile["BLOCK_ROWS"]), cdiv(cols, tile["BLOCK_COLS"]))
        _batchnorm_pointwise_kernel[grid](*args, **switches, **tile)
    else:

        def tiles(meta: dict[str, Any]) -> tuple[int, int]:
            return (cdiv(rows, meta["BLOCK_ROWS"]), cdiv(cols, meta["BLOCK_COLS"]))

        _pointwise_tuned[tiles](*args, **switches)
    return out


def _channel_sums(
    a: torch.Tensor,
    channels_last: bool,
    *,
    stats: bool,
    x: torch.Tensor | None = None,
    saved: torch.Tensor | None = None,
    mean: torch.Tensor | None = None,
    rstd: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """STATS: (mean, rstd) per channel of a = x; else (sum(dy (x-mean)) * rstd, sum(dy)) for a = dy."""
    n, channels, h, w = a.shape
    first = torch.empty(channels, dtype=out_dtype, device=a.device)
    second = torch.empty_like(first)
    if a.numel() == 0:
        return first.zero_(), second.zero_()
    # Channels-last: rows are pixels of C channels; NCHW: rows are images, one channel's plane each.
    rows, cols = (n * h * w, channels) if channels_last else (n, h * w)
    channel_programs = cdiv(channels, SPLIT_CHANNEL_BLOCK) if channels_last else channels
    row_elements = min(channels, SPLIT_CHANNEL_BLOCK) if channels_last else h * w
    wanted = cdiv(REDUCE_PROGRAMS_PER_SM * _sm_count(a.device), channel_programs)
    splits = max(1, min(wanted, rows * row_elements // MIN_SPLIT_ELEMENTS, rows))
    rows_per_split = cdiv(rows, splits)
    splits = cdiv(rows, rows_per_split)
    partial = torch.empty((2, splits, channels), dtype=torch.float32, device=a.device)
    mean = mean if mean is not None else first  # never read with STATS
    args = (a, x if x is not None else a, saved if saved is not None else a, mean, partial, rows, cols, channels, rows_per_split)
    switches = dict(STATS=stats, RELU_MASK=saved is not None, CHANNELS_LAST=channels_last)
    if interpreting():
        tile = _interpreter_tile(cols, rows_per_split)
        grid = (cdiv(channels, tile["BLOCK_COLS"]) if channels_last else channels, splits)
        _channel_sums_kernel[grid](*args, **switches, **tile, STAGES=1)
    else:

        def programs(meta: dict[str, Any]) -> tuple[int, int]:
            return (cdiv(channels, meta["BLOCK_COLS"]) if channels_last else channels, splits)

        _sums_tuned[programs](*args, **switches)
    _channel_finish_kernel[(cdiv(channels, FINISH_BLOCK_CHANNELS),)](
        partial, a, rstd if rstd is not None else first, first, second, splits, channels,
        1 if channels_last else h * w, float(n * h * w), EPS,
        STATS=stats, BLOCK_SPLITS=FINISH_BLOCK_SPLITS, BLOCK_CHANNELS=FINISH_BLOCK_CHANNELS,
    )  # fmt: skip
    return first, second


def batch_norm(
    x: torch.Tensor,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    residual: torch.Tensor | None = None,
    *,
    relu: bool = False,
) -> torch.Tensor:
    """Eval-mode F.batch_norm (eps 1e-5), then ``+ residual`` and ReLU where asked, in one pass."""
    x, channels_last = _layout(x)
    channels = x.shape[1]
    return _pointwise(
        torch.empty_like(x), channels_last, mode="forward", x=x,
        other=None if residual is None else _same_layout(residual, x, channels_last),
        mean=_vector(running_mean, channels), inv=_vector(running_var, channels),
        weight=_vector(weight, channels), bias=_vector(bias, channels),
        from_variance=True, has_residual=residual is not None, relu=relu,
    )  # fmt: skip


def batch_norm_train(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *, relu: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training-mode F.batch_norm (batch statistics, biased variance): (y, fp32 mean, fp32 rstd)."""
    x, channels_last = _layout(x)
    channels = x.shape[1]
    mean, rstd = _channel_sums(x, channels_last, stats=True)
    y = _pointwise(
        torch.empty_like(x), channels_last, mode="forward", x=x, mean=mean, inv=rstd,
        weight=_vector(weight, channels), bias=_vector(bias, channels), relu=relu,
    )  # fmt: skip
    return y, mean, rstd


def batch_norm_backward_reduce(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    relu_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_weight, grad_bias) = (sum(dy * x̂), sum(dy)) per channel, in fp32; with ``relu_out`` (the saved
    ReLU output) dy is first zeroed where it is <= 0."""
    x, channels_last = _layout(x)
    channels = x.shape[1]
    return _channel_sums(
        _same_layout(grad_out, x, channels_last), channels_last, stats=False, x=x,
        saved=None if relu_out is None else _same_layout(relu_out, x, channels_last),
        mean=_vector(mean, channels, torch.float32), rstd=_vector(rstd, channels, torch.float32),
    )  # fmt: skip


def batch_norm_backward_input(
    grad_out: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, relu_out: torch.Tensor | None = None
) -> torch.Tensor:
    """Eval-mode grad_input = dy * weight * rstd (rstd = rsqrt(running_var + eps)), ReLU-masked with ``relu_out``."""
    grad_out, channels_last = _layout(grad_out)
    channels = grad_out.shape[1]
    return _pointwise(
        torch.empty_like(grad_out), channels_last, mode="backward", grad=grad_out,
        other=None if relu_out is None else _same_layout(relu_out, grad_out, channels_last),
        inv=_vector(rstd, channels), weight=_vector(weight, channels), relu=relu_out is not None,
    )  # fmt: skip


def batch_norm_train_backward_input(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
    grad_weight: torch.Tensor,
    grad_bias: torch.Tensor,
) -> torch.Tensor:
    """Training-mode grad_input = weight * rstd * (dy - sum(dy)/M - x̂ * sum(dy x̂)/M), M = N*H*W, from the
    per-channel sums (grad_bias = sum(dy), grad_weight = sum(dy x̂): batch_norm_backward_reduce's outputs)."""
    x, channels_last = _layout(x)
    channels = x.shape[1]
    return _pointwise(
        torch.empty_like(x), channels_last, mode="train_backward", x=x,
        grad=_same_layout(grad_out, x, channels_last), mean=_vector(mean, channels), inv=_vector(rstd, channels),
        weight=_vector(weight, channels), sum_dy=_vector(grad_bias, channels),
        sum_dy_xhat=_vector(grad_weight, channels),
    )  # fmt: skip


# --- references and inputs -------------------------------------------------------------------------


def _per_channel(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(1, -1, 1, 1)


def _batch_norm_reference(
    x: torch.Tensor,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    residual: torch.Tensor | None = None,
    *,
    relu: bool = False,
) -> torch.Tensor:
    y = F.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=EPS)
    y = y if residual is None else y + residual
    return torch.relu(y) if relu else y


def _batch_norm_train_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *, relu: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, mean, rstd = torch.ops.aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, EPS)
    return (torch.relu(y) if relu else y), mean, rstd


def _masked(grad_out: torch.Tensor, relu_out: torch.Tensor | None) -> torch.Tensor:
    return grad_out if relu_out is None else torch.ops.aten.threshold_backward(grad_out, relu_out, 0)


def _backward_reduce_reference(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    relu_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    # written out: CUDA's native_batch_norm_backward returns no weight gradient without a weight
    grad = _masked(grad_out, relu_out)
    x_hat = (x - _per_channel(mean)) * _per_channel(rstd)
    return (grad * x_hat).sum(dim=(0, 2, 3)), grad.sum(dim=(0, 2, 3))


def _backward_input_reference(
    grad_out: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, relu_out: torch.Tensor | None = None
) -> torch.Tensor:
    # aten.native_batch_norm_backward in eval mode, with rstd = rsqrt(running_var + eps) given
    return _masked(grad_out, relu_out) * _per_channel(weight * rstd)


def _train_backward_input_reference(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
    grad_weight: torch.Tensor,
    grad_bias: torch.Tensor,
) -> torch.Tensor:
    # aten's backward sums dy and dy·x̂ itself: an independent check of the sums the kernel is given
    grad_input, _, _ = torch.ops.aten.native_batch_norm_backward(
        grad_out, x, weight, None, None, mean, rstd, True, EPS, [True, False, False]
    )
    return grad_input


def _randn(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, generator: Any) -> torch.Tensor:
    return torch.randn(shape, generator=generator, device=device, dtype=dtype)


def _full_size(shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any) -> torch.Tensor:
    dims = (shape["batch"], shape["channels"], shape["height"], shape["width"])
    return _randn(dims, dtype, device, generator).contiguous(memory_format=_memory_format(bool(shape["channels_last"])))


def _affine(
    channels: int, dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    return 1 + 0.1 * _randn((channels,), dtype, device, generator), 0.1 * _randn((channels,), dtype, device, generator)


def _statistics(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel fp32 mean and rstd of x (what a training forward saves)."""
    x32 = x.float()
    return x32.mean(dim=(0, 2, 3)), torch.rsqrt(x32.var(dim=(0, 2, 3), unbiased=False) + EPS)


def _relu_out(shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any) -> torch.Tensor:
    return torch.relu(_full_size(shape, dtype, device, generator))


def _make_eval_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any, *, residual: bool = False
) -> tuple[torch.Tensor, ...]:
    channels = shape["channels"]
    x = _full_size(shape, dtype, device, generator)
    running_mean = 0.1 * _randn((channels,), dtype, device, generator)
    running_var = 0.5 + torch.rand((channels,), generator=generator, device=device, dtype=dtype)
    weight, bias = _affine(channels, dtype, device, generator)
    inputs = (x, running_mean, running_var, weight, bias)
    return (*inputs, _full_size(shape, dtype, device, generator)) if residual else inputs


def _make_train_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    # Channels with an offset several times their spread: unshifted one-pass sums would cancel.
    x = _full_size(shape, dtype, device, generator)
    offset = 4 + _randn((shape["channels"],), dtype, device, generator)
    return x + _per_channel(offset), *_affine(shape["channels"], dtype, device, generator)


def _make_reduce_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any, *, relu: bool
) -> tuple[torch.Tensor, ...]:
    x = _full_size(shape, dtype, device, generator)
    grad_out = _full_size(shape, dtype, device, generator)
    inputs = (grad_out, x, *_statistics(x))
    return (*inputs, _relu_out(shape, dtype, device, generator)) if relu else inputs


def _make_backward_input_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any, *, relu: bool
) -> tuple[torch.Tensor, ...]:
    channels = shape["channels"]
    grad_out = _full_size(shape, dtype, device, generator)
    weight, _ = _affine(channels, dtype, device, generator)
    running_var = 0.5 + torch.rand((channels,), generator=generator, device=device, dtype=torch.float32)
    relu_out = (_relu_out(shape, dtype, device, generator),) if relu else ()
    return grad_out, weight, torch.rsqrt(running_var + EPS), *relu_out


def _make_train_backward_input_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    x = _full_size(shape, dtype, device, generator)
    grad_out = _full_size(shape, dtype, device, generator)
    mean, rstd = _statistics(x)
    weight, _ = _affine(shape["channels"], dtype, device, generator)
    x_hat = (x.float() - _per_channel(mean)) * _per_channel(rstd)
    grad32 = grad_out.float()
    grad_weight, grad_bias = (grad32 * x_hat).sum(dim=(0, 2, 3)), grad32.sum(dim=(0, 2, 3))
    return grad_out, x, mean, rstd, weight, grad_weight, grad_bias


_POINTWISE = (_batchnorm_pointwise_kernel,)
_REDUCE = (_channel_sums_kernel, _channel_finish_kernel)
_TRAIN = (_batchnorm_pointwise_kernel, _channel_sums_kernel, _channel_finish_kernel)

IMPLEMENTATIONS: dict[str, Implementation] = {
    "batchnorm": Implementation(batch_norm, _batch_norm_reference, _make_eval_inputs, _POINTWISE),
    "batchnorm_relu": Implementation(
        functools.partial(batch_norm, relu=True),
        functools.partial(_batch_norm_reference, relu=True),
        _make_eval_inputs,
        _POINTWISE,
    ),
    "batchnorm_add_relu": Implementation(
        functools.partial(batch_norm, relu=True),
        functools.partial(_batch_norm_reference, relu=True),
        functools.partial(_make_eval_inputs, residual=True),
        _POINTWISE,
    ),
    "batchnorm_train": Implementation(batch_norm_train, _batch_norm_train_reference, _make_train_inputs, _TRAIN),
    "batchnorm_train_relu": Implementation(
        functools.partial(batch_norm_train, relu=True),
        functools.partial(_batch_norm_train_reference, relu=True),
        _make_train_inputs,
        _TRAIN,
    ),
    "batchnorm_backward_reduce": Implementation(
        batch_norm_backward_reduce,
        _backward_reduce_reference,
        functools.partial(_make_reduce_inputs, relu=False),
        _REDUCE,
    ),
    "batchnorm_relu_backward_reduce": Implementation(
        batch_norm_backward_reduce,
        _backward_reduce_reference,
        functools.partial(_make_reduce_inputs, relu=True),
        _REDUCE,
    ),
    "batchnorm_backward_input": Implementation(
        batch_norm_backward_input,
        _backward_input_reference,
        functools.partial(_make_backward_input_inputs, relu=False),
        _POINTWISE,
    ),
    "batchnorm_relu_backward_input": Implementation(
        batch_norm_backward_input,
        _backward_input_reference,
        functools.partial(_make_backward_input_inputs, relu=True),
        _POINTWISE,
    ),
    "batchnorm_train_backward_input": Implementation(
        batch_norm_train_backward_input,
        _train_backward_input_reference,
        _make_train_backward_input_inputs,
        _POINTWISE,
    ),
}
