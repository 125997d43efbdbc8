"""The hand-written conv2d kernels against cuDNN at every convolution shape of torchvision's ResNet-50 (GPU).

Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/conv_resnet50.py --results conv.md --batch 32 --dtype bfloat16

The shapes are the model's own: a forward pass of ``torchvision.models.resnet50()`` with a hook on every
``nn.Conv2d`` records its input size, weight size, stride, padding, dilation and groups, and how many times
the model runs that shape. For each distinct shape and each memory format asked for (channels-last, NCHW):

- the hand-written kernel (``worker/handwritten/kernels/conv.py``), tuned over its whole configuration list, and
  torch's convolution (cuDNN; for float32 in TF32, as ``torch.backends.cudnn.allow_tf32`` allows by default)
  are timed with the bench stage's timer (``worker/measure.gpu_time``: ``triton.testing.do_bench`` medians,
  25 ms warm-up, L2 cleared before each call); p10-p90 given;
- the hand-written output is checked against torch's in float32 (max error over the largest value);
- every configuration's autotune time is kept, so the list can be cut to the ones that win.

1x1 stride-1 convolutions on channels-last tensors run as the hand-written matmul (conv.py ``_plain_gemm``).

Each side is also timed replayed from a CUDA graph (``gpu_graph_time``: "GPU alone"), where no host work
counts: with ``do_bench`` a Python launcher whose host time exceeds the L2 clear and the kernel is timed on
the host, not on the GPU. The verdict per direction is the model's time: the sum over shapes of (count x median) for cuDNN over the
same sum for the hand-written kernels ("share of cuDNN": 100% = as fast), as ratios measured side by side in
one process. Forward, input gradient and weight gradient are measured separately (``--directions``).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections import Counter
from pathlib import Path

import torch
import triton
from torch.nn.grad import conv2d_input, conv2d_weight

from inductor_lens.worker.handwritten import tuning
from inductor_lens.worker.handwritten.kernels import conv, load, matmul
from inductor_lens.worker.handwritten.tuning_store import config_text
from inductor_lens.worker.measure import gpu_graph_time, gpu_time

# (in_channels, height, width, out_channels, kernel, stride, padding, dilation, groups)
Shape = tuple[int, int, int, int, int, int, int, int, int]
TUNED = {
    "forward": "conv2d_forward_tuned",
    "input gradient": "conv2d_backward_input_tuned",
    "weight gradient": "conv2d_backward_weight_tuned",
}


def resnet50_shapes(batch: int) -> Counter[Shape]:
    """Each distinct convolution of torchvision's ResNet-50 (224 x 224 inputs) and how often it runs."""
    import torchvision

    model = torchvision.models.resnet50()
    found: Counter[Shape] = Counter()

    def hook(module: torch.nn.Conv2d, inputs: tuple[torch.Tensor, ...], _: torch.Tensor) -> None:
        _, c, h, w = inputs[0].shape
        found[(c, h, w, module.out_channels, module.kernel_size[0], module.stride[0], module.padding[0],  # type: ignore[index]
               module.dilation[0], module.groups)] += 1  # fmt: skip

    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            module.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    return found


def macs(shape: Shape) -> int:
    """Multiply-adds of one image (the order in which shapes are measured: the model's largest first)."""
    c, h, w, k, r, stride, padding, dilation, groups = shape
    p, q = (conv.output_size(n, r, stride, padding, dilation) for n in (h, w))
    return p * q * k * (c // groups) * r * r


def operands(shape: Shape, batch: int, dtype: torch.dtype, channels_last: bool) -> dict[str, torch.Tensor]:
    c, h, w, k, r, stride, padding, dilation, groups = shape
    p = conv.output_size(h, r, stride, padding, dilation)
    q = conv.output_size(w, r, stride, padding, dilation)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    make = lambda *size: torch.randn(*size, device="cuda", dtype=dtype).contiguous(memory_format=fmt)  # noqa: E731
    return {"x": make(batch, c, h, w), "weight": make(k, c // groups, r, r) * 0.05, "grad_out": make(batch, k, p, q)}


def calls(direction: str, shape: Shape, t: dict[str, torch.Tensor]):  # type: ignore[no-untyped-def]
    """(hand-written, torch) callables of one direction."""
    _, h, w, _, r, stride, padding, dilation, groups = shape
    args = conv.Conv2dArgs(stride, padding, dilation, groups)
    x, weight, grad_out = t["x"], t["weight"], t["grad_out"]
    if direction == "forward":
        return (lambda: conv.conv2d(x, weight, None, args),
                lambda: torch.nn.functional.conv2d(x, weight, None, stride, padding, dilation, groups))
    if direction == "input gradient":
        return (lambda: conv.conv2d_backward_input(grad_out, weight, (h, w), args),
                lambda: conv2d_input(x.shape, weight, grad_out, stride, padding, dilation, groups))
    return (lambda: conv.conv2d_backward_weight(grad_out, x, (r, r), args),
            lambda: conv2d_weight(x, weight.shape, grad_out, stride, padding, dilation, groups))  # fmt: skip


def config_timings(direction: str, shape: Shape, tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """The last tuning's time per configuration (ms), from the autotuner of the kernel that ran: the matmul
    kernel for the convolutions that are a plain GEMM (conv.py's own rule, on the activations it reads)."""
    _, _, _, _, r, stride, padding, dilation, groups = shape
    activations = tensors["grad_out" if direction == "input gradient" else "x"]
    plain = direction != "weight gradient" and conv._plain_gemm(
        activations, r, r, conv.Conv2dArgs(stride, padding, dilation, groups)
    )
    tuned = matmul.matmul_tuned if plain else getattr(conv, TUNED[direction])
    tuner = getattr(tuned, "_autotuner", None)
    timings = getattr(tuner, "configs_timings", None) or {}
    out = {}
    for config, timing in timings.items():
        median = timing[0] if isinstance(timing, (list, tuple)) else timing
        out[config_text(config)] = float(median)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--formats", nargs="*", default=["channels-last", "NCHW"])
    parser.add_argument("--directions", nargs="*", default=["forward"], choices=list(TUNED))
    parser.add_argument("--limit-s", type=float, default=1e9,
                        help="stop starting new shapes after this long (shared equally by the direction/format blocks)")
    args = parser.parse_args()
    started = time.perf_counter()
    load("conv", interpret=False)
    dtype = getattr(torch, args.dtype)
    shapes = resnet50_shapes(args.batch)
    header = [
        f"# Hand-written conv2d against cuDNN at ResNet-50's shapes ({torch.cuda.get_device_name()})",
        "",
        f"torch {torch.__version__}, triton {triton.__version__}, CUDA {torch.version.cuda}, cuDNN "
        f"{torch.backends.cudnn.version()}, Python {platform.python_version()}; batch {args.batch}, {args.dtype}; "
        f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}.",
        f"Command: `PYTHONPATH=$PWD python3 benchmarks/conv_resnet50.py --batch {args.batch} --dtype {args.dtype} "
        f"--formats {' '.join(args.formats)} --directions {' '.join(args.directions)}`",
        f"{len(shapes)} distinct shapes, {sum(shapes.values())} convolutions per forward pass. Times: do_bench "
        "medians (p10-p90), µs.",
        "",
    ]
    body: list[str] = []
    summary: list[str] = []
    winners: dict[str, list[dict[str, object]]] = {}
    for direction in args.directions:
        for fmt in args.formats:
            channels_last = fmt == "channels-last"
            block_started = time.perf_counter()
            block_limit = args.limit_s / (len(args.directions) * len(args.formats))
            rows = ["| C x H x W -> K, kernel/stride/pad | count | hand-written µs | cuDNN µs | share of cuDNN | "
                    "GPU alone: hand-written / cuDNN µs (share) | max error | winning configuration |",
                    "|---|---|---|---|---|---|---|---|"]  # fmt: skip
            mine_total = torch_total = mine_alone_total = torch_alone_total = 0.0
            measured = 0
            for shape, count in sorted(shapes.items(), key=lambda item: -item[1] * macs(item[0])):
                if time.perf_counter() - block_started > block_limit:
                    rows.append(f"| (stopped at {block_limit:.0f} s: the remaining shapes not measured) |||||||")
                    break
                tensors = operands(shape, args.batch, dtype, channels_last)
                mine, reference = calls(direction, shape, tensors)
                tuned_before = tuning.FIRST_USES["tuned"]
                out = mine()  # tunes, unless an earlier shape of the same shape class did
                timings = config_timings(direction, shape, tensors) if tuning.FIRST_USES["tuned"] > tuned_before else {}
                want = reference()
                pair = [o.float() for o in (out, want)]
                error = float((pair[0] - pair[1]).abs().max() / pair[1].abs().max().clamp_min(1e-30))
                mine_t, torch_t = gpu_time(mine), gpu_time(reference)
                mine_total += count * mine_t.median_ms
                torch_total += count * torch_t.median_ms
                mine_alone, torch_alone = gpu_graph_time(mine), gpu_graph_time(reference)
                alone = "(not captured)"
                if mine_alone is not None and torch_alone is not None:
                    mine_alone_total += count * mine_alone.median_ms
                    torch_alone_total += count * torch_alone.median_ms
                    alone = (f"{mine_alone.median_ms * 1e3:,.1f} / {torch_alone.median_ms * 1e3:,.1f} "
                             f"({torch_alone.median_ms / mine_alone.median_ms:.0%})")  # fmt: skip
                measured += 1
                best = min(timings.values()) if timings else None
                winners.setdefault(f"{direction} {fmt}", []).append(
                    {"shape": shape, "count": count, "timings_ms": timings}
                )
                chosen = min(timings, key=timings.__getitem__) if timings else "(an earlier shape's: same shape class)"
                c, h, w, k, r, stride, padding, _, groups = shape
                geometry = f"{c}x{h}x{w} -> {k}, {r}x{r}/{stride}/{padding}" + (f", groups {groups}" if groups > 1 else "")
                rows.append(
                    f"| {geometry} | {count} | {mine_t.median_ms * 1e3:,.1f} ({mine_t.p10_ms * 1e3:,.1f}-"
                    f"{mine_t.p90_ms * 1e3:,.1f}) | {torch_t.median_ms * 1e3:,.1f} ({torch_t.p10_ms * 1e3:,.1f}-"
                    f"{torch_t.p90_ms * 1e3:,.1f}) | {torch_t.median_ms / mine_t.median_ms:.0%} | {alone} | {error:.1e} | "
                    f"{chosen}{'' if best is None else f' ({len(timings)} tried)'} |"
                )
                print(rows[-1], flush=True)
                del tensors, out, want, pair
                torch.cuda.empty_cache()
            share = torch_total / mine_total if mine_total else 0.0
            alone_share = torch_alone_total / mine_alone_total if mine_alone_total else 0.0
            summary.append(f"| {direction} | {fmt} | {measured} of {len(shapes)} | {mine_total * 1e3:,.0f} | "
                           f"{torch_total * 1e3:,.0f} | {share:.0%} | {mine_alone_total * 1e3:,.0f} / "
                           f"{torch_alone_total * 1e3:,.0f} ({alone_share:.0%}) |")  # fmt: skip
            body += [f"## {direction}, {fmt}", "", *rows, ""]
            write(args.results, header, summary, body, started)
    (args.results.with_suffix(".configs.json")).write_text(json.dumps(winners, indent=1) + "\n")
    write(args.results, header, summary, body, started)


def write(path: Path, header: list[str], summary: list[str], body: list[str], started: float) -> None:
    table = ["| direction | format | shapes | hand-written µs per pass | cuDNN µs per pass | share of cuDNN | "
             "GPU alone: hand-written / cuDNN µs per pass (share) |", "|---|---|---|---|---|---|---|", *summary, ""]  # fmt: skip
    path.write_text("\n".join([*header, *table, *body, f"Total {time.perf_counter() - started:.0f} s."]) + "\n")


if __name__ == "__main__":
    main()
