"""Stage 4 of the pipeline (bench): the whole step, in parts, from the profiled steps as ``attribution.py`` read them.

A profiled step runs more than the compiled graphs: with ``compile --train`` the backward graphs, with ``run`` (a
step is from one call of the first compiled function to the next) also the optimizer, the loss, Python and the data.
``step_parts(attribution, graphs)`` splits each step into

    forward     the calls of the compiled forward (and inference) graphs
    backward    the calls of the compiled backward graphs
    optimizer   what runs under torch.optim's ``Optimizer.step#...`` and ``Optimizer.zero_grad#...`` ranges
                (a compiled optimizer's graphs included), where the step has any
    the rest    everything else: Python, Dynamo's guards and wrappers, eager ops (the loss), data

On CPU each part is host wall time (the durations of its ranges) and its share is of the step's wall time (the
step's range); on a GPU each part is the device time of the kernels it launched and its share is of the device time
per step, while the step's wall time is the host's (launches return before the GPU has run them). Medians over the
profiled steps.

``shares_note(run)`` says, where the launches' per-step times add up to less than ``SHARES_ADD_UP`` of the time
they are a share of, how much they add up to and why: on CPU the time between the launches, the graphs' Python code,
which torch's threads slow down where they contend with it for the CPUs (as many threads as CPUs, other processes
busy: ``HostLoad`` of the profiled steps), with the ``--threads`` option to measure again.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from ..records import CompileRun, GraphRecord, HostLoad, StepPart
from ..records.answers import BACKWARD, FORWARD, OPTIMIZER, REST
from .attribution import Attribution
from .stability import MIN_WINDOW_S, OTHERS_LIMIT

__all__ = ["SHARES_ADD_UP", "shares_note", "step_parts"]

SHARES_ADD_UP = 0.8


def step_parts(
    attribution: Attribution, graphs: Iterable[GraphRecord]
) -> tuple[tuple[StepPart, ...], float | None, str]:
    """The parts of the profiled step, the median host wall time of a whole step, and how both were measured;
    no parts where the trace has no steps."""
    steps = attribution.steps
    if not steps or len(attribution.step_wall_us) != steps:
        return (), None, ""
    gpu = attribution.device == "cuda"
    kinds = {graph.id: (BACKWARD if graph.kind == "backward" else FORWARD) for graph in graphs}
    per_step = {FORWARD: [0.0] * steps, BACKWARD: [0.0] * steps, OPTIMIZER: [0.0] * steps}
    calls = {FORWARD: 0, BACKWARD: 0}
    if gpu:
        for (graph_id, _), times in attribution.launches.items():
            part = OPTIMIZER if graph_id in attribution.optimizer_graphs else kinds.get(graph_id, FORWARD)
            _add(per_step[part], times.per_step_us)
        _add(per_step[OPTIMIZER], attribution.optimizer_device_us)
        whole = attribution.step_total_us
    else:
        for graph_id, host_us in attribution.graph_host_us.items():
            if graph_id not in attribution.optimizer_graphs:
                _add(per_step[kinds.get(graph_id, FORWARD)], host_us)
        _add(per_step[OPTIMIZER], attribution.optimizer_us)
        whole = attribution.step_wall_us
    for graph_id, (_, joined) in attribution.joins.items():
        if graph_id not in attribution.optimizer_graphs:
            calls[kinds.get(graph_id, FORWARD)] += joined
    whole_us = statistics.median(whole)
    wanted = [FORWARD] + [BACKWARD] * bool(calls[BACKWARD]) + [OPTIMIZER] * bool(attribution.optimizer_ranges)
    notes = _notes(gpu, calls, steps, attribution.optimizer_ranges)
    medians = {name: statistics.median(per_step[name]) for name in wanted}
    # the rest of the median step, so that the parts add up to the step the page shows
    medians[REST] = max(0.0, whole_us - sum(medians.values()))
    parts = tuple(StepPart(name, us, _share(us, whole_us), notes[name]) for name, us in medians.items())
    wall_us = statistics.median(attribution.step_wall_us)
    if gpu:
        method = (
            f"each part is the device time of the kernels it launched, median over {steps} profiled steps; shares "
            f"of the device time per step ({whole_us:,.0f} µs median), the rest being that median less the parts. The step's wall time ({wall_us:,.0f} µs) is the host's, "
            "the duration of its profiler range: launches return before the GPU runs them, so it is not the GPU's time"
        )
    else:
        method = (
            f"each part is host wall time (the durations of its profiler ranges), median over {steps} profiled steps; "
            f"shares of the step's wall time (its range, {wall_us:,.0f} µs median); the rest is that median less the parts"
        )
    return parts, wall_us, method


def shares_note(run: CompileRun) -> str:
    """"" where the launches' per-step times add up to at least ``SHARES_ADD_UP`` of the time they are a share of;
    otherwise one sentence: how much they add up to, and why."""
    step = run.bench.step if run.bench is not None else None
    if step is None or step.total_us <= 0:
        return ""
    launches_us = sum(
        launch.timing.median_us for graph in run.graphs for launch in graph.launches if launch.timing is not None
    )
    added = launches_us / step.total_us
    if added >= SHARES_ADD_UP:
        return ""
    if run.bench is not None and run.bench.device == "cuda":
        return (
            f"The launches' per-step times add up to {added:.0%} of the device time per step "
            f"({launches_us:,.0f} of {step.total_us:,.0f} µs): the rest ran in kernels no launch of the compiled "
            "graphs issued (eager ops outside them, kernels the profiler did not tie to a launch)."
        )
    said = (
        f"The launches' per-step times add up to {added:.0%} of the time in compiled graphs per step "
        f"({launches_us:,.0f} of {step.total_us:,.0f} µs): the rest went between the launches, in the graphs' Python "
        "code"
    )
    window = next((w for w in run.bench.host if w.window == "profiled steps"), None) if run.bench else None
    contention = _contention(window) if window is not None else ""
    if not contention:
        return f"{said} (allocating outputs, views, the calls themselves)."
    return (
        f"{said}, which slows down when torch's threads contend with it for the CPUs ({contention}). Measure again "
        "with fewer threads than free CPUs: --threads N (or OMP_NUM_THREADS=N)."
    )


def _contention(window: HostLoad) -> str:
    """What says the profiled steps' threads contended for the CPUs: as many threads as CPUs, or other processes
    keeping CPUs busy; "" where neither."""
    said = []
    if window.threads and window.threads >= window.cpus:
        said.append(f"torch ran {window.threads} thread(s) on {window.cpus} CPU(s)")
    if window.system_busy_s is not None and window.wall_s >= MIN_WINDOW_S:
        others = max(0.0, window.system_busy_s - window.cpu_s) / window.wall_s
        if others > OTHERS_LIMIT:
            said.append(f"other processes kept {others:.1f} CPUs busy")
    return "; ".join(said)


def _notes(gpu: bool, calls: dict[str, int], steps: int, optimizer_ranges: int) -> dict[str, str]:
    measured = "device time of the kernels launched by" if gpu else "host wall time of"
    per_step = {name: f"{count / steps:g} call(s) per step" for name, count in calls.items()}
    return {
        FORWARD: f"{measured} the calls of the compiled forward and inference graphs; {per_step[FORWARD]}",
        BACKWARD: f"{measured} the calls of the compiled backward graphs; {per_step[BACKWARD]}",
        OPTIMIZER: (
            f"{measured} what ran under torch.optim's Optimizer.step# and Optimizer.zero_grad# ranges "
            f"(compiled graphs called there included); {optimizer_ranges / steps:g} range(s) per step"
        ),
        REST: (
            "device time of the other kernels: eager ops outside the compiled graphs (the loss), kernels not tied to "
            "a launch"
            if gpu
            else "the step's wall time less the parts above: Python, Dynamo's guards and wrappers around the graphs, "
            "eager ops (the loss), data"
        ),
    }


def _add(total: list[float], values: list[float]) -> None:
    for index, value in enumerate(values[: len(total)]):
        total[index] += value


def _share(part_us: float, whole_us: float) -> float:
    return part_us / whole_us if whole_us > 0 else 0.0
