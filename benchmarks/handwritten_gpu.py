"""Check and time every hand-written Triton kernel on a GPU, against Inductor and torch, and write the results.

Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/handwritten_gpu.py --results handwritten.md

1. correctness: every hand-written kernel against its torch reference on odd, tiny and large shapes
   in float32, float16 and bfloat16 (on the GPU, so bfloat16 dot products are covered too);
2. speed, at a large shape per kernel: the hand-written kernel, torch.compile of its torch reference
   (the Inductor kernel for the same op), and torch eager, all with triton.testing.do_bench medians
   (25 ms warm-up, 100 ms of repetitions, L2 cleared before each); flash attention also against
   SDPA's memory-efficient and flash backends; memory-bound kernels and attention also with GPU time alone
   (both sides replayed from a CUDA graph), which a contended host cannot inflate;
3. targets: memory-bound kernels reach >= 80% of the measured copy bandwidth and are no slower than
   Inductor's kernel; bf16 matmul at 4096^3 reaches >= 85% of cuBLAS; flash attention forward is no
   slower than SDPA's memory-efficient backend at the transformer block sample's shapes.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch
import triton

from inductor_lens.exchange.files import CeilingsData
from inductor_lens.handwritten.catalog import EQUIVALENTS, get
from inductor_lens.handwritten.equivalent import ITEMSIZE
from inductor_lens.worker.handwritten import check
from inductor_lens.worker.measure import ceilings

ODD_SHAPES = {
    "elementwise": [(1, 1), (3, 5), (1000, 777), (37, 4099), (2, 70001)],
    "row-wise": [(1, 1), (3, 5), (1000, 777), (37, 4099), (5, 20000), (3, 70001)],
    "matmul": [(1, 1, 1), (3, 5, 7), (17, 33, 65), (129, 257, 31), (1000, 777, 333), (64, 64, 4099)],
    "attention": [
        (1, 1, 1, 16),
        (1, 2, 5, 16),
        (2, 3, 100, 64),
        (1, 1, 17, 40),
        (1, 2, 130, 32),
        (2, 4, 1000, 128),
    ],
    # (batch, in_channels, height, width, out_channels, kernel_h, kernel_w, stride, padding, dilation, groups,
    # channels_last)
    "convolution": [
        (1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0),
        (2, 5, 9, 11, 7, 3, 3, 2, 1, 1, 1, 0),
        (3, 36, 17, 19, 72, 3, 3, 1, 2, 2, 2, 1),
        (2, 96, 15, 13, 96, 3, 3, 2, 1, 1, 96, 1),
        (4, 130, 14, 14, 200, 1, 1, 1, 0, 1, 1, 0),
        (8, 256, 28, 28, 128, 1, 1, 2, 0, 1, 1, 1),
    ],
}
DTYPES = ("float32", "float16", "bfloat16")
# (kernel, shape, dtype): the large shapes the targets are judged at, plus the samples' own shapes.
BF16_ONLY = {"relu", "gelu_tanh", "bias_relu", "bias_gelu_tanh", "residual"}
SPEED_CASES = [
    *[
        (e.name, e.bench_shape, d)
        for e in EQUIVALENTS
        if e.bound == "memory"
        for d in ("float32", "bfloat16")
        if d == "bfloat16" or e.name not in BF16_ONLY
    ],
    ("softmax", (4096, 32768), "float32"),  # longer than a row in registers: the online (looped) path
    ("layernorm", (4096, 32768), "bfloat16"),
    ("matmul", (4096, 4096, 4096), "bfloat16"),
    ("matmul", (4096, 4096, 4096), "float16"),
    ("matmul_bias_gelu", (4096, 4096, 4096), "bfloat16"),
    ("matmul_bias", (1024, 8192, 2048), "bfloat16"),  # the bf16 MLP sample's first layer
    ("matmul", (4096, 4096, 4096), "float32"),
    ("flash_attention_causal", (8, 8, 256, 64), "float32"),  # the transformer block sample
    ("flash_attention_causal", (8, 8, 256, 64), "bfloat16"),
    ("flash_attention", (8, 8, 256, 64), "bfloat16"),
    ("flash_attention_causal", (4, 16, 2048, 64), "bfloat16"),
    ("flash_attention", (4, 16, 2048, 128), "bfloat16"),
    # ResNet-50 layers at batch 32: a 3x3, a 1x1 reduction, a strided 1x1 downsample; a depthwise 3x3
    *[
        (name, shape, "bfloat16")
        for name in ("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "conv2d_backward")
        for shape in ((32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1), (32, 256, 56, 56, 64, 1, 1, 1, 0, 1, 1, 1))
    ],
    ("conv2d", (32, 256, 56, 56, 512, 1, 1, 2, 0, 1, 1, 1), "bfloat16"),
    ("conv2d", (32, 256, 56, 56, 256, 3, 3, 1, 1, 1, 256, 1), "bfloat16"),
    ("conv2d", (32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1), "float32"),
]
MEMORY_TARGET = 0.80
# Two do_bench medians of the same kernel differ by up to ~1% run to run: closer than that is a tie.
TIE = 0.01
MATMUL_TARGET = 0.85


def correctness(quick: bool, names: list[str] | None = None) -> list[str]:
    lines = [
        "| kernel | dtype | shapes checked | worst error / tolerance | result |",
        "|---|---|---|---|---|",
    ]
    failures = 0
    for equivalent in EQUIVALENTS:
        if names and equivalent.name not in names:
            continue
        for dtype in DTYPES:
            worst, texts, bad = 0.0, [], []
            # the family's GPU shapes, else the entry's own odd shapes (the interpreter tests')
            shapes = list(ODD_SHAPES.get(equivalent.family, equivalent.check_shapes))
            if "attention_backward" in equivalent.covers or "attention_causal_backward" in equivalent.covers:
                # With one key dq and dk are zero: their error has no scale to be measured against.
                shapes = [values for values in shapes if values[2] > 1]
            if equivalent.name in ("rmsnorm_backward", "rmsnorm_residual_backward"):
                # A one-column row's dx is a cancellation fp32 cannot resolve (kernels/norms.py): checked
                # from three columns up, as the catalog's own check shapes are.
                shapes = [values for values in shapes if values[1] >= 3]
            for values in shapes[: 3 if quick else None]:
                result = check.check(equivalent.name, equivalent.shape(values), dtype, "cuda")
                texts.append("x".join(map(str, values)))
                ratio = max(e.max_rel for e in result.errors) / result.tolerance
                worst = max(worst, ratio)
                if not result.ok:
                    bad.append(texts[-1])
            failures += bool(bad)
            verdict = "ok" if not bad else f"**MISMATCH** on {', '.join(bad)}"
            lines.append(f"| {equivalent.name} | {dtype} | {', '.join(texts)} | {worst:.2f} | {verdict} |")
            print(lines[-1], flush=True)
    lines.append(f"\n{failures} (kernel, dtype) pairs with a mismatch.")
    return lines


def device_ms(fn) -> float | None:
    """GPU time alone: the call replayed from a CUDA graph, so Python launch overhead is not counted."""
    try:
        fn()
        return float(triton.testing.do_bench_cudagraph(fn, rep=100))
    except Exception:
        return None


def sdpa_backend_ms(backend: str, inputs: tuple, causal: bool) -> tuple[float | None, float | None]:
    """(do_bench ms, CUDA-graph ms) of one SDPA backend; None where the backend refuses the inputs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = inputs

    def call() -> torch.Tensor:
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    try:
        return check.time_kernel(call), device_ms(call)
    except RuntimeError:
        return None, None  # e.g. the flash backend refuses float32


def own_device_ms(impl, inputs: tuple) -> float | None:
    return device_ms(lambda: impl.run(*inputs))


def time_three(impl, inputs: tuple, compiled) -> tuple[float, float, float]:
    """Medians (ms) of the hand-written kernel, torch eager and ``compiled`` (torch.compile of the reference)."""
    return (
        check.time_kernel(lambda: impl.run(*inputs)),
        check.time_kernel(lambda: impl.reference(*inputs)),
        check.time_kernel(lambda: compiled(*inputs)),
    )


def speed(
    ceiling_cache: dict[str, CeilingsData],
    families: list[str] | None = None,
    dtypes: list[str] | None = None,
    names: list[str] | None = None,
) -> list[str]:
    # Memory-bound kernels with GPU time alone: (at 80% of copy, no slower than Inductor).
    alone_verdicts: list[tuple[bool, bool]] = []
    lines = [
        "| kernel | shape | dtype | hand-written | rate | % of ceiling | Inductor (torch.compile) | torch eager | "
        "other | target | result |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, values, dtype in SPEED_CASES:
        equivalent = get(name)
        if (families and equivalent.family not in families) or (dtypes and dtype not in dtypes):
            continue
        if names and name not in names:
            continue
        shape = equivalent.shape(values)
        if dtype not in ceiling_cache:
            ceiling_cache[dtype] = ceilings(torch.device("cuda"), getattr(torch, dtype))
        limits = ceiling_cache[dtype]
        torch._dynamo.reset()
        ok = check.check(name, shape, dtype, "cuda").ok
        inputs = check.make_inputs(equivalent, shape, dtype, "cuda")
        impl = check.implementation(equivalent)
        compiled = torch.compile(impl.reference, dynamic=False)
        mine, eager, inductor = time_three(impl, inputs, compiled)
        moved, flops = equivalent.cost(shape, ITEMSIZE[dtype])
        other = ""
        if equivalent.bound == "memory":
            fraction = moved / (mine * 1e-3) / 1e9 / limits.copy_gb_per_s
            rate = f"{moved / (mine * 1e-3) / 1e9:,.0f} GB/s"
            passed = fraction >= MEMORY_TARGET and mine <= inductor * (1 + TIE)
            other = f"{mine / inductor - 1:+.1%} vs Inductor"
            # without launch overhead: both replayed from a CUDA graph (a host slower than the GPU shows here)
            mine_graph = own_device_ms(impl, inputs)
            inductor_graph = device_ms(lambda compiled=compiled, inputs=inputs: compiled(*inputs))
            if mine_graph and inductor_graph:
                alone = moved / (mine_graph * 1e-3) / 1e9 / limits.copy_gb_per_s
                other += (f"; GPU alone {mine_graph * 1e3:,.1f} vs Inductor {inductor_graph * 1e3:,.1f} us "
                          f"({mine_graph / inductor_graph - 1:+.1%}), {alone:.0%} of copy")  # fmt: skip
                alone_verdicts.append((alone >= MEMORY_TARGET, mine_graph <= inductor_graph * (1 + TIE)))
            target = f">= {MEMORY_TARGET:.0%} of copy, <= Inductor (+{TIE:.0%} tie)"
        elif equivalent.family == "matmul":
            fraction = flops / (mine * 1e-3) / 1e12 / limits.matmul_tflops
            rate = f"{flops / (mine * 1e-3) / 1e12:,.1f} TFLOP/s"
            versus = eager / mine
            other = f"{versus:.1%} of cuBLAS"
            judged = values == (4096, 4096, 4096) and dtype == "bfloat16"
            passed = versus >= MATMUL_TARGET if judged else None
            target = f">= {MATMUL_TARGET:.0%} of cuBLAS" if judged else "(information)"
        elif equivalent.family == "convolution":
            fraction = flops / (mine * 1e-3) / 1e12 / limits.matmul_tflops
            rate = f"{flops / (mine * 1e-3) / 1e12:,.1f} TFLOP/s"
            other = f"{eager / mine:.1%} of cuDNN (torch eager)"
            passed, target = None, "(information)"
        else:
            fraction = flops / (mine * 1e-3) / 1e12 / limits.matmul_tflops
            rate = f"{flops / (mine * 1e-3) / 1e12:,.1f} TFLOP/s"
            causal = name.endswith("causal")
            efficient, efficient_graph = sdpa_backend_ms("EFFICIENT_ATTENTION", inputs, causal)
            flash, flash_graph = sdpa_backend_ms("FLASH_ATTENTION", inputs, causal)
            mine_graph = own_device_ms(impl, inputs)
            other = f"SDPA efficient {efficient * 1e3:.1f} us" if efficient else "SDPA efficient n/a"
            other += f", SDPA flash {flash * 1e3:.1f} us" if flash else ", SDPA flash n/a"
            if mine_graph and efficient_graph:
                other += (f"; GPU time alone (CUDA graph): hand-written {mine_graph * 1e3:.1f} us, "
                          f"SDPA efficient {efficient_graph * 1e3:.1f} us")  # fmt: skip
                if flash_graph:
                    other += f", SDPA flash {flash_graph * 1e3:.1f} us"
            judged = values == (8, 8, 256, 64)
            passed = (mine_graph is not None and efficient_graph is not None and mine_graph <= efficient_graph
                      if judged else None)  # fmt: skip
            target = "<= SDPA efficient (GPU time alone)" if judged else "(information)"
        verdict = (
            "(correctness FAILED)" if not ok else "pass" if passed else "—" if passed is None else "**miss**"
        )
        lines.append(
            f"| {name} | {'x'.join(map(str, values))} | {dtype} | {mine * 1e3:,.1f} us | {rate} | {fraction:.1%} | "
            f"{inductor * 1e3:,.1f} us | {eager * 1e3:,.1f} us | {other} | {target} | {verdict} |"
        )
        print(lines[-1], flush=True)
        inputs = None
        torch.cuda.empty_cache()
    if alone_verdicts:
        count = len(alone_verdicts)
        lines.append(
            f"\nMemory-bound, GPU time alone, {count} kernels: {sum(a for a, _ in alone_verdicts)} at >= "
            f"{MEMORY_TARGET:.0%} of copy, {sum(b for _, b in alone_verdicts)} no slower than Inductor "
            f"(+{TIE:.0%} tie), {sum(a and b for a, b in alone_verdicts)} both."
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument(
        "--quick", action="store_true", help="Three shapes per kernel in the correctness sweep."
    )
    parser.add_argument("--skip-correctness", action="store_true")
    parser.add_argument(
        "--families", nargs="*", help="Time only these families (elementwise, row-wise, ...)."
    )
    parser.add_argument("--dtypes", nargs="*", help="Time only these dtypes (float32, bfloat16, ...).")
    parser.add_argument("--names", nargs="*", help="Check and time only these catalog entries.")
    args = parser.parse_args()
    started = time.perf_counter()
    device = torch.cuda.get_device_name()
    header = [
        f"# Hand-written Triton kernels on {device}",
        "",
        f"torch {torch.__version__}, triton {triton.__version__}, CUDA {torch.version.cuda}, Python "
        f"{platform.python_version()}; TF32 {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'} "
        "(float32 dot products in full precision, as torch does by default).",
        "Command: `PYTHONPATH=$PWD python3 benchmarks/handwritten_gpu.py --results ...`",
        "",
    ]
    cache: dict[str, CeilingsData] = {}
    body = ["## Speed at large shapes", "", *speed(cache, args.families, args.dtypes, args.names), ""]
    copy = ", ".join(f"{d}: copy {c.copy_gb_per_s:,.0f} GB/s, matmul {c.matmul_tflops:,.1f} TFLOP/s"
                     for d, c in cache.items())  # fmt: skip
    body += [f"Measured ceilings (the 100% lines): {copy}.", ""]
    args.results.write_text("\n".join(header + body) + "\n")
    if not args.skip_correctness:
        body += ["## Correctness on odd shapes (GPU)", "", *correctness(args.quick, args.names), ""]
    body.append(f"Total {time.perf_counter() - started:.0f} s.")
    args.results.write_text("\n".join(header + body) + "\n")


if __name__ == "__main__":
    main()
