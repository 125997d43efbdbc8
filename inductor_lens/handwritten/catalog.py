"""Stage 4 of the pipeline (bench), hand-written side: what each hand-written Triton kernel computes.

This is the declarative half of ``inductor_lens.handwritten``: names, the shape dimensions each
kernel takes, the ATen work it covers (what ``match.py`` compares Inductor's kernels against), its
bytes moved and FLOPs, and the tolerance its check uses. It imports neither torch nor Triton, so the
report can show matches on a laptop without a GPU. The kernels themselves live in ``kernels/``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from .. import options
from ..errors import UsageError
from ..records import shape_text

DTYPES = ("float32", "float16", "bfloat16")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}

Shape = Mapping[str, int]
Cost = tuple[int, int]  # (bytes moved, FLOPs)


@dataclass(frozen=True)
class Equivalent:
    """One hand-written kernel (or launcher configuration of one) and the job it does."""

    name: str
    family: str  # "elementwise", "row-wise", "matmul", "attention"
    summary: str
    formula: str  # what it computes, in torch terms
    module: str  # kernels/<module>.py
    dims: tuple[str, ...]  # the names of the --shape dimensions, in order
    # Concepts of the ATen work it covers (see match.CONCEPTS): what it stands in for.
    covers: frozenset[str]
    cost: Callable[[Shape, int], Cost]
    bound: str  # "memory" or "compute": which ceiling its roofline percentage uses
    # Bound on max |out - ref| / max |ref| per output, by dtype.
    tolerance: Mapping[str, float] = field(default_factory=dict)
    # The reference runs in this dtype ("float64", or "float32" where float64 is impractical on a GPU).
    reference_dtype: str = "float64"
    # Dtypes the Triton interpreter (CPU) runs correctly for this kernel, with the reason for any gap.
    interpreter_dtypes: tuple[str, ...] = DTYPES
    interpreter_note: str = ""
    default_shape: tuple[int, ...] = ()
    bench_shape: tuple[int, ...] = ()
    # The @triton.jit functions it launches (kernels/<module>.py), named here so their source can be
    # recorded for the report without importing Triton (source.py); tests check them against the
    # implementation.
    kernels: tuple[str, ...] = ()
    # Shapes the interpreter tests check it on (odd sizes, block-crossing); empty: its family's list in
    # tests/unit/test_handwritten_kernels.py.
    check_shapes: tuple[tuple[int, ...], ...] = ()
    # The dimensions a CPU check under the interpreter may halve, in order, until the work is small
    # (``interpreter_shape``); empty: the family's rule.
    shrink: tuple[str, ...] = ()
    # The program steps of its launches under the interpreter, which its time there follows
    # (``interpreter_shape`` holds them to INTERPRETER_STEPS); None: bytes and MACs bound it.
    interpreter_steps: Callable[[Shape], int] | None = None

    def shape(self, values: tuple[int, ...]) -> dict[str, int]:
        if len(values) != len(self.dims):
            raise UsageError(
                f"{self.name} takes a shape of {len(self.dims)} dimensions "
                f"({'x'.join(self.dims)}), got {'x'.join(map(str, values))}"
            )
        return dict(zip(self.dims, values, strict=True))

    def shape_text(self, shape: Shape) -> str:
        return shape_text(shape, self.dims)


MEMORY_TOLERANCE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}
REDUCTION_TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 3e-2}
DOT_TOLERANCE = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}
# float32 operands rounded to TF32 keep float16's 10-bit mantissa: float16's tolerance.
TF32_TOLERANCE = DOT_TOLERANCE["float16"]
# Triton 3.7's interpreter returns garbage from tl.dot on bfloat16 operands (errors of 1e10 on a 32x32
# product, measured 2026-11-22); the kernels are checked in bfloat16 on a GPU instead.
DOT_INTERPRETER_NOTE = "bfloat16 tl.dot is wrong under Triton 3.7's interpreter; bfloat16 is checked on a GPU"


def _elementwise(full_inputs: int, biases: int) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        n = shape["rows"] * shape["cols"]
        return itemsize * (n * (full_inputs + 1) + shape["cols"] * biases), 0

    return cost


def _rowwise(full_tensors: int, vectors: int, row_floats: int = 0) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        rows, cols = shape["rows"], shape["cols"]
        return itemsize * (full_tensors * rows * cols + vectors * cols) + 4 * row_floats * rows, 0

    return cost


def _matmul(biases: int) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        m, n, k = shape["M"], shape["N"], shape["K"]
        return itemsize * (m * k + k * n + m * n + biases * n), 2 * m * n * k

    return cost


def _attention(causal: bool) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        b, h, s, d = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
        flops = 4 * b * h * s * s * d
        return itemsize * 4 * b * h * s * d, flops // 2 if causal else flops

    return cost


def _batchnorm(full_tensors: int, vectors: int, fp32_vectors: int = 0) -> Callable[[Shape, int], Cost]:
    """Full-size [N, C, H, W] tensors and per-channel vectors (in the dtype, or fp32 statistics), each once."""

    def cost(shape: Shape, itemsize: int) -> Cost:
        channels = shape["channels"]
        numel = shape["batch"] * channels * shape["height"] * shape["width"]
        return itemsize * (full_tensors * numel + vectors * channels) + 4 * fp32_vectors * channels, 0

    return cost


def _convolution_sizes(shape: Shape) -> tuple[int, int, int, int]:
    """(x, weight and y elements, multiply-adds of one GEMM) of a conv2d catalog shape."""
    n, c, k, groups = shape["batch"], shape["in_channels"], shape["out_channels"], shape["groups"]
    r, s, stride, padding, dilation = (shape[d] for d in ("kernel_h", "kernel_w", "stride", "padding", "dilation"))
    p = max(0, (shape["height"] + 2 * padding - dilation * (r - 1) - 1) // stride + 1)
    q = max(0, (shape["width"] + 2 * padding - dilation * (s - 1) - 1) // stride + 1)
    weight = k * (c // groups) * r * s
    return n * c * shape["height"] * shape["width"], weight, n * k * p * q, n * p * q * k * (c // groups) * r * s


def _convolution(inputs: int, weights: int, gemms: int) -> Callable[[Shape, int], Cost]:
    """Each tensor read or written once: ``inputs`` x-sized and ``weights`` weight-sized ones, one y-sized."""

    def cost(shape: Shape, itemsize: int) -> Cost:
        x, weight, y, macs = _convolution_sizes(shape)
        return itemsize * (inputs * x + weights * weight + y), gemms * 2 * macs

    return cost


def _attention_backward(causal: bool) -> Callable[[Shape, int], Cost]:
    # Five seq x seq x head_dim products (the scores again, dP, dV, dQ, dK) against the forward's two: 2.5
    # times its FLOPs, the usual accounting; q, k, v, o, do, dq, dk, dv and the fp32 lse moved once.
    def cost(shape: Shape, itemsize: int) -> Cost:
        b, h, s, d = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
        flops = 10 * b * h * s * s * d
        return itemsize * 8 * b * h * s * d + 4 * b * h * s, flops // 2 if causal else flops

    return cost


def _pooling_output(shape: Shape) -> tuple[int, int]:
    """(N*C*H*W, N*C*OH*OW) of a max-pool (no dilation, floor mode)."""
    kernel, stride, padding = shape["kernel"], shape["stride"], shape["padding"]
    out_h = (shape["height"] + 2 * padding - kernel) // stride + 1
    out_w = (shape["width"] + 2 * padding - kernel) // stride + 1
    planes = shape["batch"] * shape["channels"]
    return planes * shape["height"] * shape["width"], planes * max(out_h, 0) * max(out_w, 0)


def _pooling_cost(shape: Shape, itemsize: int) -> Cost:
    """Forward and backward alike: the input-sized tensor, the output-sized one and the int8 offsets, once."""
    inputs, outputs = _pooling_output(shape)
    return itemsize * (inputs + outputs) + outputs, 0


# What the backward entries change of the attention family (annotations are not evaluated at run time, so
# the TypedDict defined below may type this here).
_ATTENTION_BACKWARD: _OneModuleFamily = {
    "kernels": (
        "_attention_backward_rows_kernel", "flash_attention_backward_kernel", "_attention_dkdv_steps",
        "_attention_dq_steps", "_load_tile", "_load_rows",
    ),
    # The backward reads the forward's output rounded to the input dtype (delta = rowsum(o * do)), which the
    # float32 reference recomputes exactly: the reductions' tolerance leaves room for that in half types.
    "tolerance": REDUCTION_TOLERANCE,
    # Under the interpreter's 32-row owned blocks and 16-row steps: seq inside one step; head_dim 40 (padded
    # to 64) past one step; a partial owned block; several owned blocks ending in a partial step. (With one
    # key dq and dk are zero, so their error has no scale to be measured against.)
    "check_shapes": ((1, 1, 3, 16), (1, 2, 17, 40), (2, 1, 45, 32), (1, 1, 70, 16)),
    "shrink": ("batch", "heads", "seq"),
}  # fmt: skip


def _transformer_rotary(shape: Shape, itemsize: int) -> Cost:
    b, h, s, d = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
    return itemsize * (2 * b * h * s * d + 2 * s * d), 0  # x in, out, the cos and sin tables once


def _transformer_embedding(backward: bool) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        tokens, vocab, dim = shape["tokens"], shape["vocab"], shape["dim"]
        # forward: the ids, the rows gathered (read and written); backward: the ids, grad, the dense table
        rows = vocab * dim if backward else tokens * dim
        return 8 * tokens + itemsize * (tokens * dim + rows), 0

    return cost


def _transformer_cross_entropy(backward: bool) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        rows, vocab = shape["rows"], shape["vocab"]
        # the logits (and, backward, their gradient), the int64 targets, the fp32 logsumexp per row, the loss
        return itemsize * (1 + backward) * rows * vocab + (8 + 4) * rows + itemsize, 0

    return cost


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


def _conv_steps(*passes: str) -> Callable[[Shape], int]:
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


class _Family(TypedDict, total=False):
    """Keyword arguments of ``Equivalent`` that the entries of a family share."""

    family: str
    check_shapes: tuple[tuple[int, ...], ...]
    shrink: tuple[str, ...]
    dims: tuple[str, ...]
    bound: str
    reference_dtype: str
    interpreter_dtypes: tuple[str, ...]
    interpreter_note: str
    default_shape: tuple[int, ...]
    bench_shape: tuple[int, ...]


class _OneModuleFamily(_Family, total=False):
    """A family whose entries launch the same kernels, checked to one tolerance (row-wise entries differ)."""

    module: str
    kernels: tuple[str, ...]
    tolerance: Mapping[str, float]


_ROWS_COLS = ("rows", "cols")
_ELEMENTWISE = _OneModuleFamily(
    family="elementwise", module="elementwise", kernels=("_bias_act_kernel",), dims=_ROWS_COLS, bound="memory",
    tolerance=MEMORY_TOLERANCE, default_shape=(1000, 777), bench_shape=(8192, 8192),
)  # fmt: skip
# The elementwise entries with a bias row: flat, or over 2-D tiles where rows are aligned (elementwise.py).
_ELEMENTWISE_BIAS = _OneModuleFamily(**{**_ELEMENTWISE, "kernels": ("_bias_act_kernel", "_bias_act_tiles_kernel")})
_ROWWISE = _Family(
    family="row-wise", dims=_ROWS_COLS, bound="memory",
    default_shape=(1000, 777), bench_shape=(16384, 4096),
)  # fmt: skip
_MATMUL = _OneModuleFamily(
    family="matmul", module="matmul", kernels=("matmul_kernel",), dims=("M", "N", "K"), bound="compute", tolerance=DOT_TOLERANCE,
    reference_dtype="float32", interpreter_dtypes=("float32", "float16"),
    interpreter_note=DOT_INTERPRETER_NOTE, default_shape=(200, 300, 100), bench_shape=(4096, 4096, 4096),
)  # fmt: skip
_BATCHNORM = _Family(
    family="batch norm", dims=("batch", "channels", "height", "width", "channels_last"),
    bound="memory", default_shape=(8, 64, 28, 28, 1), bench_shape=(32, 256, 56, 56, 1),
    # channels 3, 13 (under a 64-channel tile), 70 (over one); H*W 35, 99 (over a 64-wide tile), 1155 (over
    # 1024); both layouts; batch 1 (one split per channel image) and 3
    check_shapes=((2, 3, 5, 7, 0), (2, 3, 5, 7, 1), (3, 13, 9, 11, 0), (3, 13, 9, 11, 1), (2, 70, 3, 3, 1),
                  (1, 5, 33, 35, 0)),
    shrink=("batch", "height", "width"),
)  # fmt: skip
_BATCHNORM_POINTWISE = ("_batchnorm_pointwise_kernel",)
_BATCHNORM_REDUCE = ("_channel_sums_kernel", "_channel_finish_kernel")
_BATCHNORM_TRAIN = ("_batchnorm_pointwise_kernel", "_channel_sums_kernel", "_channel_finish_kernel")
_POOLING = _Family(
    family="pooling",
    dims=("batch", "channels", "height", "width", "kernel", "stride", "padding", "channels_last"),
    bound="memory", default_shape=(8, 64, 56, 56, 3, 2, 1, 1), bench_shape=(32, 64, 112, 112, 3, 2, 1, 1),
    # ResNet's 3x3/2 pad 1 in both layouts over odd sizes; 2x2/2 without padding; 3x3/1 (every input in 9
    # windows); 5x5/3 pad 2 (windows that overlap partly); 70 channels over a 64-channel tile
    check_shapes=((2, 3, 9, 11, 3, 2, 1, 0), (2, 3, 9, 11, 3, 2, 1, 1), (1, 5, 8, 7, 2, 2, 0, 0),
                  (1, 70, 6, 5, 3, 1, 1, 1), (2, 4, 13, 10, 5, 3, 2, 0)),
    shrink=("batch", "channels"),
)  # fmt: skip
# (batch, in_channels, height, width, out_channels, kernel_h, kernel_w, stride, padding, dilation, groups,
# channels_last): 1x1 and stride 1; stride 2 with padding; dilation 2 with 2 groups; depthwise (multiplier 1
# and 2, a 3x1 kernel); channel counts crossing the interpreter's 16- and 32-wide tiles; both layouts; a deep
# layer's few pixels and long reduction.
_CONVOLUTION_CHECK_SHAPES = (
    (1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0),
    (2, 5, 9, 11, 7, 3, 3, 2, 1, 1, 1, 0),
    (2, 6, 10, 9, 10, 3, 3, 1, 2, 2, 2, 1),
    (1, 4, 6, 5, 4, 3, 3, 1, 1, 1, 4, 1),
    (2, 4, 8, 6, 8, 3, 1, 2, 1, 1, 4, 0),
    (2, 33, 9, 9, 40, 1, 1, 1, 0, 1, 1, 1),
    (2, 20, 9, 7, 18, 1, 1, 2, 0, 1, 1, 1),
    (1, 40, 5, 5, 20, 3, 3, 1, 1, 1, 1, 0),
)
# The reference is float64: cuDNN runs float32 convolutions in TF32 by default (torch.backends.cudnn.allow_tf32),
# errors of about 1e-3, where float32 matmuls stay exact; float64 convolutions are exact and still quick.
_CONVOLUTION = _Family(
    family="convolution", dims=("batch", "in_channels", "height", "width", "out_channels", "kernel_h", "kernel_w", "stride", "padding", "dilation", "groups", "channels_last"),
    bound="compute", reference_dtype="float64", interpreter_dtypes=("float32", "float16"),
    interpreter_note=DOT_INTERPRETER_NOTE, default_shape=(2, 32, 15, 15, 48, 3, 3, 1, 1, 1, 1, 1),
    bench_shape=(32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1), check_shapes=_CONVOLUTION_CHECK_SHAPES,
    shrink=("batch", "height", "width"),
)  # fmt: skip
_ATTENTION = _OneModuleFamily(
    family="attention", module="attention", kernels=("flash_attention_kernel", "_attention_key_blocks", "_load_tile"), dims=("batch", "heads", "seq", "head_dim"), bound="compute",
    tolerance=DOT_TOLERANCE, reference_dtype="float32", interpreter_dtypes=("float32", "float16"),
    interpreter_note=DOT_INTERPRETER_NOTE, default_shape=(2, 3, 100, 64), bench_shape=(8, 8, 256, 64),
)  # fmt: skip

EQUIVALENTS: tuple[Equivalent, ...] = (
    Equivalent("add", summary="Add a bias row to every row (broadcasting)", formula="x + bias",
               covers=frozenset({"add"}), cost=_elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("relu", summary="ReLU", formula="torch.relu(x)",
               covers=frozenset({"relu"}), cost=_elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("gelu", summary="GELU, exact (erf) form", formula="F.gelu(x)",
               covers=frozenset({"gelu"}), cost=_elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("gelu_tanh", summary="GELU, tanh approximation", formula="F.gelu(x, approximate='tanh')",
               covers=frozenset({"gelu_tanh"}), cost=_elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("bias_relu", summary="Bias add then ReLU, one pass", formula="torch.relu(x + bias)",
               covers=frozenset({"add", "relu"}), cost=_elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("bias_gelu", summary="Bias add then GELU (erf), one pass", formula="F.gelu(x + bias)",
               covers=frozenset({"add", "gelu"}), cost=_elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("bias_gelu_tanh", summary="Bias add then GELU (tanh), one pass",
               formula="F.gelu(x + bias, approximate='tanh')",
               covers=frozenset({"add", "gelu_tanh"}), cost=_elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("scale_bias", summary="Scale by a constant, then add a bias row, one pass", formula="x * 0.125 + bias",
               covers=frozenset({"mul", "add"}), cost=_elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("silu_mul", summary="SiLU-gated product, SwiGLU's activation (two full tensors), one pass",
               formula="F.silu(gate) * up", covers=frozenset({"silu", "mul"}), cost=_elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("gelu_mul", summary="GELU-gated product (erf form), GEGLU's activation (two full tensors), one pass",
               formula="F.gelu(gate) * up", covers=frozenset({"gelu", "mul"}), cost=_elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("gelu_tanh_mul", summary="GELU-gated product (tanh form), T5's gated-GELU (two full tensors), one pass",
               formula="F.gelu(gate, approximate='tanh') * up", covers=frozenset({"gelu_tanh", "mul"}),
               cost=_elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("residual", summary="Add a residual (two full tensors), one pass", formula="x + residual",
               covers=frozenset({"add"}), cost=_elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("bias_residual", summary="Bias add plus a residual, one pass", formula="x + bias + residual",
               covers=frozenset({"add"}), cost=_elementwise(2, 1), **_ELEMENTWISE_BIAS),
    Equivalent("copy", family="layout", module="copy", kernels=("_transpose_copy_kernel",),
               summary="A layout copy: a transposed view made contiguous, through shared-memory tiles",
               formula="x.t().contiguous()", dims=_ROWS_COLS, covers=frozenset({"copy"}), cost=_elementwise(1, 0),
               bound="memory", tolerance=MEMORY_TOLERANCE, default_shape=(1000, 777), bench_shape=(8192, 8192),
               check_shapes=((1, 1), (3, 5), (37, 1031), (130, 70)), shrink=("rows",)),
    Equivalent("softmax", module="softmax", kernels=("_softmax_rows_kernel", "_softmax_looped_kernel"), summary="Row softmax: one pass when the row fits in registers, online (looped) when not",
               formula="torch.softmax(x, dim=-1)", covers=frozenset({"softmax"}),
               cost=_rowwise(2, 0), tolerance=MEMORY_TOLERANCE, **_ROWWISE),
    Equivalent("softmax_backward", module="softmax", kernels=("_softmax_rows_kernel", "_softmax_looped_kernel"), summary="Softmax backward from the saved output",
               formula="out * (grad - (grad * out).sum(-1, keepdim=True))", covers=frozenset({"softmax_backward"}),
               cost=_rowwise(3, 0), tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("layernorm", module="norms", kernels=("_norm_forward_kernel",), summary="LayerNorm forward over the last dimension (eps 1e-5)",
               formula="F.layer_norm(x, (cols,), weight, bias)", covers=frozenset({"layernorm"}),
               cost=_rowwise(2, 2), tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("layernorm_backward", module="norms", kernels=("_layer_norm_backward_kernel", "_sum_partials_kernel"), summary="LayerNorm backward: grad of input, weight and bias",
               formula="aten.native_layer_norm_backward(grad, x, (cols,), mean, rstd, weight, bias)",
               covers=frozenset({"layernorm_backward"}), cost=_rowwise(3, 3, row_floats=2),
               tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("rmsnorm", module="norms", kernels=("_norm_forward_kernel",), summary="RMSNorm forward over the last dimension (eps 1e-6)",
               formula="F.rms_norm(x, (cols,), weight, eps=1e-6)", covers=frozenset({"rmsnorm"}),
               cost=_rowwise(2, 1), tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("matmul", summary="Tiled matmul, grouped program order, autotuned", formula="a @ b",
               covers=frozenset({"matmul"}), cost=_matmul(0), **_MATMUL),
    Equivalent("matmul_bias", summary="Matmul with the bias add fused as an epilogue", formula="a @ b + bias",
               covers=frozenset({"matmul", "add"}), cost=_matmul(1), **_MATMUL),
    Equivalent("matmul_bias_relu", summary="Matmul with bias + ReLU fused as an epilogue",
               formula="torch.relu(a @ b + bias)", covers=frozenset({"matmul", "add", "relu"}),
               cost=_matmul(1), **_MATMUL),
    Equivalent("matmul_bias_gelu", summary="Matmul with bias + GELU (erf) fused as an epilogue",
               formula="F.gelu(a @ b + bias)", covers=frozenset({"matmul", "add", "gelu"}),
               cost=_matmul(1), **_MATMUL),
    Equivalent("flash_attention", summary="Flash attention forward (online softmax, never materialises S x S)",
               formula="F.scaled_dot_product_attention(q, k, v)", covers=frozenset({"attention"}),
               cost=_attention(False), **_ATTENTION),
    Equivalent("flash_attention_causal", summary="Flash attention forward, causal mask",
               formula="F.scaled_dot_product_attention(q, k, v, is_causal=True)",
               covers=frozenset({"attention_causal"}), cost=_attention(True), **_ATTENTION),
    # -- attention backward (kernels/attention.py) --
    Equivalent("flash_attention_backward", summary="Flash attention backward: dq, dk, dv from the saved output and log-sum-exp, no atomics",
               formula="torch.autograd.grad(F.scaled_dot_product_attention(q, k, v), (q, k, v), grad_out)",
               covers=frozenset({"attention_backward"}), cost=_attention_backward(False),
               **(_ATTENTION | _ATTENTION_BACKWARD)),
    Equivalent("flash_attention_causal_backward", summary="Flash attention backward, causal mask",
               formula="torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), grad_out)",
               covers=frozenset({"attention_causal_backward"}), cost=_attention_backward(True),
               **(_ATTENTION | _ATTENTION_BACKWARD)),
    # -- convolution (kernels/conv.py) --
    Equivalent("conv2d", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=_conv_steps("forward"), kernels=("conv2d_forward_kernel", "conv2d_depthwise_kernel"),
               summary="2-D convolution as an implicit GEMM (pixels x output channels); depthwise as a direct kernel",
               formula="F.conv2d(x, weight, None, stride, padding, dilation, groups)",
               covers=frozenset({"convolution"}), cost=_convolution(1, 1, 1), **_CONVOLUTION),
    Equivalent("conv2d_backward_input", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=_conv_steps("input"), kernels=("conv2d_backward_input_kernel",),
               summary="Convolution's input gradient: a transposed convolution as an implicit GEMM over the weight",
               formula="torch.nn.grad.conv2d_input(x.shape, weight, grad_out, stride, padding, dilation, groups)",
               covers=frozenset({"convolution_backward_input"}), cost=_convolution(1, 1, 1), **_CONVOLUTION),
    Equivalent("conv2d_backward_weight", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=_conv_steps("weight"), kernels=("conv2d_backward_weight_kernel", "conv2d_sum_splits_kernel"),
               summary="Convolution's weight gradient: implicit GEMM over the output pixels, split-K with a deterministic sum",
               formula="torch.nn.grad.conv2d_weight(x, weight.shape, grad_out, stride, padding, dilation, groups)",
               covers=frozenset({"convolution_backward_weight"}), cost=_convolution(1, 1, 1), **_CONVOLUTION),
    Equivalent("conv2d_backward", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=_conv_steps("input", "weight"), kernels=("conv2d_backward_input_kernel", "conv2d_backward_weight_kernel", "conv2d_sum_splits_kernel"),
               summary="Convolution backward: the input and weight gradients (two GEMM kernels)",
               formula="aten.convolution_backward(grad_out, x, weight, None, stride, padding, dilation, False, 0, groups, [True, True, False])",
               covers=frozenset({"convolution_backward"}), cost=_convolution(2, 2, 2), **_CONVOLUTION),
    # -- batch norm and pooling (kernels/batchnorm.py, kernels/pooling.py) --
    Equivalent("batchnorm", summary="BatchNorm, eval form (running statistics, eps 1e-5), one pass",
               formula="F.batch_norm(x, running_mean, running_var, weight, bias)",
               covers=frozenset({"batchnorm"}), cost=_batchnorm(2, 4), tolerance=MEMORY_TOLERANCE,
               module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_relu", summary="BatchNorm (eval form) then ReLU, one pass",
               formula="torch.relu(F.batch_norm(x, running_mean, running_var, weight, bias))",
               covers=frozenset({"batchnorm", "relu"}), cost=_batchnorm(2, 4), tolerance=MEMORY_TOLERANCE,
               module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_add_relu", summary="BatchNorm (eval form) plus a residual, then ReLU (a bottleneck's end), one pass",
               formula="torch.relu(F.batch_norm(x, running_mean, running_var, weight, bias) + residual)",
               covers=frozenset({"batchnorm", "add", "relu"}), cost=_batchnorm(3, 4), tolerance=MEMORY_TOLERANCE,
               module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_train", summary="BatchNorm, training form: batch mean and biased variance per channel (split reduction, shifted sums), then normalise",
               formula="aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, 1e-5) -> (y, mean, rstd)",
               covers=frozenset({"batchnorm_train"}), cost=_batchnorm(2, 2, fp32_vectors=2),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_TRAIN, **_BATCHNORM),
    Equivalent("batchnorm_train_relu", summary="BatchNorm, training form, then ReLU",
               formula="y, mean, rstd = aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, 1e-5); (torch.relu(y), mean, rstd)",
               covers=frozenset({"batchnorm_train", "relu"}), cost=_batchnorm(2, 2, fp32_vectors=2),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_TRAIN, **_BATCHNORM),
    Equivalent("batchnorm_backward_reduce", summary="BatchNorm backward's per-channel sums: grad_weight = sum(dy * x_hat), grad_bias = sum(dy)",
               formula="aten.native_batch_norm_backward(dy, x, None, None, None, mean, rstd, True, 1e-5, [False, True, True])[1:]",
               covers=frozenset({"batchnorm_backward_reduce"}), cost=_batchnorm(2, 0, fp32_vectors=4),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_REDUCE, **_BATCHNORM),
    Equivalent("batchnorm_relu_backward_reduce", summary="ReLU's gradient mask, then BatchNorm backward's per-channel sums",
               formula="dy = aten.threshold_backward(dy, relu_out, 0); (sum(dy * x_hat), sum(dy)) per channel",
               covers=frozenset({"relu_backward", "batchnorm_backward_reduce"}), cost=_batchnorm(3, 0, fp32_vectors=4),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_REDUCE, **_BATCHNORM),
    Equivalent("batchnorm_backward_input", summary="BatchNorm backward, eval form: grad_input = dy * weight * rstd",
               formula="dy * (weight * rstd)[:, None, None]", covers=frozenset({"batchnorm_backward_input"}),
               cost=_batchnorm(2, 1, fp32_vectors=1), tolerance=MEMORY_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_relu_backward_input", summary="ReLU's gradient mask, then BatchNorm backward (eval form) grad_input, one pass",
               formula="aten.threshold_backward(dy, relu_out, 0) * (weight * rstd)[:, None, None]",
               covers=frozenset({"relu_backward", "batchnorm_backward_input"}), cost=_batchnorm(3, 1, fp32_vectors=1),
               tolerance=MEMORY_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_train_backward_input", summary="BatchNorm backward, training form: grad_input from the per-channel sums",
               formula="weight * rstd * (dy - sum(dy) / M - x_hat * sum(dy * x_hat) / M), M = N*H*W",
               covers=frozenset({"batchnorm_train_backward_input"}), cost=_batchnorm(3, 1, fp32_vectors=4),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("max_pool2d", module="pooling", tolerance=MEMORY_TOLERANCE, kernels=("_max_pool2d_kernel",), summary="Max-pool 2D, output and the int8 offset of each maximum in its window (as Inductor stores it)",
               formula="F.max_pool2d(x, kernel, stride, padding, return_indices=True), indices as window offsets",
               covers=frozenset({"max_pool2d"}), cost=_pooling_cost, **_POOLING),
    Equivalent("max_pool2d_backward", module="pooling", tolerance=MEMORY_TOLERANCE, kernels=("_max_pool2d_backward_kernel",), summary="Max-pool 2D backward: a gather per input pixel over the windows covering it, no atomics",
               formula="aten.max_pool2d_with_indices_backward(grad_out, x, kernel, stride, padding, 1, False, indices)",
               covers=frozenset({"max_pool2d_backward"}), cost=_pooling_cost, **_POOLING),
    # -- transformer pieces: rotary, RMSNorm with residual, gated MLP backward, embedding, cross-entropy --
    Equivalent("rotary", family="transformer", module="rotary", kernels=("_rotary_kernel",),
               summary="Rotary position embedding of q or k (HF Llama), cos/sin rows reused over heads",
               formula="x * cos + rotate_half(x) * sin", dims=("batch", "heads", "seq", "head_dim"),
               covers=frozenset({"rotary"}), cost=_transformer_rotary, bound="memory", tolerance=MEMORY_TOLERANCE,
               default_shape=(2, 8, 200, 64), bench_shape=(4, 32, 2048, 128),
               check_shapes=((1, 1, 1, 2), (2, 3, 17, 6), (1, 5, 33, 64)), shrink=("batch", "heads", "seq")),
    Equivalent("rotary_backward", family="transformer", module="rotary", kernels=("_rotary_kernel",),
               summary="Rotary embedding backward (the transposed rotation)",
               formula="grad * cos + rotate_half_transposed(grad * sin)", dims=("batch", "heads", "seq", "head_dim"),
               covers=frozenset({"rotary_backward"}), cost=_transformer_rotary, bound="memory",
               tolerance=MEMORY_TOLERANCE, default_shape=(2, 8, 200, 64), bench_shape=(4, 32, 2048, 128),
               check_shapes=((1, 1, 1, 2), (2, 3, 17, 6), (1, 5, 33, 64)), shrink=("batch", "heads", "seq")),
    Equivalent("rmsnorm_residual", module="norms", kernels=("_norm_forward_kernel",),
               summary="Residual add then RMSNorm (eps 1e-6), one pass: the normalised rows and the sum",
               formula="h = x + residual; (F.rms_norm(h, (cols,), weight, eps=1e-6), h)",
               covers=frozenset({"add", "rmsnorm"}), cost=_rowwise(4, 1), tolerance=REDUCTION_TOLERANCE,
               family="row-wise", dims=_ROWS_COLS, bound="memory", default_shape=(1000, 777),
               bench_shape=(16384, 4096), check_shapes=((1, 1), (3, 5), (37, 1031), (2, 20000))),
    Equivalent("rmsnorm_backward", module="norms", kernels=("_layer_norm_backward_kernel", "_sum_partials_kernel"),
               summary="RMSNorm backward: grad of input and weight, from the saved rstd",
               formula="(grad_x, grad_weight) of F.rms_norm(x, (cols,), weight, eps=1e-6)",
               covers=frozenset({"rmsnorm_backward"}), cost=_rowwise(3, 2, row_floats=1),
               tolerance=REDUCTION_TOLERANCE, family="row-wise", dims=_ROWS_COLS, bound="memory",
               default_shape=(1000, 777), bench_shape=(16384, 4096), check_shapes=((3, 5), (37, 1031), (2, 9000))),
    Equivalent("rmsnorm_residual_backward", module="norms",
               kernels=("_layer_norm_backward_kernel", "_sum_partials_kernel"),
               summary="RMSNorm backward plus the residual stream's gradient (pre-norm blocks)",
               formula="(grad_x of F.rms_norm(h, ...) + grad_residual, grad_weight)",
               covers=frozenset({"rmsnorm_backward", "add"}), cost=_rowwise(4, 2, row_floats=1),
               tolerance=REDUCTION_TOLERANCE, family="row-wise", dims=_ROWS_COLS, bound="memory",
               default_shape=(1000, 777), bench_shape=(16384, 4096), check_shapes=((3, 5), (37, 1031), (2, 9000))),
    Equivalent("silu_mul_backward", family="elementwise", module="elementwise",
               kernels=("_activation_backward_kernel",), dims=_ROWS_COLS, bound="memory",
               summary="SwiGLU's activation backward: both gradients from one read of grad, gate and up",
               formula="(aten.silu_backward(grad * up, gate), grad * F.silu(gate))",
               covers=frozenset({"silu_mul_backward"}), cost=_rowwise(5, 0), tolerance=MEMORY_TOLERANCE,
               default_shape=(1000, 777), bench_shape=(4096, 11008)),
    Equivalent("gelu_backward", family="elementwise", module="elementwise",
               kernels=("_activation_backward_kernel",), dims=_ROWS_COLS, bound="memory",
               summary="GELU backward, exact (erf) form", formula="aten.gelu_backward(grad, x)",
               covers=frozenset({"gelu_backward"}), cost=_rowwise(3, 0), tolerance=MEMORY_TOLERANCE,
               default_shape=(1000, 777), bench_shape=(8192, 3072)),
    Equivalent("gelu_tanh_backward", family="elementwise", module="elementwise",
               kernels=("_activation_backward_kernel",), dims=_ROWS_COLS, bound="memory",
               summary="GELU backward, tanh approximation", formula="aten.gelu_backward(grad, x, approximate='tanh')",
               covers=frozenset({"gelu_tanh_backward"}), cost=_rowwise(3, 0), tolerance=MEMORY_TOLERANCE,
               default_shape=(1000, 777), bench_shape=(8192, 3072)),
    Equivalent("embedding", family="transformer", module="embedding", kernels=("_embedding_kernel",),
               summary="Token embedding: gather the table rows of the ids", formula="F.embedding(ids, table)",
               dims=("tokens", "vocab", "dim"), covers=frozenset({"embedding"}), cost=_transformer_embedding(False),
               bound="memory", tolerance=MEMORY_TOLERANCE, default_shape=(256, 500, 128),
               bench_shape=(8192, 50257, 768), check_shapes=((1, 1, 1), (37, 11, 33), (70, 1000, 100)),
               shrink=("tokens", "vocab")),
    Equivalent("embedding_backward", family="transformer", module="embedding",
               kernels=("_embedding_backward_kernel",),
               summary="Embedding backward, deterministic: ids sorted, one program sums each id's rows",
               formula="aten.embedding_dense_backward(grad, ids, vocab, -1, False)",
               dims=("tokens", "vocab", "dim"), covers=frozenset({"embedding_backward"}),
               cost=_transformer_embedding(True), bound="memory", tolerance=REDUCTION_TOLERANCE,
               default_shape=(256, 500, 128), bench_shape=(8192, 50257, 768),
               check_shapes=((1, 1, 1), (37, 11, 33), (200, 30, 70)), shrink=("vocab", "tokens")),
    Equivalent("cross_entropy", family="transformer", module="cross_entropy",
               kernels=("_cross_entropy_kernel", "_mean_loss_kernel"),
               summary="Cross-entropy, mean over the rows not ignored (-100), online logsumexp over vocab chunks",
               formula="(F.cross_entropy(logits, targets), torch.logsumexp(logits.float(), -1))",
               dims=("rows", "vocab"), covers=frozenset({"cross_entropy"}), cost=_transformer_cross_entropy(False),
               bound="memory", tolerance=REDUCTION_TOLERANCE, default_shape=(64, 50257), bench_shape=(8192, 50257),
               check_shapes=((1, 1), (5, 33), (3, 5000)), shrink=("rows",)),
    Equivalent("cross_entropy_backward", family="transformer", module="cross_entropy",
               kernels=("_cross_entropy_backward_kernel",),
               summary="Cross-entropy backward from the saved logsumexp: (softmax - onehot) * grad / count",
               formula="aten._log_softmax_backward_data(aten.nll_loss_backward(grad, log_softmax(logits), ...))",
               dims=("rows", "vocab"), covers=frozenset({"cross_entropy_backward"}),
               cost=_transformer_cross_entropy(True), bound="memory", tolerance=REDUCTION_TOLERANCE,
               default_shape=(64, 50257), bench_shape=(8192, 50257),
               check_shapes=((1, 1), (5, 33), (3, 5000)), shrink=("rows",)),
)  # fmt: skip

_BY_NAME = {e.name: e for e in EQUIVALENTS}


def get(name: str) -> Equivalent:
    try:
        return _BY_NAME[name]
    except KeyError:
        close = difflib.get_close_matches(name.lower(), _BY_NAME, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else "`inductor-lens handwritten list` shows them"
        raise UsageError(f"no hand-written kernel named {name!r}", hint=hint) from None


def parse_shape(text: str) -> tuple[int, ...]:
    """``1000x777`` -> (1000, 777); also accepts ``,`` and ``*`` between sizes."""
    parts = [p for p in re.split(r"[x,*X ]+", text.strip()) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise UsageError(f"--shape {text!r}: expected sizes such as 1000x777")
    sizes = tuple(int(p) for p in parts)
    if any(s < 1 for s in sizes):
        raise UsageError(f"--shape {text!r}: every size must be at least 1")
    if math.prod(sizes) > 1 << 34:
        raise UsageError(f"--shape {text!r}: too large ({math.prod(sizes):,} elements)")
    return sizes


def kernel_dtype(text: str) -> str:
    """A dtype name the hand-written kernels take (float32, float16, bfloat16), from any usual spelling."""
    dtype = options.normalize_dtype(text)
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {text!r}: the hand-written kernels take {', '.join(DTYPES)}")
    return dtype


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
