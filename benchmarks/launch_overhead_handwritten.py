"""Launch overhead of the hand-written launchers, with TunedKernel's fast path off and on.

Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/launch_overhead_handwritten.py [--rounds 15]

For each small case the launcher is timed with ``tuning.FAST_LAUNCH`` off (every launch: tuning key,
memo, note, ``kernel[grid]``) and on (a launch key seen before launches the compiled kernel directly),
each column over ROUNDS rounds, as median [p10-p90] in microseconds:

- loop: the launcher called CALLS times back to back between two CUDA events, per call: the GPU
  never waits for work, so this is the host's time per launch;
- do_bench: ``triton.testing.do_bench``'s median (L2 cleared before each call): what the report shows;
- GPU alone: the launcher captured in a CUDA graph and replayed (``do_bench_cudagraph``): no Python.

"direct": whether the fast path kept a compiled kernel to launch directly ("-": the launcher uses no
TunedKernel; softmax's picks its kernel and block itself, a control). The outputs of both paths are
checked equal first.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch
from triton.testing import do_bench, do_bench_cudagraph

from inductor_lens.exchange.shared import quantile
from inductor_lens.handwritten.catalog import get
from inductor_lens.worker.handwritten import tuning
from inductor_lens.worker.handwritten.check import as_tuple, implementation, make_inputs

CASES = [
    ("relu", (64, 64), "float32"),
    ("relu", (1024, 1024), "float32"),
    ("softmax", (64, 1024), "float32"),
    ("layernorm", (64, 1024), "float32"),
]
CALLS = 1000


def loop_us(fn: Callable[[], Any]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(CALLS):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / CALLS * 1e3


def cell(samples_us: list[float]) -> str:
    median = statistics.median(samples_us)
    return f"{median:,.1f} [{quantile(samples_us, 0.1):,.1f}-{quantile(samples_us, 0.9):,.1f}]"


def direct(module: str) -> str:
    tuned = [v for v in vars(sys.modules[f"inductor_lens.worker.handwritten.kernels.{module}"]).values()
             if isinstance(v, tuning.TunedKernel) and v._launches]  # fmt: skip
    if not tuned:
        return "-"
    return "yes" if any(k.compiled is not None for t in tuned for k in t._launches.values()) else "no"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    import triton

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, {rounds} rounds")
    print("| case | fast path | direct | loop us/call | do_bench us | GPU alone us |")
    print("|---|---|---|---|---|---|")
    for name, dims, dtype in CASES:
        equivalent = get(name)
        impl = implementation(equivalent)
        inputs = make_inputs(equivalent, dict(zip(equivalent.dims, dims, strict=True)), dtype, "cuda")
        fn = functools.partial(impl.run, *inputs)
        outputs = {}
        for fast in (False, True):
            tuning.FAST_LAUNCH = fast
            for _ in range(10):  # tunes (or reads the cache), then the fast path keeps the compiled kernel
                outputs[fast] = fn()
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(*map(as_tuple, outputs.values()), strict=True)), name
        for fast in (False, True):
            tuning.FAST_LAUNCH = fast
            loop, bench, alone = [], [], []
            for _ in range(rounds):
                loop.append(loop_us(fn))
                bench.append(do_bench(fn, warmup=5, rep=20) * 1e3)
                alone.append(do_bench_cudagraph(fn, rep=20) * 1e3)
            case = f"{name} {'x'.join(map(str, dims))} {dtype}"
            kept = direct(equivalent.module) if fast else "-"
            print(f"| {case} | {'on' if fast else 'off'} | {kept} | {cell(loop)} | {cell(bench)} | {cell(alone)} |",
                  flush=True)  # fmt: skip
    tuning.FAST_LAUNCH = True


if __name__ == "__main__":
    main()
