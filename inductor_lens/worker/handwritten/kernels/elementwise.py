"""Stage 4 of the pipeline (bench), hand-written side: elementwise (scale, bias, activation, residual).

One Triton kernel does every catalog entry of the family: ``out = act(x * scale + bias) + residual``,
or ``act(x) * other`` for a gated activation (SwiGLU's ``silu(gate) * up``), where the scale, the bias add,
the residual add or gating product and the activation (none, ReLU, GELU in its erf or tanh form, SiLU) are
``tl.constexpr`` switches, so each combination compiles to its own specialised kernel with no
dead loads or branches. ``x`` is read as one flat contiguous buffer of ``rows * cols`` elements: a
program handles ``BLOCK`` consecutive elements, so loads and stores are contiguous 16-byte vectors
whatever the row length (the element count is passed as a multiple of a constexpr, so Triton knows the
tail mask is uniform over a vector even when the count is not a multiple of 16). With a bias and rows that
start on 16-byte boundaries (``TILED_BIAS_COLUMNS``: every transformer width), ``_bias_act_tiles_kernel``
takes [BLOCK_ROWS, BLOCK_COLS] tiles instead, so the bias is one contiguous vector load per tile: in the flat
kernel a block's bias columns wrap at a row's end, which Triton cannot vectorise, and the per-element bias
loads held ``bias_gelu_tanh`` to 77% of copy bandwidth on an H200 against 94% tiled. The flat kernel keeps the
bias form for unaligned rows: one scalar remainder per program and, when a row is at least a block long, a
wrap of the block's columns with one compare and subtract (a remainder per element costs about 20
instructions, as much as the memory traffic it serves in bf16). The erf GELU takes Φ from a rational
approximation (``_gaussian_cdf_pdf``) rather than libdevice's erf: 69% -> 95% of copy on an H200. Work is done in
float32 and stored in the input dtype. The kernel is bandwidth-bound: measured on an H200, many small
programs (4 KiB of ``x`` each, one 16-byte vector a thread over 8 warps) beat fewer large ones by 4-7%
(on a GPU a short autotune list of 1024 to 8192 elements and 4 or 8 warps picks per size and dtype), and
an ``evict_first`` hint on the single-use loads cost 2-5%, so only the bias row, re-read by every row,
carries a hint (``evict_last``). Offsets switch to int64 only when the tensor has more than 2**31
elements, where int32 arithmetic would overflow.

The backward of the activations (a training step's backward graph) is a second kernel of the same flat
shape, ``_activation_backward_kernel``: ``grad · act'(x)`` for GELU in both forms, and for SwiGLU's
``silu(gate) · up`` both gradients, ``grad · up · silu'(gate)`` and ``grad · silu(gate)``, from one read of
grad, gate and up (Inductor's fused backward kernel does the same work; eager autograd takes three kernels,
two products and SiLU's backward, reading grad twice). The derivatives are taken in closed form in fp32: the tanh form through ``s = sigmoid(2u)``
(``1 - tanh²u = 4s(1 - s)``, one exp, saturating to 0 or 1 without inf/inf); SiLU as ``σ(1 + x(1 - σ))``.
It takes the forward's configuration list (two or three inputs and one or two outputs instead of one
and one: the best block per dtype may move, which the autotuner picks).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreting

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")
# The interpreter's fixed config, and the best single one measured on an H200 (relu, 8192 x 8192): 4 KiB
# of x per program over 8 warps, one 16-byte vector a thread: 4230 GB/s in float32, 4130 in bf16, against
# 3970 and 3860 for 16 KiB blocks.
BLOCK_BYTES = 4096
NUM_WARPS = 8
INT32_LIMIT = 2**31 - 1
# A bias add runs over 2-D tiles where every row starts on a 16-byte boundary (Triton then vectorises the
# tile's rows and the bias), flat otherwise.
TILED_BIAS_COLUMNS = 16
SCALE = 0.125


@triton.jit
def _gaussian_cdf_pdf(x):
    """Φ(x) and φ(x) of the standard normal, in fp32, as Zelen and Severo's rational approximation
    (Abramowitz & Stegun 26.2.17): Φ(-|x|) = φ(x)·t·P(t), t = 1 / (1 + p|x|), absolute error under 7.5e-8
    (2.9e-7 in fp32 arithmetic, measured over [-12, 12] against float64's erfc; torch's float32 GELU is off
    by 1.2e-6 there, from ``1 + erf(x)`` cancelling for negative x). One exponential and one fast
    reciprocal, against a dozen more instructions for the erf of libdevice, which made the erf GELU
    compute-bound on an H200 (69% of copy bandwidth in bf16); and the backward's φ comes free. P's
    coefficients carry φ's 1/sqrt(2π), and exp(-x²/2) is taken as exp2(x²·(-1/(2 ln 2))): without fast-math
    the compiler folds neither constant, and each is a multiply per element."""
    t = tl.math.fdiv(1.0, 1.0 + 0.2316419 * tl.abs(x))
    poly = 0.1274147959 + t * (-0.1422483683 + t * (0.7107068707 + t * (-0.7265760131 + t * 0.5307027143)))
    gauss = tl.exp2(x * x * -0.7213475204)
    tail = gauss * t * poly
    return tl.where(x >= 0, 1.0 - tail, tail), 0.3989422804014327 * gauss


@triton.jit
def _activate(value, ACTIVATION: tl.constexpr):
    if ACTIVATION == "relu":
        value = tl.where(value > 0, value, 0.0)
    elif ACTIVATION == "gelu":
        cdf, _ = _gaussian_cdf_pdf(value)
        value = value * cdf
    elif ACTIVATION == "gelu_tanh":
        # 0.5 * (1 + tanh(u)) == sigmoid(2u): one exp, no cancellation near zero, saturates cleanly.
        inner = 0.7978845608028654 * (value + 0.044715 * value * value * value)
        value = value / (1.0 + tl.exp(-2.0 * inner))
    elif ACTIVATION == "silu":
        value = value / (1.0 + tl.exp(-value))
    return value


@triton.jit
def _add_residual(value, residual_ptr, offsets, mask, HAS_RESIDUAL: tl.constexpr, GATED: tl.constexpr):
    if HAS_RESIDUAL:
        other = tl.load(residual_ptr + offsets, mask=mask).to(tl.float32)
        if GATED:
            value *= other
        else:
            value += other
    return value


@triton.jit
def _bias_act_kernel(
    x_ptr,
    bias_ptr,
    residual_ptr,
    out_ptr,
    numel_in_units,
    cols,
    scale,
    BLOCK: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    GATED: tl.constexpr,
    ACTIVATION: tl.constexpr,
    INDEX_64: tl.constexpr,
    ALIGN: tl.constexpr,
):
    block = tl.program_id(0)
    if INDEX_64:
        block = block.to(tl.int64)
        numel_in_units = numel_in_units.to(tl.int64)
    # numel as a multiple of a constexpr: Triton then knows the mask is uniform over ALIGN elements and
    # keeps 16-byte vector loads when numel is not a multiple of 16 (which it checks by itself).
    numel = numel_in_units * ALIGN
    block_start = block * BLOCK
    lanes = tl.arange(0, BLOCK)
    offsets = block_start + lanes
    mask = offsets < numel

    value = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    if HAS_SCALE:
        value *= scale
    if HAS_BIAS:
        # Columns of this block: one scalar remainder, then a cheap wrap (at most one row boundary
        # when a row is at least a block long), instead of a remainder per element.
        bias_cols = ((block_start % cols) + lanes).to(tl.int32)
        if cols >= BLOCK:
            bias_cols = tl.where(bias_cols >= cols, bias_cols - cols, bias_cols)
        else:
            bias_cols = bias_cols % cols
        value += tl.load(bias_ptr + bias_cols, mask=mask, eviction_policy="evict_last").to(tl.float32)
    value = _activate(value, ACTIVATION)
    value = _add_residual(value, residual_ptr, offsets, mask, HAS_RESIDUAL, GATED)
    tl.store(out_ptr + offsets, value.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bias_act_tiles_kernel(
    x_ptr,
    bias_ptr,
    residual_ptr,
    out_ptr,
    rows,
    cols,
    scale,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    GATED: tl.constexpr,
    ACTIVATION: tl.constexpr,
    INDEX_64: tl.constexpr,
):
    """The bias form over [BLOCK_ROWS, BLOCK_COLS] tiles: the bias is one contiguous vector per tile."""
    program = tl.program_id(0)
    column_blocks = tl.cdiv(cols, BLOCK_COLS)
    row = (program // column_blocks) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    col = (program % column_blocks) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    col_mask = col < cols
    mask = (row < rows)[:, None] & col_mask[None, :]
    if INDEX_64:
        row = row.to(tl.int64)
    offsets = row[:, None] * cols + col[None, :]
    value = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    if HAS_SCALE:
        value *= scale
    bias = tl.load(bias_ptr + col, mask=col_mask, eviction_policy="evict_last").to(tl.float32)
    value = _activate(value + bias[None, :], ACTIVATION)
    value = _add_residual(value, residual_ptr, offsets, mask, HAS_RESIDUAL, GATED)
    tl.store(out_ptr + offsets, value.to(out_ptr.dtype.element_ty), mask=mask)


# On a GPU the block size and warps are autotuned per size and dtype: the best split between bytes in
# flight per program and programs per SM differs between float32 and bfloat16 and with the activation.
CONFIGS = [
    triton.Config({"BLOCK": block}, num_warps=warps) for block in (1024, 2048, 4096, 8192) for warps in (4, 8)
]
_bias_act_tuned = TunedKernel(
    _bias_act_kernel,
    CONFIGS,
    key=["numel_in_units", "cols", "HAS_SCALE", "HAS_BIAS", "HAS_RESIDUAL", "GATED", "ACTIVATION"],
)
# The bias tiles: 2048 to 8192 elements a program, from one row of up to 2048 columns to 128 rows of 64.
TILE_CONFIGS = [
    triton.Config({"BLOCK_ROWS": elements // block_cols, "BLOCK_COLS": block_cols}, num_warps=warps)
    for elements, warps in ((2048, 4), (4096, 8), (8192, 8))
    for block_cols in (64, 128, 256, 512, 1024, 2048)
]


def _prune_tiles(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """Tiles no wider than the row (padded to a power of two, at least 64)."""
    widest = max(64, triton.next_power_of_2({**named_args, **kwargs}["cols"]))
    return [c for c in configs if c.kwargs["BLOCK_COLS"] <= widest]


_bias_act_tiles_tuned = TunedKernel(
    _bias_act_tiles_kernel,
    TILE_CONFIGS,
    key=["rows", "cols", "HAS_SCALE", "HAS_RESIDUAL", "GATED", "ACTIVATION"],
    prune=_prune_tiles,
)
# The interpreter's tile: as wide as the row up to this many columns, about BLOCK_BYTES of x in all.
INTERPRETER_TILE_COLS = 64


def bias_act(
    x: torch.Tensor,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    activation: str = "none",
    scale: float = 1.0,
    gated: bool = False,
) -> torch.Tensor:
    """``act(x * scale + bias) + residual`` over the last dimension of ``x`` (any number of leading dims);
    ``gated``: ``act(x * scale + bias) * residual`` instead (the residual is then the gate's other half)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation {activation!r}: expected one of {', '.join(ACTIVATIONS)}")
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension")
    x = x.contiguous()
    cols = x.shape[-1]
    if bias is not None:
        if bias.shape != (cols,):
            raise ValueError(f"bias of shape {tuple(bias.shape)}: expected ({cols},)")
        bias = bias.contiguous()
    if residual is not None:
        if residual.shape != x.shape:
            raise ValueError(f"residual of shape {tuple(residual.shape)}: expected x's {tuple(x.shape)}")
        residual = residual.contiguous()
    out = torch.empty_like(x)
    numel = x.numel()
    if numel == 0:
        return out
    if bias is not None and cols % TILED_BIAS_COLUMNS == 0:
        _bias_act_tiles(x, bias, residual, out, activation, scale, gated)
        return out
    align = math.gcd(numel, 16)
    # x stands in for a switched-off bias or residual: never read.
    launch_args = (
        x,
        bias if bias is not None else x,
        residual if residual is not None else x,
        out,
        numel // align,
        cols,
        scale,
    )
    switches = dict(
        HAS_SCALE=scale != 1.0,
        HAS_BIAS=bias is not None,
        HAS_RESIDUAL=residual is not None,
        GATED=gated,
        ACTIVATION=activation,
        INDEX_64=numel + max(c.kwargs["BLOCK"] for c in CONFIGS) > INT32_LIMIT,
        ALIGN=align,
    )
    if interpreting():
        block = BLOCK_BYTES // x.element_size()
        _bias_act_kernel[(cdiv(numel, block),)](
            *launch_args, BLOCK=block, **switches, num_warps=NUM_WARPS
        )
    else:
        _bias_act_tuned[lambda meta: (cdiv(numel, meta["BLOCK"]),)](*launch_args, **switches)
    return out


def _bias_act_tiles(
    x: torch.Tensor,
    bias: torch.Tensor,
    residual: torch.Tensor | None,
    out: torch.Tensor,
    activation: str,
    scale: float,
    gated: bool,
) -> None:
    cols = x.shape[-1]
    rows = x.numel() // cols
    args = (x, bias, residual if residual is not None else x, out, rows, cols, scale)
    switches = dict(
        HAS_SCALE=scale != 1.0,
        HAS_RESIDUAL=residual is not None,
        GATED=gated,
        ACTIVATION=activation,
        # The largest offset a tile computes, masked lanes included.
        INDEX_64=(rows + max(c.kwargs["BLOCK_ROWS"] for c in TILE_CONFIGS)) * cols
        + max(c.kwargs["BLOCK_COLS"] for c in TILE_CONFIGS)
        > INT32_LIMIT,
    )
    if interpreting():
        block_cols = min(INTERPRETER_TILE_COLS, triton.next_power_of_2(cols))
        block_rows = max(1, BLOCK_BYTES // x.element_size() // block_cols)
        programs = cdiv(rows, block_rows) * cdiv(cols, block_cols)
        _bias_act_tiles_kernel[(programs,)](
            *args, BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, **switches, num_warps=NUM_WARPS
        )
    else:

        def tiles(meta: Mapping[str, Any]) -> tuple[int]:
            return (cdiv(rows, meta["BLOCK_ROWS"]) * cdiv(cols, meta["BLOCK_COLS"]),)

        _bias_act_tiles_tuned[tiles](*args, **switches)


# --- activations backward: GELU (both forms) and the SiLU-gated product ------------------------------


@triton.jit
def _activation_backward_kernel(
    grad_ptr,
    x_ptr,
    up_ptr,
    grad_x_ptr,
    grad_up_ptr,
    numel_in_units,
    BLOCK: tl.constexpr,
    ACTIVATION: tl.constexpr,
    GATED: tl.constexpr,
    INDEX_64: tl.constexpr,
    ALIGN: tl.constexpr,
):
    """grad_x = grad · act'(x); GATED (out = act(x) · up): grad_x = grad · up · act'(x) and
    grad_up = grad · act(x)."""
    block = tl.program_id(0)
    if INDEX_64:
        block = block.to(tl.int64)
        numel_in_units = numel_in_units.to(tl.int64)
    numel = numel_in_units * ALIGN
    offsets = block * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    grad = tl.load(grad_ptr + offsets, mask=mask).to(tl.float32)
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    if ACTIVATION == "gelu":
        # d/dx x·Φ(x) = Φ(x) + x·φ(x)
        cdf, pdf = _gaussian_cdf_pdf(x)
        slope = cdf + x * pdf
        value = x * cdf
    elif ACTIVATION == "gelu_tanh":
        # With s = sigmoid(2u) = (1 + tanh u) / 2, u = k(x + 0.044715x³): y = x·s and
        # 1 - tanh²u = 4s(1 - s), so y' = s + 2x·s(1 - s)·k(1 + 3·0.044715x²); one exp, no cancellation.
        k = 0.7978845608028654
        inner = k * (x + 0.044715 * x * x * x)
        s = 1.0 / (1.0 + tl.exp(-2.0 * inner))
        slope = s + 2.0 * x * s * (1.0 - s) * k * (1.0 + 0.134145 * x * x)
        value = x * s
    else:  # silu: y = x·σ(x), y' = σ(x)·(1 + x(1 - σ(x)))
        s = 1.0 / (1.0 + tl.exp(-x))
        slope = s * (1.0 + x * (1.0 - s))
        value = x * s
    if GATED:
        up = tl.load(up_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(grad_up_ptr + offsets, (grad * value).to(grad_up_ptr.dtype.element_ty), mask=mask)
        grad *= up
    tl.store(grad_x_ptr + offsets, (grad * slope).to(grad_x_ptr.dtype.element_ty), mask=mask)


_activation_backward_tuned = TunedKernel(
    _activation_backward_kernel, CONFIGS, key=["numel_in_units", "ACTIVATION", "GATED"]
)


def activation_backward(
    grad: torch.Tensor, x: torch.Tensor, up: torch.Tensor | None = None, activation: str = "gelu"
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The gradient of ``act(x)`` (grad_x), or with ``up`` of ``act(x) * up`` (grad_x, grad_up); activation is
    "gelu", "gelu_tanh" or "silu"."""
    if activation not in ("gelu", "gelu_tanh", "silu"):
        raise ValueError(f"activation {activation!r}: expected gelu, gelu_tanh or silu")
    for name, other in (("x", x), ("up", up)):
        if other is not None and other.shape != grad.shape:
            raise ValueError(f"{name} of shape {tuple(other.shape)}: expected grad's {tuple(grad.shape)}")
    grad, x = grad.contiguous(), x.contiguous()
    up = None if up is None else up.contiguous()
    grad_x = torch.empty_like(x)
    grad_up = None if up is None else torch.empty_like(up)
    numel = x.numel()
    if numel > 0:
        align = math.gcd(numel, 16)
        # x and grad_x stand in for a missing up and grad_up: never read or written.
        launch_args = (
            grad,
            x,
            up if up is not None else x,
            grad_x,
            grad_up if grad_up is not None else grad_x,
            numel // align,
        )
        switches = dict(
            ACTIVATION=activation,
            GATED=up is not None,
            INDEX_64=numel + max(c.kwargs["BLOCK"] for c in CONFIGS) > INT32_LIMIT,
            ALIGN=align,
        )
        if interpreting():
            block = BLOCK_BYTES // x.element_size()
            _activation_backward_kernel[(cdiv(numel, block),)](
                *launch_args, BLOCK=block, **switches, num_warps=NUM_WARPS
            )
        else:
            _activation_backward_tuned[lambda meta: (cdiv(numel, meta["BLOCK"]),)](
                *launch_args, **switches
            )
    return grad_x if grad_up is None else (grad_x, grad_up)


def _silu_mul_backward_reference(
    grad: torch.Tensor, gate: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ops.aten.silu_backward(grad * up, gate), grad * F.silu(gate)


def _make_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any, *, gated: bool
) -> tuple[torch.Tensor, ...]:
    """(grad, x) or (grad, gate, up); x (the gate) doubled, so it reaches well past the activations' bend."""
    rows, cols = shape["rows"], shape["cols"]
    tensors = [
        torch.randn(rows, cols, generator=generator, device=device, dtype=dtype) for _ in range(2 + gated)
    ]
    tensors[1] = tensors[1] * 2
    return tuple(tensors)


def _reference(
    x: torch.Tensor,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    activation: str = "none",
    scale: float = 1.0,
    gated: bool = False,
) -> torch.Tensor:
    value = x * scale if scale != 1.0 else x
    value = value if bias is None else value + bias
    if activation == "relu":
        value = torch.relu(value)
    elif activation == "gelu":
        value = F.gelu(value)
    elif activation == "gelu_tanh":
        value = F.gelu(value, approximate="tanh")
    elif activation == "silu":
        value = F.silu(value)
    if residual is None:
        return value
    return value * residual if gated else value + residual


def _make_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any, *, with_bias: bool
) -> tuple[torch.Tensor, ...]:
    rows, cols = shape["rows"], shape["cols"]
    x = torch.randn(rows, cols, generator=generator, device=device, dtype=dtype)
    if not with_bias:
        return (x,)
    return x, torch.randn(cols, generator=generator, device=device, dtype=dtype)


def _make_residual_inputs(
    shape: Mapping[str, int],
    dtype: torch.dtype,
    device: torch.device,
    generator: Any,
    *,
    with_bias: bool = True,
) -> tuple[torch.Tensor, ...]:
    inputs = _make_inputs(shape, dtype, device, generator, with_bias=with_bias)
    return (*inputs, torch.randn(inputs[0].shape, generator=generator, device=device, dtype=dtype))


# With a bias: flat where rows are unaligned, tiled where they are aligned.
BIAS_KERNELS = (_bias_act_kernel, _bias_act_tiles_kernel)


def _entry(activation: str, *, with_bias: bool) -> Implementation:
    # Without a bias, make_inputs gives x alone and bias stays None.
    def run(x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return bias_act(x, bias, activation=activation)

    def reference(x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return _reference(x, bias, activation=activation)

    make_inputs = functools.partial(_make_inputs, with_bias=with_bias)
    return Implementation(run, reference, make_inputs, BIAS_KERNELS if with_bias else (_bias_act_kernel,))


IMPLEMENTATIONS: dict[str, Implementation] = {
    "add": _entry("none", with_bias=True),
    "relu": _entry("relu", with_bias=False),
    "gelu": _entry("gelu", with_bias=False),
    "gelu_tanh": _entry("gelu_tanh", with_bias=False),
    "bias_relu": _entry("relu", with_bias=True),
    "bias_gelu": _entry("gelu", with_bias=True),
    "bias_gelu_tanh": _entry("gelu_tanh", with_bias=True),
    # x * 0.125 + bias: the scaled logits of softmax_ln.py before its softmax
    "scale_bias": Implementation(
        lambda x, bias: bias_act(x, bias, scale=SCALE),
        lambda x, bias: _reference(x, bias, scale=SCALE),
        functools.partial(_make_inputs, with_bias=True),
        BIAS_KERNELS,
    ),
    "residual": Implementation(
        lambda x, residual: bias_act(x, residual=residual),
        lambda x, residual: _reference(x, residual=residual),
        functools.partial(_make_residual_inputs, with_bias=False),
        (_bias_act_kernel,),
    ),
    # SwiGLU's activation (Llama's MLP): silu(gate) * up, the two halves as two full tensors
    "silu_mul": Implementation(
        lambda gate, up: bias_act(gate, residual=up, activation="silu", gated=True),
        lambda gate, up: _reference(gate, residual=up, activation="silu", gated=True),
        functools.partial(_make_residual_inputs, with_bias=False),
        (_bias_act_kernel,),
    ),
    # the gated GELU of T5 v1.1 and GEGLU: gelu(gate) * up, in both forms
    "gelu_mul": Implementation(
        lambda gate, up: bias_act(gate, residual=up, activation="gelu", gated=True),
        lambda gate, up: _reference(gate, residual=up, activation="gelu", gated=True),
        functools.partial(_make_residual_inputs, with_bias=False),
        (_bias_act_kernel,),
    ),
    "gelu_tanh_mul": Implementation(
        lambda gate, up: bias_act(gate, residual=up, activation="gelu_tanh", gated=True),
        lambda gate, up: _reference(gate, residual=up, activation="gelu_tanh", gated=True),
        functools.partial(_make_residual_inputs, with_bias=False),
        (_bias_act_kernel,),
    ),
    "bias_residual": Implementation(
        lambda x, bias, residual: bias_act(x, bias, residual),
        lambda x, bias, residual: _reference(x, bias, residual),
        _make_residual_inputs,
        BIAS_KERNELS,
    ),
    # the backward of the entries above (what a training step's backward graph launches)
    "silu_mul_backward": Implementation(
        lambda grad, gate, up: activation_backward(grad, gate, up, activation="silu"),
        _silu_mul_backward_reference,
        functools.partial(_make_backward_inputs, gated=True),
        (_activation_backward_kernel,),
    ),
    "gelu_backward": Implementation(
        lambda grad, x: activation_backward(grad, x, activation="gelu"),
        lambda grad, x: torch.ops.aten.gelu_backward(grad, x),
        functools.partial(_make_backward_inputs, gated=False),
        (_activation_backward_kernel,),
    ),
    "gelu_tanh_backward": Implementation(
        lambda grad, x: activation_backward(grad, x, activation="gelu_tanh"),
        lambda grad, x: torch.ops.aten.gelu_backward(grad, x, approximate="tanh"),
        functools.partial(_make_backward_inputs, gated=False),
        (_activation_backward_kernel,),
    ),
}
