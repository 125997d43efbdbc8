"""Check the capped sample count of GPU timings against do_bench's full 100 ms budget, side by side.

Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/sample_cap_check.py --rounds 5 --results cap.md

`worker.measure.gpu_time` cuts do_bench's repetition budget to about MAX_SAMPLES samples (kernels longer
than REP_MS / MAX_SAMPLES keep the whole budget). For ops from a few microseconds to milliseconds (torch
ops and hand-written kernels at GPT-2 and ResNet-50 sizes), this times each both ways, interleaved
(full, capped, full, capped, ...), and prints per op: the median of each way's round medians with their
min-max, the ratio capped / full, the samples per measurement and the wall time per measurement.
The cap is sound where the ratio is within the full budget's own round-to-round spread.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def cases():  # type: ignore[no-untyped-def]
    import torch
    import torch.nn.functional as F

    from inductor_lens.handwritten.catalog import get
    from inductor_lens.worker.handwritten import check

    device = torch.device("cuda")
    found = []
    for numel in (1 << 14, 1 << 20, 1 << 24, 1 << 27):
        x = torch.randn(numel, device=device)
        found.append((f"torch relu, {numel:,} fp32", lambda x=x: F.relu(x)))
    x = torch.randn(32, 256, 56, 56, device=device)
    weight, bias = torch.randn(256, device=device), torch.randn(256, device=device)
    mean, var = torch.zeros(256, device=device), torch.ones(256, device=device)
    found.append(("torch batch_norm + relu, 32x256x56x56 fp32",
                  lambda: F.relu(F.batch_norm(x, mean, var, weight, bias, training=False))))  # fmt: skip
    a, b = torch.randn(4096, 768, device=device, dtype=torch.bfloat16), torch.randn(768, 3072, device=device, dtype=torch.bfloat16)
    found.append(("torch matmul 4096x768x3072 bf16", lambda: a @ b))
    for name, shape, dtype in (
        ("layernorm", {"rows": 4096, "cols": 768}, "float32"),
        ("bias_gelu", {"rows": 4096, "cols": 3072}, "float32"),
        ("matmul", {"M": 4096, "N": 3072, "K": 768}, "bfloat16"),
    ):
        equivalent = get(name)
        impl = check.implementation(equivalent)
        inputs = check.make_inputs(equivalent, shape, dtype, "cuda")
        impl.run(*inputs)
        found.append((f"hand-written {name} {shape} {dtype}", lambda impl=impl, inputs=inputs: impl.run(*inputs)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    import torch
    import triton

    from inductor_lens.worker.measure import MAX_SAMPLES, gpu_time

    lines = [
        f"Device: {torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}; "
        f"{args.rounds} rounds interleaved; cap about {MAX_SAMPLES} samples.",
        "",
        "| op | full: median (min-max of round medians) | capped: median (min-max) | capped / full | "
        "samples full / capped | wall per measurement full / capped |",
        "|---|---|---|---|---|---|",
    ]
    for name, fn in cases():
        runs: dict[str, list[tuple[float, int, float]]] = {"full": [], "capped": []}
        for _ in range(args.rounds):
            for way, cap in (("full", None), ("capped", MAX_SAMPLES)):
                started = time.perf_counter()
                timing = gpu_time(fn, max_samples=cap)
                runs[way].append((timing.median_ms * 1e3, timing.samples, time.perf_counter() - started))
        full = [m for m, _, _ in runs["full"]]
        capped = [m for m, _, _ in runs["capped"]]
        row = (
            f"| {name} | {statistics.median(full):.2f} µs ({min(full):.2f}-{max(full):.2f}) | "
            f"{statistics.median(capped):.2f} µs ({min(capped):.2f}-{max(capped):.2f}) | "
            f"{statistics.median(capped) / statistics.median(full):.3f} | "
            f"{statistics.median(s for _, s, _ in runs['full']):.0f} / {statistics.median(s for _, s, _ in runs['capped']):.0f} | "
            f"{statistics.median(w for _, _, w in runs['full']):.3f} s / {statistics.median(w for _, _, w in runs['capped']):.3f} s |"
        )
        print(row, flush=True)
        lines.append(row)
    if args.results:
        args.results.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
