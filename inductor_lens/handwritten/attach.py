"""Stage 4 of the pipeline (bench), hand-written side: matches and their checks joined to the run's records.

``attach_handwritten(run, capture_dir, execute=...)`` matches every kernel (``match.py``), and either
runs in a child process (``runner.py``) the verification of each match against what Inductor's kernel
computes (``verify.py``: a rejected match is not timed) and the checks and timings, or reads the results an earlier run
left in ``capture/handwritten.json`` (a capture folder copied off a GPU box carries them). With
``capture_dir=None`` it matches only: the first report, written before the checks run, shows the matches.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..bench.roofline import place
from ..capture.supervisor import PhaseCallback
from ..exchange.files import (
    HANDWRITTEN_RESULTS_FILE,
    HandwrittenResults,
    HandwrittenTask,
    HandwrittenTaskResult,
    VerifyResult,
    VerifyTask,
    task_key,
)
from ..records import CompileRun, Diagnostic, HandwrittenMatch, HandwrittenRun
from .catalog import get
from .equivalent import ITEMSIZE
from .match import match_run, run_device, shape_for, timed_launches
from .runner import read_results, run_tasks
from .source import kernel_record
from .verify import verify_key, verify_task

DEFAULT_TIMEOUT_S = 900.0


def attach_handwritten(
    run: CompileRun,
    capture_dir: Path | None,
    *,
    execute: bool,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    budget_s: float | None = None,
    on_phase: PhaseCallback | None = None,
) -> CompileRun:
    """``run`` with its hand-written matches and their results: checked now with ``execute`` (``budget_s``: the
    stage's budget, as ``run_tasks`` takes it; ``on_phase``: told of each check as it starts), else read from
    ``capture_dir``."""
    matches = match_run(run)
    tasks, weights = _tasks(run, matches)
    data = HandwrittenResults()
    unverified: dict[str, str] = {}
    if capture_dir is not None and execute and tasks:
        verify, unverified = _verify_tasks(run, matches)
        # the largest profiled time first, so a stage cut short by its time limit has checked the most of it
        ordered = sorted(tasks.values(), key=lambda t: weights[t.key], reverse=True)
        data = run_tasks(ordered, run_device(run), capture_dir, timeout_s, verify, budget_s=budget_s, on_phase=on_phase)
    elif capture_dir is not None and (capture_dir / HANDWRITTEN_RESULTS_FILE).is_file():
        data = read_results(capture_dir / HANDWRITTEN_RESULTS_FILE)
    device = data.device or run_device(run)
    matches = tuple(_verified(m, data.verified.get(verify_key(m)), unverified.get(m.key, "")) for m in matches)
    matches = tuple(_with_runs(m, data.results, device, run) for m in matches)
    names = dict.fromkeys(name for m in matches for name in m.equivalents)
    run = replace(run, handwritten=matches, handwritten_kernels=tuple(kernel_record(n) for n in names))
    if data.error:
        warning = Diagnostic("warning", "hand-written kernels", data.error)
        run = replace(run, stats=replace(run.stats, diagnostics=(*run.stats.diagnostics, warning)))
    return run


def checks_to_run(run: CompileRun) -> int:
    """How many checks the run's matches (attached already) need: none, and there is no stage to run."""
    return len(_tasks(run, run.handwritten)[0])


def _tasks(
    run: CompileRun, matches: tuple[HandwrittenMatch, ...]
) -> tuple[dict[str, HandwrittenTask], dict[str, tuple[float, float]]]:
    """Each distinct (kernel, shape, dtype) check the matches need, and the profiled time (µs per step) of what
    it stands for: (in whole, in part)."""
    tasks: dict[str, HandwrittenTask] = {}
    weights: dict[str, tuple[float, float]] = {}
    for match, time_us in _profiled_time(run, matches):
        whole = match.kind in ("exact", "composed")
        for name in match.equivalents:
            shape = shape_for(get(name), dict(match.shape))
            if shape is not None:
                task = tasks.setdefault(task_key(name, shape, match.dtype), HandwrittenTask(name, shape, match.dtype))
                task.matches.append(verify_key(match))
                task.start_config = task.start_config or inductor_choice(run, match)
                stood_for, partly = weights.get(task.key, (0.0, 0.0))
                weights[task.key] = (stood_for + time_us, partly) if whole else (stood_for, partly + time_us)
    return tasks, weights


# What of a template kernel's launch configuration a hand-written kernel's search can start from.
_CHOICE_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")


def inductor_choice(run: CompileRun, match: HandwrittenMatch) -> dict[str, int]:
    """The launch configuration Inductor's autotuner chose for the matched kernel, where it is a template that
    records one (``triton_tem_*``: its ``config_args`` and warps and stages, max-autotune); else {}."""
    graph = run.graph(match.graph_id)
    kernel = graph.kernel(match.target) if graph is not None else None
    if kernel is None:
        return {}
    launch = kernel.launch_config
    config_args = launch.get("config_args")
    values = {**(config_args if isinstance(config_args, dict) else {}), **launch}
    chosen: dict[str, int] = {}
    for name in _CHOICE_FIELDS:
        value = values.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            chosen[name] = value
    return chosen if {"BLOCK_M", "BLOCK_N", "BLOCK_K"} <= chosen.keys() else {}


def _verify_tasks(run: CompileRun, matches: tuple[HandwrittenMatch, ...]) -> tuple[list[VerifyTask], dict[str, str]]:
    """The verification of every exact or composed match of a generated kernel, and why the others have none."""
    tasks, reasons = [], {}
    for match in matches:
        graph = run.graph(match.graph_id)
        kernel = graph.kernel(match.target) if graph is not None else None
        if match.kind not in ("exact", "composed"):
            continue
        if graph is None or kernel is None:
            reasons[match.key] = "a library call: it computes the op it names"
            continue
        task = verify_task(graph, kernel, match)
        if isinstance(task, str):
            reasons[match.key] = f"not verified: {task}"
        else:
            tasks.append(task)
    return tasks, reasons


def _verified(match: HandwrittenMatch, result: VerifyResult | None, reason: str) -> HandwrittenMatch:
    if result is None:
        return replace(match, verify_note=reason) if reason else match
    return replace(match, verified=result.agrees, verify_error=result.max_rel_error,
                   verify_tolerance=result.tolerance, verify_note=result.note)  # fmt: skip


def _profiled_time(run: CompileRun, matches: tuple[HandwrittenMatch, ...]) -> list[tuple[HandwrittenMatch, float]]:
    """Each match with the profiled device time (µs per step) of the launches it stands for; 0 where untimed."""
    spent: dict[int, float] = {}
    for _, match, time_us in timed_launches(run, matches):
        if match is not None:
            spent[id(match)] = spent.get(id(match), 0.0) + time_us
    return [(match, spent.get(id(match), 0.0)) for match in matches]


def _with_runs(
    match: HandwrittenMatch, results: dict[str, HandwrittenTaskResult], device: str, run: CompileRun
) -> HandwrittenMatch:
    runs = []
    for name in match.equivalents:
        shape = shape_for(get(name), dict(match.shape))
        if shape is None:
            runs.append(HandwrittenRun(name, {}, match.dtype, device, error="no shape for it in this match"))
            continue
        entry = results.get(task_key(name, shape, match.dtype))
        if entry is not None and match.rejected:
            # not timed as an equivalent: it does another job than Inductor's kernel
            entry = replace(entry, timing=None, eager=None, gpu_alone=None)
        runs.append(_run_record(name, shape, match.dtype, device, entry, run) if entry is not None
                    else HandwrittenRun(name, shape, match.dtype, device))  # fmt: skip
    return replace(match, runs=tuple(runs))


def _run_record(
    name: str, shape: dict[str, int], dtype: str, device: str, entry: HandwrittenTaskResult, run: CompileRun
) -> HandwrittenRun:
    roofline = None
    if entry.timing is not None and dtype in ITEMSIZE:
        moved, flops = get(name).cost(shape, ITEMSIZE[dtype])
        cost = (moved, flops or None, "the hand-written kernel's own count (catalog)")
        ceilings = run.bench.ceilings if run.bench else None
        roofline = place(cost, entry.timing.median_ms * 1e-3, "hand-written", ceilings)
    return HandwrittenRun(
        name=name, shape=shape, dtype=dtype, device=device,
        checked_shape=entry.checked_shape, interpreter=entry.interpreter, ok=entry.ok,
        max_rel_error=entry.max_rel_error, tolerance=entry.tolerance,
        timing=entry.timing, eager=entry.eager, gpu_alone=entry.gpu_alone, roofline=roofline,
        error=entry.error or None, configs=tuple(entry.configs), skipped=entry.skipped,
    )  # fmt: skip
