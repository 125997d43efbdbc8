"""Stage 4 of the pipeline (bench), read back: the four answers of the first page, built from the records.

``attach_answers(run)`` runs after the measurements are attached (and again when a profiler trace replaces
them), so the report, the terminal summary and ``lens.json`` (``run.answers``) read the same answers:

1. compiled vs eager: the two end-to-end medians and their spread;
2. where the time goes: operation groups (``operations.py``), time per nn.Module path and per source line
   (``modules.py``);
3. GPU-bound, host-bound or mixed (``bound.py``);
4. what to try: the diagnosis's findings (``diagnosis.py``), ranked by time at stake; where suggestions were
   tried (``--try``, ``run.trials``), by what was measured: the ones that won first, by the time they saved, then
   the ones not tried in the diagnosis's order, then the ones tried that gained nothing, were slower or failed.

``summary_lines(answers)`` is the same in a few lines of text, for the terminal; ``trial_lines(trials)`` the
suggestions tried.
"""

from __future__ import annotations

from dataclasses import replace

from ..records import ANSWERS_VERSION, Answers, CompileRun, Finding, Trials
from ..units import format_micros
from .bound import bound_verdict
from .diagnosis import diagnose
from .modules import line_times, module_times, top_modules
from .operations import operation_groups
from .step_parts import shares_note

TERMINAL_GROUPS = 3
TERMINAL_FINDINGS = 2


def build_answers(run: CompileRun) -> Answers:
    bench = run.bench
    end_to_end = bench.end_to_end if bench is not None else None
    eager_ms = end_to_end.eager.median_ms if end_to_end is not None else None
    compiled_ms = end_to_end.compiled.median_ms if end_to_end is not None else None
    speedup = end_to_end.speedup if end_to_end is not None and end_to_end.speedup else None
    if end_to_end is not None:
        c, e = end_to_end.compiled, end_to_end.eager
        speedup_note = (
            f"medians: compiled {c.median_ms:,.3f} ms (p10-p90 {c.p10_ms:,.3f}-{c.p90_ms:,.3f}), eager "
            f"{e.median_ms:,.3f} ms (p10-p90 {e.p10_ms:,.3f}-{e.p90_ms:,.3f}); {c.method}"
        )
    else:
        speedup_note = _unmeasured_speedup(run)
    gpu = bench is not None and bench.device.startswith("cuda")
    step = bench.step if bench is not None else None
    modules = module_times(run)
    return Answers(
        version=ANSWERS_VERSION,
        device=bench.device if bench is not None else None,
        eager_ms=eager_ms,
        compiled_ms=compiled_ms,
        speedup=speedup,
        speedup_note=speedup_note,
        bound=bound_verdict(run),
        groups=operation_groups(run),
        modules=top_modules(modules, n=len(modules)),
        lines=line_times(run),
        findings=ranked_by_trials(diagnose(run).findings, run.trials),
        step_parts=step.parts if step is not None else (),
        time_basis=(
            ("device time per profiled step (the GPU kernels each launch issued)" if gpu else "time in the compiled graphs' kernels per profiled step")
            if step is not None
            else ""
        ),
        shares_note=shares_note(run) if step is not None else "",
    )


def _unmeasured_speedup(run: CompileRun) -> str:
    """Why compiled vs eager has no figure, and how to get one."""
    bench, capture = run.bench, run.capture
    if bench is not None and bench.error:
        return f"not measured: timing failed ({bench.error})"
    if capture is None:
        return ("not measured: this report was read from debug output, the model did not run here "
                "(inductor-lens compile MODEL.py times it against eager)")  # fmt: skip
    if capture.status != "ok":
        return f"not measured: the model process stopped during '{capture.phase}', before its timing"
    if bench is None:
        return "not measured: the capture ran without timing (--no-bench)"
    return "not measured: a script's run times its profiled steps, not an eager run beside them"


def attach_answers(run: CompileRun) -> CompileRun:
    """The run with its answers, and each grouped launch with its group's key (``Launch.group``)."""
    answers = build_answers(run)
    keys = {(m.graph_id, m.position): g.key for g in answers.groups for m in g.members}
    graphs = tuple(
        replace(
            graph,
            launches=tuple(
                replace(launch, group=keys.get((graph.id, launch.position))) for launch in graph.launches
            ),
        )
        for graph in run.graphs
    )
    return replace(run, graphs=graphs, answers=answers)


def ranked_by_trials(findings: tuple[Finding, ...], trials: Trials | None) -> tuple[Finding, ...]:
    """Measured winners first (most time saved first), then the findings not tried (in the diagnosis's order), then
    those tried that did not win (no gain, slower, failed): a measurement outranks an estimate."""
    if trials is None:
        return findings

    def rank(item: tuple[int, Finding]) -> tuple[int, float, int]:
        index, finding = item
        tried = trials.of(finding.settings)
        won = [t.measured_us or 0.0 for t in tried if t.verdict == "faster"]
        if won:
            return 0, -max(won), index
        return (2 if tried else 1), 0.0, index

    return tuple(finding for _, finding in sorted(enumerate(findings), key=rank))


def trial_lines(trials: Trials) -> list[str]:
    """The suggestions tried, one line each, as the first page gives them."""
    lines = []
    for trial in trials.trials:
        gain = f"{trial.speedup:.2f}x" if trial.speedup else ""
        predicted = (f"; estimated {format_micros(trial.predicted_us)} saved, measured "
                     f"{format_micros(trial.measured_us)}" if trial.predicted_us and trial.measured_us is not None
                     else "")  # fmt: skip
        accuracy = (f"; {trial.accuracy_tensor or 'output'} RMSE against float64 {trial.rmse:.2g}, "
                    f"{trial.rmse / trial.base_rmse:,.3g}x the run's own" if trial.rmse is not None and trial.base_rmse
                    else "")  # fmt: skip
        lines.append(f"tried {trial.setting.label}: {trial.verdict}{' ' + gain if gain and trial.verdict != 'failed' else ''} "
                     f"({trial.reason}){predicted}{accuracy}")  # fmt: skip
    if trials.untried:
        lines.append(f"not tried: {len(trials.untried)} suggestion(s) ({'; '.join(u.why for u in trials.untried[:2])})")
    return lines


def summary_lines(answers: Answers) -> list[str]:
    """The four answers in a few lines, as the first page gives them."""
    lines = []
    if answers.speedup is not None and answers.compiled_ms is not None and answers.eager_ms is not None:
        faster = "faster" if answers.speedup >= 1 else "slower"
        ratio = answers.speedup if answers.speedup >= 1 else 1 / answers.speedup
        lines.append(
            f"compiled {answers.compiled_ms:,.3f} ms vs eager {answers.eager_ms:,.3f} ms per step: "
            f"{ratio:.2f}x {faster} (medians)"
        )
    if answers.bound is not None:
        bound = answers.bound
        detail = f": {bound.detail}" if bound.detail else ""
        waiting = "GPU idle" if (answers.device or "").startswith("cuda") else "outside the kernels"
        idle = (
            f" ({waiting} {format_micros(bound.idle_us)} of a {format_micros(bound.step_us)} step)"
            if bound.idle_us is not None and bound.step_us
            else ""
        )
        lines.append(f"{bound.verdict}{idle}{detail}")
    if answers.groups:
        top = "; ".join(
            f"{g.share:.0%} {g.name}" + (f" x{g.launches_per_step:g}" if g.launches_per_step > 1 else "")
            + (f" [{g.module or g.source}]" if g.module or g.source else "")
            for g in answers.groups[:TERMINAL_GROUPS]
        )
        lines.append(f"top operations: {top}")
    for finding in answers.findings[:TERMINAL_FINDINGS]:
        stake = f" ({format_micros(finding.at_stake_us)} per step at stake)" if finding.at_stake_us else ""
        lines.append(f"try: {finding.change or finding.title}{stake}")
    return lines
