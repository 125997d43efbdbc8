"""Stage 4 of the pipeline (bench), hand-written side: the bytes moved and FLOPs of each hand-written kernel
family on a catalog shape (``Equivalent.cost``), which its roofline percentage is measured against.

Each function makes the cost model of one family, given what its entries read and write; no torch import.
"""

from __future__ import annotations

from collections.abc import Callable

from .equivalent import Cost, Shape


def elementwise(full_inputs: int, biases: int) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        n = shape["rows"] * shape["cols"]
        return itemsize * (n * (full_inputs + 1) + shape["cols"] * biases), 0

    return cost


def rowwise(full_tensors: int, vectors: int, row_floats: int = 0) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        rows, cols = shape["rows"], shape["cols"]
        return itemsize * (full_tensors * rows * cols + vectors * cols) + 4 * row_floats * rows, 0

    return cost


def matmul(biases: int) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        m, n, k = shape["M"], shape["N"], shape["K"]
        return itemsize * (m * k + k * n + m * n + biases * n), 2 * m * n * k

    return cost


def attention(causal: bool) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        b, h, s, d = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
        flops = 4 * b * h * s * s * d
        return itemsize * 4 * b * h * s * d, flops // 2 if causal else flops

    return cost


def batchnorm(full_tensors: int, vectors: int, fp32_vectors: int = 0) -> Callable[[Shape, int], Cost]:
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


def convolution(inputs: int, weights: int, gemms: int) -> Callable[[Shape, int], Cost]:
    """Each tensor read or written once: ``inputs`` x-sized and ``weights`` weight-sized ones, one y-sized."""

    def cost(shape: Shape, itemsize: int) -> Cost:
        x, weight, y, macs = _convolution_sizes(shape)
        return itemsize * (inputs * x + weights * weight + y), gemms * 2 * macs

    return cost


def attention_backward(causal: bool) -> Callable[[Shape, int], Cost]:
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


def pooling(shape: Shape, itemsize: int) -> Cost:
    """Forward and backward alike: the input-sized tensor, the output-sized one and the int8 offsets, once."""
    inputs, outputs = _pooling_output(shape)
    return itemsize * (inputs + outputs) + outputs, 0


def transformer_rotary(shape: Shape, itemsize: int) -> Cost:
    b, h, s, d = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
    return itemsize * (2 * b * h * s * d + 2 * s * d), 0  # x in, out, the cos and sin tables once


def transformer_embedding(backward: bool) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        tokens, vocab, dim = shape["tokens"], shape["vocab"], shape["dim"]
        # forward: the ids, the rows gathered (read and written); backward: the ids, grad, the dense table
        rows = vocab * dim if backward else tokens * dim
        return 8 * tokens + itemsize * (tokens * dim + rows), 0

    return cost


def transformer_cross_entropy(backward: bool) -> Callable[[Shape, int], Cost]:
    def cost(shape: Shape, itemsize: int) -> Cost:
        rows, vocab = shape["rows"], shape["vocab"]
        # the logits (and, backward, their gradient), the int64 targets, the fp32 logsumexp per row, the loss
        return itemsize * (1 + backward) * rows * vocab + (8 + 4) * rows + itemsize, 0

    return cost
