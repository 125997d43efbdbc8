"""Host time per call of the hand-written launchers, torch eager and torch.compile, at the samples' shapes.

Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/launch_overhead.py [--profile layernorm]

At the samples' small shapes a kernel's GPU work takes a few microseconds, so what a do_bench median
shows is mostly how long the host takes to launch it. This script separates the two for each kernel:

- host: the time per call with the GPU never waited for (1000 calls back to back, then one
  synchronize; per-call wall time while the launch queue is the bottleneck);
- GPU alone: the same call replayed from a CUDA graph (no Python at all);
- do_bench: the median the report shows (L2 cleared before each call).

``--profile NAME`` adds a cProfile of 2000 calls of that launcher, the 20 costliest functions.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

import torch
from triton.testing import do_bench, do_bench_cudagraph

from inductor_lens.handwritten.catalog import get
from inductor_lens.worker.handwritten.check import implementation, make_inputs

# The shapes the samples' kernels have (softmax_ln, block and mlp on the GPU).
CASES = [
    ("layernorm", (2048, 512), "float32"),
    ("layernorm", (2048, 4096), "float32"),
    ("softmax", (2048, 4096), "float32"),
    ("scale_bias", (2048, 4096), "float32"),
    ("bias_gelu", (2048, 2048), "float32"),
    ("bias_residual", (2048, 512), "float32"),
    ("matmul", (2048, 512, 512), "float32"),
    ("matmul_bias", (256, 4096, 1024), "bfloat16"),
    ("flash_attention_causal", (8, 8, 256, 64), "float32"),
]


def host_us(fn: Callable[[], Any], calls: int = 1000) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def row(label: str, fn: Callable[[], Any]) -> str:
    host = host_us(fn)
    alone = do_bench_cudagraph(fn, rep=100) * 1e3
    bench = do_bench(fn, warmup=25, rep=100) * 1e3
    return f"| {label} | {host:,.1f} | {alone:,.1f} | {bench:,.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", nargs="*", default=[], help="cProfile these launchers")
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| kernel, shape, dtype: what runs | host us/call | GPU alone us | do_bench us |")
    print("|---|---|---|---|")
    for name, dims, dtype in CASES:
        equivalent = get(name)
        shape = dict(zip(equivalent.dims, dims, strict=True))
        impl = implementation(equivalent)
        inputs = make_inputs(equivalent, shape, dtype, "cuda")
        compiled = torch.compile(impl.reference, dynamic=False)
        label = f"{name} {'x'.join(map(str, dims))} {dtype}"
        for what, function in (
            ("hand-written", impl.run),
            ("torch eager", impl.reference),
            ("torch.compile", compiled),
        ):
            print(row(f"{label}: {what}", functools.partial(function, *inputs)), flush=True)
        if name in args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(2000):
                impl.run(*inputs)
            profiler.disable()
            torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
            print(f"```\ncProfile of 2000 calls of {label}\n{text.getvalue()}```", flush=True)


if __name__ == "__main__":
    main()
