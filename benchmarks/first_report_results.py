"""Issue 33's tables from the runs of benchmarks/first_report_gpu.sh and benchmarks/tuning_table_gpu.sh.

1. Per model, from the stamped terminal log of `inductor-lens compile` (each line prefixed by the seconds since
   the command started): the model process's "done", the first report ("report written: ..."), the helpers'
   compile-ahead line, and the end ("report written in ..."), as seconds after "done"; the checks run and
   skipped.
2. Per hand-written kernel (name, shape, dtype): its do_bench median over Inductor's in-context time for the same
   launch (benchmarks/handwritten_coverage.py's table), in each run given, side by side: a full search's ratio
   against the shipped table's, each against its own capture's Inductor time.

Usage: python benchmarks/first_report_results.py --logs RUN_DIR... --kernels LABEL=FILE.md... > results.md
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

CASES = ("gpt2", "vit", "llama", "resnet50")
STAMP = re.compile(r"^\s*([0-9.]+) (.*)$")


def stages(log: Path) -> dict[str, object]:
    """Seconds since the command started at which each moment was printed."""
    found: dict[str, object] = {"checks": 0, "skipped": 0}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        match = STAMP.match(line)
        if match is None:
            continue
        at, text = float(match.group(1)), match.group(2)
        if text.rstrip().endswith("] done"):
            found["done"] = at
        elif "report written: " in text and "first" not in found:
            found["first"] = at
        elif "compiled ahead for" in text:
            found["ahead"] = text.split("] ", 1)[-1]
        elif "report written in" in text:
            found["end"] = at
        elif re.search(r"hand-written \d+/\d+: ", text):
            found["checks"] = int(found["checks"]) + 1  # type: ignore[call-overload]
        elif "skipped (budget spent)" in text:
            found["skipped"] = int(re.search(r": (\d+) check", text).group(1))  # type: ignore[union-attr]
    return found


def kernels(path: Path) -> dict[tuple[str, str, str], float]:
    """(name, shape, dtype) -> hand-written / Inductor ratio, from a handwritten_coverage table."""
    ratios = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[7].endswith("x") and cells[0] != "hand-written":
            ratios[(cells[0], cells[1], cells[2])] = float(cells[7][:-1])
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", nargs="+", type=Path, default=[], help="LABEL=DIR holding <case>.log")
    parser.add_argument("--kernels", nargs="+", default=[], help="LABEL=FILE.md (handwritten_coverage tables)")
    args = parser.parse_args()
    out = ["| run | model | model process done (s) | first report after it | hand-written side done after it | "
           "checks run / skipped | compiled ahead |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for item in args.logs:
        label, folder = str(item).split("=", 1)
        for case in CASES:
            log = Path(folder) / f"{case}.log"
            if not log.is_file():
                continue
            s = stages(log)
            done = float(s.get("done", 0.0))  # type: ignore[arg-type]
            first = f"{float(s['first']) - done:.1f} s" if "first" in s else "—"  # type: ignore[arg-type]
            end = f"{float(s['end']) - done:.1f} s" if "end" in s else "—"  # type: ignore[arg-type]
            out.append(f"| {label} | {case} | {done:.1f} | {first} | {end} | {s['checks']} / {s['skipped']} | "
                       f"{s.get('ahead', '—')} |")  # fmt: skip
    tables = [(label, kernels(Path(path))) for label, path in (k.split("=", 1) for k in args.kernels)]
    if tables:
        keys = sorted({key for _, table in tables for key in table})
        out += ["", "| hand-written | shape | dtype | " + " | ".join(f"{label}: ratio to Inductor" for label, _ in tables) + " |",
                "|---|---|---|" + "---|" * len(tables)]  # fmt: skip
        for key in keys:
            cells = [f"{table[key]:.2f}x" if key in table else "—" for _, table in tables]
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
