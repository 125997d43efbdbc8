"""The results of `--try` runs (benchmarks/try_gpu.sh) as Markdown: per model, each suggestion tried with its predicted
and measured gain, the noise of the pair, accuracy under it, compile cost and memory, and the wall time of the whole
--try; each trial's step checked against the medians of its warm rounds' own capture.json, worked out here.

Usage: python benchmarks/try_results.py FOLDER...   (report folders of `compile --try`, or folders holding their
lens.json, capture/trials.json and tries/configs/*/warm-rounds/*/capture.json as try_gpu.sh archives them)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from inductor_lens.pipeline import load_run
from inductor_lens.units import format_bytes


def step_medians(config: Path) -> list[float]:
    """The medians the step is the median of (compare/noise.py): the warm rounds' own, joined by the cold process's
    (the configuration's report) where there are fewer than three rounds."""
    rounds = [json.loads(p.read_text())["bench"]["end_to_end"]["compiled"]["median_ms"]
              for p in sorted(config.glob("warm-rounds/*/capture.json"))
              if (json.loads(p.read_text()).get("bench") or {}).get("end_to_end")]  # fmt: skip
    if 0 < len(rounds) < 3:
        cold = json.loads((config / "lens.json").read_text())["run"]["bench"]["end_to_end"]["compiled"]["median_ms"]
        rounds.append(cold)
    return rounds


def ms(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "—"


def report(folder: Path) -> str:
    run = load_run(folder)
    trials = run.trials
    lines = [f"### {folder.name}: {run.title}", ""]
    if trials is None:
        return "\n".join([*lines, "no trials recorded", ""])
    settings = run.settings
    lines.append(f"Run's own settings: mode {settings.mode if settings else '?'}, dtype {settings.dtype if settings else '?'}"
                 f"{', --train' if settings and settings.train else ''}. `{trials.command}`: {trials.rounds} of "
                 f"{trials.rounds_asked} rounds, budget {trials.budget_s:.0f} s, the whole --try {trials.wall_s:.0f} s.")  # fmt: skip
    lines += ["", "| suggestion | verdict | step (ms): run's own → tried | change (noise of the pair) | speed-up | "
              "predicted saving | measured saving | measured / predicted | cold compile (s): own → tried | "
              "peak memory: own → tried | accuracy under it | raw check |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for trial in trials.trials:
        config = folder / "tries" / "configs"
        mine, base = step_medians(config / trial.name), step_medians(config / trials.base)
        check = "—"
        if mine and base and trial.step_ms and trial.base_step_ms:
            same = abs(statistics.median(mine) - trial.step_ms) < 1e-9 and abs(statistics.median(base) - trial.base_step_ms) < 1e-9
            check = (f"median of {len(mine)}: {statistics.median(mine):.3f} / {statistics.median(base):.3f}"
                     + (" (equal)" if same else " (DIFFERENT)"))  # fmt: skip
        change = (f"{trial.change:+.1%} (±{trial.noise:.1%}, rounds {'agree' if trial.rounds_agree else 'disagree'})"
                  if trial.change is not None and trial.noise is not None else "—")  # fmt: skip
        ratio = f"{trial.estimate_ratio:.2f}" if trial.estimate_ratio is not None else "—"
        memory = (f"{format_bytes(trial.base_peak_bytes)} → {format_bytes(trial.peak_bytes)}"
                  if trial.peak_bytes and trial.base_peak_bytes else "—")  # fmt: skip
        cold = f"{trial.base_cold_compile_s or 0:.1f} → {trial.cold_compile_s or 0:.1f}"
        lines.append(
            f"| {trial.setting.label} | {trial.verdict} | {ms(trial.base_step_ms)} → {ms(trial.step_ms)} | {change} | "
            f"{trial.speedup:.2f}× | {ms((trial.predicted_us or 0) / 1e3) if trial.predicted_us else '—'} ms | "
            f"{ms((trial.measured_us or 0) / 1e3) if trial.measured_us is not None else '—'} ms | {ratio} | {cold} | "
            f"{memory} | {trial.accuracy_note or '—'} | {check} |"
            if trial.speedup else f"| {trial.setting.label} | {trial.verdict} | — | — | — | — | — | — | {cold} | — | "
            f"{trial.accuracy_note or '—'} | {trial.reason} |"
        )
    for untried in trials.untried:
        lines.append(f"\nNot tried: {untried.title} — {untried.why}.")
    if trials.estimates:
        lines.append(f"\nEstimates: {trials.estimates}")
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    print("\n".join(report(Path(p)) for p in sys.argv[1:]))
