"""The comparison stage, applied to one run's advice: its suggestions run and measured (``--try N``, ``try REPORT``).

    suggestions(findings, base, top)  what is tried: the findings' settings (``Finding.settings``), best finding
                                      first, none that leaves the run's own settings as they were; and what is
                                      not: code changes (with the line they concern), suggestions beyond ``top``
    try_suggestions(report_dir, ...)  a comparison in the report's ``tries/`` folder (compare/runner.py): the
                                      run's own settings measured again as the baseline, and each suggestion, a
                                      cold process each (its compile time, peak memory and accuracy against
                                      float64), then interleaved warm rounds timing the step; the Trials written
                                      to ``capture/trials.json`` (bench/trials.py) and the report rendered again
    trials_of(comparison, ...)        the comparison's configurations as Trials: verdict, reason, gains, accuracy

The verdict is the comparison's judgement of each suggestion against the baseline (compare/noise.py): faster
or slower only beyond the noise of the pair with every round on the same side, "no gain" otherwise.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from ..bench.answers import attach_answers
from ..bench.diagnosis import NOT_FOR_SPEED, diagnose
from ..bench.trials import write_trials
from ..capture import PhaseCallback
from ..errors import InputFolderError, LensError, UsageError
from ..exchange.files import CAPTURE_DIR, SPEC_FILE
from ..options import CompileSpec, ScriptSpec
from ..pipeline import load_run, render
from ..records import Accuracy, CompileRun, ConfigResult, Finding, SettingChange
from ..records.trials import TRIALS_VERSION, Trial, Trials, TryVerdict, UntriedSuggestion
from ..report.folders import CONFIGS_DIR, LENS_JSON
from ..units import format_ms, format_percent, format_signed_percent
from .configs import ConfigRequest
from .noise import DEFAULT_ROUNDS
from .runner import Budget, compare_models

TRIES_DIR = "tries"  # in the report folder: the comparison of the suggestions
BASELINE = "as-run"


@dataclass(frozen=True)
class Suggestion:
    """One setting to try, and the finding it comes from."""

    name: str  # the configuration's name in tries/
    setting: SettingChange
    finding: Finding | None  # None: a configuration the user asked for (``try --config``)


@dataclass(frozen=True)
class TryResult:
    trials: Trials
    run: CompileRun
    index: Path  # the report's index.html, rendered again with the trials
    comparison: Path | None  # tries/index.html; None where nothing was run
    error: LensError | None = None  # the first suggestion that failed (the others are still measured)


def suggestions(
    findings: Sequence[Finding], base: CompileSpec | ScriptSpec, top: int
) -> tuple[list[Suggestion], list[UntriedSuggestion]]:
    """The first ``top`` settings of the findings (in their order; a finding's alternatives in its order) that
    change the run's settings; the findings that are code changes and the settings beyond ``top`` as untried."""
    chosen: list[Suggestion] = []
    untried: list[UntriedSuggestion] = []
    seen: set[str] = set()
    for finding in findings:
        if not finding.settings:
            if finding.change and not finding.change.startswith(NOT_FOR_SPEED):
                untried.append(UntriedSuggestion(finding.kind, finding.title, finding.change,
                                                 "a change of code: not something a setting can try",
                                                 finding.where, finding.evidence_url))  # fmt: skip
            continue
        for setting in finding.settings:
            if setting.key() in seen or _unchanged(request_for("candidate", setting, base), base):
                continue
            seen.add(setting.key())
            if len(chosen) < top:
                chosen.append(Suggestion(_config_name(len(chosen) + 1, setting.label), setting, finding))
            else:
                untried.append(UntriedSuggestion(finding.kind, f"{finding.title} ({setting.label})", setting.describe(),
                                                 f"beyond the {top} tried (--try {top})", finding.where,
                                                 finding.evidence_url))  # fmt: skip
    return chosen, untried


def _unchanged(request: ConfigRequest, base: CompileSpec | ScriptSpec) -> bool:
    return request.apply(base) == base


def request_for(name: str, setting: SettingChange, base: CompileSpec | ScriptSpec) -> ConfigRequest:
    """The configuration that runs ``setting`` on top of the run's own settings (options and Dynamo config added
    to the run's; everything the setting leaves unset kept)."""
    return ConfigRequest(
        name,
        setting.mode or base.mode,
        {**base.options, **setting.options},
        matmul_precision=setting.matmul_precision,
        cudnn_allow_tf32=setting.cudnn_allow_tf32,
        autocast=setting.autocast,
        dynamic=setting.dynamic,
        dynamo_options={**base.dynamo_options, **setting.dynamo_options},
    )


def _config_name(number: int, label: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()[:40].strip("-")
    return f"try{number}-{slug or 'setting'}"


def base_spec(report_dir: Path) -> CompileSpec | ScriptSpec:
    """The spec the report's capture was made with (its ``capture/spec.json``), as the baseline of the trials: a
    model file's (``compile``) or a script's (``run``)."""
    path = report_dir / CAPTURE_DIR / SPEC_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise InputFolderError(f"{report_dir}: no {CAPTURE_DIR}/{SPEC_FILE}: suggestions are tried on the report "
                               "folder of a compile (its capture folder says what was run)") from None  # fmt: skip
    try:
        script = json.loads(text).get("kind") == "script"
        spec = ScriptSpec.from_json(text) if script else CompileSpec.from_json(text)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InputFolderError(f"{path}: not a readable spec ({exc})") from exc
    if not spec.model_path.is_file():
        raise UsageError(f"{spec.model_path}: the report's model file is not here; trying needs it to compile again")
    if isinstance(spec, ScriptSpec):
        if not spec.bench:
            raise UsageError(f"{report_dir}: this script's steps were not profiled (--no-bench); suggestions are "
                             "measured against its profiled step")  # fmt: skip
        return replace(spec, handwritten=False)
    if not spec.bench or spec.preview_gpu:
        raise UsageError(f"{report_dir}: this report's step was not timed ({'--preview-gpu' if spec.preview_gpu else '--no-bench'}); "
                         "suggestions are measured against the timed step")  # fmt: skip
    # the trials measure the step, its memory and accuracy: nothing the capture added besides
    return replace(spec, handwritten=False, find_divergence=False, save_inputs_mb=None)


def try_suggestions(
    report_dir: Path,
    top: int,
    *,
    asked: Sequence[ConfigRequest] = (),
    rounds: int = DEFAULT_ROUNDS,
    budget_s: float | None = None,
    command: str = "",
    strict: bool = False,
    say: Callable[[str], None] | None = None,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
) -> TryResult:
    """Run the report's top ``top`` suggestions (and the configurations ``asked``), measure each against the run's
    own settings, keep the Trials with the capture and render the report again."""
    started = time.monotonic()
    announce = say or (lambda _: None)
    run = load_run(report_dir)
    base = base_spec(report_dir)
    # the diagnosis's own order (by the time at stake), not the page's (measured winners first): what is tried
    # does not depend on what an earlier --try measured
    chosen, untried = suggestions(diagnose(run).findings, base, top)
    taken = {BASELINE, *(s.name for s in chosen)}
    for request in asked:
        if request.name in taken:
            raise UsageError(f"--config {request.name}: the name is taken ({', '.join(sorted(taken))}); choose another")
        taken.add(request.name)
    chosen += [Suggestion(r.name, _asked_setting(r, base), None) for r in asked]
    if not chosen:
        announce("nothing to try: no suggestion of this report applies as a setting"
                 + (f" ({len(untried)} need a change of code: listed on the first page)" if untried else ""))  # fmt: skip
        trials = Trials(TRIALS_VERSION, _now(), command, BASELINE, "", 0, rounds, _NOTHING_TRIED, time.monotonic() - started,
                        budget_s, untried=tuple(untried), notes=(_NOTHING_TRIED,))  # fmt: skip
        return _kept(report_dir, run, trials, None, None)
    for number, suggestion in enumerate(chosen, 1):
        announce(f"suggestion {number} of {len(chosen)}: {suggestion.setting.label} ({suggestion.setting.describe()})")
    requests = [ConfigRequest(BASELINE, base.mode, dict(base.options)),
                *(request_for(s.name, s.setting, base) for s in chosen)]  # fmt: skip
    budget = Budget(budget_s, started) if budget_s is not None else None
    result = compare_models(base, requests, report_dir / TRIES_DIR, rounds=rounds, strict=strict, say=say,
                            progress=progress, echo=echo, budget=budget, cold_scope="end_to_end")  # fmt: skip
    runs = {c.name: _config_run(report_dir / TRIES_DIR, c) for c in result.comparison.configs}
    trials = trials_of(result.comparison.configs, chosen, runs, result.skipped,
                       rounds_done=result.rounds_done, rounds=rounds, budget_s=budget_s,
                       wall_s=time.monotonic() - started, command=command, untried=untried)  # fmt: skip
    return _kept(report_dir, run, trials, result.index, result.error)


_NOTHING_TRIED = ("Nothing was run: no suggestion of this report changes a setting that can be run as it is (a mode, "
                  "Inductor or Dynamo options, the matmul precision, autocast, dynamic); those that need a change of code "
                  "are listed, with the line they concern.")  # fmt: skip


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _kept(report_dir: Path, run: CompileRun, trials: Trials, comparison: Path | None, error: LensError | None) -> TryResult:
    """The trials written beside the capture, and the report rendered again with them."""
    write_trials(report_dir / CAPTURE_DIR, trials)
    run = attach_answers(replace(run, trials=trials))
    return TryResult(trials, run, render(run, report_dir), comparison, error)


def _asked_setting(request: ConfigRequest, base: CompileSpec | ScriptSpec) -> SettingChange:
    """A configuration the user asked for (``try --config``) as a setting: what it changes against the run's own."""
    options = {k: v for k, v in request.options.items() if base.options.get(k) != v}
    return SettingChange(request.name, mode=request.mode if request.mode != base.mode else None, options=options,
                         matmul_precision=request.matmul_precision, cudnn_allow_tf32=request.cudnn_allow_tf32,
                         autocast=request.autocast, dynamic=request.dynamic,
                         dynamo_options=dict(request.dynamo_options))  # fmt: skip


def _config_run(folder: Path, config: ConfigResult) -> CompileRun | None:
    try:
        return load_run(folder / CONFIGS_DIR / config.name / LENS_JSON)
    except InputFolderError:
        return None


def trials_of(
    configs: Sequence[ConfigResult],
    chosen: Sequence[Suggestion],
    runs: dict[str, CompileRun | None],
    skipped: Sequence[str],
    *,
    rounds_done: int,
    rounds: int,
    budget_s: float | None,
    wall_s: float,
    command: str,
    untried: Sequence[UntriedSuggestion] = (),
) -> Trials:
    """The comparison's configurations (the first is the run's own settings) as Trials."""
    by_name = {c.name: c for c in configs}
    base = configs[0]
    base_run = runs.get(base.name)
    trials = []
    left = list(untried)
    for suggestion in chosen:
        config = by_name.get(suggestion.name)
        if config is None:
            why = f"the --try budget of {budget_s:.0f} s ran out before it" if suggestion.name in skipped else "not run"
            left.append(UntriedSuggestion(_kind(suggestion), _title(suggestion), suggestion.setting.describe(), why,
                                          suggestion.finding.where if suggestion.finding else "",
                                          suggestion.finding.evidence_url if suggestion.finding else ""))  # fmt: skip
            continue
        trials.append(_trial(suggestion, config, base, runs.get(config.name), base_run))
    method = (
        f"The run's own settings ({BASELINE}) were measured again beside the suggestions, as configurations of one "
        "comparison: a cold process each on empty caches (compile time, peak memory, accuracy against float64), "
        f"then {rounds_done} interleaved warm round{'s' if rounds_done != 1 else ''} (of {rounds} asked) timing the "
        "compiled step, the order rotated every round. A suggestion is faster or slower only beyond the noise of "
        "the pair (the spread of its paired round ratios and of each side's rounds, at least 2%) with every round on "
        "the same side; otherwise no gain."
    )
    notes = []
    if base.step_ms is None:
        notes.append(f"The baseline ({BASELINE}) measured no step ({base.error or base.warm_error or 'no rounds'}): "
                     "no suggestion could be judged against it.")  # fmt: skip
    return Trials(
        version=TRIALS_VERSION,
        created=_now(),
        command=command,
        base=BASELINE,
        comparison=f"{TRIES_DIR}/index.html",
        rounds=rounds_done,
        rounds_asked=rounds,
        method=method,
        wall_s=wall_s,
        budget_s=budget_s,
        trials=tuple(trials),
        untried=tuple(left),
        estimates=estimates_text(trials),
        notes=tuple(notes),
    )


def _kind(suggestion: Suggestion) -> str:
    return suggestion.finding.kind if suggestion.finding else "asked"


def _title(suggestion: Suggestion) -> str:
    return suggestion.finding.title if suggestion.finding else f"asked for: {suggestion.setting.describe()}"


def _trial(
    suggestion: Suggestion, config: ConfigResult, base: ConfigResult, run: CompileRun | None, base_run: CompileRun | None
) -> Trial:
    accuracy = _accuracy(run, base_run)
    common = dict(
        name=config.name,
        finding=_title(suggestion),
        kind=_kind(suggestion),
        setting=suggestion.setting,
        report=f"{TRIES_DIR}/{config.report}/index.html",
        predicted_us=suggestion.setting.predicted_us,
        cold_compile_s=config.cold_compile_s,
        base_cold_compile_s=base.cold_compile_s,
        peak_bytes=config.peak_bytes,
        base_peak_bytes=base.peak_bytes,
        **accuracy,
    )
    if config.status != "ok" or config.error:
        return Trial(verdict="failed", reason=config.error or f"the capture {config.status}", error=config.error,
                     **common)  # type: ignore[arg-type]  # fmt: skip
    versus = config.against_baseline
    if config.step_ms is None or base.step_ms is None or versus is None:
        why = config.warm_error or base.warm_error or "no compiled step was measured"
        return Trial(verdict="failed", reason=f"not measured: {why}", error=why, step_ms=config.step_ms,
                     base_step_ms=base.step_ms, **common)  # type: ignore[arg-type]  # fmt: skip
    verdict: TryVerdict = {"faster": "faster", "slower": "slower"}.get(versus.judgement, "no gain")  # type: ignore[assignment]
    return Trial(
        verdict=verdict,
        reason=_reason(verdict, versus.fraction, versus.noise, versus.rounds_agree, config, base),
        step_ms=config.step_ms,
        base_step_ms=base.step_ms,
        change=versus.fraction,
        noise=versus.noise,
        rounds_agree=versus.rounds_agree,
        ratios=versus.ratios,
        speedup=base.step_ms / config.step_ms if config.step_ms else None,
        measured_us=(base.step_ms - config.step_ms) * 1e3,
        **common,  # type: ignore[arg-type]
    )


def _reason(
    verdict: str, fraction: float, noise: float, agree: bool | None, config: ConfigResult, base: ConfigResult
) -> str:
    numbers = (f"{format_ms(config.step_ms or 0.0)} against {format_ms(base.step_ms or 0.0)} with the run's own "
               f"settings, {format_signed_percent(fraction)}")  # fmt: skip
    if verdict == "no gain":
        why = (f"within the noise of {format_percent(noise)}" if abs(fraction) <= noise
               else f"beyond the noise of {format_percent(noise)}, but the rounds disagree")  # fmt: skip
        return f"{numbers}: {why}"
    rounds = ", every round on the same side" if agree else ""
    return f"{numbers}: beyond the noise of {format_percent(noise)}{rounds}"


def _accuracy(run: CompileRun | None, base_run: CompileRun | None) -> dict[str, object]:
    """The accuracy under the change: its verdict, and the output whose RMSE against float64 grew the most."""
    tried = run.capture.accuracy if run is not None and run.capture is not None else None
    mine = base_run.capture.accuracy if base_run is not None and base_run.capture is not None else None
    if tried is None:
        script = run is not None and run.capture is not None and run.capture.command
        return {"accuracy_note": "not measured: a script has no accuracy check (it runs as it is, with no float64 "
                "reference)" if script else "not measured (the configuration's capture has no accuracy check)"}
    if tried.reference != "float64":
        return {"accuracy_within": tried.within_tolerance,
                "accuracy_note": f"checked against eager only ({tried.method or 'no float64 reference'})"}  # fmt: skip
    worst = _worst_growth(tried, mine)
    if worst is None:
        return {"accuracy_within": tried.within_tolerance, "accuracy_note": "no output with an RMSE against float64"}
    name, rmse, base_rmse, eager_rmse = worst
    # the page words the RMSEs and their ratio from the fields; the note adds what they rest on
    words = f"eager under the same change: RMSE {eager_rmse:.3g}; " if eager_rmse is not None else ""
    words += f"{tried.checked or tried.tensors} tensor(s) checked against float64"
    return {"accuracy_within": tried.within_tolerance, "accuracy_tensor": name, "rmse": rmse, "base_rmse": base_rmse,
            "accuracy_note": words}  # fmt: skip


def _worst_growth(tried: Accuracy, base: Accuracy | None) -> tuple[str, float, float | None, float | None] | None:
    """The output (or gradient) whose compiled RMSE against float64 grew the most over the baseline's same tensor
    (the largest RMSE where the baseline has none)."""
    before = {c.name: c.compiled_rmse for c in base.checks} if base is not None else {}
    found = [(c.name, c.compiled_rmse, before.get(c.name), c.eager_rmse) for c in tried.checks
             if c.compiled_rmse is not None]  # fmt: skip
    if not found:
        return None

    def growth(item: tuple[str, float, float | None, float | None]) -> float:
        _, rmse, was, _ = item
        return rmse / was if was else (float("inf") if rmse else 0.0)

    name, rmse, was, eager = max(found, key=lambda item: (growth(item), item[1]))
    return name, rmse, was, eager


def estimates_text(trials: Sequence[Trial]) -> str:
    """How far the diagnosis's estimates were from the measured gains, in words."""
    pairs = [t for t in trials if t.predicted_us and t.measured_us is not None]
    if not pairs:
        unestimated = [t.setting.label for t in trials if not t.predicted_us and t.measured_us is not None]
        return ("No estimate to check: " + ", ".join(unestimated) + " had no estimated gain.") if unestimated else ""
    parts = []
    for trial in pairs:
        assert trial.predicted_us is not None and trial.measured_us is not None
        ratio = trial.estimate_ratio
        parts.append(f"{trial.setting.label}: estimated {trial.predicted_us / 1e3:,.3f} ms saved per step, measured "
                     f"{trial.measured_us / 1e3:,.3f} ms" + (f" ({ratio:.2f}× the estimate)" if ratio is not None else ""))  # fmt: skip
    return "; ".join(parts) + "."
