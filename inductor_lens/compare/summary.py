"""The comparison stage, judgement: each configuration's numbers, judged against the noise, and the evidence.

Every judgement the pages show is made here and kept in the records (the report only reads them):
each configuration's step against the baseline's and against the fastest's (the noise model and its
rule are compare/noise.py's), each kernel change's time, and, where a configuration is slower, what
the captures show. The verdict sentence is compare/verdict.py's.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..bench.diagnosis import diagnose
from ..bench.stability import judge as judge_stability
from ..parse.compat import CUDAGRAPH_LOG_MARKERS
from ..records import (
    AgainstBaseline,
    AutotuneWinner,
    CaptureStatus,
    CompileRun,
    ConfigDiff,
    ConfigResult,
    DiagnosisLine,
    Evidence,
    JsonValue,
    Judgement,
    KernelChange,
    RoundMeasure,
    Timing,
)
from ..units import format_percent, format_signed_percent
from .comparability import run_facts
from .configs import settings_text
from .kernels import launch_kind
from .noise import NOISE_FLOOR, basis, judge, own_noise, versus

# Autotune picks this close to the runner-up are coin flips (the autotuner's own timing noise).
CLOSE_PICK = 0.03
# A kernel's profiled time per step moves by about a microsecond between two processes whatever its code
# (another autotuner pick of the same code, the clock, the profiler): less is not a change.
KERNEL_FLOOR_US = 1.0


@dataclass(frozen=True)
class ConfigRun:
    """What the runner (or the ``diff`` command) hands over for one configuration."""

    name: str
    mode: str
    options: Mapping[str, JsonValue]
    run: CompileRun | None
    report: str
    status: CaptureStatus = "ok"
    error: str | None = None
    warm_compile_s: float | None = None
    warm_error: str | None = None
    latency_again: Timing | None = None  # older comparisons: the step measured in one warm process
    rounds: tuple[RoundMeasure, ...] = ()  # the interleaved warm rounds (``compare``)
    # Its settings beyond the mode and options, in words (``ConfigRequest.describe``'s); its run's, where it has one.
    settings: str = ""


def config_result(entry: ConfigRun) -> ConfigResult:
    run = entry.run
    if run is None:
        return ConfigResult(entry.name, entry.mode, entry.options, settings=entry.settings, report=entry.report,
                            status=entry.status, error=entry.error, warm_compile_s=entry.warm_compile_s,
                            warm_error=entry.warm_error, rounds=entry.rounds)  # fmt: skip
    e2e = run.bench.end_to_end if run.bench else None
    latency = e2e.compiled if e2e else None
    step, eager_step = basis(latency, entry.latency_again, entry.rounds), basis(e2e.eager if e2e else None, None, entry.rounds, eager=True)
    warm = [r.compile_s for r in entry.rounds if r.compile_s is not None]
    kernels: Counter[str] = Counter(launch_kind(g, launch) for g in run.graphs for launch in g.launches)
    return ConfigResult(
        name=entry.name,
        mode=entry.mode,
        options=entry.options,
        settings=settings_text(run.settings) if run.settings is not None else entry.settings,
        report=entry.report,
        status=entry.status,
        error=entry.error,
        cold_compile_s=run.capture.cold_compile_s if run.capture else None,
        warm_compile_s=statistics.median(warm) if warm else entry.warm_compile_s,
        warm_error=entry.warm_error,
        latency=latency,
        latency_again=entry.latency_again,
        noise=own_noise(latency, entry.latency_again, entry.rounds),
        step_ms=step.step_ms,
        rounds=entry.rounds,
        measured=step.how,
        facts=run_facts(run),
        eager=e2e.eager if e2e else None,
        # one source for "faster or slower than eager": the same processes, worked out the same way
        speedup=eager_step.step_ms / step.step_ms if eager_step.step_ms and step.step_ms else None,
        eager_step_ms=eager_step.step_ms,
        step_rule=step.rule,
        unstable=tuple(r.text for r in judge_stability(run).reasons),
        peak_bytes=e2e.compiled_peak_bytes if e2e else None,
        graphs=len(run.graphs),
        graph_breaks=len(run.graph_breaks),
        recompiles=len(run.recompiles),
        kernels=dict(sorted(kernels.items())),
        cudagraphs=e2e.cudagraphs if e2e else None,
        autotune=autotune_winners(run),
        device=run.environment.device_name or run.environment.device_type,
        torch_version=run.environment.torch_version,
        diagnosis=diagnosis_lines(run),
    )


def diagnosis_lines(run: CompileRun, most: int = 3) -> tuple[DiagnosisLine, ...]:
    """The configuration's top findings (its report shows them all): the change to try, with its evidence link."""
    found = diagnose(run)
    return tuple(
        DiagnosisLine(f.title, None if found.noisy else f.at_stake_us, f.change, f.evidence_url)
        for f in found.findings[:most]
    )


def autotune_winners(run: CompileRun) -> tuple[AutotuneWinner, ...]:
    winners = []
    for table in run.autotune:
        ranked = sorted(table.choices, key=lambda c: c.ms)
        if not ranked:
            continue
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        winners.append(
            AutotuneWinner(
                op=table.op,
                shapes=", ".join(table.shapes),
                winner=best.name,
                winner_ms=best.ms,
                winner_kind=best.kind,
                runner_up=second.name if second else None,
                runner_up_ms=second.ms if second else None,
                choices=table.num_choices or len(table.choices),
            )
        )
    return tuple(winners)


def judged(configs: Sequence[ConfigResult]) -> tuple[ConfigResult, ...]:
    """The configurations, each judged against the baseline (the first) and against the fastest."""
    timed = [c for c in configs if c.step_ms]
    fastest = min(timed, key=lambda c: c.step_ms or 0.0) if timed else None
    base = configs[0]
    return tuple(
        replace(
            c,
            against_baseline=versus(base, c) if c is not base else None,
            against_fastest=versus(fastest, c) if fastest is not None and c is not fastest else None,
        )
        for c in configs
    )


def against_eager(config: ConfigResult) -> AgainstBaseline | None:
    """The step against the eager step, from the speed-up the table shows (+ = slower than eager), judged
    against the configuration's own noise: the one source of every "faster or slower than eager"."""
    if not config.speedup:
        return None
    fraction, noise = 1 / config.speedup - 1, config.noise or NOISE_FLOOR
    return AgainstBaseline(fraction, noise, judge(fraction, noise), against="eager")


def pair_noise(a: ConfigResult, b: ConfigResult) -> float:
    """The noise a difference between two configurations must beat (compare/noise.py)."""
    pair = versus(a, b)
    return pair.noise if pair else max(a.noise or NOISE_FLOOR, b.noise or NOISE_FLOOR)


def judge_changes(diff: ConfigDiff, noise: float) -> ConfigDiff:
    """The kernel diff with each change's time judged against ``noise``, the noise of its two configurations.

    The same code under another autotuner pick whose time moved within the noise is no change: it is
    counted as unchanged (its note keeps the two picks)."""
    changes = []
    for change in diff.changes:
        judgement = _change_judgement(change, noise)
        kind = "unchanged" if change.same_code and judgement == "within noise" else change.kind
        changes.append(replace(change, kind=kind, judgement=judgement))
    return replace(diff, changes=tuple(changes), noise=noise)


def change_threshold(noise: float) -> str:
    """The rule ``_change_judgement`` applies, in words (the page's count of changes says it)."""
    return f"a kernel's time counts as moved beyond the larger of {format_percent(noise)} of it (the noise of the two configurations) and {KERNEL_FLOOR_US:.0f} µs"


def _change_judgement(change: KernelChange, noise: float) -> Judgement | None:
    delta, before = change.delta_us, change.before.time_us if change.before else None
    if delta is None:
        return None
    if abs(delta) <= max(noise * (before or 0.0), KERNEL_FLOOR_US):
        return "within noise"
    return "slower" if delta > 0 else "faster"


def tried_here(configs: Sequence[ConfigResult]) -> tuple[ConfigResult, ...]:
    """Each diagnosis line whose change another configuration of the comparison ran, with that configuration's
    step against this one's: the page shows what was measured instead of advising it blindly."""
    return tuple(
        replace(config, diagnosis=tuple(_tried(line, config, configs) for line in config.diagnosis))
        for config in configs
    )


def _tried(line: DiagnosisLine, config: ConfigResult, configs: Sequence[ConfigResult]) -> DiagnosisLine:
    for other in configs:
        if other is config or not other.step_ms or not config.step_ms or not _runs_change(line.change, config, other):
            continue
        return replace(line, tried_by=other.name, tried=versus(config, other))
    return line


_MODE_IN_CHANGE = re.compile(r"""\bmode\s*=\s*["']?([a-z][a-z-]*)""")
# What a change names, and the fact (compare/comparability.py) of a configuration that ran it.
_PRECISION_WORDS = ("set_float32_matmul_precision", "TF32", "tf32")


def _runs_change(change: str, config: ConfigResult, other: ConfigResult) -> bool:
    """Whether ``other`` runs what ``change`` (a diagnosis line of ``config``) advises: its mode, one of its
    options, or its float32 matmul precision, where ``config``'s differs."""
    mode = _MODE_IN_CHANGE.search(change)
    if mode and mode.group(1) == other.mode != config.mode:
        return True
    options = [k for k, v in other.options.items() if config.options.get(k) != v]
    if any(re.search(rf"\b{re.escape(k)}\b", change) for k in options):
        return True
    precision = other.facts.get("matmul precision"), config.facts.get("matmul precision")
    return any(w in change for w in _PRECISION_WORDS) and precision[0] not in (None, "highest", precision[1])


def evidence(
    configs: Sequence[ConfigResult], runs: dict[str, CompileRun], diffs: Sequence[ConfigDiff]
) -> tuple[Evidence, ...]:
    """For each configuration slower than the baseline or than eager (beyond noise): what the captures show.

    ``configs`` as ``against_baseline`` judged them.
    """
    found = []
    base = configs[0]
    for config in configs:
        run = runs.get(config.name)
        ms = config.step_ms
        if run is None or ms is None:
            continue
        diff = next((d for d in diffs if d.other == config.name), None)
        versus = config.against_baseline
        if versus is not None and versus.judgement == "slower":
            findings = _findings(config, run, base, diff, versus.noise, runs.get(base.name), configs)
            found.append(Evidence(config.name, base.name, versus.fraction, findings))
        eager = against_eager(config)
        if eager is not None and eager.judgement == "slower":
            found.append(Evidence(config.name, "eager", eager.fraction,
                                  _findings(config, run, None, None, eager.noise, None, configs)))  # fmt: skip
    return tuple(found)


def _findings(
    config: ConfigResult,
    run: CompileRun,
    base: ConfigResult | None,
    diff: ConfigDiff | None,
    noise: float,
    base_run: CompileRun | None = None,
    configs: Sequence[ConfigResult] = (),
) -> tuple[str, ...]:
    notes = []
    if config.cudagraphs and config.cudagraphs.startswith("skipped"):
        notes.append(f"CUDA graphs {config.cudagraphs}")
    for marker, meaning in CUDAGRAPH_LOG_MARKERS.items():
        hits = sum(1 for line in run.log_text.splitlines() if marker in line)
        if hits:
            notes.append(f"{meaning}: {hits} line(s) in the log ('{marker}')")
    if config.recompiles and (base is None or config.recompiles > base.recompiles):
        reasons = dict.fromkeys(r for f in run.recompiles for r in f.recompile_reasons)
        notes.append(f"{config.recompiles} recompile(s): {'; '.join(list(reasons)[:3])}")
    if config.graph_breaks and (base is None or config.graph_breaks > base.graph_breaks):
        notes.append(f"{config.graph_breaks} graph break(s), each a return to Python between compiled graphs")
    if base is not None:
        launches, base_launches = sum(config.kernels.values()), sum(base.kernels.values())
        if launches > base_launches:
            notes.append(
                f"{launches - base_launches} more launch(es) than {base.name} ({launches} against {base_launches})"
            )
    for pick in config.autotune:
        if pick.winner_kind == "triton" and pick.runner_up_ms:
            lead = pick.runner_up_ms / pick.winner_ms - 1 if pick.winner_ms else 0.0
            close = " (a close call: within the autotuner's own noise)" if lead < CLOSE_PICK else ""
            notes.append(f"autotune picked the Triton template {pick.winner} for {pick.op}({pick.shapes}) over "
                         f"{pick.runner_up}, {pick.winner_ms:.4f} against {pick.runner_up_ms:.4f} ms{close}")  # fmt: skip
    if diff is not None:
        slower = sorted((c for c in diff.changes if (c.delta_us or 0) > 0 and c.kind != "unchanged"),
                        key=lambda c: -(c.delta_us or 0))  # fmt: skip
        for change in slower[:3]:
            before = " + ".join(change.before.targets) if change.before else "nothing"
            after = " + ".join(change.after.targets) if change.after else "nothing"
            notes.append(f"{change.kind} kernel: {before} → {after}, {change.delta_us:+,.1f} µs per step")
        device_before = _device_us(diff, "before")
        device_after = _device_us(diff, "after")
        # under CUDA graphs only Triton kernels are tied to launches: their sums would mislead
        replayed = "used" in (config.cudagraphs or "") or "used" in ((base.cudagraphs if base else "") or "")
        if device_before and device_after and not replayed:
            notes.append(f"time in the compiled graphs' launches: {device_after:,.1f} µs per step against "
                         f"{device_before:,.1f} µs for {diff.base}")  # fmt: skip
            if device_after <= device_before * (1 + noise):
                notes.append("the launches themselves are no slower: the difference lies outside them "
                             "(host time in Python and guards, launch gaps, synchronisation)")  # fmt: skip
    step = run.bench.step if run.bench else None
    base_step = base_run.bench.step if base_run and base_run.bench else None
    if step is not None and base_step is not None and base is not None and base_step.total_us:
        what = ("GPU time per step (profiled)" if run.environment.device_type == "cuda"
                else "time inside the compiled graphs per step (profiled)")  # fmt: skip
        notes.append(f"{what}: {step.total_us:,.1f} µs against {base_step.total_us:,.1f} µs for {base.name}, "
                     + gap_words(step.total_us / base_step.total_us - 1, noise, "the kernels"))  # fmt: skip
    ms = config.step_ms
    if step is not None and ms and run.environment.device_type == "cuda" and step.total_us < 0.5 * ms * 1e3:
        notes.append(f"the GPU works {step.total_us:,.1f} µs of the {ms * 1e3:,.1f} µs step "
                     f"({step.total_us / (ms * 1e3):.0%}): the step is bound by host time (Dynamo's guards, the "
                     "Python wrapper, launches)" + ("" if config.cudagraphs == "used" else
                     _cudagraphs_words(config, configs)))  # fmt: skip
    on_cpu = config.device == "cpu" or run.environment.device_type == "cpu"
    if on_cpu and config.mode in ("reduce-overhead", "max-autotune"):
        notes.append("on a CPU there are no CUDA graphs: this mode's main lever does nothing here")
    if not notes:
        notes.append("nothing in the captures explains it: look at host-side time (Python, guards, launches)")
    return tuple(notes)


def _cudagraphs_words(config: ConfigResult, configs: Sequence[ConfigResult]) -> str:
    """What CUDA graphs would do for a host-bound step: measured, where a configuration of the comparison
    used them (its step against this one's, judged), else what they are for."""
    for other in configs:
        pair = versus(config, other) if other.cudagraphs == "used" and other is not config else None
        if pair is not None:
            return (f"; CUDA graphs were measured here: {other.name} uses them, "
                    f"{format_signed_percent(pair.fraction)} against it (noise {format_percent(pair.noise)}): {pair.judgement}")  # fmt: skip
    return ", which CUDA graphs (reduce-overhead) cut"


def gap_words(fraction: float, noise: float, what: str) -> str:
    """``+36.6%, beyond the noise of 5.0%: the kernels take longer``: one wording for every gap, by the rule of noise.py."""
    if abs(fraction) <= noise:
        return f"{format_signed_percent(fraction)}, within the noise of {format_percent(noise)}: {what} take about the same time"
    more = "longer" if fraction > 0 else "less time"
    return f"{format_signed_percent(fraction)}, beyond the noise of {format_percent(noise)}: {what} take {more}"


def _device_us(diff: ConfigDiff, side: str) -> float | None:
    """Launch time per step of one side; None unless every launch of that side was timed."""
    times = [getattr(c, side).time_us for c in diff.changes if getattr(c, side) is not None]
    return None if not times or any(t is None for t in times) else sum(times)
