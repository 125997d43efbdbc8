"""Stage 4 of the pipeline (bench), hand-written side: cross-entropy over a vocabulary, forward and backward.

A language model's loss, ``F.cross_entropy(logits, targets)`` with the default mean reduction and
``ignore_index=-100`` (HF's label for padding and for positions without a next token), reads a
``[rows, vocab]`` logits matrix whose rows are far too long for registers (50257 columns for GPT-2), so,
like Liger-Kernel's and unsloth's kernels, each program walks its row in chunks of ``BLOCK_VOCAB`` and keeps
an *online logsumexp*: a running maximum and a sum of exponentials rescaled to it, per lane (so the loop has
no cross-thread reduction; the lanes are merged once at the end, as in softmax.py's looped kernel). The
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
short list of 2048- to 32768-wide chunks (Liger's fixed choice is the widest, with 32 warps; not yet measured
on a GPU); the interpreter takes chunks of 1024, so its checks cross several.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, interpreting

IGNORE_INDEX = -100
INTERPRETER_BLOCK_VOCAB = 1024
# The loss mean's program sums this many rows at a time.
MEAN_BLOCK_ROWS = 1024


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
):
    """One row: its logsumexp (online, over chunks) and loss logsumexp - logits[target] (0 if ignored)."""
    row = tl.program_id(0).to(tl.int64)
    row_logits = logits_ptr + row * logits_row_stride
    lanes = tl.arange(0, BLOCK_VOCAB)
    # A lane that has seen only masked (-inf) logits keeps max -inf and sum 0 (the where avoids
    # exp(-inf - -inf) = nan).
    max_lanes = tl.full([BLOCK_VOCAB], -float("inf"), dtype=tl.float32)
    sum_lanes = tl.zeros([BLOCK_VOCAB], dtype=tl.float32)
    for block in range(0, tl.cdiv(vocab, BLOCK_VOCAB)):
        col = block * BLOCK_VOCAB + lanes
        x = tl.load(row_logits + col, mask=col < vocab, other=-float("inf"), eviction_policy="evict_first")
        x = x.to(tl.float32)
        new_max = tl.maximum(max_lanes, x)
        safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
        sum_lanes = sum_lanes * tl.exp(max_lanes - safe_max) + tl.exp(x - safe_max)
        max_lanes = new_max
    row_max = tl.max(max_lanes, axis=0)
    safe_lanes_max = tl.where(max_lanes == -float("inf"), row_max, max_lanes)
    lse = row_max + tl.log(tl.sum(sum_lanes * tl.exp(safe_lanes_max - row_max), axis=0))
    target = tl.load(targets_ptr + row)
    valid = target != ignore_index
    target_logit = tl.load(row_logits + target, mask=valid, other=0.0).to(tl.float32)
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
def _cross_entropy_backward_kernel(
    logits_ptr,
    targets_ptr,
    lse_ptr,
    grad_ptr,
    count_ptr,
    grad_logits_ptr,
    vocab,
    logits_row_stride,
    grad_logits_row_stride,
    ignore_index,
    BLOCK_VOCAB: tl.constexpr,
):
    """One row of (softmax - onehot(target)) · grad / count, zero where the target is ignored."""
    row = tl.program_id(0).to(tl.int64)
    row_logits = logits_ptr + row * logits_row_stride
    row_grad = grad_logits_ptr + row * grad_logits_row_stride
    target = tl.load(targets_ptr + row)
    lse = tl.load(lse_ptr + row)
    scale = tl.load(grad_ptr).to(tl.float32) / tl.load(count_ptr).to(tl.float32)
    scale = tl.where(target != ignore_index, scale, 0.0)
    lanes = tl.arange(0, BLOCK_VOCAB)
    for block in range(0, tl.cdiv(vocab, BLOCK_VOCAB)):
        col = block * BLOCK_VOCAB + lanes
        mask = col < vocab
        x = tl.load(row_logits + col, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        probability = tl.exp(x - lse)
        result = (probability - tl.where(col == target, 1.0, 0.0)) * scale
        tl.store(row_grad + col, result.to(grad_logits_ptr.dtype.element_ty), mask=mask)


CONFIGS = [
    triton.Config({"BLOCK_VOCAB": block}, num_warps=warps)
    for block, warps in ((2048, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16), (32768, 32))
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
    if interpreting():
        _cross_entropy_kernel[(rows,)](*args, BLOCK_VOCAB=INTERPRETER_BLOCK_VOCAB)
    else:
        _forward_tuned[(rows,)](*args)
    _mean_loss_kernel[(1,)](losses, targets, loss, rows, IGNORE_INDEX, BLOCK_ROWS=MEAN_BLOCK_ROWS)
    return loss, lse


def cross_entropy_backward(
    logits: torch.Tensor, targets: torch.Tensor, grad: torch.Tensor, lse: torch.Tensor
) -> torch.Tensor:
    """The gradient of the mean cross-entropy with respect to the logits, from the upstream 0-dim gradient and
    the forward's logsumexp per row: (softmax(logits) - onehot(targets)) · grad / (rows not ignored)."""
    logits = _check(logits, targets)
    rows, vocab = logits.shape
    grad_logits = torch.empty((rows, vocab), dtype=logits.dtype, device=logits.device)
    if grad_logits.numel() == 0:
        return grad_logits
    targets = targets.contiguous()
    lse = lse.to(torch.float32).contiguous()
    # One small reduction on the device (no host synchronisation), as ATen's total_weight.
    count = (targets != IGNORE_INDEX).sum()
    args = (
        logits, targets, lse, grad.reshape(()), count, grad_logits, vocab,
        logits.stride(0), grad_logits.stride(0), IGNORE_INDEX,
    )  # fmt: skip
    if interpreting():
        _cross_entropy_backward_kernel[(rows,)](*args, BLOCK_VOCAB=INTERPRETER_BLOCK_VOCAB)
    else:
        _backward_tuned[(rows,)](*args)
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
