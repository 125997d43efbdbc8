"""Stage 4 of the pipeline (bench), hand-written side: cross-entropy over a vocabulary, forward and backward.

A language model's loss, ``F.cross_entropy(logits, targets)`` with the default mean reduction and
``ignore_index=-100`` (HF's label for padding and for positions without a next token), reads a
``[rows, vocab]`` logits matrix whose rows are far too long for registers (50257 columns for GPT-2), so,
like Liger-Kernel's and unsloth's kernels, each program walks its row in chunks of ``BLOCK_VOCAB`` and keeps
an *online logsumexp*: a running maximum and a sum of exponentials rescaled to it, per lane (so the loop has
no cross-thread reduction; the lanes are merged once at the end, as in softmax.py's looped kernel). The loop is
compute-bound on an H200 unless each logit is cheap, so: one exponential per logit, not two (the rescaling of a
new maximum and the term of an old one are both ``exp(-|x - max|)``); libdevice's fast exponential, without
tl.exp's guard for results under 2^-126 (``_exp``); and the chunks' loads software-pipelined where the
autotuner finds it faster (``STAGES``). Rows are walked in 16-byte vectors from the first aligned address, with
the unaligned head and tail of a row (under 16 bytes each) loaded apart: an odd vocabulary like GPT-2's 50257
puts most rows off alignment, and a row read from its start would be read one element at a time (Triton
cannot prove a vector aligned). Measured on an H200 at 8192 x 50257 in bf16 (GPU time alone), the forward went
from 47% to 72% of copy bandwidth and the backward from 61% to 88% (benchmarks/results/
2026-11-24-h200-memory-bound-kernels.md). The
target's logit is one scalar load, so the row's loss ``logsumexp - logits[target]`` costs one read of the
logits in all. The forward returns what ATen's ``F.cross_entropy`` returns, the 0-dim mean loss in the logits'
dtype (the sum of the per-row losses over the number of rows not ignored; NaN when every row is ignored,
as ATen gives), plus the fp32 logsumexp per row, which the backward takes instead of re-reducing each row
(Inductor's training graphs likewise keep per-row statistics for the backward, or the log-softmax itself).
The mean is taken by a second one-program kernel over the per-row losses, in a fixed order: no atomics,
so the loss is the same bits on every run. The backward, ATen's ``nll_loss_backward`` then
``_log_softmax_backward_data``, is ``dlogits = (softmax(logits) - onehot(target)) · grad / count`` with
``softmax = exp(logits - logsumexp)``: one read of the logits and one write, zero rows where the target is
ignored. Liger-Kernel goes further and writes the gradient into the logits' own memory during the forward
(one fewer [rows, vocab] buffer; the same bytes moved in total); the catalog keeps forward and backward
apart, as Inductor's forward and backward graphs are. unsloth also splits a vocabulary over 65536 across
programs and merges their logsumexps; one program per row suffices for rows in the thousands, which the
training shapes here have. ``BLOCK_VOCAB`` and the warps are autotuned per vocabulary size on a GPU from a
short list of 2048- to 32768-wide chunks, with and without pipelining (Liger's fixed choice is the widest, with 32
warps); the interpreter takes chunks of 1024, so its checks cross several.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice

from ..tuning import TunedKernel
from . import Implementation, interpreting

IGNORE_INDEX = -100
INTERPRETER_BLOCK_VOCAB = 1024
# Below any logit a model produces (the float32 minimum is -3.4e38), and finite.
LANE_FLOOR: tl.constexpr = tl.constexpr(-3.0e38)
# Rows are walked in vectors of this many bytes from their first aligned address (see the docstring).
VECTOR_BYTES = 16
# The loss mean's program sums this many rows at a time.
MEAN_BLOCK_ROWS = 1024


@triton.jit
def _row_span(row, row_stride, vocab, VECTOR: tl.constexpr):
    """A row's flat element range [begin, end) and its aligned body [body_begin, body_end), both ends
    multiples of VECTOR (16 bytes), given as counts of vectors so that Triton sees the alignment; the
    body is empty (body_end < body_begin) when the row crosses no full vector."""
    begin = row * row_stride
    end = begin + vocab
    return begin, end, (begin + VECTOR - 1) // VECTOR, end // VECTOR


@triton.jit
def _edge_offsets(begin, end, body_begin_units, body_end_units, VECTOR: tl.constexpr):
    """The offsets of the row's unaligned head and tail (VECTOR lanes each) and which of them are in it."""
    lanes = tl.arange(0, VECTOR)
    body_begin = body_begin_units * VECTOR
    head = begin + lanes
    tail = body_end_units * VECTOR + lanes
    head_mask = head < tl.minimum(body_begin, end)
    # tail >= body_begin: a row inside one vector is all head.
    tail_mask = (tail < end) & (tail >= body_begin)
    return head, head_mask, tail, tail_mask


@triton.jit
def _edge_logsumexp_terms(logits_ptr, offsets, mask):
    """The maximum of a few masked logits and the sum of their exponentials relative to it."""
    x = tl.load(logits_ptr + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    top = tl.max(x, axis=0)
    safe_top = tl.where(top == -float("inf"), 0.0, top)
    return top, tl.sum(tl.exp(x - safe_top), axis=0)


@triton.jit
def _merge_logsumexp(max_a, sum_a, max_b, sum_b):
    """Two (maximum, sum of exp(x - maximum)) pairs as one; an empty pair is (-inf, 0)."""
    top = tl.maximum(max_a, max_b)
    safe_top = tl.where(top == -float("inf"), 0.0, top)
    return top, sum_a * tl.exp(max_a - safe_top) + sum_b * tl.exp(max_b - safe_top)


@triton.jit
def _exp(x, FAST: tl.constexpr):
    """exp(x). FAST (on a GPU): libdevice's fast_expf, a multiply and the special-function unit's ex2, with
    results under 2^-126 flushed to zero; tl.exp adds a range guard for them (a compare and two multiplies
    an element). The online sum's terms are added to a sum of at least 1, so a flushed term changes nothing.
    Triton's interpreter has no libdevice."""
    if FAST:
        return libdevice.fast_expf(x)
    else:
        return tl.exp(x)


@triton.jit
def _cross_entropy_kernel(
    logits_ptr,
    targets_ptr,
    lse_ptr,
    losses_ptr,
    vocab,
    logits_row_stride,
    ignore_index,
    BLOCK_VOCAB: tl.constexpr,
    VECTOR: tl.constexpr,
    STAGES: tl.constexpr,
    FAST_EXP: tl.constexpr,
):
    """One row: its logsumexp (online, over chunks) and loss logsumexp - logits[target] (0 if ignored)."""
    row = tl.program_id(0).to(tl.int64)
    begin, end, body_begin_units, body_end_units = _row_span(row, logits_row_stride, vocab, VECTOR)
    body_end = body_end_units * VECTOR
    lanes = tl.arange(0, BLOCK_VOCAB)
    # A lane's maximum starts at a finite floor below any logit, so x - max is never -inf - -inf: a -inf
    # logit then adds exp(-inf) = 0, and a lane that saw nothing keeps a sum of 0.
    max_lanes = tl.full([BLOCK_VOCAB], LANE_FLOOR, dtype=tl.float32)
    sum_lanes = tl.zeros([BLOCK_VOCAB], dtype=tl.float32)
    for block in tl.range(0, tl.cdiv(body_end_units - body_begin_units, BLOCK_VOCAB // VECTOR), num_stages=STAGES):
        offsets = body_begin_units * VECTOR + block * BLOCK_VOCAB + lanes
        x = tl.load(logits_ptr + offsets, mask=offsets < body_end, other=-float("inf"))
        x = x.to(tl.float32)
        # One exponential per logit: with d = x - max, a new maximum rescales the sum by exp(-d) and adds
        # 1, an old one adds exp(d); both are exp(-|d|).
        shift = x - max_lanes
        scaled = _exp(-tl.abs(shift), FAST_EXP)
        sum_lanes = tl.where(shift > 0, sum_lanes * scaled + 1.0, sum_lanes + scaled)
        max_lanes = tl.maximum(max_lanes, x)
    row_max = tl.max(max_lanes, axis=0)
    row_sum = tl.sum(sum_lanes * tl.exp(max_lanes - row_max), axis=0)
    # A row whose body held no logit has a floor, not a maximum.
    row_max = tl.where(row_sum == 0.0, -float("inf"), row_max)
    head, head_mask, tail, tail_mask = _edge_offsets(begin, end, body_begin_units, body_end_units, VECTOR)
    head_max, head_sum = _edge_logsumexp_terms(logits_ptr, head, head_mask)
    tail_max, tail_sum = _edge_logsumexp_terms(logits_ptr, tail, tail_mask)
    row_max, row_sum = _merge_logsumexp(row_max, row_sum, head_max, head_sum)
    row_max, row_sum = _merge_logsumexp(row_max, row_sum, tail_max, tail_sum)
    lse = row_max + tl.log(row_sum)
    target = tl.load(targets_ptr + row)
    valid = target != ignore_index
    target_logit = tl.load(logits_ptr + begin + target, mask=valid, other=0.0).to(tl.float32)
    tl.store(lse_ptr + row, lse)
    tl.store(losses_ptr + row, tl.where(valid, lse - target_logit, 0.0))


@triton.jit
def _mean_loss_kernel(losses_ptr, targets_ptr, loss_ptr, rows, ignore_index, BLOCK_ROWS: tl.constexpr):
    """loss = sum of the per-row losses / the rows not ignored, by one program in a fixed order."""
    total = tl.zeros([BLOCK_ROWS], dtype=tl.float32)
    count = tl.zeros([BLOCK_ROWS], dtype=tl.float32)
    for start in range(0, rows, BLOCK_ROWS):
        row = start + tl.arange(0, BLOCK_ROWS)
        mask = row < rows
        total += tl.load(losses_ptr + row, mask=mask, other=0.0)
        target = tl.load(targets_ptr + row, mask=mask, other=ignore_index)
        count += tl.where(target != ignore_index, 1.0, 0.0)
    loss = tl.sum(total, axis=0) / tl.sum(count, axis=0)
    tl.store(loss_ptr, loss.to(loss_ptr.dtype.element_ty))


@triton.jit
def _store_gradient(logits_ptr, grad_logits_ptr, offsets, mask, begin, target, lse, scale):
    """(softmax - onehot(target)) · scale at some flat offsets of one row."""
    x = tl.load(logits_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    probability = tl.exp(x - lse)
    result = (probability - tl.where(offsets - begin == target, 1.0, 0.0)) * scale
    tl.store(grad_logits_ptr + offsets, result.to(grad_logits_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _cross_entropy_backward_kernel(
    logits_ptr,
    targets_ptr,
    lse_ptr,
    grad_ptr,
    count_ptr,
    grad_logits_ptr,
    vocab,
    row_stride,
    ignore_index,
    BLOCK_VOCAB: tl.constexpr,
    VECTOR: tl.constexpr,
    STAGES: tl.constexpr,
):
    """One row of (softmax - onehot(target)) · grad / count, zero where the target is ignored; the logits
    and their gradient share one layout, so one set of offsets serves both."""
    row = tl.program_id(0).to(tl.int64)
    begin, end, body_begin_units, body_end_units = _row_span(row, row_stride, vocab, VECTOR)
    body_end = body_end_units * VECTOR
    target = tl.load(targets_ptr + row)
    lse = tl.load(lse_ptr + row)
    scale = tl.load(grad_ptr).to(tl.float32) / tl.load(count_ptr).to(tl.float32)
    scale = tl.where(target != ignore_index, scale, 0.0)
    lanes = tl.arange(0, BLOCK_VOCAB)
    for block in tl.range(0, tl.cdiv(body_end_units - body_begin_units, BLOCK_VOCAB // VECTOR), num_stages=STAGES):
        offsets = body_begin_units * VECTOR + block * BLOCK_VOCAB + lanes
        _store_gradient(logits_ptr, grad_logits_ptr, offsets, offsets < body_end, begin, target, lse, scale)
    head, head_mask, tail, tail_mask = _edge_offsets(begin, end, body_begin_units, body_end_units, VECTOR)
    _store_gradient(logits_ptr, grad_logits_ptr, head, head_mask, begin, target, lse, scale)
    _store_gradient(logits_ptr, grad_logits_ptr, tail, tail_mask, begin, target, lse, scale)


# STAGES 3: the chunk loop's loads are software-pipelined (cp.async into shared memory, three chunks in
# flight); a program's serial loop otherwise waits out each chunk's memory latency.
CONFIGS = [
    triton.Config({"BLOCK_VOCAB": block, "STAGES": stages}, num_warps=warps)
    for block, warps in ((2048, 4), (4096, 4), (4096, 8), (8192, 8), (16384, 16), (32768, 32))
    for stages in (1, 3)
]


def _prune(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """Chunks no wider than the row (padded to a power of two); the narrowest where all are wider."""
    padded = triton.next_power_of_2({**named_args, **kwargs}["vocab"])
    fitting = [c for c in configs if c.kwargs["BLOCK_VOCAB"] <= padded]
    return fitting or [configs[0]]


_forward_tuned = TunedKernel(_cross_entropy_kernel, CONFIGS, key=["vocab"], prune=_prune)
_backward_tuned = TunedKernel(_cross_entropy_backward_kernel, CONFIGS, key=["vocab"], prune=_prune)


def _check(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)}: "
            "expected [rows, vocab] and [rows]"
        )
    return logits if logits.stride(-1) == 1 else logits.contiguous()


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``F.cross_entropy(logits, targets)`` (the 0-dim mean loss, in logits' dtype) and the fp32 logsumexp per
    row, for logits [rows, vocab] and int64 targets [rows], ``-100`` marking rows to ignore."""
    logits = _check(logits, targets)
    rows, vocab = logits.shape
    targets = targets.contiguous()
    lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
    losses = torch.empty_like(lse)
    loss = torch.empty((), dtype=logits.dtype, device=logits.device)
    if rows == 0:
        return loss.fill_(float("nan")), lse
    args = (logits, targets, lse, losses, vocab, logits.stride(0), IGNORE_INDEX)
    vector = VECTOR_BYTES // logits.element_size()
    if interpreting():
        _cross_entropy_kernel[(rows,)](
            *args, BLOCK_VOCAB=INTERPRETER_BLOCK_VOCAB, VECTOR=vector, STAGES=1, FAST_EXP=False
        )
    else:
        _forward_tuned[(rows,)](*args, VECTOR=vector, FAST_EXP=True)
    _mean_loss_kernel[(1,)](losses, targets, loss, rows, IGNORE_INDEX, BLOCK_ROWS=MEAN_BLOCK_ROWS)
    return loss, lse


def cross_entropy_backward(
    logits: torch.Tensor, targets: torch.Tensor, grad: torch.Tensor, lse: torch.Tensor
) -> torch.Tensor:
    """The gradient of the mean cross-entropy with respect to the logits, from the upstream 0-dim gradient and
    the forward's logsumexp per row: (softmax(logits) - onehot(targets)) · grad / (rows not ignored)."""
    # The gradient takes the logits' offsets, so a padded view of the logits is read as a copy.
    logits = _check(logits, targets).contiguous()
    rows, vocab = logits.shape
    grad_logits = torch.empty_like(logits)
    if grad_logits.numel() == 0:
        return grad_logits
    targets = targets.contiguous()
    lse = lse.to(torch.float32).contiguous()
    # One small reduction on the device (no host synchronisation), as ATen's total_weight.
    count = (targets != IGNORE_INDEX).sum()
    args = (
        logits, targets, lse, grad.reshape(()), count, grad_logits, vocab, vocab, IGNORE_INDEX,
    )  # fmt: skip
    vector = VECTOR_BYTES // logits.element_size()
    if interpreting():
        _cross_entropy_backward_kernel[(rows,)](*args, BLOCK_VOCAB=INTERPRETER_BLOCK_VOCAB, VECTOR=vector, STAGES=1)
    else:
        _backward_tuned[(rows,)](*args, VECTOR=vector)
    return grad_logits


def _cross_entropy_reference(
    logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX), torch.logsumexp(logits, dim=-1)


def _cross_entropy_backward_reference(
    logits: torch.Tensor, targets: torch.Tensor, grad: torch.Tensor, lse: torch.Tensor
) -> torch.Tensor:
    # ATen's own backward ops, from the log-softmax (the reference does not use the lse it is given).
    log_probabilities = torch.log_softmax(logits, dim=-1)
    total_weight = (targets != IGNORE_INDEX).sum().to(logits.dtype)
    grad_log_probabilities = torch.ops.aten.nll_loss_backward(
        grad, log_probabilities, targets, None, 1, IGNORE_INDEX, total_weight
    )
    return torch.ops.aten._log_softmax_backward_data(
        grad_log_probabilities, log_probabilities, 1, logits.dtype
    )


def _make_cross_entropy_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    """Logits of a spread like a trained model's, targets with every seventh row from the second ignored."""
    rows, vocab = shape["rows"], shape["vocab"]
    logits = (3 * torch.randn((rows, vocab), generator=generator, device=device)).to(dtype)
    targets = torch.randint(0, vocab, (rows,), generator=generator, device=device, dtype=torch.int64)
    targets[1::7] = IGNORE_INDEX
    return logits, targets


def _make_cross_entropy_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    logits, targets = _make_cross_entropy_inputs(shape, dtype, device, generator)
    grad = (1 + torch.rand((), generator=generator, device=device)).to(dtype)
    return logits, targets, grad, torch.logsumexp(logits.float(), dim=-1)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "cross_entropy": Implementation(
        cross_entropy,
        _cross_entropy_reference,
        _make_cross_entropy_inputs,
        (_cross_entropy_kernel, _mean_loss_kernel),
    ),
    "cross_entropy_backward": Implementation(
        cross_entropy_backward,
        _cross_entropy_backward_reference,
        _make_cross_entropy_backward_inputs,
        (_cross_entropy_backward_kernel,),
    ),
}
