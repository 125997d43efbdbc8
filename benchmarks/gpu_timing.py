"""Check inductor-lens's timings on a GPU: compile each sample twice per mode and compare what was measured.

Run on a GPU machine from the repository root, e.g.

    PYTHONPATH=$PWD python3 benchmarks/gpu_timing.py --modes default max-autotune-no-cudagraphs \
        --out inductor-lens-reports/timing --results timing.md

For every (sample, mode) it runs `inductor-lens compile` twice (two independent captures, each with
fresh caches) and reads both reports' lens.json. It checks, and writes as a Markdown page:

1. attribution: the in-context times of all launches add up to within 10% of the profiled GPU time
   of the step (the sum of every kernel the step ran);
2. isolated vs in context: for every Triton kernel whose in-context time per launch is over 20 us,
   the isolated do_bench median is within 15% of it;
3. run to run: every kernel or extern launch over 20 us per step has in-context times within 5% in
   the two captures (matched by graph and kernel name, or graph, position and op for externs);
4. ceilings: the measured device-to-device copy bandwidth (read + write) is within 15% of what the
   device is known to reach (H100 ~3.0 TB/s, H200 ~4.3 TB/s).

This is a check of the measurements, not a benchmark of Inductor: nothing here compares modes.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

SAMPLES = ("mlp", "softmax_ln", "block", "convnet", "graphbreak")
KNOWN_COPY_GB_PER_S = {"H100": 3000.0, "H200": 4300.0}
BIG_US = 20.0
ATTRIBUTION_TOLERANCE = 0.10
ISOLATED_TOLERANCE = 0.15
RUN_TO_RUN_TOLERANCE = 0.05
COPY_TOLERANCE = 0.15


def compile_once(sample: str, mode: str, out: Path, log: list[str], timeout: int) -> dict | None:
    command = [sys.executable, "-m", "inductor_lens", "compile", f"samples/{sample}.py", "--mode", mode,
               "--device", "cuda", "--out", str(out), "--timeout", str(timeout)]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    shown = " ".join(["inductor-lens", *command[3:]])
    log.append(
        f"$ {shown}\n{done.stderr}{done.stdout}(exit {done.returncode}, {time.perf_counter() - started:.1f} s)\n"
    )
    print(log[-1], flush=True)
    lens = out / "lens.json"
    return json.loads(lens.read_text())["run"] if lens.is_file() else None


def timed_items(run: dict) -> dict[str, tuple[float, str | None]]:
    """In-context microseconds per step and launch config of every kernel and extern launch, by a stable key."""
    items: dict[str, tuple[float, str | None]] = {}
    for graph in run["graphs"]:
        for kernel in graph["kernels"]:
            if kernel.get("timing"):
                timing = kernel["timing"]
                items[f"{graph['id']}:{kernel['name']}"] = (timing["in_context_us"], timing.get("config"))
        for launch in graph["launches"]:
            if launch["kind"] == "extern" and launch.get("timing"):
                op = launch.get("aten_op") or launch["target"]
                items[f"{graph['id']}:#{launch['position']} {op}"] = (launch["timing"]["median_us"], None)
    return items


def isolated_pairs(run: dict) -> list[tuple[str, float, float]]:
    """(kernel, in-context us per launch, isolated us) for Triton kernels over BIG_US per launch."""
    pairs = []
    for graph in run["graphs"]:
        for kernel in graph["kernels"]:
            timing = kernel.get("timing") or {}
            if not timing.get("launches") or not timing.get("isolated"):
                continue
            per_launch = timing["in_context_us"] / timing["launches"]
            if per_launch > BIG_US:
                pairs.append((kernel["name"], per_launch, timing["isolated"]["median_ms"] * 1e3))
    return pairs


def missing_isolated(run: dict) -> list[str]:
    return [
        k["name"]
        for g in run["graphs"]
        for k in g["kernels"]
        if k["backend"] == "triton" and k.get("timing") and not k["timing"].get("isolated")
    ]


def isolation_errors(out: Path) -> list[str]:
    """Kernels the capture could not replay alone, with the reason (from the capture's raw results)."""
    raw = out / "capture" / "capture.json"
    if not raw.is_file():
        return []
    isolated = (json.loads(raw.read_text()).get("bench") or {}).get("isolated") or {}
    return [f"{name}: {e['error']}" for name, entries in isolated.items() for e in entries if e.get("error")]


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def mark(ok: bool) -> str:
    return "pass" if ok else "**FAIL**"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", nargs="+", default=["default", "max-autotune-no-cudagraphs"])
    parser.add_argument("--samples", nargs="+", default=list(SAMPLES))
    parser.add_argument("--out", type=Path, default=Path("inductor-lens-reports/timing"))
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--timeout", type=int, default=300)
    args = parser.parse_args()

    log: list[str] = []
    sections: list[str] = []
    failures = 0
    environment: dict = {}
    copies: list[float] = []
    for mode in args.modes:
        for sample in args.samples:
            runs = [
                compile_once(sample, mode, args.out / f"{sample}-{mode}-{i}", log, args.timeout)
                for i in (1, 2)
            ]
            if any(r is None or not (r.get("bench") or {}).get("step") for r in runs):
                sections.append(f"### {sample}, {mode}\n\nno timed report (see the command log): **FAIL**\n")
                failures += 1
                continue
            environment = runs[0]["environment"]
            lines = [f"### {sample}, {mode}", ""]
            lines += ["| capture | step GPU time | attributed | difference | check (<10%) | copy GB/s | matmul TFLOP/s |",
                      "|---|---|---|---|---|---|---|"]  # fmt: skip
            notes: list[str] = []
            for index, run in enumerate(runs, 1):
                step = run["bench"]["step"]
                ceilings = run["bench"].get("ceilings") or {}
                copies.append(ceilings.get("copy_gb_per_s", 0.0))
                gap = relative(step["attributed_us"], step["total_us"])
                failures += gap > ATTRIBUTION_TOLERANCE
                if step.get("unattributed"):
                    missing = ", ".join(f"{n} {us:.1f} us" for n, us in sorted(step["unattributed"].items()))
                    notes.append(f"capture {index}, GPU work not tied to a launch: {missing}")
                lines.append(
                    f"| {index} | {step['total_us']:.1f} us | {step['attributed_us']:.1f} us | {gap:.1%} | "
                    f"{mark(gap <= ATTRIBUTION_TOLERANCE)} | {ceilings.get('copy_gb_per_s', 0):.0f} | "
                    f"{ceilings.get('matmul_tflops', 0):.1f} |"
                )
            lines += [f"\n- {note}" for note in notes]
            lines += ["", "| kernel (capture 1) | in context / launch | isolated | difference | check (<15%) |",
                      "|---|---|---|---|---|"]  # fmt: skip
            pairs = isolated_pairs(runs[0])
            for name, in_context, isolated in pairs:
                gap = relative(isolated, in_context)
                failures += gap > ISOLATED_TOLERANCE
                lines.append(
                    f"| `{name}` | {in_context:.1f} us | {isolated:.1f} us | {gap:.1%} | "
                    f"{mark(gap <= ISOLATED_TOLERANCE)} |"
                )
            if not pairs:
                lines.append(f"| (no Triton kernel over {BIG_US:.0f} us per launch) | | | | |")
            missing = missing_isolated(runs[0])
            if missing:
                failures += 1
                lines.append(f"\nTriton kernels without an isolated time: {', '.join(missing)} **FAIL**")
            errors = isolation_errors(args.out / f"{sample}-{mode}-1")
            if errors:
                lines.append(f"\nReplay errors: {'; '.join(errors)}")
            lines += ["", "| kernel or extern launch | capture 1 | capture 2 | difference | check (<5%) |",
                      "|---|---|---|---|---|"]  # fmt: skip
            first, second = timed_items(runs[0]), timed_items(runs[1])
            compared, retuned = 0, []
            for key in sorted(first, key=lambda k: -first[k][0]):
                if first[key][0] <= BIG_US or key not in second:
                    continue
                if first[key][1] != second[key][1]:
                    retuned.append(f"`{key}` ({first[key][1]}: {first[key][0]:.1f} us; "
                                   f"{second[key][1]}: {second[key][0]:.1f} us)")  # fmt: skip
                    continue
                compared += 1
                gap = relative(second[key][0], first[key][0])
                failures += gap > RUN_TO_RUN_TOLERANCE
                lines.append(
                    f"| `{key}` | {first[key][0]:.1f} us | {second[key][0]:.1f} us | {gap:.1%} | "
                    f"{mark(gap <= RUN_TO_RUN_TOLERANCE)} |"
                )
            if not compared:
                lines.append(
                    f"| (nothing over {BIG_US:.0f} us per step with the same code in both captures) | | | | |"
                )
            unmatched = [k for k in first if first[k][0] > BIG_US and k not in second]
            if unmatched:
                lines.append(f"\nOnly in capture 1 (autotuning chose differently): {', '.join(unmatched)}")
            if retuned:
                lines.append(
                    "\nNot compared, the autotuner kept a different launch config in each capture, so the two "
                    f"captures ran different code: {'; '.join(retuned)}"
                )
            sections.append("\n".join(lines) + "\n")

    device = str(environment.get("device_name", ""))
    known = next((v for k, v in KNOWN_COPY_GB_PER_S.items() if k in device), None)
    copy_lines = []
    if known and copies:
        worst = max(copies, key=lambda c: relative(c, known))
        ok = relative(worst, known) <= COPY_TOLERANCE
        failures += not ok
        copy_lines.append(
            f"- Copy bandwidth over {len(copies)} captures: {min(copies):.0f}-{max(copies):.0f} GB/s against the "
            f"known ~{known:.0f} GB/s for this device: worst {relative(worst, known):.1%} off, {mark(ok)} (<15%)."
        )
    header = [
        f"# inductor-lens timings checked on {device or 'a GPU'}",
        "",
        f"- Date: {time.strftime('%Y-%m-%d')}; device: {device} (compute capability "
        f"{environment.get('device_capability')}, {environment.get('multiprocessor_count')} SMs)",
        f"- torch {environment.get('torch_version')}, triton {environment.get('triton_version')}, "
        f"CUDA {environment.get('cuda_version')}, Python {platform.python_version()}",
        f"- Command: `PYTHONPATH=$PWD python3 benchmarks/gpu_timing.py --modes {' '.join(args.modes)} "
        f"--samples {' '.join(args.samples)}`; each (sample, mode) is compiled twice with "
        "`inductor-lens compile samples/<sample>.py --mode <mode> --device cuda`.",
        "- In context: torch.profiler over 20 compiled steps, median per step; isolated: triton.testing.do_bench "
        "median of the kernel replayed alone on a copy of its real launch's arguments (L2 cleared before each "
        "repetition).",
        *copy_lines,
        f"- Checks failed: {failures}.",
        "",
    ]
    args.results.write_text("\n".join(header + sections + ["## Command log", "", "```", *log, "```", ""]))
    print(f"{failures} checks failed; results in {args.results}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
