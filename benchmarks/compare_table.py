"""Print a comparison's table, verdict, evidence and kernel-diff counts as Markdown (for benchmarks/results/).

python benchmarks/compare_table.py COMPARISON_DIR [COMPARISON_DIR ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from inductor_lens.compare.summary import step_ms
from inductor_lens.records import Comparison


def table(folder: Path) -> list[str]:
    c = Comparison.from_json((folder / "lens.json").read_text())
    lines = [f"### `{c.title}` ({folder.name})", "", f"Verdict: {c.verdict.text if c.verdict else '—'}.", ""]
    lines += [
        "| configuration | cold compile | warm compile | step median (p10-p90) | 2nd process | noise | vs "
        f"{c.configs[0].name} | speed-up over eager | peak memory | launches by kind | CUDA graphs | autotuned |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = step_ms(c.configs[0])
    for x in c.configs:
        lat, again = x.latency, x.latency_again
        ms = step_ms(x)
        versus = f"{ms / base - 1:+.1%}" if ms and base and x is not c.configs[0] else "—"
        kinds = ", ".join(f"{k} {n}" for k, n in x.kernels.items())
        peak = f"{x.peak_bytes / 1e6:.1f} MB" if x.peak_bytes else "—"
        lines.append(
            f"| {x.name} | {x.cold_compile_s:.2f} s | {x.warm_compile_s:.2f} s | "
            f"{lat.median_ms * 1e3:.1f} us ({lat.p10_ms * 1e3:.1f}-{lat.p90_ms * 1e3:.1f}) | "
            f"{again.median_ms * 1e3:.1f} us | {x.noise:.1%} | {versus} | {x.speedup:.2f}x | {peak} | {kinds} | "
            f"{x.cudagraphs or 'off'} | {len(x.autotune)} |"
        )
    lines += ["", "Kernel diff against the baseline:", ""]
    for d in c.diffs:
        counts = ", ".join(
            f"{d.count(k)} {k}" for k in ("changed", "regrouped", "added", "removed", "unchanged")
        )
        lines.append(f"- {d.base} → {d.other}: {counts}")
    if c.evidence:
        lines += ["", "Evidence shown for the slower configurations:", ""]
        for e in c.evidence:
            lines.append(f"- {e.config}, {e.slower_by:.1%} slower than {e.against}: " + "; ".join(e.findings))
    return [*lines, ""]


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("\n".join(table(Path(arg))))
