"""Stage 4 of the pipeline (bench), hand-written side: max-pool 2D (forward with window offsets, and backward).

Inductor lowers ``max_pool2d_with_indices`` to ``_low_memory_max_pool_with_offsets``: besides the output it
stores, per output element, the int8 offset ``kh * kernel + kw`` of the maximum inside its window rather
than an int64 index into the input (8x fewer bytes), and its backward reads those offsets back. These
kernels do the same. Both see a tensor as a matrix whose columns are contiguous in memory: NCHW as
[N*C*rows of the plane, width], channels-last as [N*H*W pixels, C]. A program takes a
[BLOCK_ROWS, BLOCK_COLS] tile, so the integer divisions that recover a pixel's (n, h, w) are done once per
tile row rather than per element (Inductor's flat kernels divide per element); the kernel size, stride and
padding are compile-time constants (a network uses very few), so the window loops unroll and the tap
offsets fold into immediates, as in Inductor's kernel.

Forward: each output element loads its ``kernel²`` taps (neighbouring outputs share taps, served from L1),
padding taps masked to -inf, and keeps the running maximum and its offset with torch's rule: a tap wins
when it is greater than the maximum so far or NaN, and the first in-bounds tap always starts the window;
so ties go to the first maximum, and a window of -inf still points at an input element. Comparisons run
in fp32, exact for every input dtype (half types widen exactly and the maximum narrows back unchanged).

Backward: ``grad_input`` is written as a gather, one program per tile of *input* pixels: an input pixel
(ih, iw) lies in the windows oh in [ceil((ih + p - k + 1) / s), floor((ih + p) / s)] (at most
ceil(k / s) of them per axis: 4 windows for ResNet's 3x3 / 2), so each pixel loads those windows' offsets
and gradients and sums the ones whose offset points back at it, in fp32. No atomics, no zero-fill pass,
deterministic, and every grad_input byte is written once (a scatter over output windows would need
atomics on overlapping windows). The tile shape is autotuned on a GPU (not yet measured: the list is
the usual pointwise one, 1024 to 4096 elements a tile).

The launchers take the window as a small int64 CPU tensor (``[kernel, stride, padding]``, and the input's
``[height, width]`` for the backward), so every launcher argument is a tensor, as the catalog's checks and
benchmarks pass them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreting

# An int8 offset holds kh * kernel + kw.
MAX_WINDOW = 127
# Fixed tiles for Triton's interpreter, which must not autotune.
INTERPRETER_TILE_ELEMENTS = 1024
INTERPRETER_BLOCK_COLS = 64


@triton.jit
def _tile_pixels(row, col, height, width, CHANNELS_LAST: tl.constexpr):
    """(image, h, w) of each element of a tile of a [.., height, width] tensor's matrix view (image: the
    batch index channels-last, the plane n*C + c for NCHW)."""
    if CHANNELS_LAST:
        # rows are pixels n*H*W + h*W + w, columns channels
        pixel = row % (height * width)
        image = (row // (height * width)).to(tl.int64)[:, None]
        h = (pixel // width)[:, None]
        w = (pixel % width)[:, None]
    else:
        # rows are plane rows (n*C + c)*H + h, columns w
        image = (row // height).to(tl.int64)[:, None]
        h = (row % height)[:, None]
        w = col[None, :]
    return image, h, w


@triton.jit
def _plane_base(image, col, channels, height, width, CHANNELS_LAST: tl.constexpr):
    """The offset of pixel (0, 0) of each element's plane in a [.., height, width] tensor, and the steps
    of h and w."""
    if CHANNELS_LAST:
        base = image * height * width * channels + col[None, :]
        h_step = width * channels
        w_step = channels
    else:
        base = image * height * width
        h_step = width
        w_step = 1
    return base, h_step, w_step


@triton.jit
def _max_pool2d_kernel(
    x_ptr,
    out_ptr,
    offset_ptr,
    rows,
    cols,
    channels,
    height,
    width,
    out_height,
    out_width,
    KERNEL: tl.constexpr,
    STRIDE: tl.constexpr,
    PADDING: tl.constexpr,
    CHANNELS_LAST: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    # The tile covers output elements; out and offset share the output's layout.
    row = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    col = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    mask = (row < rows)[:, None] & (col < cols)[None, :]
    image, out_h, out_w = _tile_pixels(row, col, out_height, out_width, CHANNELS_LAST)
    in_base, h_step, w_step = _plane_base(image, col, channels, height, width, CHANNELS_LAST)
    h_start = out_h * STRIDE - PADDING
    w_start = out_w * STRIDE - PADDING
    best = tl.full([BLOCK_ROWS, BLOCK_COLS], float("-inf"), tl.float32)
    best_offset = tl.full([BLOCK_ROWS, BLOCK_COLS], -1, tl.int32)
    for kh in tl.static_range(KERNEL):
        h = h_start + kh
        h_ok = (h >= 0) & (h < height)
        for kw in tl.static_range(KERNEL):
            w = w_start + kw
            valid = mask & h_ok & (w >= 0) & (w < width)
            tap = tl.load(x_ptr + in_base + h * h_step + w * w_step, mask=valid, other=float("-inf")).to(tl.float32)
            # torch's rule: greater, or NaN (which then stays); the first in-bounds tap starts the window
            take = valid & ((tap > best) | (tap != tap) | (best_offset < 0))
            best = tl.where(take, tap, best)
            best_offset = tl.where(take, kh * KERNEL + kw, best_offset)
    out_offsets = row[:, None].to(tl.int64) * cols + col[None, :]
    tl.store(out_ptr + out_offsets, best.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(offset_ptr + out_offsets, best_offset.to(tl.int8), mask=mask)


@triton.jit
def _max_pool2d_backward_kernel(
    grad_out_ptr,
    offset_ptr,
    grad_in_ptr,
    rows,
    cols,
    channels,
    height,
    width,
    out_height,
    out_width,
    KERNEL: tl.constexpr,
    STRIDE: tl.constexpr,
    PADDING: tl.constexpr,
    CHANNELS_LAST: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    # The tile covers input pixels; grad_out and the offsets share the output's layout.
    row = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    col = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    mask = (row < rows)[:, None] & (col < cols)[None, :]
    image, in_h, in_w = _tile_pixels(row, col, height, width, CHANNELS_LAST)
    out_base, h_step, w_step = _plane_base(image, col, channels, out_height, out_width, CHANNELS_LAST)
    # the last window on each axis that covers the pixel; earlier ones are STRIDE apart
    last_h = (in_h + PADDING) // STRIDE
    last_w = (in_w + PADDING) // STRIDE
    total = tl.zeros([BLOCK_ROWS, BLOCK_COLS], tl.float32)
    for i in tl.static_range((KERNEL + STRIDE - 1) // STRIDE):
        out_h = last_h - i
        kh = in_h + PADDING - out_h * STRIDE
        h_ok = (out_h >= 0) & (out_h < out_height) & (kh < KERNEL)
        for j in tl.static_range((KERNEL + STRIDE - 1) // STRIDE):
            out_w = last_w - j
            kw = in_w + PADDING - out_w * STRIDE
            valid = mask & h_ok & (out_w >= 0) & (out_w < out_width) & (kw < KERNEL)
            window = out_base + out_h * h_step + out_w * w_step
            offset = tl.load(offset_ptr + window, mask=valid, other=-1).to(tl.int32)
            grad = tl.load(grad_out_ptr + window, mask=valid, other=0.0).to(tl.float32)
            total += tl.where(offset == kh * KERNEL + kw, grad, 0.0)
    in_offsets = row[:, None].to(tl.int64) * cols + col[None, :]
    tl.store(grad_in_ptr + in_offsets, total.to(grad_in_ptr.dtype.element_ty), mask=mask)


# --- autotuning (GPU only) -------------------------------------------------------------------------


def _tile_configs() -> list[triton.Config]:
    """Tiles of 1024 to 4096 elements (Triton's tutorials' pointwise blocks), columns 16 to 1024 wide."""
    return [
        triton.Config({"BLOCK_ROWS": total // block_cols, "BLOCK_COLS": block_cols}, num_warps=warps)
        for total in (1024, 2048, 4096)
        for block_cols in (16, 32, 64, 128, 256, 512, 1024)
        if block_cols <= total
        for warps in (4, 8)
    ]


def _prune_tiles(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """Tiles as wide as the columns (or the widest that fits) but no wider, and no taller than the rows."""
    args = {**named_args, **kwargs}
    widths = sorted({c.kwargs["BLOCK_COLS"] for c in configs})
    widest = max([w for w in widths if w <= triton.next_power_of_2(args["cols"])], default=widths[0])
    narrowest = min(widest, 64)
    rows = triton.next_power_of_2(args["rows"])
    fitting = [c for c in configs if narrowest <= c.kwargs["BLOCK_COLS"] <= widest]
    kept = [c for c in fitting if c.kwargs["BLOCK_ROWS"] <= rows]
    smallest = min(c.kwargs["BLOCK_ROWS"] for c in fitting)
    return kept or [c for c in fitting if c.kwargs["BLOCK_ROWS"] == smallest]


_KEY = ["rows", "cols", "channels", "KERNEL", "STRIDE", "PADDING", "CHANNELS_LAST"]
_forward_tuned = TunedKernel(_max_pool2d_kernel, _tile_configs(), key=_KEY, prune=_prune_tiles)
_backward_tuned = TunedKernel(_max_pool2d_backward_kernel, _tile_configs(), key=_KEY, prune=_prune_tiles)


# --- launchers -------------------------------------------------------------------------------------


def _window(window: torch.Tensor | tuple[int, ...], size: int) -> tuple[int, ...]:
    values = tuple(int(v) for v in (window.tolist() if isinstance(window, torch.Tensor) else window))
    if len(values) != size:
        raise ValueError(f"window {values}: expected {size} numbers")
    kernel, stride, padding = values[:3]
    if kernel < 1 or stride < 1 or not 0 <= padding <= kernel // 2 or kernel * kernel > MAX_WINDOW + 1:
        raise ValueError(
            f"kernel {kernel}, stride {stride}, padding {padding}: expected padding at most half the kernel "
            f"and at most {MAX_WINDOW + 1} taps a window"
        )
    return values


def _channels_last(t: torch.Tensor) -> bool:
    """Whether t is dense channels-last (NCHW when it is both), made dense NCHW otherwise by the caller."""
    if t.dim() != 4:
        raise ValueError(f"expected an [N, C, H, W] tensor, got {tuple(t.shape)}")
    return not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last)


def _memory_format(channels_last: bool) -> torch.memory_format:
    return torch.channels_last if channels_last else torch.contiguous_format


def _matrix(shape: tuple[int, int, int, int], channels_last: bool) -> tuple[int, int]:
    """(rows, cols) of the kernels' view: [N*H*W, C] channels-last, [N*C*H, W] NCHW."""
    n, c, h, w = shape
    return (n * h * w, c) if channels_last else (n * c * h, w)


def _launch(tuned: TunedKernel, kernel: Any, args: tuple[Any, ...], rows: int, cols: int, **switches: Any) -> None:
    if rows * cols == 0:
        return
    if interpreting():
        block_cols = min(triton.next_power_of_2(cols), INTERPRETER_BLOCK_COLS)
        block_rows = min(triton.next_power_of_2(rows), INTERPRETER_TILE_ELEMENTS // block_cols)
        grid = (cdiv(rows, block_rows), cdiv(cols, block_cols))
        kernel[grid](*args, **switches, BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols)
    else:

        def tiles(meta: dict[str, Any]) -> tuple[int, int]:
            return (cdiv(rows, meta["BLOCK_ROWS"]), cdiv(cols, meta["BLOCK_COLS"]))

        tuned[tiles](*args, **switches)


def max_pool2d(x: torch.Tensor, window: torch.Tensor | tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """F.max_pool2d(x, kernel, stride, padding) (square, no dilation, floor mode) and the int8 offset
    ``kh * kernel + kw`` of each maximum in its window; ``window`` is (kernel, stride, padding)."""
    kernel, stride, padding = _window(window, 3)
    channels_last = _channels_last(x)
    x = x.contiguous(memory_format=_memory_format(channels_last))
    n, c, h, w = x.shape
    out_h, out_w = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
    if out_h < 1 or out_w < 1:
        raise ValueError(f"a {kernel}x{kernel} window does not fit a {h}x{w} input padded by {padding}")
    fmt = _memory_format(channels_last)
    out = torch.empty((n, c, out_h, out_w), dtype=x.dtype, device=x.device, memory_format=fmt)
    offsets = torch.empty((n, c, out_h, out_w), dtype=torch.int8, device=x.device, memory_format=fmt)
    rows, cols = _matrix((n, c, out_h, out_w), channels_last)
    args = (x, out, offsets, rows, cols, c, h, w, out_h, out_w)
    switches = dict(KERNEL=kernel, STRIDE=stride, PADDING=padding, CHANNELS_LAST=channels_last)
    _launch(_forward_tuned, _max_pool2d_kernel, args, rows, cols, **switches)
    return out, offsets


def max_pool2d_backward(
    grad_out: torch.Tensor, offsets: torch.Tensor, window: torch.Tensor | tuple[int, int, int, int, int]
) -> torch.Tensor:
    """grad_input of max_pool2d from the window offsets; ``window`` is (kernel, stride, padding, height,
    width), the last two the input's size. grad_input takes grad_out's layout."""
    kernel, stride, padding, h, w = _window(window, 5)
    channels_last = _channels_last(grad_out)
    fmt = _memory_format(channels_last)
    grad_out = grad_out.contiguous(memory_format=fmt)
    offsets = offsets.contiguous(memory_format=fmt)
    n, c, out_h, out_w = grad_out.shape
    if offsets.shape != grad_out.shape:
        raise ValueError(f"offsets of shape {tuple(offsets.shape)}: expected grad_out's {tuple(grad_out.shape)}")
    grad_in = torch.empty((n, c, h, w), dtype=grad_out.dtype, device=grad_out.device, memory_format=fmt)
    rows, cols = _matrix((n, c, h, w), channels_last)
    args = (grad_out, offsets, grad_in, rows, cols, c, h, w, out_h, out_w)
    switches = dict(KERNEL=kernel, STRIDE=stride, PADDING=padding, CHANNELS_LAST=channels_last)
    _launch(_backward_tuned, _max_pool2d_backward_kernel, args, rows, cols, **switches)
    return grad_in


# --- references and inputs -------------------------------------------------------------------------


def _output_grid(out_h: int, out_w: int, stride: int, padding: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The first input row and column of each window, as [out_h, 1] and [1, out_w]."""
    rows = torch.arange(out_h, device=device).view(-1, 1) * stride - padding
    return rows, torch.arange(out_w, device=device).view(1, -1) * stride - padding


def window_offsets(indices: torch.Tensor, width: int, kernel: int, stride: int, padding: int) -> torch.Tensor:
    """torch's flat input indices (ih * width + iw) of the maxima as int8 offsets kh * kernel + kw."""
    first_h, first_w = _output_grid(indices.shape[-2], indices.shape[-1], stride, padding, indices.device)
    return ((indices // width - first_h) * kernel + indices % width - first_w).to(torch.int8)


def _max_pool2d_reference(x: torch.Tensor, window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    kernel, stride, padding = _window(window, 3)
    out, indices = F.max_pool2d(x, kernel, stride, padding, return_indices=True)
    return out, window_offsets(indices, x.shape[-1], kernel, stride, padding)


def _max_pool2d_backward_reference(grad_out: torch.Tensor, offsets: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    kernel, stride, padding, h, w = _window(window, 5)
    first_h, first_w = _output_grid(offsets.shape[-2], offsets.shape[-1], stride, padding, offsets.device)
    taps = offsets.long()
    indices = (first_h + taps // kernel) * w + first_w + taps % kernel
    x = grad_out.new_empty((*grad_out.shape[:2], h, w))
    return torch.ops.aten.max_pool2d_with_indices_backward(
        grad_out, x, [kernel] * 2, [stride] * 2, [padding] * 2, [1, 1], False, indices
    )


def _geometry(shape: Mapping[str, int]) -> tuple[int, int, int]:
    return shape["kernel"], shape["stride"], shape["padding"]


def _input(shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any) -> torch.Tensor:
    dims = (shape["batch"], shape["channels"], shape["height"], shape["width"])
    x = torch.randn(dims, generator=generator, device=device, dtype=dtype)
    return x.contiguous(memory_format=_memory_format(bool(shape["channels_last"])))


def _make_forward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    # ReLU'd, as ResNet pools it: many ties at zero, which must go to the first maximum
    return torch.relu(_input(shape, dtype, device, generator)), torch.tensor(_geometry(shape))


def _make_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    kernel, stride, padding = _geometry(shape)
    x = _input(shape, dtype, device, generator)
    out, indices = F.max_pool2d(x.float(), kernel, stride, padding, return_indices=True)
    offsets = window_offsets(indices, shape["width"], kernel, stride, padding)
    fmt = _memory_format(bool(shape["channels_last"]))
    grad_out = torch.randn(out.shape, generator=generator, device=device, dtype=dtype).contiguous(memory_format=fmt)
    window = torch.tensor((kernel, stride, padding, shape["height"], shape["width"]))
    return grad_out, offsets.contiguous(memory_format=fmt), window


IMPLEMENTATIONS: dict[str, Implementation] = {
    "max_pool2d": Implementation(max_pool2d, _max_pool2d_reference, _make_forward_inputs, (_max_pool2d_kernel,)),
    "max_pool2d_backward": Implementation(
        max_pool2d_backward,
        _max_pool2d_backward_reference,
        _make_backward_inputs,
        (_max_pool2d_backward_kernel,),
    ),
}
