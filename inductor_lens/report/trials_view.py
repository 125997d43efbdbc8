"""Stage 5 of the pipeline (report): the suggestions tried (``--try N``, ``inductor-lens try``), as measured.

Reads ``run.trials`` (records/trials.py) and lays out, for the first page, each tried finding's outcome in a
few words beside it in "What to try" (``finding_outcome``), and the section "Suggestions tried" after the
answers: one row per trial with its verdict, its step against the run's own, the estimate beside the
measurement, its cold compile, peak memory and accuracy, then the suggestions not tried and how all were
measured. Without trials, the section is one line saying how to get them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..records import CompileRun, Finding, Trial, Trials, TryVerdict, UntriedSuggestion
from ..units import format_bytes, format_micros, format_ms, format_percent, format_signed_percent
from .env import format_error, format_seconds

VERDICT_WORDS: dict[TryVerdict, str] = {
    "faster": "faster beyond the noise",
    "no gain": "no gain",
    "slower": "slower",
    "failed": "failed",
}
# A class for each verdict (templates/static/lens.css: .tried-*), and which outcome a finding shows first.
VERDICT_TONES: dict[TryVerdict, str] = {"faster": "faster", "no gain": "no-gain", "slower": "slower", "failed": "failed"}
_VERDICT_RANK: dict[TryVerdict, int] = {"faster": 0, "no gain": 1, "slower": 2, "failed": 3}
ERROR_CHARS = 60  # of a failed trial's error in the first-screen list (the whole error on hover and below)
TRY_COMMAND = "inductor-lens try <this report folder> --top 3"


def trial_anchor(trial: Trial) -> str:
    """The id of a trial's row in "Suggestions tried": ``tried-`` and its configuration's name."""
    return "tried-" + re.sub(r"[^A-Za-z0-9_-]", "-", trial.name)


def _saved(saved_us: float) -> str:
    """Time saved per step: ``5.25 ms saved``, ``120.0 µs lost``."""
    return f"{format_micros(abs(saved_us))} {'saved' if saved_us >= 0 else 'lost'}"


def _times(ratio: float) -> str:
    """A ratio of two sizes: ``0.95×``, ``2.1×``, ``258×``."""
    return f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.2g}×"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class TriedOutcome:
    """A finding's measured outcome in a few words, for the first screen's "What to try"."""

    text: str  # "tried: 2.93× faster (5,250.0 µs saved per step, noise ±1.8%)"
    tone: str  # VERDICT_TONES
    anchor: str  # its trial's row below
    detail: str  # on hover: the verdict's reason (a failure's whole error)
    more: int  # the finding's other trials (TF32, then bfloat16 autocast), in the rows below


def outcome_words(trial: Trial) -> str:
    """``2.93× faster (5,250.0 µs saved per step, noise ±1.8%)``, ``no gain (-1.1%, within the noise of 3.0%)``."""
    noise = f"noise ±{format_percent(trial.noise)}" if trial.noise is not None else ""
    if trial.verdict == "failed":
        return f"failed ({_clip(trial.error or trial.reason, ERROR_CHARS)})"
    if trial.verdict == "faster":
        head = f"{trial.speedup:.2f}× faster" if trial.speedup else "faster"
        numbers = [f"{_saved(trial.measured_us)} per step" if trial.measured_us is not None else "", noise]
    elif trial.verdict == "no gain":
        within = f"within the noise of {format_percent(trial.noise)}" if trial.noise is not None else "within the noise"
        head, numbers = "no gain", [format_signed_percent(trial.change) if trial.change is not None else "", within]
    else:
        head, numbers = "slower", [format_signed_percent(trial.change) if trial.change is not None else "", noise]
    said = ", ".join(n for n in numbers if n)
    return f"{head} ({said})" if said else head


def finding_outcome(trials: Trials | None, finding: Finding) -> TriedOutcome | None:
    """The outcome of a finding's best trial (faster first, then by speed-up); None where it was not tried."""
    tried = trials.of(finding.settings) if trials is not None else ()
    if not tried:
        return None
    best = min(tried, key=lambda t: (_VERDICT_RANK[t.verdict], -(t.speedup or 0.0)))
    named = f" {best.setting.label}" if len(tried) > 1 else ""
    return TriedOutcome(
        text=f"tried{named}: {outcome_words(best)}",
        tone=VERDICT_TONES[best.verdict],
        anchor=trial_anchor(best),
        detail=best.error or best.reason,
        more=len(tried) - 1,
    )


@dataclass(frozen=True)
class TrialRow:
    trial: Trial
    anchor: str
    verdict: str  # VERDICT_WORDS
    tone: str  # VERDICT_TONES
    step: str  # "2.720 ms against 7.970 ms"
    change: str  # "-65.9%, noise 1.8%, every round on the same side"
    speedup: str  # "2.93×"
    gain: str  # "5.25 ms saved per step, estimated 5.00 ms saved"
    estimate: str  # "measured 1.05× the estimate"
    cold_compile: str  # "12.30 s against 10.10 s (+2.20 s)"
    memory: str  # "1.2 GB against 1.5 GB (-20.0%)"
    accuracy: str  # "within tolerance; worst output logits: RMSE 3.10e-04 against 1.20e-06 (258×) ..."
    accuracy_tone: str  # "", "bad" where out of tolerance


def _step(trial: Trial) -> tuple[str, str]:
    if trial.step_ms is None:
        return "not measured", ""
    step = f"{format_ms(trial.step_ms)} against {format_ms(trial.base_step_ms)}"
    parts = [format_signed_percent(trial.change) if trial.change is not None else ""]
    if trial.noise is not None:
        parts.append(f"noise {format_percent(trial.noise)}")
    if trial.rounds_agree is not None:
        parts.append("every round on the same side" if trial.rounds_agree else "the rounds disagree")
    return step, ", ".join(p for p in parts if p)


def _gain(trial: Trial) -> tuple[str, str]:
    """The measured saving beside the estimated one, and how far off the estimate was."""
    estimated = f"estimated {format_micros(trial.predicted_us)} saved" if trial.predicted_us else ""
    if trial.measured_us is None:
        return "not measured", estimated or "no estimate"
    measured = f"{_saved(trial.measured_us)} per step"
    if not estimated:
        return measured, "no estimate"
    gain = f"{measured}, {estimated}"
    ratio = trial.estimate_ratio
    if ratio is None:
        return gain, ""
    if ratio > 0:
        return gain, f"measured {ratio:.2f}× the estimate"
    return gain, "a saving was estimated, none measured"


def _cold_compile(trial: Trial) -> str:
    if trial.cold_compile_s is None:
        return "—"
    if trial.base_cold_compile_s is None:
        return format_seconds(trial.cold_compile_s)
    delta = trial.cold_compile_s - trial.base_cold_compile_s
    sign = "+" if delta >= 0 else "-"
    return (
        f"{format_seconds(trial.cold_compile_s)} against {format_seconds(trial.base_cold_compile_s)} "
        f"({sign}{format_seconds(abs(delta))})"
    )


def _memory(trial: Trial) -> str:
    if trial.peak_bytes is None:
        return "—"
    if not trial.base_peak_bytes:
        return format_bytes(trial.peak_bytes)
    change = format_signed_percent(trial.peak_bytes / trial.base_peak_bytes - 1)
    return f"{format_bytes(trial.peak_bytes)} against {format_bytes(trial.base_peak_bytes)} ({change})"


def _accuracy(trial: Trial) -> str:
    parts = []
    if trial.accuracy_within is not None:
        parts.append("within tolerance" if trial.accuracy_within else "out of tolerance")
    if trial.rmse is not None:
        of = f" of {trial.accuracy_tensor}" if trial.accuracy_tensor else ""
        rmse = f"RMSE{of} {format_error(trial.rmse)}"
        if trial.base_rmse is not None:
            rmse += f" against {format_error(trial.base_rmse)} in the run's own settings"
            if trial.base_rmse > 0:
                rmse += f" ({_times(trial.rmse / trial.base_rmse)})"
        parts.append(rmse)
    if trial.accuracy_note:
        parts.append(trial.accuracy_note)
    return "; ".join(parts) or "not measured"


def trial_row(trial: Trial) -> TrialRow:
    step, change = _step(trial)
    gain, estimate = _gain(trial)
    return TrialRow(
        trial=trial,
        anchor=trial_anchor(trial),
        verdict=VERDICT_WORDS[trial.verdict],
        tone=VERDICT_TONES[trial.verdict],
        step=step,
        change=change,
        speedup=f"{trial.speedup:.2f}×" if trial.speedup else "—",
        gain=gain,
        estimate=estimate,
        cold_compile=_cold_compile(trial),
        memory=_memory(trial),
        accuracy=_accuracy(trial),
        accuracy_tone="bad" if trial.accuracy_within is False else "",
    )


@dataclass(frozen=True)
class TrialsView:
    trials: Trials | None
    rows: tuple[TrialRow, ...]
    untried: tuple[UntriedSuggestion, ...]
    rounds: str  # "3 of 3 interleaved warm rounds"
    budget: str  # "a budget of 10.0 min" or ""
    wall: str  # the whole of the trying
    # Without trials: the command that gets them, or why none can be run for this report.
    command: str
    why_none: str


def trials_view(run: CompileRun, findings: Sequence[Finding]) -> TrialsView:
    """``findings``: the answers' (``answers_view``), to say whether any of them could be tried."""
    trials = run.trials
    if trials is None:
        if run.capture is None:
            why_none = "this report was read from a debug folder, and trying one runs the model again"
        elif not any(f.settings for f in findings):
            why_none = "none of this report's suggestions is a change of settings that can be run as it is"
        else:
            why_none = ""
        return TrialsView(None, (), (), "", "", "", "" if why_none else TRY_COMMAND, why_none)
    return TrialsView(
        trials=trials,
        rows=tuple(trial_row(t) for t in trials.trials),
        untried=trials.untried,
        rounds=f"{trials.rounds} of {trials.rounds_asked} interleaved warm round{'s' if trials.rounds_asked != 1 else ''}",
        budget=f"a budget of {format_seconds(trials.budget_s)}" if trials.budget_s is not None else "",
        wall=format_seconds(trials.wall_s),
        command="",
        why_none="",
    )
