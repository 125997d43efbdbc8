"""Several ranks: the light pass over one rank's TORCH_TRACE logs and profile trace, for the landing page.

``light_summary(rank, folder, logs)`` reads the rank's logs once (parse/trace.py, keeping each graph's output
code and FX graph) and reduces them to the ``RankSummary`` the ranks are compared by (records/rank_summary.py):
compile ids, recompile reasons, guards, cache lookups, compile times and graph breaks from the frames, and per
graph its code hash, launches and collectives; and where the rank's capture left a profile trace, its profiled
step's time in compiled code and its collectives per step (bench/profiled_step.py, as its full
report's ``StepTiming`` has them). Nothing is rendered and no graph is parsed beyond its output
code's launches, so a job of many ranks gets its landing page in seconds (``light_summaries`` spreads the ranks
over the cores); the same facts of a full report (``summarize``) are made by the same functions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from .bench.profiled_step import ProfiledStep, profiled_step
from .bench.trace_ranges import UNREADABLE
from .parse.diagnostics import Diagnostics
from .parse.frames import dynamo_frame, fold_restarts, graph_breaks, own_graph_breaks
from .parse.output_code import parse_output_code
from .parse.trace import read_traces
from .records.rank_normalise import code_hash
from .records.rank_summary import numbered, rank_graph, summary_of
from .records.ranks import RankSummary

__all__ = ["LightTask", "light_summaries", "light_summary"]

# A capture's profile trace (absolute path) and the device it profiled.
ProfileTrace = tuple[str, str]
# (rank, its report folder's name, its TORCH_TRACE logs, its status, its error, its profile trace)
LightTask = tuple[int, str, tuple[str, ...], str, "str | None", "ProfileTrace | None"]
# Below this many ranks the pass runs in this process: starting workers costs more than it saves.
_PARALLEL_FROM = 4
# The launches of each output code already read by this process, by its normalised hash: the ranks of a job
# mostly compile the same code, and reading a graph's launches is most of the pass.
_LAUNCHES: dict[str, tuple[str, ...]] = {}


def light_summary(
    rank: int,
    folder: str,
    logs: Sequence[str],
    *,
    status: str = "ok",
    error: str | None = None,
    profile: ProfileTrace | None = None,
) -> RankSummary:
    """The comparable facts of one rank, from its TORCH_TRACE logs (and ``profile``, its capture's profile trace
    and device, where it has one: its profiled step and collectives)."""
    diagnostics = Diagnostics()
    paths = [Path(log) for log in logs]
    root = paths[0].parent if paths else Path()
    traces = read_traces(paths, root, diagnostics, keep_graphs=True)
    frame_traces = fold_restarts(traces.frames)
    own_breaks = own_graph_breaks(frame_traces)
    frames = [dynamo_frame(trace, own_breaks.get(trace.compile_id)) for trace in frame_traces]
    breaks = [b for trace in frame_traces for b in graph_breaks(trace)]
    graphs = []
    for traced in traces.traced_graphs:
        code = traced.files.get("output_code.py", "")
        digest = code_hash(code)
        if digest not in _LAUNCHES:
            launches = parse_output_code(code, traced.where, diagnostics).launches if code else ()
            _LAUNCHES[digest] = tuple(launch.label for launch in launches)
        fx_text = traced.files.get("fx_graph_readable.py") or traced.files.get("fx_graph_transformed.py")
        key = f"{traced.compile_id} {traced.kind}"
        graphs.append(rank_graph(key, key, code, _LAUNCHES[digest], fx_text, digest))
    summary = summary_of(rank, folder, frames, numbered(graphs), breaks, status=status, error=error)
    step = _profiled(profile) if profile is not None else None
    if step is None:
        return summary
    return replace(summary, step_device_us=step.total_us, step_collectives=step.collectives)


def _profiled(profile: ProfileTrace) -> ProfiledStep | None:
    """The profiled step of a rank's trace; None where it is unreadable, as its full report is then untimed."""
    trace, device = profile
    try:
        return profiled_step(Path(trace), device)
    except UNREADABLE:
        return None


def light_summaries(tasks: Sequence[LightTask], workers: int | None = None) -> list[RankSummary]:
    """Each rank's light summary, in the order given, the ranks spread over the cores."""
    workers = workers or os.cpu_count() or 1
    if len(tasks) < _PARALLEL_FROM or workers < 2:
        return [_run(task) for task in tasks]
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        return list(pool.map(_run, tasks, chunksize=max(1, len(tasks) // (workers * 4))))


def _run(task: LightTask) -> RankSummary:
    rank, folder, logs, status, error, profile = task
    return light_summary(rank, folder, logs, status=status, error=error, profile=profile)
