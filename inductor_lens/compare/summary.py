"""The comparison stage, judgement: each configuration's numbers, the verdict, and the evidence.

Every judgement the pages show is made here and kept in the records (the report only reads them):
each configuration's step against the baseline's, each kernel change's time, the verdict.

The verdict names the fastest configuration only where its lead is larger than the run-to-run
noise, measured, not assumed: ``compare`` times each configuration's compiled step in two separate
processes (the cold one and the warm one), the gap between the two medians is that configuration's
noise, and a difference between two configurations must beat the larger noise of the two. Two
reports (``diff``) have one process each: the spread of their own samples stands in (with a higher
floor), and the page says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..parse.compat import CUDAGRAPH_LOG_MARKERS
from ..records import (
    AgainstBaseline,
    AutotuneWinner,
    CaptureStatus,
    CompileRun,
    ConfigDiff,
    ConfigResult,
    Evidence,
    JsonValue,
    Judgement,
    KernelChange,
    Timing,
    Verdict,
)
from .kernels import launch_kind

# Below this, two medians of one step are not told apart, however quiet the machine looked.
NOISE_FLOOR = 0.02
# With one process per configuration (``diff``), the spread inside a run understates the noise between
# processes (2-12% between the cold and warm processes of one configuration in this project's compares).
SINGLE_PROCESS_FLOOR = 0.05
# Autotune picks this close to the runner-up are coin flips (the autotuner's own timing noise).
CLOSE_PICK = 0.03


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
    latency_again: Timing | None = None


def config_result(entry: ConfigRun) -> ConfigResult:
    run = entry.run
    if run is None:
        return ConfigResult(entry.name, entry.mode, entry.options, entry.report, entry.status, entry.error,
                            warm_compile_s=entry.warm_compile_s, warm_error=entry.warm_error)  # fmt: skip
    e2e = run.bench.end_to_end if run.bench else None
    latency = e2e.compiled if e2e else None
    kernels: Counter[str] = Counter(launch_kind(g, launch) for g in run.graphs for launch in g.launches)
    return ConfigResult(
        name=entry.name,
        mode=entry.mode,
        options=entry.options,
        report=entry.report,
        status=entry.status,
        error=entry.error,
        cold_compile_s=run.capture.cold_compile_s if run.capture else None,
        warm_compile_s=entry.warm_compile_s,
        warm_error=entry.warm_error,
        latency=latency,
        latency_again=entry.latency_again,
        noise=own_noise(latency, entry.latency_again),
        step_ms=_mean_median(latency, entry.latency_again),
        eager=e2e.eager if e2e else None,
        speedup=e2e.speedup if e2e else None,
        peak_bytes=e2e.compiled_peak_bytes if e2e else None,
        graphs=len(run.graphs),
        graph_breaks=len(run.graph_breaks),
        recompiles=len(run.recompiles),
        kernels=dict(sorted(kernels.items())),
        cudagraphs=e2e.cudagraphs if e2e else None,
        autotune=autotune_winners(run),
        device=run.environment.device_name or run.environment.device_type,
        torch_version=run.environment.torch_version,
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


def step_ms(config: ConfigResult) -> float | None:
    """The compiled step's median: the mean of the two processes' medians where both measured it."""
    return _mean_median(config.latency, config.latency_again)


def _mean_median(latency: Timing | None, again: Timing | None) -> float | None:
    if latency is None:
        return None
    if again is None:
        return latency.median_ms
    return (latency.median_ms + again.median_ms) / 2


def own_noise(latency: Timing | None, again: Timing | None) -> float | None:
    """How far apart two measurements of one configuration's step land, as a fraction of the step.

    With two processes (``compare``): the gap between their medians. With one (``diff``): the
    half-width of the run's p10-p90 spread, which understates it, hence the higher floor.
    """
    if latency is None:
        return None
    if again is not None:
        return max(_gap(latency.median_ms, again.median_ms), NOISE_FLOOR)
    spread = (latency.p90_ms - latency.p10_ms) / 2 / latency.median_ms if latency.median_ms else 0.0
    return max(spread, SINGLE_PROCESS_FLOOR)


def pair_noise(a: ConfigResult, b: ConfigResult) -> float:
    """The noise a difference between two configurations must beat: the larger of their own."""
    return max(a.noise or NOISE_FLOOR, b.noise or NOISE_FLOOR)


def judge(fraction: float, noise: float) -> Judgement:
    """A difference in time (fraction, + = slower) counts only beyond the noise."""
    return "within noise" if abs(fraction) <= noise else "slower" if fraction > 0 else "faster"


def against_baseline(configs: Sequence[ConfigResult]) -> tuple[ConfigResult, ...]:
    """The configurations, each but the first (the baseline) with its step judged against the baseline's."""
    base, base_ms = configs[0], step_ms(configs[0])
    judged = [base]
    for config in configs[1:]:
        ms = step_ms(config)
        if ms and base_ms:
            fraction, noise = ms / base_ms - 1, pair_noise(config, base)
            config = replace(
                config, against_baseline=AgainstBaseline(fraction, noise, judge(fraction, noise))
            )
        judged.append(config)
    return tuple(judged)


def judge_changes(diff: ConfigDiff, noise: float) -> ConfigDiff:
    """The kernel diff with each change's time judged against ``noise``, the noise of its two configurations."""
    changes = tuple(replace(c, judgement=_change_judgement(c, noise)) for c in diff.changes)
    return replace(diff, changes=changes, noise=noise)


def _change_judgement(change: KernelChange, noise: float) -> Judgement | None:
    delta, before = change.delta_us, change.before.time_us if change.before else None
    if delta is None:
        return None
    if before and abs(delta) <= noise * before:
        return "within noise"
    # an added launch (nothing before) is judged by its sign alone
    return "slower" if delta > 0 else "faster"


def _gap(a: float, b: float) -> float:
    return abs(a - b) / min(a, b) if min(a, b) > 0 else 0.0


def verdict(configs: Sequence[ConfigResult]) -> Verdict:
    timed = sorted((c for c in configs if step_ms(c)), key=lambda c: step_ms(c) or 0.0)
    if len(timed) < 2:
        return Verdict(None, "not enough configurations were timed to compare them", False)
    fastest, second = timed[0], timed[1]
    noise = pair_noise(fastest, second)
    two = fastest.latency_again is not None and second.latency_again is not None
    how = (f"the larger of the two configurations' own noise ({fastest.name} {fastest.noise:.1%}, {second.name} "
           f"{second.noise:.1%}): " + ("the gap between the step medians of its cold and its warm process, "
           f"at least {NOISE_FLOOR:.0%}" if two else "one process per configuration, so the half-width of its "
           f"p10-p90 spread, at least {SINGLE_PROCESS_FLOOR:.0%}, since processes differ by more than their own spread"))  # fmt: skip
    margin = (step_ms(second) or 0.0) / (step_ms(fastest) or 1.0) - 1
    if margin > noise:
        text = (f"{fastest.name} is the fastest: {margin:.1%} faster than the next, {second.name} "
                f"({_ms(step_ms(fastest))} against {_ms(step_ms(second))}), beyond the run-to-run noise of {noise:.1%}")  # fmt: skip
        return Verdict(fastest.name, text, True, margin, noise, how)
    tied = [
        c.name for c in timed if (step_ms(c) or 0.0) / (step_ms(fastest) or 1.0) - 1 <= pair_noise(fastest, c)
    ]
    text = (f"no significant difference between {', '.join(tied)}: within {margin:.1%} of each other, "
            f"inside the run-to-run noise of {noise:.1%}")  # fmt: skip
    return Verdict(None, text, False, margin, noise, how)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.3f} ms"


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
        ms = step_ms(config)
        if run is None or ms is None:
            continue
        diff = next((d for d in diffs if d.other == config.name), None)
        versus = config.against_baseline
        if versus is not None and versus.judgement == "slower":
            findings = _findings(config, run, base, diff, versus.noise, runs.get(base.name))
            found.append(Evidence(config.name, base.name, versus.fraction, findings))
        own = config.noise or NOISE_FLOOR
        if config.eager and ms / config.eager.median_ms - 1 > own:
            found.append(
                Evidence(
                    config.name,
                    "eager",
                    ms / config.eager.median_ms - 1,
                    _findings(config, run, None, None, own),
                )
            )
    return tuple(found)


def _findings(
    config: ConfigResult,
    run: CompileRun,
    base: ConfigResult | None,
    diff: ConfigDiff | None,
    noise: float,
    base_run: CompileRun | None = None,
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
        more = step.total_us / base_step.total_us - 1
        verdict_text = ("the kernels themselves take longer" if more > noise
                        else "about the same: the difference is not in the kernels")  # fmt: skip
        notes.append(f"GPU time per step (profiled): {step.total_us:,.1f} µs against {base_step.total_us:,.1f} µs "
                     f"for {base.name}, {more:+.1%}: {verdict_text}")  # fmt: skip
    ms = step_ms(config)
    if step is not None and ms and run.environment.device_type == "cuda" and step.total_us < 0.5 * ms * 1e3:
        notes.append(f"the GPU works {step.total_us:,.1f} µs of the {ms * 1e3:,.1f} µs step "
                     f"({step.total_us / (ms * 1e3):.0%}): the step is bound by host time (Dynamo's guards, the "
                     "Python wrapper, launches)" + ("" if config.cudagraphs == "used" else
                     ", which CUDA graphs (reduce-overhead) cut"))  # fmt: skip
    on_cpu = config.device == "cpu" or run.environment.device_type == "cpu"
    if on_cpu and config.mode in ("reduce-overhead", "max-autotune"):
        notes.append("on a CPU there are no CUDA graphs: this mode's main lever does nothing here")
    if not notes:
        notes.append("nothing in the captures explains it: look at host-side time (Python, guards, launches)")
    return tuple(notes)


def _device_us(diff: ConfigDiff, side: str) -> float | None:
    """Launch time per step of one side; None unless every launch of that side was timed."""
    times = [getattr(c, side).time_us for c in diff.changes if getattr(c, side) is not None]
    return None if not times or any(t is None for t in times) else sum(times)
