"""Compile every sample with `inductor-lens compile` under the given modes and write a results page.

Run on a GPU machine from the repository root, e.g.

    PYTHONPATH=$PWD python3 benchmarks/gpu_samples.py --modes default max-autotune-no-cudagraphs \
        --out inductor-lens-reports/gpu --results results.md

For each (sample, mode) it runs the real command line, keeps its output, and reads the report's
lens.json: graphs, Triton kernels by category, extern calls, cold compile seconds and agreement with
eager. Nothing here is a timing benchmark of the kernels; the compile seconds are single cold runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

SAMPLES = ("mlp", "softmax_ln", "block", "convnet", "graphbreak")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", nargs="+", default=["default", "max-autotune-no-cudagraphs"])
    parser.add_argument("--samples", nargs="+", default=list(SAMPLES))
    parser.add_argument("--out", type=Path, default=Path("inductor-lens-reports/gpu"))
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more arguments for compile")
    args = parser.parse_args()

    rows, log = [], []
    environment = {}
    for mode in args.modes:
        for sample in args.samples:
            out = args.out / f"{sample}-{mode}"
            command = [sys.executable, "-m", "inductor_lens", "compile", f"samples/{sample}.py", "--mode", mode,
                       "--device", "cuda", "--out", str(out), *args.extra]  # fmt: skip
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True)
            wall = time.perf_counter() - started
            shown = " ".join(["inductor-lens", *command[3:]])
            log.append(f"$ {shown}\n{done.stderr}{done.stdout}(exit {done.returncode}, {wall:.1f} s)\n")
            print(log[-1], flush=True)
            lens = out / "lens.json"
            if not lens.is_file():
                rows.append((sample, mode, done.returncode, None))
                continue
            run = json.loads(lens.read_text())["run"]
            environment = run["environment"]
            rows.append((sample, mode, done.returncode, run))

    lines = [
        f"# `inductor-lens compile` on the samples: {environment.get('device_name', 'GPU')}",
        "",
        f"- Date: {time.strftime('%Y-%m-%d')}; device: {environment.get('device_name')} "
        f"(compute capability {environment.get('device_capability')}, {environment.get('multiprocessor_count')} SMs)",
        f"- torch {environment.get('torch_version')}, triton {environment.get('triton_version')}, "
        f"CUDA {environment.get('cuda_version')}, Python {platform.python_version()}",
        f"- Command: `PYTHONPATH=$PWD python3 benchmarks/gpu_samples.py --modes {' '.join(args.modes)}`, "
        "which runs `inductor-lens compile samples/<sample>.py --mode <mode> --device cuda` for each pair.",
        "- Cold compile = the first compiled call with fresh Inductor and Triton caches (one run, not a benchmark).",
        "",
        "| sample | mode | exit | graphs | Triton kernels (by category) | extern calls | cold compile | agrees with eager |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sample, mode, code, run in rows:
        if run is None:
            lines.append(f"| {sample} | {mode} | {code} | no report | | | | |")
            continue
        kernels = [k for g in run["graphs"] for k in g["kernels"]]
        by_category = Counter(k["category"] for k in kernels if k["backend"] == "triton")
        externs = sum(1 for g in run["graphs"] for launch in g["launches"] if launch["kind"] == "extern")
        capture = run["capture"] or {}
        accuracy = capture.get("accuracy") or {}
        agrees = "yes" if accuracy.get("within_tolerance") else "no"
        if accuracy:
            agrees += f" (max abs {accuracy['max_abs_error']:.1e})"
        categories = ", ".join(f"{n} {c}" for c, n in sorted(by_category.items())) or "none"
        cold = f"{capture['cold_compile_s']:.1f} s" if capture.get("cold_compile_s") else "—"
        lines.append(
            f"| {sample} | {mode} | {code} | {len(run['graphs'])} | {sum(by_category.values())} ({categories}) "
            f"| {externs} | {cold} | {agrees} |"
        )
    lines += ["", "## Command log", "", "```", *"".join(log).splitlines(), "```", ""]
    args.results.write_text("\n".join(lines))
    return 0 if all(code == 0 for _, _, code, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
