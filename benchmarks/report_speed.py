"""Time `inductor-lens report` against tlparse on the same captures: build time, re-render time, peak memory, size.

Run from the repository root (tlparse from PyPI: `pip install tlparse`):

    PYTHONPATH=$PWD python3 benchmarks/report_speed.py --captures DIR [DIR ...] --rounds 5 --results out.md

Each DIR is a capture: a report folder of `inductor-lens compile` (its capture/ holds the debug folder
and the TORCH_TRACE log) or a fixture archive's unpacked folder (torch_compile_debug/ and trace/).
`--make-captures FOLDER` first compiles the CPU captures this benchmark was run on (samples/mlp.py,
samples/block.py, the 24- and 48-layer transformers with --train) into FOLDER.

Per capture and round, interleaved (tlparse, then a first build, then a re-render, so machine load
hits all three alike), each in a fresh process:
- tlparse: `tlparse <trace log> -o <tmp> --overwrite` (the largest log when there are several);
- first build: `inductor-lens report DIR --out <tmp>` with an empty layout cache
  (INDUCTOR_LENS_CACHE_DIR pointing at a new folder), so every drawing is laid out;
- re-render: the same command again with the layout cache of the first build.
Wall time is the median over the rounds with min-max; peak memory is the process's maximum resident set
(`wait4`'s ru_maxrss, the report process itself; `dot` runs in its own processes, each well under it).
Sizes: the largest page (any .html) and the folders, against tlparse's output for the same log.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = {
    "mlp": ("samples/mlp.py", []),
    "block": ("samples/block.py", []),
    "transformer24-train": ("samples/transformer24.py", ["--train"]),
    "transformer48-train": ("samples/transformer48.py", ["--train"]),
}


@dataclass
class Timing:
    seconds: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)

    def text(self) -> str:
        if not self.seconds:
            return "—"
        median = statistics.median(self.seconds)
        return f"{median:.2f} s ({min(self.seconds):.2f}-{max(self.seconds):.2f})"


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, peak resident MB and exit status of one process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if process.stderr is not None:
        process.stderr.close()
    return seconds, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def trace_log(capture: Path) -> Path:
    logs = sorted(capture.rglob("dedicated_log_torch_trace*.log"), key=lambda p: p.stat().st_size)
    if not logs:
        raise SystemExit(f"{capture}: no TORCH_TRACE log (dedicated_log_torch_trace*.log)")
    return logs[-1]


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def report_sizes(folder: Path) -> dict[str, float]:
    pages = [p for p in folder.rglob("*.html")]
    drawings = [p for p in pages if p.name.startswith("drawing-")]
    largest = max(pages, key=lambda p: p.stat().st_size)
    return {
        "largest_page_mb": largest.stat().st_size / 1e6,
        "pages_mb": sum(p.stat().st_size for p in pages) / 1e6,
        "drawing_pages_mb": sum(p.stat().st_size for p in drawings) / 1e6,
        "lens_json_mb": (folder / "lens.json").stat().st_size / 1e6,
        "total_mb": folder_bytes(folder) / 1e6 - folder_bytes(folder / "capture") / 1e6
        if (folder / "capture").is_dir()
        else folder_bytes(folder) / 1e6,
    }


def undrawn(folder: Path) -> int:
    """Drawings the report could not make (a notice where the SVG should be)."""
    count = 0
    for page in folder.rglob("*.html"):
        text = page.read_text(encoding="utf-8", errors="replace")
        count += text.count("to lay out this drawing") + text.count("could not draw this graph")
    return count


def make_captures(folder: Path) -> list[Path]:
    made = []
    for name, (model, flags) in CAPTURES.items():
        out = folder / name
        if not (out / "capture").is_dir():
            subprocess.run([sys.executable, "-m", "inductor_lens", "compile", str(ROOT / model), *flags,
                            "--device", "cpu", "--no-bench", "--no-handwritten", "--out", str(out)], check=True)  # fmt: skip
        made.append(out)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captures", nargs="*", type=Path, default=[])
    parser.add_argument("--make-captures", type=Path, help="compile the CPU captures into this folder first")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", type=Path, help="write the Markdown table here")
    args = parser.parse_args()
    tlparse = shutil.which("tlparse")
    if tlparse is None:
        raise SystemExit("tlparse is not installed (pip install tlparse)")
    captures = list(args.captures)
    if args.make_captures:
        captures = make_captures(args.make_captures) + captures
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    lines = [
        f"Machine: {platform.node()}, {os.cpu_count()} cores; Python {platform.python_version()}; "
        f"{subprocess.run([tlparse, '--version'], capture_output=True, text=True).stdout.strip()}; "
        f"{subprocess.run(['dot', '-V'], capture_output=True, text=True).stderr.strip()}; {args.rounds} rounds, interleaved.",
        "",
        "| capture | trace log | tlparse | first build | x tlparse | re-render | x tlparse | peak MB | largest page | "
        "report MB (drawing pages) | tlparse MB | undrawn |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for capture in captures:
        log = trace_log(capture)
        results = {"tlparse": Timing(), "first": Timing(), "again": Timing()}
        with tempfile.TemporaryDirectory(prefix="report-speed-") as scratch:
            work = Path(scratch)
            out = work / "report"
            for _ in range(args.rounds):
                seconds, peak, code = timed([tlparse, str(log), "-o", str(work / "tlparse"), "--overwrite", "--no-browser"], env)
                if code != 0:
                    raise SystemExit(f"tlparse failed on {log}")
                results["tlparse"].seconds.append(seconds)
                cache = work / f"cache-{time.monotonic_ns()}"
                command = [sys.executable, "-m", "inductor_lens", "report", str(capture), "--out", str(out)]
                for key in ("first", "again"):
                    seconds, peak, code = timed(command, {**env, "INDUCTOR_LENS_CACHE_DIR": str(cache)})
                    if code != 0:
                        raise SystemExit(f"inductor-lens report failed on {capture}")
                    results[key].seconds.append(seconds)
                    results[key].peak_mb.append(peak)
                shutil.rmtree(cache, ignore_errors=True)
            sizes = report_sizes(out)
            largest = max(out.rglob("*.html"), key=lambda p: p.stat().st_size)
            base = statistics.median(results["tlparse"].seconds)
            row = (
                f"| {capture.name} | {log.stat().st_size / 1e6:.1f} MB | {results['tlparse'].text()} | "
                f"{results['first'].text()} | {statistics.median(results['first'].seconds) / base:.1f}x | "
                f"{results['again'].text()} | {statistics.median(results['again'].seconds) / base:.1f}x | "
                f"{max(results['first'].peak_mb + results['again'].peak_mb):.0f} | "
                f"{sizes['largest_page_mb']:.2f} MB ({largest.relative_to(out)}) | "
                f"{sizes['total_mb']:.1f} ({sizes['drawing_pages_mb']:.1f}) | "
                f"{folder_bytes(work / 'tlparse') / 1e6:.1f} | {undrawn(out)} |"
            )
            print(row, flush=True)
            lines.append(row)
    if args.results:
        args.results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
