"""Stage 4 of the pipeline (bench), hand-written side: token embedding lookup and its (dense) backward.

The forward gathers ``table[ids]``: each program takes a tile of tokens and a block of the embedding's
columns, loads the tokens' ids once and copies their rows; a row is contiguous, so the loads are 16-byte
vectors whatever the ids are. Nothing is computed: the kernel moves ``tokens x dim`` elements in and out,
the ids once, and reads only the table rows it needs.

The backward, ``aten.embedding_dense_backward``, sums the gradient rows of all tokens with the same id into
that id's row of a dense ``[vocab, dim]`` gradient (zero for ids that never occur). Inductor lowers it to a
zero-filled fp32 buffer and a scatter with ``tl.atomic_add`` (then a cast for half types): atomics from many
programs to one row land in whatever order the hardware serves them, and fp32 addition is not associative,
so a repeated id's row differs in its last bits from run to run. This kernel is deterministic instead:
the launcher sorts the ids (a stable ``torch.sort``, so equal ids keep their token order) and finds where
each id's run of sorted positions starts (``torch.searchsorted``, one boundary per vocabulary row), then one
program per (vocabulary row, column block) sums its run's gradient rows, a tile of tokens at a time, in fp32
in a fixed order, and writes the row once, zeros included: no zero-fill pass and no read-modify-write of
the table, so the dense gradient is written exactly once and every run gives the same bits. The price is
the sort and search (two small launches over ``tokens`` ids, next to a kernel that writes ``vocab x dim``
elements) and one program per vocabulary row, most of which only store zeros. A frequent id (a padding
token repeated thousands of times) is summed by one program alone, where atomics would spread it; its
sum is fp32 and error-bounded like any row reduction. ``padding_idx`` and ``scale_grad_by_freq`` are not
supported (HF GPT-2 and Llama pass neither to their token embeddings). Block sizes are autotuned per
(dim, vocab) on a GPU from a short list (not yet measured on a GPU); the interpreter runs fixed ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreting

# The interpreter's fixed configurations (small tiles: the checks' dims are a few dozen columns).
INTERPRETER_FORWARD = {"BLOCK_TOKENS": 16, "BLOCK_DIM": 32}
INTERPRETER_BACKWARD = {"BLOCK_TOKENS": 4, "BLOCK_DIM": 64}


@triton.jit
def _embedding_kernel(
    ids_ptr,
    table_ptr,
    out_ptr,
    tokens,
    dim,
    table_row_stride,
    out_row_stride,
    BLOCK_TOKENS: tl.constexpr,
    BLOCK_DIM: tl.constexpr,
):
    """out[token, :] = table[ids[token], :] for a tile of tokens and a block of columns."""
    token = tl.program_id(0) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)
    col = tl.program_id(1) * BLOCK_DIM + tl.arange(0, BLOCK_DIM)
    token_mask = token < tokens
    mask = token_mask[:, None] & (col < dim)[None, :]
    ids = tl.load(ids_ptr + token, mask=token_mask, other=0)
    rows = tl.load(table_ptr + ids[:, None].to(tl.int64) * table_row_stride + col[None, :], mask=mask)
    tl.store(out_ptr + token[:, None].to(tl.int64) * out_row_stride + col[None, :], rows, mask=mask)


@triton.jit
def _embedding_backward_kernel(
    grad_ptr,
    order_ptr,
    run_starts_ptr,
    out_ptr,
    dim,
    grad_row_stride,
    BLOCK_TOKENS: tl.constexpr,
    BLOCK_DIM: tl.constexpr,
):
    """out[v, cols] = sum of grad[order[i], cols] over the sorted positions i of id v, in a fixed order."""
    row = tl.program_id(0)
    col = tl.program_id(1) * BLOCK_DIM + tl.arange(0, BLOCK_DIM)
    col_mask = col < dim
    run_start = tl.load(run_starts_ptr + row)
    run_end = tl.load(run_starts_ptr + row + 1)
    total = tl.zeros([BLOCK_TOKENS, BLOCK_DIM], tl.float32)
    for tile_start in range(run_start, run_end, BLOCK_TOKENS):
        position = tile_start + tl.arange(0, BLOCK_TOKENS)
        position_mask = position < run_end
        token = tl.load(order_ptr + position, mask=position_mask, other=0)
        mask = position_mask[:, None] & col_mask[None, :]
        total += tl.load(grad_ptr + token[:, None] * grad_row_stride + col[None, :], mask=mask, other=0.0)
    out = tl.sum(total, axis=0)
    tl.store(out_ptr + row.to(tl.int64) * dim + col, out.to(out_ptr.dtype.element_ty), mask=col_mask)


_FORWARD_CONFIGS = [
    triton.Config({"BLOCK_TOKENS": tokens, "BLOCK_DIM": block_dim}, num_warps=warps)
    for tokens, block_dim, warps in (
        (4, 256, 4), (8, 256, 4), (8, 512, 4), (16, 256, 8), (4, 1024, 8), (16, 512, 8),
    )
]  # fmt: skip
# Most vocabulary rows have no token (they only store zeros), so the tiles are narrow in tokens; a wide
# column block keeps a row's zeros to one program.
_BACKWARD_CONFIGS = [
    triton.Config({"BLOCK_TOKENS": tokens, "BLOCK_DIM": block_dim}, num_warps=warps)
    for tokens, block_dim, warps in (
        (1, 256, 2), (2, 256, 2), (2, 512, 4), (4, 512, 4), (2, 1024, 4), (4, 1024, 8),
    )
]  # fmt: skip
_embedding_tuned = TunedKernel(_embedding_kernel, _FORWARD_CONFIGS, key=["tokens", "dim"])
_embedding_backward_tuned = TunedKernel(_embedding_backward_kernel, _BACKWARD_CONFIGS, key=["dim"])


def embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``F.embedding(ids, table)``: the rows of ``table`` [vocab, dim] named by ``ids`` (int64, any shape)."""
    if table.dim() != 2:
        raise ValueError(f"table of shape {tuple(table.shape)}: expected [vocab, dim]")
    dim = table.shape[1]
    flat_ids = ids.reshape(-1).contiguous()
    tokens = flat_ids.numel()
    table = table if table.stride(-1) == 1 else table.contiguous()
    out = torch.empty((tokens, dim), dtype=table.dtype, device=table.device)
    if out.numel() > 0:
        args = (flat_ids, table, out, tokens, dim, table.stride(0), out.stride(0))
        if interpreting():
            config = INTERPRETER_FORWARD
            grid = (cdiv(tokens, config["BLOCK_TOKENS"]), cdiv(dim, config["BLOCK_DIM"]))
            _embedding_kernel[grid](*args, **config)
        else:

            def tuned_grid(meta: Mapping[str, Any]) -> tuple[int, int]:
                return (cdiv(tokens, meta["BLOCK_TOKENS"]), cdiv(dim, meta["BLOCK_DIM"]))

            _embedding_tuned[tuned_grid](*args)
    return out.view(*ids.shape, dim)


def embedding_backward(grad: torch.Tensor, ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """``aten.embedding_dense_backward(grad, ids, vocab, -1, False)``, deterministically: the [vocab, dim]
    gradient of the table, in grad's dtype (summed in fp32)."""
    dim = grad.shape[-1]
    grad_rows = grad.reshape(-1, dim)
    grad_rows = grad_rows if grad_rows.stride(-1) == 1 else grad_rows.contiguous()
    flat_ids = ids.reshape(-1)
    if flat_ids.numel() != grad_rows.shape[0]:
        raise ValueError(f"{flat_ids.numel()} ids for {grad_rows.shape[0]} gradient rows")
    out = torch.empty((vocab, dim), dtype=grad.dtype, device=grad.device)
    if out.numel() == 0:
        return out
    sorted_ids, order = torch.sort(flat_ids, stable=True)
    boundaries = torch.arange(vocab + 1, device=grad.device, dtype=sorted_ids.dtype)
    run_starts = torch.searchsorted(sorted_ids, boundaries)
    args = (grad_rows, order, run_starts, out, dim, grad_rows.stride(0))
    if interpreting():
        config = INTERPRETER_BACKWARD
        _embedding_backward_kernel[(vocab, cdiv(dim, config["BLOCK_DIM"]))](*args, **config)
    else:
        _embedding_backward_tuned[lambda meta: (vocab, cdiv(dim, meta["BLOCK_DIM"]))](*args)
    return out


def _make_embedding_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    tokens, vocab, dim = shape["tokens"], shape["vocab"], shape["dim"]
    ids = torch.randint(0, vocab, (tokens,), generator=generator, device=device, dtype=torch.int64)
    return ids, torch.randn((vocab, dim), generator=generator, device=device, dtype=dtype)


def _make_embedding_backward_inputs(
    shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: Any
) -> tuple[torch.Tensor, ...]:
    """(grad, ids, an empty [vocab, 0] tensor): the gradient's row count travels as a shape, with no data
    and no host synchronisation, since the launcher's arguments are tensors."""
    tokens, vocab, dim = shape["tokens"], shape["vocab"], shape["dim"]
    ids = torch.randint(0, vocab, (tokens,), generator=generator, device=device, dtype=torch.int64)
    grad = torch.randn((tokens, dim), generator=generator, device=device, dtype=dtype)
    return grad, ids, torch.empty((vocab, 0), device=device, dtype=dtype)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "embedding": Implementation(
        embedding, lambda ids, table: table[ids], _make_embedding_inputs, (_embedding_kernel,)
    ),
    "embedding_backward": Implementation(
        lambda grad, ids, vocab_rows: embedding_backward(grad, ids, vocab_rows.shape[0]),
        lambda grad, ids, vocab_rows: torch.ops.aten.embedding_dense_backward(
            grad, ids, vocab_rows.shape[0], -1, False
        ),
        _make_embedding_backward_inputs,
        (_embedding_backward_kernel,),
    ),
}
