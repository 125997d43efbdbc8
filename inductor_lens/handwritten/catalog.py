"""Stage 4 of the pipeline (bench), hand-written side: what each hand-written Triton kernel computes.

This is the declarative half of ``inductor_lens.handwritten``: the catalog's entries (``EQUIVALENTS``), each
with its name, the shape dimensions it takes, the ATen work it covers (what ``match.py`` compares Inductor's
kernels against), its bytes moved and FLOPs (costs.py), and the tolerance its check uses (equivalent.py); how a
CPU check shrinks its shape is in interpreter_shapes.py. None of them imports torch or Triton, so the report
can show matches on a laptop without a GPU. The kernels themselves live in ``worker/handwritten/kernels/``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from typing import TypedDict

from .. import options
from ..errors import UsageError
from . import costs
from .equivalent import (
    DOT_INTERPRETER_NOTE,
    DOT_TOLERANCE,
    DTYPES,
    MEMORY_TOLERANCE,
    REDUCTION_TOLERANCE,
    Equivalent,
)
from .interpreter_shapes import conv_steps


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
# What the backward entries change of the attention family.
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

EQUIVALENTS: tuple[Equivalent, ...] = (
    Equivalent("add", summary="Add a bias row to every row (broadcasting)", formula="x + bias",
               covers=frozenset({"add"}), cost=costs.elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("relu", summary="ReLU", formula="torch.relu(x)",
               covers=frozenset({"relu"}), cost=costs.elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("gelu", summary="GELU, exact (erf) form", formula="F.gelu(x)",
               covers=frozenset({"gelu"}), cost=costs.elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("gelu_tanh", summary="GELU, tanh approximation", formula="F.gelu(x, approximate='tanh')",
               covers=frozenset({"gelu_tanh"}), cost=costs.elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("bias_relu", summary="Bias add then ReLU, one pass", formula="torch.relu(x + bias)",
               covers=frozenset({"add", "relu"}), cost=costs.elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("bias_gelu", summary="Bias add then GELU (erf), one pass", formula="F.gelu(x + bias)",
               covers=frozenset({"add", "gelu"}), cost=costs.elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("bias_gelu_tanh", summary="Bias add then GELU (tanh), one pass",
               formula="F.gelu(x + bias, approximate='tanh')",
               covers=frozenset({"add", "gelu_tanh"}), cost=costs.elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("scale_bias", summary="Scale by a constant, then add a bias row, one pass", formula="x * 0.125 + bias",
               covers=frozenset({"mul", "add"}), cost=costs.elementwise(1, 1), **_ELEMENTWISE_BIAS),
    Equivalent("silu_mul", summary="SiLU-gated product, SwiGLU's activation (two full tensors), one pass",
               formula="F.silu(gate) * up", covers=frozenset({"silu", "mul"}), cost=costs.elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("gelu_mul", summary="GELU-gated product (erf form), GEGLU's activation (two full tensors), one pass",
               formula="F.gelu(gate) * up", covers=frozenset({"gelu", "mul"}), cost=costs.elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("gelu_tanh_mul", summary="GELU-gated product (tanh form), T5's gated-GELU (two full tensors), one pass",
               formula="F.gelu(gate, approximate='tanh') * up", covers=frozenset({"gelu_tanh", "mul"}),
               cost=costs.elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("residual", summary="Add a residual (two full tensors), one pass", formula="x + residual",
               covers=frozenset({"add"}), cost=costs.elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("bias_residual", summary="Bias add plus a residual, one pass", formula="x + bias + residual",
               covers=frozenset({"add"}), cost=costs.elementwise(2, 1), **_ELEMENTWISE_BIAS),
    Equivalent("copy", family="layout", module="copy", kernels=("_transpose_copy_kernel",),
               summary="A layout copy: a transposed view made contiguous, through shared-memory tiles",
               formula="x.t().contiguous()", dims=_ROWS_COLS, covers=frozenset({"copy"}), cost=costs.elementwise(1, 0),
               bound="memory", tolerance=MEMORY_TOLERANCE, default_shape=(1000, 777), bench_shape=(8192, 8192),
               check_shapes=((1, 1), (3, 5), (37, 1031), (130, 70)), shrink=("rows",)),
    Equivalent("softmax", module="softmax", kernels=("_softmax_rows_kernel", "_softmax_looped_kernel"), summary="Row softmax: one pass when the row fits in registers, online (looped) when not",
               formula="torch.softmax(x, dim=-1)", covers=frozenset({"softmax"}),
               cost=costs.rowwise(2, 0), tolerance=MEMORY_TOLERANCE, **_ROWWISE),
    Equivalent("softmax_backward", module="softmax", kernels=("_softmax_rows_kernel", "_softmax_looped_kernel"), summary="Softmax backward from the saved output",
               formula="out * (grad - (grad * out).sum(-1, keepdim=True))", covers=frozenset({"softmax_backward"}),
               cost=costs.rowwise(3, 0), tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("layernorm", module="norms", kernels=("_norm_forward_kernel",), summary="LayerNorm forward over the last dimension (eps 1e-5)",
               formula="F.layer_norm(x, (cols,), weight, bias)", covers=frozenset({"layernorm"}),
               cost=costs.rowwise(2, 2), tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("layernorm_backward", module="norms", kernels=("_layer_norm_backward_kernel", "_sum_partials_kernel"), summary="LayerNorm backward: grad of input, weight and bias",
               formula="aten.native_layer_norm_backward(grad, x, (cols,), mean, rstd, weight, bias)",
               covers=frozenset({"layernorm_backward"}), cost=costs.rowwise(3, 3, row_floats=2),
               tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("rmsnorm", module="norms", kernels=("_norm_forward_kernel",), summary="RMSNorm forward over the last dimension (eps 1e-6)",
               formula="F.rms_norm(x, (cols,), weight, eps=1e-6)", covers=frozenset({"rmsnorm"}),
               cost=costs.rowwise(2, 1), tolerance=REDUCTION_TOLERANCE, **_ROWWISE),
    Equivalent("matmul", summary="Tiled matmul, grouped program order, autotuned", formula="a @ b",
               covers=frozenset({"matmul"}), cost=costs.matmul(0), **_MATMUL),
    Equivalent("matmul_bias", summary="Matmul with the bias add fused as an epilogue", formula="a @ b + bias",
               covers=frozenset({"matmul", "add"}), cost=costs.matmul(1), **_MATMUL),
    Equivalent("matmul_bias_relu", summary="Matmul with bias + ReLU fused as an epilogue",
               formula="torch.relu(a @ b + bias)", covers=frozenset({"matmul", "add", "relu"}),
               cost=costs.matmul(1), **_MATMUL),
    Equivalent("matmul_bias_gelu", summary="Matmul with bias + GELU (erf) fused as an epilogue",
               formula="F.gelu(a @ b + bias)", covers=frozenset({"matmul", "add", "gelu"}),
               cost=costs.matmul(1), **_MATMUL),
    Equivalent("flash_attention", summary="Flash attention forward (online softmax, never materialises S x S)",
               formula="F.scaled_dot_product_attention(q, k, v)", covers=frozenset({"attention"}),
               cost=costs.attention(False), **_ATTENTION),
    Equivalent("flash_attention_causal", summary="Flash attention forward, causal mask",
               formula="F.scaled_dot_product_attention(q, k, v, is_causal=True)",
               covers=frozenset({"attention_causal"}), cost=costs.attention(True), **_ATTENTION),
    # -- attention backward (kernels/attention.py) --
    Equivalent("flash_attention_backward", summary="Flash attention backward: dq, dk, dv from the saved output and log-sum-exp, no atomics",
               formula="torch.autograd.grad(F.scaled_dot_product_attention(q, k, v), (q, k, v), grad_out)",
               covers=frozenset({"attention_backward"}), cost=costs.attention_backward(False),
               **(_ATTENTION | _ATTENTION_BACKWARD)),
    Equivalent("flash_attention_causal_backward", summary="Flash attention backward, causal mask",
               formula="torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), grad_out)",
               covers=frozenset({"attention_causal_backward"}), cost=costs.attention_backward(True),
               **(_ATTENTION | _ATTENTION_BACKWARD)),
    # -- convolution (kernels/conv.py) --
    Equivalent("conv2d", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=conv_steps("forward"), kernels=("conv2d_forward_kernel", "conv2d_depthwise_kernel"),
               summary="2-D convolution as an implicit GEMM (pixels x output channels); depthwise as a direct kernel",
               formula="F.conv2d(x, weight, None, stride, padding, dilation, groups)",
               covers=frozenset({"convolution"}), cost=costs.convolution(1, 1, 1), **_CONVOLUTION),
    Equivalent("conv2d_backward_input", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=conv_steps("input"), kernels=("conv2d_backward_input_kernel",),
               summary="Convolution's input gradient: a transposed convolution as an implicit GEMM over the weight",
               formula="torch.nn.grad.conv2d_input(x.shape, weight, grad_out, stride, padding, dilation, groups)",
               covers=frozenset({"convolution_backward_input"}), cost=costs.convolution(1, 1, 1), **_CONVOLUTION),
    Equivalent("conv2d_backward_weight", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=conv_steps("weight"), kernels=("conv2d_backward_weight_kernel", "conv2d_sum_splits_kernel"),
               summary="Convolution's weight gradient: implicit GEMM over the output pixels, split-K with a deterministic sum",
               formula="torch.nn.grad.conv2d_weight(x, weight.shape, grad_out, stride, padding, dilation, groups)",
               covers=frozenset({"convolution_backward_weight"}), cost=costs.convolution(1, 1, 1), **_CONVOLUTION),
    Equivalent("conv2d_backward", module="conv", tolerance=DOT_TOLERANCE, interpreter_steps=conv_steps("input", "weight"), kernels=("conv2d_backward_input_kernel", "conv2d_backward_weight_kernel", "conv2d_sum_splits_kernel"),
               summary="Convolution backward: the input and weight gradients (two GEMM kernels)",
               formula="aten.convolution_backward(grad_out, x, weight, None, stride, padding, dilation, False, 0, groups, [True, True, False])",
               covers=frozenset({"convolution_backward"}), cost=costs.convolution(2, 2, 2), **_CONVOLUTION),
    # -- batch norm and pooling (kernels/batchnorm.py, kernels/pooling.py) --
    Equivalent("batchnorm", summary="BatchNorm, eval form (running statistics, eps 1e-5), one pass",
               formula="F.batch_norm(x, running_mean, running_var, weight, bias)",
               covers=frozenset({"batchnorm"}), cost=costs.batchnorm(2, 4), tolerance=MEMORY_TOLERANCE,
               module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_relu", summary="BatchNorm (eval form) then ReLU, one pass",
               formula="torch.relu(F.batch_norm(x, running_mean, running_var, weight, bias))",
               covers=frozenset({"batchnorm", "relu"}), cost=costs.batchnorm(2, 4), tolerance=MEMORY_TOLERANCE,
               module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_add_relu", summary="BatchNorm (eval form) plus a residual, then ReLU (a bottleneck's end), one pass",
               formula="torch.relu(F.batch_norm(x, running_mean, running_var, weight, bias) + residual)",
               covers=frozenset({"batchnorm", "add", "relu"}), cost=costs.batchnorm(3, 4), tolerance=MEMORY_TOLERANCE,
               module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_train", summary="BatchNorm, training form: batch mean and biased variance per channel (split reduction, shifted sums), then normalise",
               formula="aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, 1e-5) -> (y, mean, rstd)",
               covers=frozenset({"batchnorm_train"}), cost=costs.batchnorm(2, 2, fp32_vectors=2),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_TRAIN, **_BATCHNORM),
    Equivalent("batchnorm_train_relu", summary="BatchNorm, training form, then ReLU",
               formula="y, mean, rstd = aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, 1e-5); (torch.relu(y), mean, rstd)",
               covers=frozenset({"batchnorm_train", "relu"}), cost=costs.batchnorm(2, 2, fp32_vectors=2),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_TRAIN, **_BATCHNORM),
    Equivalent("batchnorm_backward_reduce", summary="BatchNorm backward's per-channel sums: grad_weight = sum(dy * x_hat), grad_bias = sum(dy)",
               formula="aten.native_batch_norm_backward(dy, x, None, None, None, mean, rstd, True, 1e-5, [False, True, True])[1:]",
               covers=frozenset({"batchnorm_backward_reduce"}), cost=costs.batchnorm(2, 0, fp32_vectors=4),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_REDUCE, **_BATCHNORM),
    Equivalent("batchnorm_relu_backward_reduce", summary="ReLU's gradient mask, then BatchNorm backward's per-channel sums",
               formula="dy = aten.threshold_backward(dy, relu_out, 0); (sum(dy * x_hat), sum(dy)) per channel",
               covers=frozenset({"relu_backward", "batchnorm_backward_reduce"}), cost=costs.batchnorm(3, 0, fp32_vectors=4),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_REDUCE, **_BATCHNORM),
    Equivalent("batchnorm_backward_input", summary="BatchNorm backward, eval form: grad_input = dy * weight * rstd",
               formula="dy * (weight * rstd)[:, None, None]", covers=frozenset({"batchnorm_backward_input"}),
               cost=costs.batchnorm(2, 1, fp32_vectors=1), tolerance=MEMORY_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_relu_backward_input", summary="ReLU's gradient mask, then BatchNorm backward (eval form) grad_input, one pass",
               formula="aten.threshold_backward(dy, relu_out, 0) * (weight * rstd)[:, None, None]",
               covers=frozenset({"relu_backward", "batchnorm_backward_input"}), cost=costs.batchnorm(3, 1, fp32_vectors=1),
               tolerance=MEMORY_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("batchnorm_train_backward_input", summary="BatchNorm backward, training form: grad_input from the per-channel sums",
               formula="weight * rstd * (dy - sum(dy) / M - x_hat * sum(dy * x_hat) / M), M = N*H*W",
               covers=frozenset({"batchnorm_train_backward_input"}), cost=costs.batchnorm(3, 1, fp32_vectors=4),
               tolerance=REDUCTION_TOLERANCE, module="batchnorm", kernels=_BATCHNORM_POINTWISE, **_BATCHNORM),
    Equivalent("max_pool2d", module="pooling", tolerance=MEMORY_TOLERANCE, kernels=("_max_pool2d_kernel",), summary="Max-pool 2D, output and the int8 offset of each maximum in its window (as Inductor stores it)",
               formula="F.max_pool2d(x, kernel, stride, padding, return_indices=True), indices as window offsets",
               covers=frozenset({"max_pool2d"}), cost=costs.pooling, **_POOLING),
    Equivalent("max_pool2d_backward", module="pooling", tolerance=MEMORY_TOLERANCE, kernels=("_max_pool2d_backward_kernel",), summary="Max-pool 2D backward: a gather per input pixel over the windows covering it, no atomics",
               formula="aten.max_pool2d_with_indices_backward(grad_out, x, kernel, stride, padding, 1, False, indices)",
               covers=frozenset({"max_pool2d_backward"}), cost=costs.pooling, **_POOLING),
    # -- transformer pieces: rotary, RMSNorm with residual, gated MLP backward, embedding, cross-entropy --
    Equivalent("rotary", family="transformer", module="rotary", kernels=("_rotary_kernel",),
               summary="Rotary position embedding of q or k (HF Llama), cos/sin rows reused over heads",
               formula="x * cos + rotate_half(x) * sin", dims=("batch", "heads", "seq", "head_dim"),
               covers=frozenset({"rotary"}), cost=costs.transformer_rotary, bound="memory", tolerance=MEMORY_TOLERANCE,
               default_shape=(2, 8, 200, 64), bench_shape=(4, 32, 2048, 128),
               check_shapes=((1, 1, 1, 2), (2, 3, 17, 6), (1, 5, 33, 64)), shrink=("batch", "heads", "seq")),
    Equivalent("rotary_backward", family="transformer", module="rotary", kernels=("_rotary_kernel",),
               summary="Rotary embedding backward (the transposed rotation)",
               formula="grad * cos + rotate_half_transposed(grad * sin)", dims=("batch", "heads", "seq", "head_dim"),
               covers=frozenset({"rotary_backward"}), cost=costs.transformer_rotary, bound="memory",
               tolerance=MEMORY_TOLERANCE, default_shape=(2, 8, 200, 64), bench_shape=(4, 32, 2048, 128),
               check_shapes=((1, 1, 1, 2), (2, 3, 17, 6), (1, 5, 33, 64)), shrink=("batch", "heads", "seq")),
    Equivalent("rmsnorm_residual", module="norms", kernels=("_norm_forward_kernel",),
               summary="Residual add then RMSNorm (eps 1e-6), one pass: the normalised rows and the sum",
               formula="h = x + residual; (F.rms_norm(h, (cols,), weight, eps=1e-6), h)",
               covers=frozenset({"add", "rmsnorm"}), cost=costs.rowwise(4, 1), tolerance=REDUCTION_TOLERANCE,
               family="row-wise", dims=_ROWS_COLS, bound="memory", default_shape=(1000, 777),
               bench_shape=(16384, 4096), check_shapes=((1, 1), (3, 5), (37, 1031), (2, 20000))),
    Equivalent("rmsnorm_backward", module="norms", kernels=("_layer_norm_backward_kernel", "_sum_partials_kernel"),
               summary="RMSNorm backward: grad of input and weight, from the saved rstd",
               formula="(grad_x, grad_weight) of F.rms_norm(x, (cols,), weight, eps=1e-6)",
               covers=frozenset({"rmsnorm_backward"}), cost=costs.rowwise(3, 2, row_floats=1),
               tolerance=REDUCTION_TOLERANCE, family="row-wise", dims=_ROWS_COLS, bound="memory",
               default_shape=(1000, 777), bench_shape=(16384, 4096), check_shapes=((3, 5), (37, 1031), (2, 9000))),
    Equivalent("rmsnorm_residual_backward", module="norms",
               kernels=("_layer_norm_backward_kernel", "_sum_partials_kernel"),
               summary="RMSNorm backward plus the residual stream's gradient (pre-norm blocks)",
               formula="(grad_x of F.rms_norm(h, ...) + grad_residual, grad_weight)",
               covers=frozenset({"rmsnorm_backward", "add"}), cost=costs.rowwise(4, 2, row_floats=1),
               tolerance=REDUCTION_TOLERANCE, family="row-wise", dims=_ROWS_COLS, bound="memory",
               default_shape=(1000, 777), bench_shape=(16384, 4096), check_shapes=((3, 5), (37, 1031), (2, 9000))),
    Equivalent("silu_mul_backward", family="elementwise", module="elementwise",
               kernels=("_activation_backward_kernel",), dims=_ROWS_COLS, bound="memory",
               summary="SwiGLU's activation backward: both gradients from one read of grad, gate and up",
               formula="(aten.silu_backward(grad * up, gate), grad * F.silu(gate))",
               covers=frozenset({"silu_mul_backward"}), cost=costs.rowwise(5, 0), tolerance=MEMORY_TOLERANCE,
               default_shape=(1000, 777), bench_shape=(4096, 11008)),
    Equivalent("gelu_backward", family="elementwise", module="elementwise",
               kernels=("_activation_backward_kernel",), dims=_ROWS_COLS, bound="memory",
               summary="GELU backward, exact (erf) form", formula="aten.gelu_backward(grad, x)",
               covers=frozenset({"gelu_backward"}), cost=costs.rowwise(3, 0), tolerance=MEMORY_TOLERANCE,
               default_shape=(1000, 777), bench_shape=(8192, 3072)),
    Equivalent("gelu_tanh_backward", family="elementwise", module="elementwise",
               kernels=("_activation_backward_kernel",), dims=_ROWS_COLS, bound="memory",
               summary="GELU backward, tanh approximation", formula="aten.gelu_backward(grad, x, approximate='tanh')",
               covers=frozenset({"gelu_tanh_backward"}), cost=costs.rowwise(3, 0), tolerance=MEMORY_TOLERANCE,
               default_shape=(1000, 777), bench_shape=(8192, 3072)),
    Equivalent("embedding", family="transformer", module="embedding", kernels=("_embedding_kernel",),
               summary="Token embedding: gather the table rows of the ids", formula="F.embedding(ids, table)",
               dims=("tokens", "vocab", "dim"), covers=frozenset({"embedding"}), cost=costs.transformer_embedding(False),
               bound="memory", tolerance=MEMORY_TOLERANCE, default_shape=(256, 500, 128),
               bench_shape=(8192, 50257, 768), check_shapes=((1, 1, 1), (37, 11, 33), (70, 1000, 100)),
               shrink=("tokens", "vocab")),
    Equivalent("embedding_backward", family="transformer", module="embedding",
               kernels=("_embedding_backward_kernel",),
               summary="Embedding backward, deterministic: ids sorted, one program sums each id's rows",
               formula="aten.embedding_dense_backward(grad, ids, vocab, -1, False)",
               dims=("tokens", "vocab", "dim"), covers=frozenset({"embedding_backward"}),
               cost=costs.transformer_embedding(True), bound="memory", tolerance=REDUCTION_TOLERANCE,
               default_shape=(256, 500, 128), bench_shape=(8192, 50257, 768),
               check_shapes=((1, 1, 1), (37, 11, 33), (200, 30, 70)), shrink=("vocab", "tokens")),
    Equivalent("cross_entropy", family="transformer", module="cross_entropy",
               kernels=("_cross_entropy_kernel", "_mean_loss_kernel"),
               summary="Cross-entropy, mean over the rows not ignored (-100), online logsumexp over vocab chunks",
               formula="(F.cross_entropy(logits, targets), torch.logsumexp(logits.float(), -1))",
               dims=("rows", "vocab"), covers=frozenset({"cross_entropy"}), cost=costs.transformer_cross_entropy(False),
               bound="memory", tolerance=REDUCTION_TOLERANCE, default_shape=(64, 50257), bench_shape=(8192, 50257),
               check_shapes=((1, 1), (5, 33), (3, 5000)), shrink=("rows",)),
    Equivalent("cross_entropy_backward", family="transformer", module="cross_entropy",
               kernels=("_cross_entropy_backward_kernel",),
               summary="Cross-entropy backward from the saved logsumexp: (softmax - onehot) * grad / count",
               formula="aten._log_softmax_backward_data(aten.nll_loss_backward(grad, log_softmax(logits), ...))",
               dims=("rows", "vocab"), covers=frozenset({"cross_entropy_backward"}),
               cost=costs.transformer_cross_entropy(True), bound="memory", tolerance=REDUCTION_TOLERANCE,
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

