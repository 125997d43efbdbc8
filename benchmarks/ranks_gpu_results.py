"""Issue 34's table from multi-rank reports (benchmarks/ranks_gpu.sh on GPUs, or any `compile --nproc` /
`run -- torchrun` report folders): per job, the landing page's verdict and each rank's outcome, accuracy verdict,
compiled step (end-to-end median), profiled step in compiled code, compile time, the collectives in its graphs and
the collectives of its profiled steps, wherever they ran (calls, time, bytes and on GPUs bandwidth, per step).

Usage: python benchmarks/ranks_gpu_results.py LABEL=REPORT_DIR... > results.md
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inductor_lens.pipeline import load_run
from inductor_lens.ranked import read_ranked
from inductor_lens.records.rank_summary import summarize
from inductor_lens.report.ranks_view import collective_text

VERDICT = re.compile(r"(All ranks compiled the same[^<]*|The ranks diverged[^<]*)")


def verdict(folder: Path) -> str:
    landing = folder / "index.html"
    found = VERDICT.search(landing.read_text(encoding="utf-8")) if landing.is_file() else None
    return html.unescape(found.group(1)).strip() if found else "(no landing page)"


def causes(folder: Path) -> list[str]:
    """The landing page's named causes: its bold titles."""
    landing = folder / "index.html"
    text = landing.read_text(encoding="utf-8") if landing.is_file() else ""
    return list(dict.fromkeys(html.unescape(t) for t in re.findall(r"<b>([^<]{3,80})</b>", text)))[:8]


def number(value: float | None, unit: str, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f} {unit}"


def main(argv: list[str]) -> int:
    lines = ["| job | landing page | rank | outcome | accuracy | compiled step | profiled step (compiled code) | "
             "compile | collectives in the graphs | collectives per step (calls: time, bytes) |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    named = []
    for item in argv:
        label, folder_text = item.split("=", 1)
        folder = Path(folder_text)
        ranked = read_ranked(folder)
        said = verdict(folder)
        named.append(f"- {label}: {said}" + (f" (named: {'; '.join(causes(folder))})" if "diverged" in said else ""))
        if ranked is None:
            lines.append(f"| {label} | {said} | — | no ranks.json | | | | | | |")
            continue
        for entry in ranked.ranks:
            report = folder / entry.folder
            if not (report / "lens.json").is_file():
                lines.append(f"| {label} | {said} | {entry.rank} | {entry.status} (no full report) | | | | | | |")
                continue
            run = load_run(report)
            summary = summarize(entry.rank, entry.folder, run, status=entry.status, error=entry.error)
            accuracy = run.capture.accuracy if run.capture else None
            judged = "—" if accuracy is None else ("within tolerance" if accuracy.within_tolerance else "OUT of tolerance")
            collectives = ", ".join(c.label for c in summary.collectives) or "none"
            per_step = "<br>".join(collective_text(c) for c in summary.step_collectives) or "—"
            lines.append(
                f"| {label} | {said} | {entry.rank} | {entry.status} | {judged} | {number(summary.step_ms, 'ms', 3)} | "
                f"{number(summary.step_device_us, 'µs', 1)} | {number(summary.compile_s, 's', 1)} | {collectives} | {per_step} |"
            )
    print("\n".join([*lines, "", *named]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
