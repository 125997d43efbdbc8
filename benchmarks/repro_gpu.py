"""Reproducers against the report: does ``repro.py`` of a kernel, run alone in a fresh process, take the time the
report measured for that kernel alone?

python benchmarks/repro_gpu.py [CAPTURE ...] [--compile samples/block.py] [--device cuda|cpu] [--work DIR]
                               [--out RESULT.md] [--tolerance 0.10]

1. the captures: the given report or capture folders (or .tar.gz archives of one, unpacked into --work), by
   default ``tests/fixtures/h200-block-autotune-timed.tar.gz`` (a timed H200 capture: every Triton kernel has its
   isolated time in the report); with ``--compile SAMPLE``, a fresh ``inductor-lens compile SAMPLE --device DEVICE
   --save-inputs`` on this machine instead (its reproducers then run on the real inputs of each launch);
2. for every kernel (Triton on ``--device cuda``, every generated kernel on ``--device cpu``) ``inductor-lens repro``
   writes its script, which runs in a fresh process; its summary line gives the check and the median time;
3. each time is divided by the report's time of the same kernel: its isolated time (``do_bench`` of the kernel
   replayed alone on a copy of its real arguments, GPU) or, where there is none (CPU captures), its in-context
   time per launch (said so in the table, and never gated: a kernel in the compiled step and a kernel alone in a
   loop are not the same measurement on a CPU).

Prints a markdown table (per kernel: check, reproducer time, report time, ratio; then the median, p10 and p90 of
the ratios) and writes it to ``--out``. Exits 1 when a reproducer fails to run or its check fails, or when an
isolated time is off by more than ``--tolerance`` (10%). ``--device cpu`` is the self-check on a machine without
a GPU: ``python benchmarks/repro_gpu.py --device cpu tests/fixtures/cpu-torch2.13-block-dynamic.tar.gz``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_CAPTURE = ROOT / "tests" / "fixtures" / "h200-block-autotune-timed.tar.gz"
SUMMARY = re.compile(
    r"^repro (?P<kernel>\S+): (?P<check>[^|]+) \| (?P<time>[^|]+) \| (?P<inputs>.+)$", re.MULTILINE
)
MEDIAN = re.compile(r"^([\d.]+) us median")


@dataclass
class Row:
    capture: str
    graph: str
    kernel: str
    check: str = ""
    inputs: str = ""
    repro_us: float | None = None
    report_us: float | None = None
    report_what: str = ""  # "isolated" or "in context, per launch"
    error: str = ""
    seconds: float = 0.0

    @property
    def ratio(self) -> float | None:
        return self.repro_us / self.report_us if self.repro_us and self.report_us else None


def _lens(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "inductor_lens", *[str(a) for a in args]]
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd)


def _capture_folder(given: Path, work: Path) -> Path:
    if given.name.endswith(".tar.gz"):
        target = work / "captures" / given.name.removesuffix(".tar.gz")
        if not target.exists():
            target.mkdir(parents=True)
            with tarfile.open(given) as archive:
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(target, filter="data")
                else:
                    archive.extractall(target)
        (child,) = target.iterdir()
        return child
    return given


def _report_time(kernel: object, device: str) -> tuple[float | None, str]:
    timing = getattr(kernel, "timing", None)
    if timing is None:
        return None, ""
    if timing.isolated is not None:
        return timing.isolated.median_ms * 1e3, "isolated"
    if device == "cpu" and timing.launches:
        return timing.in_context_us / timing.launches, "in context, per launch"
    return None, ""


def run_capture(folder: Path, device: str, work: Path) -> list[Row]:
    from inductor_lens.repro.writer import load_capture

    run, _ = load_capture(folder)
    rows = []
    for graph in run.graphs:
        for kernel in graph.kernels:
            if device == "cuda" and kernel.backend != "triton":
                continue
            if not kernel.launches:
                continue
            row = Row(folder.name, graph.id, kernel.name)
            row.report_us, row.report_what = _report_time(kernel, device)
            out = work / "repro" / folder.name / graph.id / kernel.name
            written = _lens("repro", folder, f"{graph.id}/{kernel.name}", "--out", out)
            if written.returncode != 0:
                row.error = (
                    written.stderr.strip().splitlines()[-1] if written.stderr.strip() else "repro failed"
                )
                rows.append(row)
                continue
            env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
            started = time.perf_counter()
            done = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True, text=True, env=env,
                                  cwd=out, timeout=900)  # fmt: skip
            row.seconds = time.perf_counter() - started
            match = SUMMARY.search(done.stdout)
            if match is None:
                row.error = (done.stderr.strip().splitlines() or ["no summary line"])[-1][:200]
            else:
                row.check = match["check"].strip()
                row.inputs = match["inputs"].split(";")[0].strip()
                median = MEDIAN.match(match["time"].strip())
                row.repro_us = float(median[1]) if median else None
                if done.returncode not in (0, 1):
                    row.error = f"exit {done.returncode}"
            print(
                f"  {kernel.name}: {row.check[:60]} | {row.repro_us} us vs {row.report_us} us {row.error}",
                flush=True,
            )
            rows.append(row)
    return rows


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def table(rows: list[Row], device: str, tolerance: float) -> tuple[str, bool]:
    lines = [
        "| capture | graph | kernel | check | inputs | repro (us) | report (us) | report time | ratio |",
        "|---|---|---|---|---|---:|---:|---|---:|",
    ]
    ok = True
    gated = []
    for row in rows:
        check = row.error or row.check
        ratio = row.ratio
        if row.error or check.startswith("check FAILED"):
            ok = False
        if ratio is not None and row.report_what == "isolated":
            gated.append(ratio)
            if abs(ratio - 1) > tolerance:
                ok = False
        lines.append(
            f"| {row.capture} | {row.graph} | `{row.kernel}` | {check[:90]} | {row.inputs} | "
            f"{row.repro_us if row.repro_us is not None else '-'} | "
            f"{f'{row.report_us:.3f}' if row.report_us is not None else '-'} | {row.report_what or '-'} | "
            f"{f'{ratio:.3f}' if ratio is not None else '-'} |"
        )
    ratios = [r.ratio for r in rows if r.ratio is not None]
    lines.append("")
    if ratios:
        lines.append(
            f"Ratios (reproducer / report), {len(ratios)} kernels: median {statistics.median(ratios):.3f}, "
            f"p10 {quantile(ratios, 0.1):.3f}, p90 {quantile(ratios, 0.9):.3f}; gated (isolated times, "
            f"within {tolerance:.0%}): {len(gated)}, of which {sum(abs(r - 1) <= tolerance for r in gated)} within."
        )
    else:
        lines.append("No kernel had a report time to compare with.")
    checks = [r for r in rows if r.check.startswith("check passed")]
    lines.append(
        f"Checks: {len(checks)} of {len(rows)} passed; device {device}; verdict: {'PASS' if ok else 'FAIL'}."
    )
    return "\n".join(lines) + "\n", ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("captures", nargs="*", type=Path)
    parser.add_argument("--compile", type=Path, default=None, help="compile this sample here instead")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--work", type=Path, default=Path("/tmp/repro-gpu-bench"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--tolerance", type=float, default=0.10)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    captures = [_capture_folder(c, args.work) for c in args.captures]
    if args.compile is not None:
        fresh = args.work / f"fresh-{args.compile.stem}"
        done = _lens("compile", args.compile.resolve(), "--device", args.device, "--save-inputs", "--no-handwritten",
                     "--out", fresh)  # fmt: skip
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        captures.append(fresh)
    if not captures:
        captures = [_capture_folder(DEFAULT_CAPTURE, args.work)]
    rows = [row for folder in captures for row in run_capture(folder, args.device, args.work)]
    text, ok = table(rows, args.device, args.tolerance)
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
