"""Stage 4 of the pipeline (bench): a profiler trace read as ranges on threads, and its steps.

The first step of ``attribution.attribute``: the Chrome trace's CPU and annotation ranges (each with its
thread, ``External id`` and autograd ``Sequence number``), its device work, and the profiled steps
(``inductor_lens_step_<i>`` from the model process, ``ProfilerStep#<i>`` from a profiled script or
torch.profiler's schedule; a trace with neither gets one step per call of its first compiled graph). Also the
questions the other steps ask of ranges: which step holds one, which ranges a call holds, which are outermost.
"""

from __future__ import annotations

import gzip
import json
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exchange.files import STEP_MARKS
from ..records import GraphRecord

GPU_WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
# What reading a truncated, edited or other-version measurement file or profile trace raises: its readers catch these.
UNREADABLE = (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError)
_CPP_PROFILE_PREFIX = re.compile(r"^graph_\d+_")


@dataclass(frozen=True)
class TraceRange:
    name: str
    start: float
    end: float
    tid: Any
    external_id: Any
    duration: float = 0.0  # the trace's own ``dur``: end - start rounds at the clock's magnitude (µs since a base)
    sequence: Any = None  # autograd's "Sequence number": a backward node's range carries its forward's


@dataclass(frozen=True)
class ProfiledTrace:
    events: list[dict[str, Any]]
    ranges: list[TraceRange]  # CPU ops and annotations, in the trace's order
    by_thread: dict[Any, list[TraceRange]]  # the same per thread, sorted by start, the outer of two ranges first
    kernels: list[dict[str, Any]]  # device work (GPU_WORK), sorted by start


def load_trace(path: Path) -> dict[str, Any]:
    """A Chrome trace as torch.profiler's ``export_chrome_trace`` writes it (gzipped where it ends in .gz);
    its ``traceEvents`` must be a list."""
    raw = Path(path).read_bytes()
    document = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise ValueError("not a Chrome trace: no traceEvents list")
    return document


def read_trace(events: list[dict[str, Any]]) -> ProfiledTrace:
    ranges = [
        TraceRange(
            e["name"],
            float(e["ts"]),
            float(e["ts"]) + float(e.get("dur", 0)),
            e.get("tid"),
            (e.get("args") or {}).get("External id"),
            float(e.get("dur", 0)),
            (e.get("args") or {}).get("Sequence number"),
        )
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
    ]
    kernels = sorted(
        (e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_WORK),
        key=lambda e: float(e.get("ts", 0)),
    )
    by_thread: dict[Any, list[TraceRange]] = {}
    for r in ranges:
        by_thread.setdefault(r.tid, []).append(r)
    for items in by_thread.values():
        items.sort(key=lambda r: (r.start, -r.end))
    return ProfiledTrace(events, ranges, by_thread, kernels)


def range_label(name: str) -> str:
    return _CPP_PROFILE_PREFIX.sub("", name)


def find_steps(
    trace: ProfiledTrace, calls: list[tuple[TraceRange, Any, GraphRecord | None, Any]], infer_steps: bool
) -> tuple[list[TraceRange], str]:
    """The profiled steps in the order of their numbers, and how they were delimited; ``infer_steps``: a trace
    without step marks gets one step per call of its first compiled graph (``calls``: the compiled-graph calls)."""
    steps = sorted((r for r in trace.ranges if step_number(r.name) is not None), key=lambda r: step_number(r.name) or 0)
    if steps:
        return steps, f"{len(steps)} steps marked {next(m for m in STEP_MARKS if steps[0].name.startswith(m))}<i>"
    if infer_steps:
        return _inferred_steps(calls, trace.by_thread, trace.ranges, trace.kernels)
    return steps, "no step marks"


def step_number(name: str) -> int | None:
    """The number of a profiled step's range, or None for any other range."""
    for mark in STEP_MARKS:
        if name.startswith(mark) and name[len(mark) :].isdecimal():
            return int(name[len(mark) :])
    return None


def _inferred_steps(
    regions: list[tuple[TraceRange, Any, GraphRecord | None, Any]],
    by_thread: dict[Any, list[TraceRange]],
    ranges: list[TraceRange],
    kernels: list[dict[str, Any]],
) -> tuple[list[TraceRange], str]:
    """Steps of a trace without step marks: one per call of the first compiled graph that runs (the first
    call joined to a graph of the report, else the first call at all), from the outermost range around
    that call that holds no other call of it, to the next one; the last as long as the one before it."""
    if not regions:
        return [], "no step marks and no compiled-graph calls"
    joined = [(region, graph.id) for region, _, graph, _ in regions if graph is not None]
    calls = joined or [(region, region.name) for region, _, _, _ in regions]
    opener = calls[0][1]
    openings = [region for region, key in calls if key == opener]
    starts: list[float] = []
    for region in openings:
        around = [r for r in by_thread[region.tid] if r.start <= region.start and region.end <= r.end]
        lone = [r for r in around if sum(r.start <= o.start < r.end for o in openings) == 1]
        starts.append(min((r.start for r in lone), default=region.start))
    last_end = max([r.end for r in ranges] + [float(k["ts"]) + float(k.get("dur", 0)) for k in kernels])
    ends = [*starts[1:], min(last_end, 2 * starts[-1] - starts[-2]) if len(starts) > 1 else last_end]
    steps = [TraceRange(f"step {i}", *window, None, None) for i, window in enumerate(zip(starts, ends, strict=True))]
    named = f"graph {opener}" if joined else f"the compiled graph of the call {opener.strip('# ')!r}"
    return steps, (
        f"no step marks in the trace: {len(steps)} steps, one per call of {named} (the first compiled graph to "
        "run), each from that call to the next (the last as long as the one before it)"
    )


def step_index(steps: list[TraceRange]) -> Callable[[TraceRange | None], int | None]:
    starts = [s.start for s in steps]

    def find(r: TraceRange | None) -> int | None:
        if r is None:
            return None
        # Backward graphs run on autograd's thread, but inside the step's time window all the same.
        index = bisect_right(starts, r.start) - 1
        return index if index >= 0 and r.start <= steps[index].end else None

    return find


def top_level(thread: list[TraceRange], region: TraceRange) -> list[tuple[TraceRange, list[TraceRange]]]:
    """The direct children of a region, each with every range nested in it (itself included)."""
    inside = [r for r in thread if region.start < r.start and r.end <= region.end and r is not region]
    children: list[tuple[TraceRange, list[TraceRange]]] = []
    for r in inside:
        if children and r.end <= children[-1][0].end and r.start >= children[-1][0].start:
            children[-1][1].append(r)
        else:
            children.append((r, [r]))
    return children


def outermost(candidates: Iterable[TraceRange]) -> list[TraceRange]:
    """The ranges not nested in another of them on their thread (a wrapped optimizer's step runs the inner one's)."""
    found: list[TraceRange] = []
    ends: dict[Any, float] = {}
    for r in sorted(candidates, key=lambda r: (r.start, -r.end)):
        if r.end <= ends.get(r.tid, float("-inf")):
            continue
        ends[r.tid] = r.end
        found.append(r)
    return found


def containment(outer: list[TraceRange]) -> Callable[[TraceRange], bool]:
    """Whether a range starts inside one of ``outer`` (disjoint per thread) on its own thread."""
    by_thread: dict[Any, list[TraceRange]] = {}
    for r in outer:
        by_thread.setdefault(r.tid, []).append(r)
    starts = {tid: [r.start for r in items] for tid, items in by_thread.items()}

    def inside(r: TraceRange) -> bool:
        items = by_thread.get(r.tid)
        if not items:
            return False
        index = bisect_right(starts[r.tid], r.start) - 1
        return index >= 0 and r.start <= items[index].end

    return inside


def eager_ops(
    by_thread: dict[Any, list[TraceRange]], regions: list[tuple[TraceRange, Any, Any, Any]]
) -> Iterator[TraceRange]:
    """CPU: the ATen ops run outside every compiled graph (eager code around them), outermost only."""
    regions_of: dict[Any, list[TraceRange]] = {}
    for region, *_ in regions:
        regions_of.setdefault(region.tid, []).append(region)
    for tid, thread in by_thread.items():
        covered = regions_of.get(tid, [])
        outer_end = float("-inf")
        for r in thread:  # sorted by start, the outer of two ranges first
            if not r.name.startswith("aten::") or r.end <= outer_end:
                continue
            if any(c.start <= r.start and r.end <= c.end for c in covered):
                continue
            outer_end = r.end
            yield r


def enclosing_graph(launch: TraceRange, regions: list[tuple[TraceRange, GraphRecord]]) -> GraphRecord | None:
    """The graph whose ``## Call CompiledFxGraph`` range holds this runtime call (same thread)."""
    for region, graph in regions:
        if region.tid == launch.tid and region.start <= launch.start <= region.end:
            return graph
    return None


def union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total
