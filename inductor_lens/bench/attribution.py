"""Stage 4 of the pipeline (bench): tie every kernel of a profiled step to the launch that issued it.

The profiler's Chrome trace (torch.profiler, Kineto) holds, per step (``inductor_lens_step_<i>`` from the
model process, ``ProfilerStep#<i>`` from a profiled script):
- one ``## Call CompiledFxGraph <key> ##`` CPU range per compiled graph that ran;
- inside it, one top-level CPU range per launch, in launch order: Inductor names each Triton
  launch after its kernel, C++ kernels appear as ``graph_<k>_<kernel>`` (with
  TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE), and extern calls as their ATen op (``aten::mm``);
- GPU kernels, each linked by ``External id`` to the CPU range that launched it (possibly nested
  inside the top-level one, such as ``aten::_efficient_attention_forward`` inside SDPA).

Each region is matched to a graph by its sequence of launch names, so graph breaks and backward
graphs (run on autograd's thread) are told apart. On GPU a launch's time is the sum of its kernels'
durations; on CPU it is the duration of its range. Kernels replayed from a CUDA graph (reduce-overhead)
have no launch range of their own: Inductor's Triton kernels among them are matched by name, the rest
is reported as device work not tied to a launch.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import GraphRecord, Launch
from ..worker.files import REGION_MARK, STEP_MARKS
from .graph_replay import LaunchKey, best_graph, tie_replay

GPU_WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
_CPP_PROFILE_PREFIX = re.compile(r"^graph_\d+_")


@dataclass(frozen=True)
class _Range:
    name: str
    start: float
    end: float
    tid: Any
    external_id: Any


@dataclass
class LaunchTimes:
    """Per profiled step: microseconds and number of device kernels (GPU) or ranges (CPU)."""

    per_step_us: list[float] = field(default_factory=list)
    per_step_calls: list[int] = field(default_factory=list)

    @property
    def median_us(self) -> float:
        return statistics.median(self.per_step_us) if self.per_step_us else 0.0


@dataclass
class Attribution:
    steps: int
    device: str
    # (graph id, launch position) -> its times
    launches: dict[tuple[str, int], LaunchTimes]
    step_total_us: list[float]  # GPU: all kernel time of the step; CPU: time inside compiled graphs
    step_span_us: list[float]  # first kernel start to last kernel end (GPU)
    step_busy_us: list[float]  # union of kernel intervals (GPU)
    unattributed: dict[str, float]  # kernel or range name -> median microseconds per step
    # GPU: the kernels each launch issued in the first step it ran, in order (what a CUDA-graph replay aligns to)
    kernel_names: dict[LaunchKey, list[str]] = field(default_factory=dict)
    replayed_us: list[float] = field(default_factory=list)  # per step: device time inside CUDA-graph replays
    approximate_us: list[float] = field(default_factory=list)  # per step: of which tied by position only
    replays_tied_exactly: bool = False


def launch_label(launch: Launch) -> str:
    """The name the profiler gives a launch's top-level range."""
    if launch.kind == "extern":
        op = launch.aten_op or launch.target
        base = op.split(".")[1] if op.startswith("aten.") and "." in op else op
        return f"aten::{base}"
    return launch.target


def range_label(name: str) -> str:
    return _CPP_PROFILE_PREFIX.sub("", name)


def attribute(
    trace_path: Path,
    graphs: Iterable[GraphRecord],
    device: str,
    known: dict[LaunchKey, list[str]] | None = None,
) -> Attribution:
    events = json.loads(Path(trace_path).read_text())["traceEvents"]
    ranges = [
        _Range(
            e["name"],
            float(e["ts"]),
            float(e["ts"]) + float(e.get("dur", 0)),
            e.get("tid"),
            (e.get("args") or {}).get("External id"),
        )
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
    ]
    kernels = sorted(
        (e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_WORK),
        key=lambda e: float(e.get("ts", 0)),
    )
    steps = sorted(
        (r for r in ranges if _step_number(r.name) is not None), key=lambda r: _step_number(r.name) or 0
    )
    graphs = list(graphs)
    by_thread: dict[Any, list[_Range]] = {}
    for r in ranges:
        by_thread.setdefault(r.tid, []).append(r)
    for items in by_thread.values():
        items.sort(key=lambda r: (r.start, -r.end))
    step_of_range = _step_index(steps)

    launches: dict[tuple[str, int], LaunchTimes] = {}
    owner_of_id: dict[Any, tuple[str, int]] = {}  # external id -> (graph, position) of its top-level launch
    cpu_time: dict[tuple[str, int, int], float] = {}  # (graph, position, step) -> CPU range time
    region_time = [0.0] * len(steps)
    region_graphs: list[tuple[_Range, GraphRecord]] = []
    by_code = _by_output_code(graphs) if any(len(_region_key(r.name)) == 32 for r in ranges) else {}
    for region in (r for r in ranges if r.name.startswith(REGION_MARK)):
        step = step_of_range(region)
        if step is None:
            continue
        region_time[step] += region.end - region.start
        children = _top_level(by_thread[region.tid], region)
        graph = _graph_of_region(graphs, by_code, region.name, [range_label(c.name) for c, _ in children])
        if graph is None:
            continue
        region_graphs.append((region, graph))
        pairs = _align(graph.launches, children)
        for launch, (child, nested) in pairs:
            key = (graph.id, launch.position)
            launches.setdefault(key, LaunchTimes())
            for r in nested:
                owner_of_id[r.external_id] = key
            cpu_time[(graph.id, launch.position, step)] = cpu_time.get(
                (graph.id, launch.position, step), 0.0
            ) + (child.end - child.start)

    per_step: dict[LaunchKey, list[float]] = {key: [0.0] * len(steps) for key in launches}
    per_step_calls: dict[LaunchKey, list[int]] = {key: [0] * len(steps) for key in launches}
    total = [0.0] * len(steps)
    intervals: list[list[tuple[float, float]]] = [[] for _ in steps]
    unattributed: dict[str, list[float]] = {}
    kernel_names: dict[LaunchKey, list[str]] = {}
    first_step: dict[LaunchKey, int] = {}
    replayed = [0.0] * len(steps)
    approximate = [0.0] * len(steps)
    replays: dict[Any, list[tuple[dict[str, Any], int, float]]] = {}
    exact = True

    def charge(owner: LaunchKey | None, kernel: dict[str, Any], step: int, duration: float) -> None:
        if owner is None:
            unattributed.setdefault(kernel["name"], [0.0] * len(steps))[step] += duration
            return
        if owner not in per_step:
            launches.setdefault(owner, LaunchTimes())
            per_step[owner], per_step_calls[owner] = [0.0] * len(steps), [0] * len(steps)
        per_step[owner][step] += duration
        per_step_calls[owner][step] += 1
        if first_step.setdefault(owner, step) == step:
            kernel_names.setdefault(owner, []).append(kernel["name"])

    if device == "cuda":
        # cuda_runtime ranges place every kernel in its step, cudaGraphLaunch ones included
        runtime = [
            _Range(e["name"], float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e.get("tid"), ext)
            for e in events
            if e.get("ph") == "X"
            and e.get("cat") == "cuda_runtime"
            and (ext := (e.get("args") or {}).get("External id")) is not None
        ]
        launch_ranges = {r.external_id: r for r in [*runtime, *ranges] if r.external_id is not None}
        # a kernel's ``correlation`` names the runtime call that issued it: cudaGraphLaunch for a replay
        graph_launches = {
            e["args"]["correlation"]: _Range(e["name"], float(e["ts"]), float(e["ts"]), e.get("tid"), None)
            for e in events
            if e.get("ph") == "X"
            and e.get("cat") == "cuda_runtime"
            and e.get("name") == "cudaGraphLaunch"
            and isinstance(e.get("args"), dict)
            and e["args"].get("correlation") is not None
        }
        for kernel in kernels:
            ext = (kernel.get("args") or {}).get("External id")
            source = launch_ranges.get(ext)
            step = step_of_range(source) if source is not None else None
            if step is None or source is None:
                continue
            duration = float(kernel.get("dur", 0))
            total[step] += duration
            start = float(kernel["ts"])
            intervals[step].append((start, start + duration))
            correlation = (kernel.get("args") or {}).get("correlation")
            if correlation in graph_launches:
                replays.setdefault(correlation, []).append((kernel, step, duration))
            else:
                charge(owner_of_id.get(ext), kernel, step, duration)
        for correlation, replay in replays.items():
            names = [kernel["name"] for kernel, _, _ in replay]
            graph = _enclosing_graph(graph_launches[correlation], region_graphs) or best_graph(names, graphs)
            if graph is None:
                for kernel, step, duration in replay:
                    charge(None, kernel, step, duration)
                continue
            tie = tie_replay(names, graph, known)
            exact = exact and not tie.approximate and bool(known)
            for index, ((kernel, step, duration), owner) in enumerate(zip(replay, tie.owners, strict=True)):
                replayed[step] += duration
                if index in tie.approximate:
                    approximate[step] += duration
                charge(owner, kernel, step, duration)
    else:
        for (graph_id, position, step), duration in cpu_time.items():
            per_step[(graph_id, position)][step] += duration
            per_step_calls[(graph_id, position)][step] += 1
        total = region_time
    for key, times in launches.items():
        times.per_step_us = per_step[key]
        times.per_step_calls = per_step_calls[key]
    span = [max(e for _, e in iv) - min(s for s, _ in iv) if iv else 0.0 for iv in intervals]
    busy = [_union(iv) for iv in intervals]
    return Attribution(
        steps=len(steps),
        device=device,
        launches=launches,
        step_total_us=total,
        step_span_us=span,
        step_busy_us=busy,
        unattributed={name: statistics.median(v) for name, v in unattributed.items()},
        kernel_names=kernel_names,
        replayed_us=replayed if device == "cuda" else [],
        approximate_us=approximate if device == "cuda" else [],
        replays_tied_exactly=device == "cuda" and bool(replays) and exact,
    )


def _enclosing_graph(launch: _Range, regions: list[tuple[_Range, GraphRecord]]) -> GraphRecord | None:
    """The graph whose ``## Call CompiledFxGraph`` range holds this runtime call (same thread)."""
    for region, graph in regions:
        if region.tid == launch.tid and region.start <= launch.start <= region.end:
            return graph
    return None


def _step_index(steps: list[_Range]) -> Callable[[_Range | None], int | None]:
    starts = [s.start for s in steps]

    def find(r: _Range | None) -> int | None:
        if r is None:
            return None
        # Backward graphs run on autograd's thread, but inside the step's time window all the same.
        index = bisect_right(starts, r.start) - 1
        return index if index >= 0 and r.start <= steps[index].end else None

    return find


def _top_level(thread: list[_Range], region: _Range) -> list[tuple[_Range, list[_Range]]]:
    """The direct children of a region, each with every range nested in it (itself included)."""
    inside = [r for r in thread if region.start < r.start and r.end <= region.end and r is not region]
    children: list[tuple[_Range, list[_Range]]] = []
    for r in inside:
        if children and r.end <= children[-1][0].end and r.start >= children[-1][0].start:
            children[-1][1].append(r)
        else:
            children.append((r, [r]))
    return children


def _region_key(name: str) -> str:
    return name.removeprefix(REGION_MARK).strip(" #") if name.startswith(REGION_MARK) else ""


def _by_output_code(graphs: list[GraphRecord]) -> dict[str, list[GraphRecord]]:
    """md5 of output_code.py -> its graphs: graph_free.py's ranges name a graph by it."""
    found: dict[str, list[GraphRecord]] = {}
    for graph in graphs:
        found.setdefault(hashlib.md5(graph.output_code.encode()).hexdigest(), []).append(graph)
    return found


def _graph_of_region(
    graphs: list[GraphRecord], by_code: dict[str, list[GraphRecord]], region: str, names: list[str]
) -> GraphRecord | None:
    """The graph a ``## Call CompiledFxGraph <key> ##`` region ran: by its FX graph cache key where the
    trace logged it (graphs of a recompile can launch the same kernels), or by the md5 of its output code
    (graph-free calls), else by its launches."""
    key = _region_key(region)
    by_key = [g for g in graphs if g.fx_cache_key and g.fx_cache_key == key] or by_code.get(key, [])
    return by_key[0] if len(by_key) == 1 else _match_graph(graphs, names)


def _match_graph(graphs: list[GraphRecord], names: list[str]) -> GraphRecord | None:
    """The graph whose launch sequence best matches the region's top-level range names."""
    best, best_score = None, 0.0
    for graph in graphs:
        expected = [launch_label(launch) for launch in graph.launches]
        if not expected:
            continue
        matched = _count_in_order(expected, names)
        score = matched / len(expected)
        if score > best_score:
            best, best_score = graph, score
    return best if best_score >= 0.8 else None


def _count_in_order(expected: list[str], names: list[str]) -> int:
    position, matched = 0, 0
    for want in expected:
        try:
            position = names.index(want, position) + 1
            matched += 1
        except ValueError:
            continue
    return matched


def _align(
    launches: tuple[Launch, ...], children: list[tuple[_Range, list[_Range]]]
) -> list[tuple[Launch, tuple[_Range, list[_Range]]]]:
    """Pair each launch with the next top-level range of the same name, in order."""
    pairs: list[tuple[Launch, tuple[_Range, list[_Range]]]] = []
    position = 0
    names = [range_label(c.name) for c, _ in children]
    for launch in launches:
        try:
            index = names.index(launch_label(launch), position)
        except ValueError:
            continue
        pairs.append((launch, children[index]))
        position = index + 1
    return pairs


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def _step_number(name: str) -> int | None:
    """The number of a profiled step's range, or None for any other range."""
    for mark in STEP_MARKS:
        if name.startswith(mark) and name[len(mark) :].isdecimal():
            return int(name[len(mark) :])
    return None
