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
_ROWWISE = _Family(
    family="row-wise", dims=_ROWS_COLS, bound="memory",
    default_shape=(1000, 777), bench_shape=(16384, 4096),
)  # fmt: skip
_MATMUL = _OneModuleFamily(
    family="matmul", module="matmul", kernels=("matmul_kernel",), dims=("M", "N", "K"), bound="compute", tolerance=DOT_TOLERANCE,
    reference_dtype="float32", interpreter_dtypes=("float32", "float16"),
    interpreter_note=DOT_INTERPRETER_NOTE, default_shape=(200, 300, 100), bench_shape=(4096, 4096, 4096),
)  # fmt: skip
_ATTENTION = _OneModuleFamily(
    family="attention", module="attention", kernels=("flash_attention_kernel", "_attention_key_blocks", "_load_tile"), dims=("batch", "heads", "seq", "head_dim"), bound="compute",
    tolerance=DOT_TOLERANCE, reference_dtype="float32", interpreter_dtypes=("float32", "float16"),
    interpreter_note=DOT_INTERPRETER_NOTE, default_shape=(2, 3, 100, 64), bench_shape=(8, 8, 256, 64),
)  # fmt: skip

EQUIVALENTS: tuple[Equivalent, ...] = (
    Equivalent("add", summary="Add a bias row to every row (broadcasting)", formula="x + bias",
               covers=frozenset({"add"}), cost=_elementwise(1, 1), **_ELEMENTWISE),
    Equivalent("relu", summary="ReLU", formula="torch.relu(x)",
               covers=frozenset({"relu"}), cost=_elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("gelu", summary="GELU, exact (erf) form", formula="F.gelu(x)",
               covers=frozenset({"gelu"}), cost=_elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("gelu_tanh", summary="GELU, tanh approximation", formula="F.gelu(x, approximate='tanh')",
               covers=frozenset({"gelu_tanh"}), cost=_elementwise(1, 0), **_ELEMENTWISE),
    Equivalent("bias_relu", summary="Bias add then ReLU, one pass", formula="torch.relu(x + bias)",
               covers=frozenset({"add", "relu"}), cost=_elementwise(1, 1), **_ELEMENTWISE),
    Equivalent("bias_gelu", summary="Bias add then GELU (erf), one pass", formula="F.gelu(x + bias)",
               covers=frozenset({"add", "gelu"}), cost=_elementwise(1, 1), **_ELEMENTWISE),
    Equivalent("bias_gelu_tanh", summary="Bias add then GELU (tanh), one pass",
               formula="F.gelu(x + bias, approximate='tanh')",
               covers=frozenset({"add", "gelu_tanh"}), cost=_elementwise(1, 1), **_ELEMENTWISE),
    Equivalent("scale_bias", summary="Scale by a constant, then add a bias row, one pass", formula="x * 0.125 + bias",
               covers=frozenset({"mul", "add"}), cost=_elementwise(1, 1), **_ELEMENTWISE),
    Equivalent("silu_mul", summary="SiLU-gated product, SwiGLU's activation (two full tensors), one pass",
               formula="F.silu(gate) * up", covers=frozenset({"silu", "mul"}), cost=_elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("residual", summary="Add a residual (two full tensors), one pass", formula="x + residual",
               covers=frozenset({"add"}), cost=_elementwise(2, 0), **_ELEMENTWISE),
    Equivalent("bias_residual", summary="Bias add plus a residual, one pass", formula="x + bias + residual",
               covers=frozenset({"add"}), cost=_elementwise(2, 1), **_ELEMENTWISE),
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
    # -- convolution (kernels/conv.py) --
    # -- batch norm and pooling (kernels/batchnorm.py, kernels/pooling.py) --
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
    """A smaller shape for a CPU check under the interpreter: fewer rows (or M, N, batch, heads, seq)."""
    reduced = dict(shape)
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
        for dim in ("M", "N"):
            while reduced[dim] > 16 and reduced["M"] * reduced["N"] * reduced["K"] > INTERPRETER_MACS:
                reduced[dim] = (reduced[dim] + 1) // 2
    else:
        for dim in ("batch", "heads", "seq"):
            while reduced[dim] > 1 and _attention_macs(reduced) > INTERPRETER_MACS:
                reduced[dim] = (reduced[dim] + 1) // 2
    return reduced


def _attention_macs(shape: dict[str, int]) -> int:
    return shape["batch"] * shape["heads"] * shape["seq"] ** 2 * shape["head_dim"]
