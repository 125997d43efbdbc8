"""The hand-written matmul_bias against cuBLAS's addmm, side by side in one process (GPU).

For the shapes of issue 33 (GPT-2's c_attn 4096x2304x768, timm ViT-S/16's qkv 12608x1152x384, a 64x1000x384
classifier head) in float32 (torch's default: IEEE products, no TF32) and bfloat16, with b an nn.Linear
weight's transpose as the models have it (``catalog`` inputs: ``make_inputs`` of matmul_bias):

- the hand-written launcher (``kernels/matmul.py`` ``matmul``, autotuned as the report's stage runs it: the
  shipped table, else a search) and ``torch.addmm(bias, a, b)`` are timed in alternation, ``--rounds`` rounds,
  each a ``worker.measure.gpu_time`` median (do_bench: warm-up, L2 cleared before each call);
- the ratio hand-written / addmm is given as the median of the rounds' ratios with their min-max, and the
  result is checked against float64.

Usage: PYTHONPATH=$PWD python3 benchmarks/matmul_bias_vs_cublas.py --rounds 5 --results out.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from inductor_lens.handwritten.catalog import get
from inductor_lens.worker.handwritten import tuning_record
from inductor_lens.worker.handwritten.check import implementation, make_inputs
from inductor_lens.worker.measure import gpu_graph_time, gpu_time

SHAPES = {"GPT-2 c_attn": (4096, 2304, 768), "ViT-S/16 qkv": (12608, 1152, 384), "classifier head": (64, 1000, 384)}


def rounds(
    impl: Any, inputs: tuple[torch.Tensor, ...], count: int, timer: Callable[[Callable[[], Any]], Any]
) -> tuple[list[float], list[float]]:
    """Medians (ms) of the hand-written kernel and of addmm by ``timer``, in alternation, ``count`` rounds."""
    a, b, bias = inputs
    ours, theirs = [], []
    for _ in range(count):
        ours.append(timer(lambda: impl.run(a, b, bias)).median_ms)
        theirs.append(timer(lambda: torch.addmm(bias, a, b)).median_ms)
    return ours, theirs


def ratio_text(ours: list[float], theirs: list[float]) -> str:
    ratios = [mine / cublas for mine, cublas in zip(ours, theirs, strict=True)]
    return (f"{statistics.median(ours) * 1e3:.1f} | {statistics.median(theirs) * 1e3:.1f} | "
            f"{statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    args = parser.parse_args()
    equivalent = get("matmul_bias")
    impl = implementation(equivalent, "cuda")
    lines = [
        "| shape (M x N x K) | dtype | hand-written µs | addmm µs | ratio, median of rounds (min-max) | "
        "GPU alone: hand-written µs | addmm µs | ratio (min-max) | config (origin) | max error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, (m, n, k) in SHAPES.items():
        for dtype in args.dtypes:
            a, b, bias = make_inputs(equivalent, {"M": m, "N": n, "K": k}, dtype, "cuda")
            with tuning_record.recording() as configs:
                out = impl.run(a, b, bias)
            reference = torch.addmm(bias.double(), a.double(), b.double())
            error = float((out.double() - reference).abs().max() / reference.abs().max())
            timed = ratio_text(*rounds(impl, (a, b, bias), args.rounds, gpu_time))
            alone = ratio_text(*rounds(impl, (a, b, bias), args.rounds, gpu_graph_time))
            used = "; ".join(f"{c.config} ({c.origin})" for c in configs)
            lines.append(f"| {label} {m}x{n}x{k} | {dtype} | {timed} | {alone} | {used} | {error:.1e} |")
            print(lines[-1], flush=True)
    header = [
        f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; TF32 for float32 matmuls: "
        f"{torch.backends.cuda.matmul.allow_tf32}; {args.rounds} rounds, each a do_bench median (L2 cleared); GPU alone: "
        "do_bench_cudagraph medians of the call replayed from a CUDA graph (no host launch time).",
        "",
    ]
    args.results.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
