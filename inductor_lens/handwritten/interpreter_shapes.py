"""Stage 4 of the pipeline (bench), hand-written side: how large a check under Triton's interpreter (CPU) may be,
and the smaller shape a catalog entry is checked on there (``interpreter_shape``).

The interpreter's time follows a launch's programs and the steps of their loops, not its MACs: matmuls and
convolutions are held to INTERPRETER_STEPS program steps, every check to INTERPRETER_ELEMENTS and
INTERPRETER_MACS. No torch import.
"""

from __future__ import annotations

from collections.abc import Callable

from .equivalent import Equivalent, Shape

# The interpreter runs a launch's programs one after another, each operation of each a numpy call on a tile: a
# check's time follows its programs and the steps of their inner loops, not its MACs (a depthwise 7x7
# convolution's input gradient on 2x32x16x16, 0.4 M multiply-adds, took 141 s: 512 programs of 49 tl.dot steps).
# Convolutions (``Equivalent.interpreter_steps``) and matmuls are held to this many program steps, about 2 s on
# 2 cores at the 3-9 ms a step measured (2026-11-27).
INTERPRETER_STEPS = 300
# A program's own work (its prologue, index math and store), counted in steps of its loop.
PROGRAM_STEPS = 2
# The interpreter's fixed tiles, as kernels/matmul.py's INTERPRETER_CONFIG and kernels/conv.py's INTERPRETER_*
# configurations set them (a unit test keeps them equal): (BLOCK_M, BLOCK_N, BLOCK_K).
MATMUL_TILE = (32, 32, 32)
CONV_GEMM_TILE = (32, 16, 16)
CONV_WEIGHT_GRAD_TILE = (16, 16, 32)
CONV_DEPTHWISE_TILE = (32, 16)
# kernels/conv.py under the interpreter: FLAT_TAPS_BELOW, INTERPRETER_SMS, the largest of SPLIT_FILLS and
# INTERPRETER_MIN_SPLIT_PIXELS (the weight gradient's slices).
CONV_FLAT_TAPS_BELOW = 16
CONV_SLICE_PROGRAMS = 8 * 4
CONV_MIN_SLICE_PIXELS = 64


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _matmul_steps(m: int, n: int, k: int) -> int:
    block_m, block_n, block_k = MATMUL_TILE
    return _cdiv(m, block_m) * _cdiv(n, block_n) * (PROGRAM_STEPS + _cdiv(k, block_k))


def conv_steps(*passes: str) -> Callable[[Shape], int]:
    """The program steps of a convolution's launches under the interpreter: ``passes`` of "forward", "input"
    (its input gradient) and "weight" (its weight gradient), each as kernels/conv.py launches it there."""

    def steps(shape: Shape) -> int:
        batch, channels, height, width = shape["batch"], shape["in_channels"], shape["height"], shape["width"]
        groups, kernel_h, kernel_w = shape["groups"], shape["kernel_h"], shape["kernel_w"]
        stride, padding, dilation = shape["stride"], shape["padding"], shape["dilation"]
        group_in, group_out = channels // groups, shape["out_channels"] // groups
        out_h = max(0, (height + 2 * padding - dilation * (kernel_h - 1) - 1) // stride + 1)
        out_w = max(0, (width + 2 * padding - dilation * (kernel_w - 1) - 1) // stride + 1)
        pixels, out_pixels, taps = batch * height * width, batch * out_h * out_w, kernel_h * kernel_w
        # 1x1, stride 1, unpadded, one group, channels-last: the matmul kernel on [pixels, channels]
        plain = (kernel_h, kernel_w, stride, padding, groups, shape["channels_last"]) == (1, 1, 1, 0, 1, 1)
        block_m, block_n, block_k = CONV_GEMM_TILE
        total = 0
        if "forward" in passes:
            if plain:
                total += _matmul_steps(pixels, shape["out_channels"], channels)
            elif group_in == 1:
                programs = _cdiv(out_pixels, CONV_DEPTHWISE_TILE[0]) * _cdiv(shape["out_channels"], CONV_DEPTHWISE_TILE[1])
                total += programs * (PROGRAM_STEPS + taps)
            else:
                if (kernel_h, kernel_w, padding) == (1, 1, 0):
                    loop = _cdiv(group_in, block_k)
                elif group_in < CONV_FLAT_TAPS_BELOW:
                    loop = _cdiv(taps * group_in, block_k)
                else:
                    loop = taps * _cdiv(group_in, block_k)
                total += _cdiv(out_pixels, block_m) * _cdiv(group_out, block_n) * groups * (PROGRAM_STEPS + loop)
        if "input" in passes:
            if plain:
                total += _matmul_steps(pixels, channels, shape["out_channels"])
            else:
                programs = _cdiv(pixels, block_m) * _cdiv(group_in, block_n) * groups
                total += programs * (PROGRAM_STEPS + taps * _cdiv(group_out, block_k))
        if "weight" in passes:
            flat = group_in < CONV_FLAT_TAPS_BELOW
            planes, columns = (1, group_in * taps) if flat else (taps, group_in)
            weight_m, weight_n, weight_k = CONV_WEIGHT_GRAD_TILE
            tiles = groups * planes * _cdiv(group_out, weight_m) * _cdiv(columns, weight_n)
            slices = max(1, min(CONV_SLICE_PROGRAMS // tiles, out_pixels // CONV_MIN_SLICE_PIXELS))
            # each slice a program; the pixel blocks are shared among a tile's slices
            total += tiles * (slices * PROGRAM_STEPS + _cdiv(out_pixels, weight_k))
        return total

    return steps


def _tiled_shrink(size: int, tile: int) -> int:
    """About half of ``size`` with the same remainder by ``tile``, and at least one whole tile where it had one:
    the partial tile (its masks) is still exercised where it was, and no new one is made."""
    whole = size // tile
    return size % tile + tile * max(1, whole // 2) if whole > 1 else size


# Under the Triton interpreter, checks run on at most this many elements (or multiply-adds).
INTERPRETER_ELEMENTS = 1 << 18
INTERPRETER_MACS = 1 << 23


def interpreter_shape(equivalent: Equivalent, shape: dict[str, int]) -> dict[str, int]:
    """A smaller shape for a CPU check under the interpreter: fewer rows (or M, N, batch, heads, seq; a
    convolution's groups, channels, pixels and batch)."""
    reduced = dict(shape)
    if equivalent.family == "convolution":
        return _conv_interpreter_shape(equivalent, reduced)
    if equivalent.shrink:
        # halve the shrinkable dimensions in turn until bytes and FLOPs are within the interpreter's budget
        def too_large() -> bool:
            moved, flops = equivalent.cost(reduced, 4)
            return moved > 4 * INTERPRETER_ELEMENTS or flops > 2 * INTERPRETER_MACS

        while too_large() and any(reduced[d] > 1 for d in equivalent.shrink):
            for dim in equivalent.shrink:
                if reduced[dim] > 1 and too_large():
                    reduced[dim] = (reduced[dim] + 1) // 2
        return reduced
    if equivalent.family in ("elementwise", "row-wise"):
        reduced["rows"] = max(1, min(shape["rows"], INTERPRETER_ELEMENTS // max(1, shape["cols"])))
    elif equivalent.family == "matmul":
        # M and N first (K, the reduction, last), each keeping its partial tile
        def matmul_too_large() -> bool:
            m, n, k = reduced["M"], reduced["N"], reduced["K"]
            return m * n * k > INTERPRETER_MACS or _matmul_steps(m, n, k) > INTERPRETER_STEPS

        for dims in (("M", "N"), ("K",)):
            while matmul_too_large() and any(_tiled_shrink(reduced[d], MATMUL_TILE[0]) < reduced[d] for d in dims):
                for dim in dims:
                    if matmul_too_large():
                        reduced[dim] = _tiled_shrink(reduced[dim], MATMUL_TILE[0])
    else:
        for dim in ("batch", "heads", "seq"):
            while reduced[dim] > 1 and _attention_macs(reduced) > INTERPRETER_MACS:
                reduced[dim] = (reduced[dim] + 1) // 2
    return reduced


def _conv_interpreter_shape(equivalent: Equivalent, reduced: dict[str, int]) -> dict[str, int]:
    """A convolution within the interpreter's program steps, bytes and MACs, reduced in this order while too
    large: its groups (to 2, so the group offsets are still exercised), the channels of a group (keeping their
    partial tile, and the few-channel path below CONV_FLAT_TAPS_BELOW), height and width (to the kernel's extent:
    padded and whole windows both remain), the batch, and last the groups to 1."""
    assert equivalent.interpreter_steps is not None
    steps = equivalent.interpreter_steps
    group_in, group_out = reduced["in_channels"] // reduced["groups"], reduced["out_channels"] // reduced["groups"]

    def too_large() -> bool:
        moved, flops = equivalent.cost(reduced, 4)
        return steps(reduced) > INTERPRETER_STEPS or moved > 4 * INTERPRETER_ELEMENTS or flops > 2 * INTERPRETER_MACS

    def set_channels(groups: int, per_group_in: int, per_group_out: int) -> None:
        reduced.update(groups=groups, in_channels=groups * per_group_in, out_channels=groups * per_group_out)

    def fewer_groups(least: int) -> bool:
        if reduced["groups"] <= least:
            return False
        set_channels(max(least, (reduced["groups"] + 1) // 2), group_in, group_out)
        return True

    def fewer_channels() -> bool:
        nonlocal group_in, group_out
        # a whole tile of 16 stays, so a group of 16 or more input channels keeps off the few-channel path
        shrunk_in = _tiled_shrink(group_in, CONV_FLAT_TAPS_BELOW)
        shrunk_out = _tiled_shrink(group_out, CONV_GEMM_TILE[1])
        if (shrunk_in, shrunk_out) == (group_in, group_out):
            return False
        group_in, group_out = shrunk_in, shrunk_out
        set_channels(reduced["groups"], group_in, group_out)
        return True

    def fewer_pixels() -> bool:
        changed = False
        for size, kernel in (("height", "kernel_h"), ("width", "kernel_w")):
            extent = reduced["dilation"] * (reduced[kernel] - 1) + 1
            smaller = max(min(reduced[size], extent), (reduced[size] + 1) // 2)
            changed |= smaller < reduced[size]
            reduced[size] = smaller
        return changed

    def fewer_images() -> bool:
        if reduced["batch"] <= 1:
            return False
        reduced["batch"] = (reduced["batch"] + 1) // 2
        return True

    for shrink in (lambda: fewer_groups(2), fewer_channels, fewer_pixels, fewer_images, lambda: fewer_groups(1)):
        while too_large() and shrink():
            pass
    return reduced


def _attention_macs(shape: dict[str, int]) -> int:
    return shape["batch"] * shape["heads"] * shape["seq"] ** 2 * shape["head_dim"]
