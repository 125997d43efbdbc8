"""Stage 4 of the pipeline (bench), hand-written side: 2-D convolution, forward and both gradients.

Every kernel here is an *implicit GEMM*, in the style of Triton's matmul tutorial and of Inductor's
own conv templates (``torch/_inductor/kernel/conv.py`` and its ``triton_conv2d_bwd_*`` templates): the
im2col matrix is never built, each program computes the addresses of its tile of it on the fly and
feeds ``tl.dot`` (tensor cores) with an fp32 accumulator; the output is stored in the input's dtype.
For a convolution of x[N, C, H, W] by w[K, C/G, R, S] (G groups) into y[N, K, P, Q]:

* forward: rows are output pixels (n, p, q) (N·P·Q of them), columns a group's output channels, and the
  reduction runs over (r, s, c) (R·S·C/G), one flat loop over the taps times the channel blocks (as
  Inductor's template does: a nested loop pipelines only its inner part), with (r, s, block) carried from
  step to step rather than divided out. A tap whose input pixel falls in the padding is masked per row:
  each row's in-bounds taps are found once, as bits of an int32 (``TAP_BITS``, up to 32 taps), so a step
  tests a bit instead of four bounds; without padding nothing is masked, and a 1x1 unpadded convolution
  (any stride: ``ONE_TAP``) is a GEMM over rows gathered once, its pointers stepping along the channels.
  Compiled for sm_90, a padded 3x3 step of 128x128x128 went from 352 to 190 instructions a warp (its
  8 tensor-core instructions unchanged). The program's output-channel tiles are numbered fastest, so tiles
  that run together read the same input rows (the weight is small and stays in L2).
* grad_input (a transposed convolution): rows are input pixels (n, h, w), columns a group's input
  channels, the reduction runs over (r, s, k): input pixel h meets output row p = (h + padding - r·dilation)
  / stride when that is a whole number in range, masked otherwise. With stride 2, about three taps in four
  are masked for any one row and their multiply-adds wasted; the ResNet shapes this is timed on are stride
  1 (cuDNN splits a strided dgrad into stride² dense sub-problems, not done here).
* grad_weight: rows are a group's output channels, columns its input channels, one program per tap (r, s)
  so that both tiles are rectangular slices of grad_out and x, and the reduction runs over the N·P·Q
  output pixels. That reduction is long (100 352 pixels for a ResNet-50 layer at batch 32) while the
  output is small (a 64x64x3x3 weight is 9 tiles of 64x64), so the reduction is split (split-K) into
  slices of at least 512 pixels. How many is tuned with the tile: each configuration names the programs
  per SM its split aims at (0, 1, 2 or 4; the slice count keeps the programs within that, so no wave runs
  part-empty), and the tuner times each with the sum of its slices, replayed from a CUDA graph. The deep
  layers, whose weights are large next to their pixels, run unsplit; the large-pixel ones split most.
  Each slice writes an fp32 partial weight into a workspace, and a second small kernel sums the slices, 16
  at a time, and casts: deterministic, unlike ``tl.atomic_add`` into an fp32 buffer (which would need the
  same final cast pass anyway), at the price of one extra read of slices x weight floats; one slice writes
  grad_weight itself. A step's pixels are its first pixel moved on with carries (no division in the loop);
  a 1x1 stride-1 unpadded convolution whose pixels are one run of equal strides in both tensors
  (channels-last: ``DENSE_PIXELS``) is a plain GEMM.
  The forward's reduction is not split: tried on an H200, its output-sized fp32 partials cost more than
  the idle SMs they filled (ResNet-50's 14x14 3x3 layer went from 25 to 38 us).
* ``conv2d_backward`` launches the grad_input and grad_weight kernels one after the other, as
  ``aten.convolution_backward`` does when both are asked for.

Depthwise convolutions (one input channel per group, any channel multiplier) have no reduction over
channels, so a GEMM tile would be padded to ``tl.dot``'s minimum of 16 on two sides and waste 255 of 256
multiply-adds: their forward takes a direct kernel instead, a tile of output pixels x output channels
across all groups, one fp32 multiply-add per tap (memory-bound, contiguous along channels when
channels-last). Their gradients still run through the grouped GEMM kernels, correct but wasteful.

Every tensor is addressed through its four strides, so NCHW, channels-last (channels contiguous: the
loads of a tile are then contiguous along its channel axis) and strided views all work; the outputs are
channels-last when an input is, as torch makes them. Offsets are int32 unless a tensor spans 2**31
elements (``INT64_OFFSETS``), as in the matmul kernel. float32 follows the flag torch's own convolutions
follow: TF32 while ``torch.backends.cudnn.allow_tf32`` is set (the default, unlike matmul's flag), so a
float32 convolution is timed against cuDNN at the precision cuDNN ran it, and checked at TF32's
tolerance (``float32_products``); the interpreter has no TF32 and stays exact. On a
GPU the launchers autotune over the configurations of Inductor's conv list that won at ResNet-50's shapes
(block sizes, stages, warps), pruned to the tiles the channel counts can fill. A 1x1, stride-1, ungrouped
convolution on channels-last activations is a plain GEMM on the [N*H*W, C] matrix they are stored as, and
runs as the matmul kernel (forward and input gradient). Measured against cuDNN on an H200 (bf16, ResNet-50 at
batch 32, benchmarks/conv_resnet50.py, GPU time alone, the model's convolutions summed): forward 82% on
channels-last and 66% on NCHW, input gradient 90%, weight gradient 93% of cuDNN's speed
(benchmarks/results/2026-11-24-h200-conv2d.md). Fewer than ``FLAT_TAPS_BELOW`` channels per group (the 3-channel
stem) reduce over channels and taps as one axis (``FLAT_TAPS``), in the forward and the weight gradient.

The stride, padding, dilation and groups of a call are not in any tensor's shape, so the catalog's input
makers pass them (with the kernel and input sizes a gradient cannot infer) in a small CPU int64 tensor
``geometry`` = [stride, padding, dilation, groups, kernel_h, kernel_w, height, width].
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.grad import conv2d_input, conv2d_weight

from ..tuning import TunedKernel, graph_benchmark
from . import Implementation, cdiv, interpreting
from .matmul import matmul


@triton.jit
def _pixel(index, width, height):
    """(image, row, column) of flat pixel indices over [N, height, width], the column fastest: two
    divisions (each a dozen instructions on a GPU for a divisor known only at run time), the rests by
    multiply-subtract."""
    rows = index // width
    images = rows // height
    return images, rows - images * height, index - rows * width


@triton.jit
def _advance_pixel(n, p, q, dn, dp, dq, width, height):
    """Pixel (n, p, q) moved on by dn images, dp rows and dq columns, with dp < height and dq < width: each
    carry is at most one, so a compare and a select do what a division would."""
    q = q + dq
    q_carry = q >= width
    q = tl.where(q_carry, q - width, q)
    p = p + dp + q_carry.to(tl.int32)
    p_carry = p >= height
    return n + dn + p_carry.to(tl.int32), tl.where(p_carry, p - height, p), q


@triton.jit
def _blocked_tap(step, channel_blocks, kernel_w, BLOCK_K: tl.constexpr):
    """(r, s, first channel) of a reduction step over taps x channel blocks, the channel block fastest."""
    tap = step // channel_blocks
    return tap // kernel_w, tap % kernel_w, (step % channel_blocks) * BLOCK_K


@triton.jit
def _flat_tap(index, group_in, kernel_w):
    """(r, s, c) of indices over the taps and channels as one axis (FLAT_TAPS), the channel fastest."""
    return index // (group_in * kernel_w), (index // group_in) % kernel_w, index % group_in


@triton.jit
def _dot_steps(
    acc, a_ptrs, b_ptrs, a_stride, b_stride, first, last, INPUT_PRECISION: tl.constexpr, BLOCK_K: tl.constexpr
):  # fmt: skip
    """acc + a @ b over the reduction indices [first, last), a[:, k] at a_ptrs + k * a_stride and b[k, :] at
    b_ptrs + k * b_stride: a plain GEMM's loop, pointers stepped and only the reduction's tail masked."""
    offs_k = tl.arange(0, BLOCK_K)
    for start in range(first, last, BLOCK_K):
        k_ok = offs_k < last - start
        a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * a_stride
        b_ptrs += BLOCK_K * b_stride
    return acc


@triton.jit
def conv2d_forward_kernel(
    x_ptr, w_ptr, y_ptr, bias_ptr,
    batch, height, width, out_h, out_w, group_in, group_out,
    kernel_h, kernel_w, stride, padding, dilation,
    stride_xn, stride_xc, stride_xh, stride_xw,
    stride_wk, stride_wc, stride_wr, stride_ws,
    stride_yn, stride_yk, stride_yp, stride_yq,
    HAS_BIAS: tl.constexpr, INPUT_PRECISION: tl.constexpr, INT64_OFFSETS: tl.constexpr, FLAT_TAPS: tl.constexpr,
    PADDED: tl.constexpr, ONE_TAP: tl.constexpr, TAP_BITS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # Axis 0: (pixel tile, channel tile) with the channel tile fastest; axis 1: the group.
    pid = tl.program_id(axis=0)
    group = tl.program_id(axis=1)
    num_pid_n = tl.cdiv(group_out, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    # Rows: output pixels (n, p, q); columns: the group's output channels. Rows and columns past the edge are
    # wrapped onto valid ones (as in the matmul kernel), so loads need no mask for them; the store drops them.
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    pixels = batch * out_h * out_w
    row_ok = offs_m < pixels
    col_ok = offs_n < group_out
    n, p, q = _pixel(offs_m % pixels, out_w, out_h)
    if INT64_OFFSETS:
        n = n.to(tl.int64)
    top = p * stride - padding
    left = q * stride - padding
    x_rows = x_ptr + n * stride_xn + group * group_in * stride_xc
    w_cols = w_ptr + (group * group_out + offs_n % group_out) * stride_wk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if ONE_TAP:
        # 1x1 without padding (any stride): every pixel reads inside the input, so this is a GEMM whose rows
        # are gathered once and whose pointers then step along the channels, no index math in the loop.
        x_ptrs = x_rows[:, None] + (top * stride_xh + left * stride_xw)[:, None] + offs_k[None, :] * stride_xc
        w_ptrs = w_cols[None, :] + offs_k[:, None] * stride_wc
        acc = _dot_steps(acc, x_ptrs, w_ptrs, stride_xc, stride_wc, 0, group_in, INPUT_PRECISION, BLOCK_K)
    elif FLAT_TAPS:
        # Few input channels (the 3-channel stem): one reduction axis over (r, s, c) together, so a block
        # of 16+ is not mostly padding; each element finds its own tap.
        reduction = kernel_h * kernel_w * group_in
        for start in range(0, reduction, BLOCK_K):
            f = start + offs_k
            r, s, c = _flat_tap(f, group_in, kernel_w)
            f_ok = f < reduction
            h = top[:, None] + (r * dilation)[None, :]
            w = left[:, None] + (s * dilation)[None, :]
            pixel_ok = row_ok[:, None] & f_ok[None, :]
            if PADDED:
                pixel_ok = pixel_ok & (h >= 0) & (h < height) & (w >= 0) & (w < width)
            x_ptrs = x_rows[:, None] + h * stride_xh + w * stride_xw + c[None, :] * stride_xc
            a = tl.load(x_ptrs, mask=pixel_ok, other=0.0)
            w_ptrs = w_cols[None, :] + (c * stride_wc + r * stride_wr + s * stride_ws)[:, None]
            b = tl.load(w_ptrs, mask=f_ok[:, None] & col_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    else:
        # Each row's pointer at tap (0, 0), and (TAP_BITS) bit r*S + s set where tap (r, s) lands inside the
        # input: found once, so a step adds one offset per row and tests one bit instead of four bounds.
        x_base = x_rows + top * stride_xh + left * stride_xw
        if TAP_BITS:
            inside = tl.zeros((BLOCK_M,), dtype=tl.int32)
            for tap in range(0, kernel_h * kernel_w):
                h = top + (tap // kernel_w) * dilation
                w = left + (tap % kernel_w) * dilation
                inside = inside | (((h >= 0) & (h < height) & (w >= 0) & (w < width)).to(tl.int32) << tap)
        # The steps run over taps x channel blocks, the block fastest, (r, s, block) carried along.
        channel_blocks = tl.cdiv(group_in, BLOCK_K)
        r = tl.full((), 0, tl.int32)
        s = tl.full((), 0, tl.int32)
        block = tl.full((), 0, tl.int32)
        for _ in range(0, kernel_h * kernel_w * channel_blocks):
            c = block * BLOCK_K + offs_k
            c_ok = c < group_in
            # Unpadded, every tap of an output pixel lands inside the input (rows are wrapped, not masked).
            a_ok = c_ok[None, :]
            if TAP_BITS:
                a_ok = a_ok & (((inside >> (r * kernel_w + s)) & 1) != 0)[:, None]
            elif PADDED:
                h = top + r * dilation
                w = left + s * dilation
                a_ok = a_ok & ((h >= 0) & (h < height) & (w >= 0) & (w < width))[:, None]
            x_ptrs = (x_base + (r * stride_xh + s * stride_xw) * dilation)[:, None] + c[None, :] * stride_xc
            a = tl.load(x_ptrs, mask=a_ok, other=0.0)
            w_ptrs = w_cols[None, :] + c[:, None] * stride_wc + r * stride_wr + s * stride_ws
            b = tl.load(w_ptrs, mask=c_ok[:, None], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
            block += 1
            next_tap = block == channel_blocks
            block = tl.where(next_tap, 0, block)
            s = tl.where(next_tap, s + 1, s)
            next_row = s == kernel_w
            s = tl.where(next_row, 0, s)
            r = tl.where(next_row, r + 1, r)

    out_channel = group * group_out + offs_n
    if HAS_BIAS:
        acc += tl.load(bias_ptr + out_channel, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    y_ptrs = (
        y_ptr + (n * stride_yn + p * stride_yp + q * stride_yq)[:, None] + out_channel[None, :] * stride_yk
    )
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def conv2d_depthwise_kernel(
    x_ptr, w_ptr, y_ptr, bias_ptr,
    batch, height, width, out_h, out_w, out_channels, multiplier,
    kernel_h, kernel_w, stride, padding, dilation,
    stride_xn, stride_xc, stride_xh, stride_xw,
    stride_wk, stride_wr, stride_ws,
    stride_yn, stride_yk, stride_yp, stride_yq,
    HAS_BIAS: tl.constexpr, INT64_OFFSETS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # Rows: output pixels (n, p, q); columns: output channels of all groups (channel k reads input
    # channel k // multiplier), so no tile is padded for tl.dot.
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n, p, q = _pixel(offs_m, out_w, out_h)
    row_ok = n < batch
    col_ok = offs_n < out_channels
    if INT64_OFFSETS:
        n = n.to(tl.int64)
    top = p * stride - padding
    left = q * stride - padding
    x_tile = x_ptr + (n * stride_xn)[:, None] + ((offs_n // multiplier) * stride_xc)[None, :]
    w_cols = w_ptr + offs_n * stride_wk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for tap in range(0, kernel_h * kernel_w):
        r = tap // kernel_w
        s = tap % kernel_w
        h = top + r * dilation
        w = left + s * dilation
        pixel_ok = row_ok & (h >= 0) & (h < height) & (w >= 0) & (w < width)
        x_ptrs = x_tile + (h * stride_xh + w * stride_xw)[:, None]
        a = tl.load(x_ptrs, mask=pixel_ok[:, None] & col_ok[None, :], other=0.0)
        b = tl.load(w_cols + r * stride_wr + s * stride_ws, mask=col_ok, other=0.0)
        acc += a.to(tl.float32) * b.to(tl.float32)[None, :]

    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + (n * stride_yn + p * stride_yp + q * stride_yq)[:, None] + offs_n[None, :] * stride_yk
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def conv2d_backward_input_kernel(
    dy_ptr, w_ptr, dx_ptr,
    batch, height, width, out_h, out_w, group_in, group_out,
    kernel_h, kernel_w, stride, padding, dilation,
    stride_dyn, stride_dyk, stride_dyp, stride_dyq,
    stride_wk, stride_wc, stride_wr, stride_ws,
    stride_dxn, stride_dxc, stride_dxh, stride_dxw,
    INPUT_PRECISION: tl.constexpr, INT64_OFFSETS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    group = tl.program_id(axis=1)
    num_pid_n = tl.cdiv(group_in, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    # Rows: input pixels (n, h, w); columns: the group's input channels.
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n, h, w = _pixel(offs_m, width, height)
    row_ok = n < batch
    col_ok = offs_n < group_in
    if INT64_OFFSETS:
        n = n.to(tl.int64)
    dy_rows = dy_ptr + n * stride_dyn + group * group_out * stride_dyk
    w_cols = w_ptr + offs_n * stride_wc + group * group_out * stride_wk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    channel_blocks = tl.cdiv(group_out, BLOCK_K)
    for step in range(0, kernel_h * kernel_w * channel_blocks):
        r, s, first_channel = _blocked_tap(step, channel_blocks, kernel_w, BLOCK_K)
        k = first_channel + offs_k
        # Output pixel (p, q) reads input pixel (h, w) through tap (r, s) when p * stride = h + padding -
        # r * dilation; rows where that is negative, fractional or past the output are masked.
        p_scaled = h + padding - r * dilation
        q_scaled = w + padding - s * dilation
        p = p_scaled // stride
        q = q_scaled // stride
        pixel_ok = (
            row_ok & (p_scaled >= 0) & (q_scaled >= 0) & (p * stride == p_scaled) & (q * stride == q_scaled)
        )
        pixel_ok = pixel_ok & (p < out_h) & (q < out_w)
        k_ok = k < group_out
        dy_ptrs = dy_rows[:, None] + (p * stride_dyp + q * stride_dyq)[:, None] + k[None, :] * stride_dyk
        a = tl.load(dy_ptrs, mask=pixel_ok[:, None] & k_ok[None, :], other=0.0)
        w_ptrs = w_cols[None, :] + k[:, None] * stride_wk + r * stride_wr + s * stride_ws
        b = tl.load(w_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

    in_channel = group * group_in + offs_n
    dx_ptrs = (
        dx_ptr
        + (n * stride_dxn + h * stride_dxh + w * stride_dxw)[:, None]
        + in_channel[None, :] * stride_dxc
    )
    tl.store(dx_ptrs, acc.to(dx_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit(do_not_specialize=["slices"])  # one compiled kernel for every slice count the tuner tries
def conv2d_backward_weight_kernel(
    dy_ptr, x_ptr, dw_ptr, partial_ptr,
    batch, height, width, out_h, out_w, group_in, group_out,
    kernel_h, kernel_w, stride, padding, dilation, split_stride,
    stride_dyn, stride_dyk, stride_dyp, stride_dyq,
    stride_xn, stride_xc, stride_xh, stride_xw,
    stride_dwk, stride_dwc, stride_dwr, stride_dws,
    slices,
    INPUT_PRECISION: tl.constexpr, INT64_OFFSETS: tl.constexpr, FLAT_TAPS: tl.constexpr, PADDED: tl.constexpr,
    DENSE_PIXELS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # Axis 0: (output-channel tile, input-channel tile, tap) with the tap fastest, so programs that run
    # together read the same grad_out pixels; axis 1: the slice of pixels; axis 2: the group. FLAT_TAPS
    # (few input channels): the columns are (r, s, c) together, no tap axis.
    pid = tl.program_id(axis=0)
    split = tl.program_id(axis=1)
    group = tl.program_id(axis=2)
    taps = kernel_h * kernel_w
    offs_k = tl.arange(0, BLOCK_K)
    if FLAT_TAPS:
        num_pid_n = tl.cdiv(group_in * taps, BLOCK_N)
        pid_m = pid // num_pid_n
        offs_n = (pid % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = offs_n < group_in * taps
        r, s, c = _flat_tap(offs_n, group_in, kernel_w)
    else:
        num_pid_n = tl.cdiv(group_in, BLOCK_N)
        tap = pid % taps
        pid_m = (pid // taps) // num_pid_n
        offs_n = ((pid // taps) % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = offs_n < group_in
        c = offs_n
        r = tap // kernel_w
        s = tap % kernel_w

    # Rows: the group's output channels; columns: its input channels (and taps); reduction: output pixels.
    # Rows and columns past the edge are wrapped onto valid ones for the loads; the store drops them.
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_m < group_out
    dy_cols = dy_ptr + (group * group_out + offs_m % group_out) * stride_dyk
    x_cols = x_ptr + (group * group_in + c % group_in) * stride_xc

    # This slice's pixels: whole blocks, ``slices`` of them (the grid's; the last may be short or empty).
    pixels = batch * out_h * out_w
    split_pixels = tl.cdiv(tl.cdiv(pixels, slices), BLOCK_K) * BLOCK_K
    first = split * split_pixels
    last = tl.minimum(first + split_pixels, pixels)
    # A step's pixels are its first pixel (n0, p0, q0) moved on by 0 .. BLOCK_K-1: the divisions happen here,
    # once, and each step only adds with carries (the index math, not the tensor cores, bounded this loop).
    n0, p0, q0 = _pixel(first, out_w, out_h)
    offset_n, offset_p, offset_q = _pixel(offs_k, out_w, out_h)
    block_n, block_p, block_q = _pixel(tl.full((), BLOCK_K, tl.int32), out_w, out_h)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if DENSE_PIXELS:
        # 1x1, stride 1, no padding, and in both tensors pixel j at j times one stride (channels-last): a
        # plain GEMM whose pointers step along the pixels, no index math in the loop.
        j = first + offs_k
        if INT64_OFFSETS:
            j = j.to(tl.int64)
        dy_ptrs = dy_cols[:, None] + (j * stride_dyq)[None, :]
        x_ptrs = x_cols[None, :] + (j * stride_xw)[:, None]
        acc = _dot_steps(acc, dy_ptrs, x_ptrs, stride_dyq, stride_xw, first, last, INPUT_PRECISION, BLOCK_K)
    else:
        for start in range(first, last, BLOCK_K):
            j_ok = start + offs_k < last
            n, p, q = _advance_pixel(n0, p0, q0, offset_n, offset_p, offset_q, out_w, out_h)
            n0, p0, q0 = _advance_pixel(n0, p0, q0, block_n, block_p, block_q, out_w, out_h)
            if INT64_OFFSETS:
                n = n.to(tl.int64)
            dy_ptrs = dy_cols[:, None] + (n * stride_dyn + p * stride_dyp + q * stride_dyq)[None, :]
            a = tl.load(dy_ptrs, mask=j_ok[None, :], other=0.0)
            if FLAT_TAPS:
                h = (p * stride - padding)[:, None] + (r * dilation)[None, :]
                w = (q * stride - padding)[:, None] + (s * dilation)[None, :]
                pixel_ok = j_ok[:, None] & col_ok[None, :]
                if PADDED:
                    pixel_ok = pixel_ok & (h >= 0) & (h < height) & (w >= 0) & (w < width)
                x_ptrs = x_cols[None, :] + (n * stride_xn)[:, None] + h * stride_xh + w * stride_xw
                b = tl.load(x_ptrs, mask=pixel_ok, other=0.0)
            else:
                h = p * stride - padding + r * dilation
                w = q * stride - padding + s * dilation
                pixel_ok = j_ok
                if PADDED:
                    pixel_ok = pixel_ok & (h >= 0) & (h < height) & (w >= 0) & (w < width)
                x_ptrs = x_cols[None, :] + (n * stride_xn + h * stride_xh + w * stride_xw)[:, None]
                b = tl.load(x_ptrs, mask=pixel_ok[:, None], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

    # Into grad_weight itself (one slice), or into this slice's fp32 plane of the workspace, laid out as
    # grad_weight's storage.
    out_channel = group * group_out + offs_m
    offsets = out_channel[:, None] * stride_dwk + (c * stride_dwc + r * stride_dwr + s * stride_dws)[None, :]
    if slices == 1:
        tl.store(dw_ptr + offsets, acc.to(dw_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])
    else:
        tl.store(partial_ptr + split * split_stride + offsets, acc, mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def conv2d_sum_splits_kernel(partial_ptr, out_ptr, numel, splits, BLOCK: tl.constexpr, SPLIT_BLOCK: tl.constexpr):
    """out (dense, any memory format) = the sum of the splits' fp32 partials, laid out as out's storage.
    SPLIT_BLOCK slices are loaded at once: with one load per step, a small weight split 200 ways (a 64x64
    1x1 layer over 100 352 pixels) would wait out the memory's latency 200 times in a row."""
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    total = tl.zeros((SPLIT_BLOCK, BLOCK), dtype=tl.float32)
    for first in range(0, splits, SPLIT_BLOCK):
        split = first + tl.arange(0, SPLIT_BLOCK)
        ptrs = partial_ptr + split[:, None] * numel + offs[None, :]
        total += tl.load(ptrs, mask=(split < splits)[:, None] & mask[None, :], other=0.0)
    tl.store(out_ptr + offs, tl.sum(total, axis=0).to(out_ptr.dtype.element_ty), mask=mask)


# --- autotuning (GPU only) -------------------------------------------------------------------------


def _config(block_m: int, block_n: int, block_k: int, stages: int, warps: int, **more: int) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, **more}, num_stages=stages, num_warps=warps
    )


# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps). Cut from Inductor's 17-entry conv template list (torch 2.13,
# template_heuristics/triton.py) to the tiles that won at ResNet-50's shapes on an H100 (bf16, batch 32,
# forward and input gradient, NCHW and channels-last: benchmarks/conv_resnet50.py, results in
# benchmarks/results/2026-11-24-h200-handwritten-real-models.md, section 3): the model's time with these nine
# is within 0.25% of the whole list's best, for half the cold tuning. 1024x16 serves the 3-channel stem's
# input gradient.
GEMM_CONFIGS = [
    _config(*c)
    for c in (
        (128, 64, 64, 4, 4),
        (256, 64, 16, 2, 4),
        (128, 128, 128, 3, 8),
        (256, 64, 32, 2, 8),
        (64, 128, 128, 4, 4),
        (128, 128, 64, 3, 8),
        (256, 128, 64, 2, 8),
        (64, 128, 64, 4, 4),
        (1024, 16, 16, 1, 8),
    )
]
# The weight gradient's reduction over pixels is long: the matmul tutorial's square tiles won it at every
# ResNet-50 shape measured (within 0.1% of the whole 21-entry list with the first three). The 256-wide tiles
# halve the index math per multiply-add (compiled for sm_90, padded 3x3: 401 instructions a warp per
# 256x128x64 step against 263 per 128x128x64 step, while the tensor cores' work doubles). Each tile comes
# with each of SPLIT_FILLS, the programs per SM its split-K aims at (0: no split; a launcher's field, which
# the kernel never gets: _slice_count turns it into the shape's slice count), and the tuner picks the two
# together, each configuration timed with the sum of its slices. A fixed fill lost either way on an H200:
# the deep layers, whose weights are large next to their pixels, ran 2.3x slower split for two programs per
# SM than unsplit (their fp32 slices cost more than the idle SMs), the large-pixel layers faster with more.
WEIGHT_GRAD_TILES = ((64, 64, 64, 4, 4), (128, 128, 64, 3, 8), (128, 128, 32, 2, 8), (256, 128, 64, 3, 8), (128, 256, 64, 3, 8))  # fmt: skip
SPLIT_FILLS = (0, 1, 2, 4)
WEIGHT_GRAD_CONFIGS = [_config(*tile, programs_per_sm=fill) for tile in WEIGHT_GRAD_TILES for fill in SPLIT_FILLS]
# The sum of grad_weight's slices: one configuration, through TunedKernel for its light launch; BLOCK (from
# 64 to 1024 elements) so that the weight gives about PROGRAMS_PER_SM programs per SM, SUM_SPLIT_BLOCK
# slices a step.
SUM_SPLITS_CONFIGS = [triton.Config({}, num_warps=4)]
SUM_SPLIT_BLOCK = 16
# Depthwise: a memory-bound tile, wider along channels (contiguous when channels-last) where they exist.
DEPTHWISE_CONFIGS = [
    triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_stages=1, num_warps=warps)
    for block_m, block_n in ((16, 128), (32, 64), (32, 128), (64, 32), (64, 64), (128, 16), (128, 32), (256, 16))
    for warps in (4, 8)
]  # fmt: skip


def _fits(
    config: triton.Config, args: Mapping[str, Any], rows: str | None, cols: str, reduction: str | None
) -> bool:
    """A tile no more than one power of two past what the sizes fill (16 is tl.dot's minimum)."""
    kwargs = config.kwargs

    def useful(name: str | None) -> int:
        if not name:
            return 1 << 30
        size = int(args[name])
        if args.get("FLAT_TAPS") and name == "group_in":  # channels and taps are one axis then
            size *= int(args["kernel_h"]) * int(args["kernel_w"])
        return max(16, triton.next_power_of_2(size))

    return (
        kwargs["BLOCK_M"] <= useful(rows)
        and kwargs["BLOCK_N"] <= useful(cols)
        and kwargs["BLOCK_K"] <= useful(reduction)
    )


def _pruner(rows: str | None, cols: str, reduction: str | None) -> Callable[..., list[triton.Config]]:
    """An early_config_prune keeping the tiles the channel counts can fill; the smallest when none can."""

    def prune(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
        args = {**named_args, **kwargs}
        chosen = [c for c in configs if _fits(c, args, rows, cols, reduction)]
        if chosen:
            return chosen
        return [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] * c.kwargs["BLOCK_K"])]

    return prune


def _weight_grad_tiles(meta: Mapping[str, Any], config: Mapping[str, Any]) -> int:
    """Output tiles per group of grad_weight's kernel for the arguments ``meta`` and a tile: one plane of
    tiles per tap of input channels, or one of channels x taps (FLAT_TAPS)."""
    taps = meta["kernel_h"] * meta["kernel_w"]
    planes, columns = (1, meta["group_in"] * taps) if meta["FLAT_TAPS"] else (taps, meta["group_in"])
    return planes * cdiv(meta["group_out"], config["BLOCK_M"]) * cdiv(columns, config["BLOCK_N"])


def _slice_count(meta: Mapping[str, Any]) -> int:
    """grad_weight's slice count for the kernel's arguments and a configuration (``meta``): as many as keep
    its programs within ``programs_per_sm`` per SM (one for 0, or where the tiles alone are as many), each
    slice at least MIN_SPLIT_PIXELS long."""
    fill = meta["programs_per_sm"]
    if fill == 0:
        return 1
    groups = meta["dy_ptr"].shape[1] // meta["group_out"]
    tiles = groups * _weight_grad_tiles(meta, meta)
    pixels = meta["batch"] * meta["out_h"] * meta["out_w"]
    shortest = INTERPRETER_MIN_SPLIT_PIXELS if interpreting() else MIN_SPLIT_PIXELS
    return max(1, min(fill * _sms(meta["x_ptr"].device) // tiles, pixels // shortest))


def _weight_grad_choices(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> dict[tuple[tuple[Any, ...], int], triton.Config]:
    """The tiles the channel counts can fill, each with the fills that give it distinct slice counts (the
    first fill of each), by (tile, slice count)."""
    meta = {**named_args, **kwargs}
    fitting = {_tile(c) for c in _pruner("group_out", "group_in", None)(configs, named_args, **kwargs)}
    kept: dict[tuple[tuple[Any, ...], int], triton.Config] = {}
    for config in configs:
        tile = _tile(config)
        if tile in fitting:
            kept.setdefault((tile, _slice_count({**meta, **config.kwargs})), config)
    return kept


def _weight_grad_prune(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    """grad_weight's early_config_prune: _weight_grad_choices' configurations."""
    return list(_weight_grad_choices(configs, named_args, **kwargs).values())


def _tile(config: triton.Config) -> tuple[Any, ...]:
    kwargs = config.kwargs
    return (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["BLOCK_K"], config.num_warps, config.num_stages)


def _sum_tuned_slices(nargs: dict[str, Any], exception: BaseException | None = None) -> None:
    """The tuner's post hook for grad_weight: a configuration's time includes the sum of its slices."""
    slices = _slice_count(nargs)
    if exception is None and slices > 1:
        _sum_splits(nargs["partial_ptr"], nargs["dw_ptr"], slices)


# Layout is in the keys through the channel stride (1 when channels-last).
conv2d_forward_tuned = TunedKernel(
    conv2d_forward_kernel,
    GEMM_CONFIGS,
    key=["batch", "out_h", "out_w", "group_in", "group_out", "kernel_h", "kernel_w", "stride", "stride_xc",
         "FLAT_TAPS", "PADDED", "ONE_TAP"],
    prune=_pruner(None, "group_out", "group_in"),
)  # fmt: skip
conv2d_depthwise_tuned = TunedKernel(
    conv2d_depthwise_kernel,
    DEPTHWISE_CONFIGS,
    key=["batch", "out_h", "out_w", "out_channels", "kernel_h", "kernel_w", "stride", "stride_xc"],
)
conv2d_backward_input_tuned = TunedKernel(
    conv2d_backward_input_kernel,
    GEMM_CONFIGS,
    key=["batch", "height", "width", "group_in", "group_out", "kernel_h", "kernel_w", "stride", "stride_dyk"],
    prune=_pruner(None, "group_in", "group_out"),
)
conv2d_backward_weight_tuned = TunedKernel(
    conv2d_backward_weight_kernel,
    WEIGHT_GRAD_CONFIGS,
    key=["batch", "out_h", "out_w", "group_in", "group_out", "kernel_h", "kernel_w", "stride_xc", "FLAT_TAPS",
         "PADDED", "DENSE_PIXELS"],
    prune=_weight_grad_prune,
    heuristics={"slices": _slice_count},
    post_hook=_sum_tuned_slices,
    benchmark=graph_benchmark,
)  # fmt: skip
conv2d_sum_splits_tuned = TunedKernel(conv2d_sum_splits_kernel, SUM_SPLITS_CONFIGS, key=[])

# Fewer input channels per group than this: the reduction (forward) or the columns (weight gradient) run
# over channels and taps as one axis, since a channel block of tl.dot's minimum 16 would be mostly padding
# (the 3-channel stem's 7x7 convolution: 147 values per pixel in 10 blocks of 16 instead of 49).
FLAT_TAPS_BELOW = 16

# Under the interpreter: small fixed tiles, so checks stay fast; tl.dot needs 16 on every side.
INTERPRETER_GEMM_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 16}
INTERPRETER_WEIGHT_GRAD_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32}
INTERPRETER_DEPTHWISE_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 16}

# Split-K of grad_weight: slices at least MIN_SPLIT_PIXELS long. The slices' sum: PROGRAMS_PER_SM programs per SM.
PROGRAMS_PER_SM = 2
MIN_SPLIT_PIXELS = 512
# Under the interpreter: 8 SMs, slices of at least 64 pixels, so the check shapes take both paths.
INTERPRETER_SMS = 8
INTERPRETER_MIN_SPLIT_PIXELS = 64


# --- launchers -------------------------------------------------------------------------------------


class Conv2dArgs(NamedTuple):
    """The hyper-parameters of a conv2d, one value for both spatial axes."""

    stride: int = 1
    padding: int = 0
    dilation: int = 1
    groups: int = 1


# stride 1, no padding, dilation 1, one group
NO_ARGS = Conv2dArgs()


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """torch's output length of a convolution along one axis."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _channels_last(*tensors: torch.Tensor) -> bool:
    """cuDNN's rule: channels-last output when an operand is channels-last (and not also plain contiguous)."""
    return any(t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous() for t in tensors)


def _empty(size: tuple[int, ...], like: torch.Tensor, channels_last: bool) -> torch.Tensor:
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    return torch.empty(size, device=like.device, dtype=like.dtype, memory_format=memory_format)


def _int64_offsets(*tensors: torch.Tensor) -> bool:
    return any(
        sum((size - 1) * abs(st) for size, st in zip(t.shape, t.stride(), strict=True)) >= 2**31
        for t in tensors
    )


def float32_products() -> str:
    """cuDNN's rule for float32 convolutions: TF32 while ``torch.backends.cudnn.allow_tf32`` (on by default)."""
    return "tf32" if torch.backends.cudnn.allow_tf32 and not interpreting() else "ieee"


def _precision(t: torch.Tensor) -> str:
    return float32_products() if t.dtype == torch.float32 else "ieee"


def _plain_gemm(activations: torch.Tensor, kernel_h: int, kernel_w: int, args: Conv2dArgs) -> bool:
    """A 1x1 convolution with stride 1, no padding and one group on channels-last activations: every pixel's
    channels are one contiguous row, so the convolution is a GEMM on [N*H*W, C] as stored. (At ResNet-50's
    1x1 shapes the implicit GEMM reached 30-50% of cuDNN there, its index math on a reduction of 4-16 steps.)"""
    return (
        (kernel_h, kernel_w, args.stride, args.padding, args.groups) == (1, 1, 1, 0, 1)
        and activations.is_contiguous(memory_format=torch.channels_last)
    )


def _dense_pixels(t: torch.Tensor) -> bool:
    """Pixel (n, h, w) of t[N, C, H, W] at (n*H*W + h*W + w) times one stride, as in channels-last storage."""
    _, _, height, width = t.shape
    return t.stride(2) == width * t.stride(3) and t.stride(0) == height * t.stride(2)


def _pixels_by_channels(t: torch.Tensor) -> torch.Tensor:
    """A channels-last [N, C, H, W] tensor as the [N*H*W, C] matrix it is stored as (a view)."""
    return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1])


def _check_groups(channels: int, out_channels: int, groups: int) -> None:
    if groups < 1 or channels % groups or out_channels % groups:
        raise ValueError(
            f"{channels} input and {out_channels} output channels do not split into {groups} groups"
        )


def conv2d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, args: Conv2dArgs = NO_ARGS
) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride, padding, dilation, groups)`` for x[N, C, H, W], weight[K, C/G, R, S]."""
    (batch, channels, height, width), (out_channels, group_in, kernel_h, kernel_w) = x.shape, weight.shape
    stride, padding, dilation, groups = args
    _check_groups(channels, out_channels, groups)
    if group_in * groups != channels:
        raise ValueError(
            f"weight {tuple(weight.shape)} does not fit {channels} input channels in {groups} groups"
        )
    out_h = output_size(height, kernel_h, stride, padding, dilation)
    out_w = output_size(width, kernel_w, stride, padding, dilation)
    if out_h < 1 or out_w < 1:
        raise ValueError(f"a {kernel_h}x{kernel_w} kernel leaves no output on a {height}x{width} input")
    if _plain_gemm(x, kernel_h, kernel_w, args) and x.numel():
        # [N*H*W, C] @ [C, K]: already a matrix, so the tiled matmul with no index math
        rows = matmul(_pixels_by_channels(x), weight.reshape(out_channels, channels).t(), bias,
                      input_precision=_precision(x))  # fmt: skip
        return rows.view(batch, out_h, out_w, out_channels).permute(0, 3, 1, 2)
    y = _empty((batch, out_channels, out_h, out_w), x, _channels_last(x, weight))
    if y.numel() == 0:
        return y
    group_out = out_channels // groups
    geometry = (kernel_h, kernel_w, stride, padding, dilation)
    switches: dict[str, Any] = dict(HAS_BIAS=bias is not None, INT64_OFFSETS=_int64_offsets(x, y))
    pixels = batch * out_h * out_w
    if group_in == 1:
        launch_args = (
            x, weight, y, bias if bias is not None else y,
            batch, height, width, out_h, out_w, out_channels, group_out, *geometry,
            *x.stride(), weight.stride(0), weight.stride(2), weight.stride(3), *y.stride(),
        )  # fmt: skip
        if interpreting():
            config = INTERPRETER_DEPTHWISE_CONFIG
            programs = (cdiv(pixels, config["BLOCK_M"]), cdiv(out_channels, config["BLOCK_N"]))
            conv2d_depthwise_kernel[programs](*launch_args, **switches, **config)
        else:

            def depthwise_grid(meta: Mapping[str, Any]) -> tuple[int, int]:
                return (cdiv(pixels, meta["BLOCK_M"]), cdiv(out_channels, meta["BLOCK_N"]))

            conv2d_depthwise_tuned[depthwise_grid](*launch_args, **switches)
        return y
    launch_args = (
        x, weight, y, bias if bias is not None else y,
        batch, height, width, out_h, out_w, group_in, group_out, *geometry,
        *x.stride(), *weight.stride(), *y.stride(),
    )  # fmt: skip
    switches |= dict(
        INPUT_PRECISION=_precision(x), FLAT_TAPS=group_in < FLAT_TAPS_BELOW, PADDED=padding > 0,
        ONE_TAP=(kernel_h, kernel_w, padding) == (1, 1, 0), TAP_BITS=padding > 0 and kernel_h * kernel_w <= 32,
    )  # fmt: skip
    _launch_gemm(conv2d_forward_kernel, conv2d_forward_tuned, launch_args, switches, pixels, group_out, groups)
    return y


def _launch_gemm(
    kernel: Any, tuned: TunedKernel, launch_args: tuple[Any, ...], switches: dict[str, Any],
    rows: int, cols: int, groups: int,
) -> None:  # fmt: skip
    """Launch a (pixel tile x channel tile, group) GEMM kernel: fixed tiles under the interpreter."""
    if interpreting():
        config = INTERPRETER_GEMM_CONFIG
        programs = (cdiv(rows, config["BLOCK_M"]) * cdiv(cols, config["BLOCK_N"]), groups)
        kernel[programs](*launch_args, **switches, **config)
        return

    def grid(meta: Mapping[str, Any]) -> tuple[int, int]:
        return (cdiv(rows, meta["BLOCK_M"]) * cdiv(cols, meta["BLOCK_N"]), groups)

    tuned[grid](*launch_args, **switches)


def conv2d_backward_input(
    grad_out: torch.Tensor, weight: torch.Tensor, input_size: tuple[int, int], args: Conv2dArgs = NO_ARGS
) -> torch.Tensor:
    """grad of conv2d's input x[N, C, H, W] (``input_size`` = (H, W)) from grad_out[N, K, P, Q] and weight."""
    (batch, out_channels, out_h, out_w), (_, group_in, kernel_h, kernel_w) = grad_out.shape, weight.shape
    (height, width), (stride, padding, dilation, groups) = input_size, args
    _check_groups(group_in * groups, out_channels, groups)
    expected = (
        output_size(height, kernel_h, stride, padding, dilation),
        output_size(width, kernel_w, stride, padding, dilation),
    )
    if (out_h, out_w) != expected:
        raise ValueError(
            f"grad_out is {out_h}x{out_w} but a {height}x{width} input gives {expected[0]}x{expected[1]}"
        )
    if _plain_gemm(grad_out, kernel_h, kernel_w, args) and grad_out.numel() and out_channels:
        # [N*H*W, K] @ [K, C]
        rows = matmul(_pixels_by_channels(grad_out), weight.reshape(out_channels, group_in),
                      input_precision=_precision(grad_out))  # fmt: skip
        return rows.view(batch, height, width, group_in).permute(0, 3, 1, 2)
    grad_input = _empty((batch, group_in * groups, height, width), grad_out, _channels_last(grad_out, weight))
    if grad_input.numel() == 0:
        return grad_input
    if out_channels == 0:
        return grad_input.zero_()
    launch_args = (
        grad_out, weight, grad_input,
        batch, height, width, out_h, out_w, group_in, out_channels // groups,
        kernel_h, kernel_w, stride, padding, dilation,
        *grad_out.stride(), *weight.stride(), *grad_input.stride(),
    )  # fmt: skip
    switches = dict(INPUT_PRECISION=_precision(grad_out), INT64_OFFSETS=_int64_offsets(grad_out, grad_input))
    _launch_gemm(
        conv2d_backward_input_kernel, conv2d_backward_input_tuned, launch_args, switches,
        batch * height * width, group_in, groups,
    )  # fmt: skip
    return grad_input


@functools.cache
def _sm_count(device: torch.device) -> int:
    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def _sms(device: torch.device) -> int:
    """The device's SMs (INTERPRETER_SMS under the interpreter)."""
    return INTERPRETER_SMS if interpreting() else _sm_count(device)


def _programs_wanted(device: torch.device) -> int:
    """How many programs fill the device: PROGRAMS_PER_SM per SM."""
    return PROGRAMS_PER_SM * _sms(device)


class _WeightGradGrid:
    """grad_weight's grid, (tiles, slices, groups), for the configuration's tile and slice count; ``slices``
    is the count of the last configuration given it: the one that ran."""

    def __init__(self, groups: int) -> None:
        self.groups, self.slices = groups, 0

    def __call__(self, meta: Mapping[str, Any]) -> tuple[int, int, int]:
        self.slices = int(meta["slices"])
        return (_weight_grad_tiles(meta, meta), self.slices, self.groups)


# The slice count each grad_weight launch took, by its sizes, strides, dtype and device: later calls size
# the workspace for it alone (the first sizes it for every count the tuner may try).
_weight_grad_slices: dict[tuple[Any, ...], int] = {}


def conv2d_backward_weight(
    grad_out: torch.Tensor, x: torch.Tensor, kernel_size: tuple[int, int], args: Conv2dArgs = NO_ARGS
) -> torch.Tensor:
    """grad of conv2d's weight[K, C/G, R, S] (``kernel_size`` = (R, S)) from grad_out[N, K, P, Q] and x[N, C, H, W]."""
    (batch, out_channels, out_h, out_w), (_, channels, height, width) = grad_out.shape, x.shape
    (kernel_h, kernel_w), (stride, padding, dilation, groups) = kernel_size, args
    _check_groups(channels, out_channels, groups)
    group_in, group_out = channels // groups, out_channels // groups
    expected = (
        output_size(height, kernel_h, stride, padding, dilation),
        output_size(width, kernel_w, stride, padding, dilation),
    )
    if (out_h, out_w) != expected:
        raise ValueError(
            f"grad_out is {out_h}x{out_w} but a {height}x{width} input gives {expected[0]}x{expected[1]}"
        )
    grad_weight = _empty((out_channels, group_in, kernel_h, kernel_w), x, _channels_last(grad_out, x))
    if grad_weight.numel() == 0:
        return grad_weight
    pixels = batch * out_h * out_w
    if pixels == 0:
        return grad_weight.zero_()
    switches = dict(
        INPUT_PRECISION=_precision(x), INT64_OFFSETS=_int64_offsets(grad_out, x),
        FLAT_TAPS=group_in < FLAT_TAPS_BELOW, PADDED=padding > 0,
        DENSE_PIXELS=(kernel_h, kernel_w, stride, padding) == (1, 1, 1, 0)
        and _dense_pixels(grad_out) and _dense_pixels(x),
    )  # fmt: skip
    # What the pruner and the tile count read of the kernel's arguments.
    meta = dict(dy_ptr=grad_out, x_ptr=x, batch=batch, out_h=out_h, out_w=out_w, group_in=group_in,
                group_out=group_out, kernel_h=kernel_h, kernel_w=kernel_w, **switches)  # fmt: skip
    launch_key = (grad_out.shape, grad_out.stride(), grad_out.dtype, x.shape, x.stride(), x.dtype, x.device, kernel_size, args)
    config: dict[str, Any] = {}
    if interpreting():  # the largest fill, so that the checks take the sum's path
        planes = _slice_count({**meta, **INTERPRETER_WEIGHT_GRAD_CONFIG, "programs_per_sm": max(SPLIT_FILLS)})
        config = {**INTERPRETER_WEIGHT_GRAD_CONFIG, "slices": planes}
    else:
        planes = _weight_grad_slices.get(launch_key) or max(
            slices for _, slices in _weight_grad_choices(WEIGHT_GRAD_CONFIGS, meta)
        )
    # Several slices: fp32 partials in grad_weight's storage order, one weight-sized plane per slice. One
    # slice writes grad_weight itself; its workspace is an empty fp32 tensor, so the compiled kernel is the same.
    partials = torch.empty((planes if planes > 1 else 0, grad_weight.numel()), device=x.device, dtype=torch.float32)
    launch_args = (
        grad_out, x, grad_weight, partials,
        batch, height, width, out_h, out_w, group_in, group_out,
        kernel_h, kernel_w, stride, padding, dilation, grad_weight.numel(),
        *grad_out.stride(), *x.stride(), *grad_weight.stride(),
    )  # fmt: skip
    grid = _WeightGradGrid(groups)
    if interpreting():
        conv2d_backward_weight_kernel[grid](*launch_args, **switches, **config)
    else:
        conv2d_backward_weight_tuned[grid](*launch_args, **switches)
        _weight_grad_slices[launch_key] = grid.slices
    if grid.slices > 1:
        _sum_splits(partials, grad_weight, grid.slices)
    return grad_weight


def _sum_splits(partials: torch.Tensor, out: torch.Tensor, splits: int) -> None:
    numel = out.numel()
    block = min(1024, max(64, triton.next_power_of_2(cdiv(numel, _programs_wanted(out.device)))))
    kernel = conv2d_sum_splits_kernel if interpreting() else conv2d_sum_splits_tuned
    kernel[(cdiv(numel, block),)](partials, out, numel, splits, BLOCK=block, SPLIT_BLOCK=SUM_SPLIT_BLOCK)


def conv2d_backward(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, args: Conv2dArgs = NO_ARGS
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_input, grad_weight) of conv2d, as ``aten.convolution_backward`` with output_mask [True, True, False]."""
    grad_input = conv2d_backward_input(grad_out, weight, (x.shape[2], x.shape[3]), args)
    grad_weight = conv2d_backward_weight(grad_out, x, (weight.shape[2], weight.shape[3]), args)
    return grad_input, grad_weight


# --- references and inputs -------------------------------------------------------------------------


class Geometry(NamedTuple):
    """What a catalog check passes besides the tensors (the ``geometry`` input, see the module docstring)."""

    args: Conv2dArgs
    kernel_size: tuple[int, int]
    input_size: tuple[int, int]


def _geometry(geometry: torch.Tensor) -> Geometry:
    stride, padding, dilation, groups, kernel_h, kernel_w, height, width = geometry.tolist()
    return Geometry(Conv2dArgs(stride, padding, dilation, groups), (kernel_h, kernel_w), (height, width))


def make_conv_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """x, weight, grad_out and geometry for a catalog shape, in NCHW or channels-last."""
    batch, channels, height, width = shape["batch"], shape["in_channels"], shape["height"], shape["width"]
    out_channels, kernel_h, kernel_w, groups = (
        shape["out_channels"],
        shape["kernel_h"],
        shape["kernel_w"],
        shape["groups"],
    )
    stride, padding, dilation = shape["stride"], shape["padding"], shape["dilation"]
    _check_groups(channels, out_channels, groups)
    out_h = output_size(height, kernel_h, stride, padding, dilation)
    out_w = output_size(width, kernel_w, stride, padding, dilation)
    if out_h < 1 or out_w < 1:
        raise ValueError(f"a {kernel_h}x{kernel_w} kernel leaves no output on a {height}x{width} input")
    memory_format = torch.channels_last if shape["channels_last"] else torch.contiguous_format

    def randn(*size: int, scale: float = 1.0) -> torch.Tensor:
        t = torch.randn(*size, generator=generator, device=device, dtype=torch.float32) * scale
        return t.to(dtype).contiguous(memory_format=memory_format)

    group_in = channels // groups
    # The weight scaled by fan_in**-0.5, so the output stays O(1) for any reduction length.
    return {
        "x": randn(batch, channels, height, width),
        "weight": randn(
            out_channels, group_in, kernel_h, kernel_w, scale=(group_in * kernel_h * kernel_w) ** -0.5
        ),
        "grad_out": randn(batch, out_channels, out_h, out_w),
        "geometry": torch.tensor([stride, padding, dilation, groups, kernel_h, kernel_w, height, width]),
    }


def _make_inputs(
    *names: str,
) -> Callable[[Mapping[str, int], torch.dtype, torch.device, torch.Generator], tuple[torch.Tensor, ...]]:
    def make_inputs(
        shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: torch.Generator
    ) -> tuple[torch.Tensor, ...]:
        tensors = make_conv_inputs(shape, dtype, device, generator)
        return tuple(tensors[name] for name in names)

    return make_inputs


def _forward_reference(x: torch.Tensor, weight: torch.Tensor, geometry: torch.Tensor) -> torch.Tensor:
    stride, padding, dilation, groups = _geometry(geometry).args
    return F.conv2d(x, weight, None, stride, padding, dilation, groups)


def _backward_input_reference(
    grad_out: torch.Tensor, weight: torch.Tensor, geometry: torch.Tensor
) -> torch.Tensor:
    (stride, padding, dilation, groups), _, (height, width) = _geometry(geometry)
    size = (grad_out.shape[0], weight.shape[1] * groups, height, width)
    return conv2d_input(size, weight, grad_out, stride, padding, dilation, groups)


def _backward_weight_reference(
    grad_out: torch.Tensor, x: torch.Tensor, geometry: torch.Tensor
) -> torch.Tensor:
    (stride, padding, dilation, groups), (kernel_h, kernel_w), _ = _geometry(geometry)
    size = (grad_out.shape[1], x.shape[1] // groups, kernel_h, kernel_w)
    return conv2d_weight(x, size, grad_out, stride, padding, dilation, groups)


def _backward_reference(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, geometry: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    stride, padding, dilation, groups = _geometry(geometry).args
    grad_input, grad_weight, _ = torch.ops.aten.convolution_backward(
        grad_out, x, weight, None, [stride] * 2, [padding] * 2, [dilation] * 2, False, [0, 0], groups,
        [True, True, False],
    )  # fmt: skip
    return grad_input, grad_weight


def _run_forward(x: torch.Tensor, weight: torch.Tensor, geometry: torch.Tensor) -> torch.Tensor:
    return conv2d(x, weight, None, _geometry(geometry).args)


def _run_backward_input(grad_out: torch.Tensor, weight: torch.Tensor, geometry: torch.Tensor) -> torch.Tensor:
    args, _, input_size = _geometry(geometry)
    return conv2d_backward_input(grad_out, weight, input_size, args)


def _run_backward_weight(grad_out: torch.Tensor, x: torch.Tensor, geometry: torch.Tensor) -> torch.Tensor:
    args, kernel_size, _ = _geometry(geometry)
    return conv2d_backward_weight(grad_out, x, kernel_size, args)


def _run_backward(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, geometry: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return conv2d_backward(grad_out, x, weight, _geometry(geometry).args)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "conv2d": Implementation(
        run=_run_forward,
        reference=_forward_reference,
        make_inputs=_make_inputs("x", "weight", "geometry"),
        kernels=(conv2d_forward_kernel, conv2d_depthwise_kernel),
        float32_products=float32_products,
    ),
    "conv2d_backward_input": Implementation(
        run=_run_backward_input,
        reference=_backward_input_reference,
        make_inputs=_make_inputs("grad_out", "weight", "geometry"),
        kernels=(conv2d_backward_input_kernel,),
        float32_products=float32_products,
    ),
    "conv2d_backward_weight": Implementation(
        run=_run_backward_weight,
        reference=_backward_weight_reference,
        make_inputs=_make_inputs("grad_out", "x", "geometry"),
        kernels=(conv2d_backward_weight_kernel, conv2d_sum_splits_kernel),
        float32_products=float32_products,
    ),
    "conv2d_backward": Implementation(
        run=_run_backward,
        reference=_backward_reference,
        make_inputs=_make_inputs("grad_out", "x", "weight", "geometry"),
        kernels=(conv2d_backward_input_kernel, conv2d_backward_weight_kernel, conv2d_sum_splits_kernel),
        float32_products=float32_products,
    ),
}
