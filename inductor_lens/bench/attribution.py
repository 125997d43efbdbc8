"""Stage 4 of the pipeline (bench): tie every kernel of a profiled step to the launch that issued it.

The profiler's Chrome trace (torch.profiler, Kineto) holds, per step (``inductor_lens_step_<i>`` from the
model process, ``ProfilerStep#<i>`` from a profiled script or torch.profiler's schedule; a trace with neither,
recorded elsewhere around a plain loop, gets its steps from the calls of its first compiled graph):
- one ``## Call CompiledFxGraph <key> ##`` CPU range per compiled graph that ran;
- inside it, one top-level CPU range per launch, in launch order: Inductor names each Triton
  launch after its kernel, C++ kernels appear as ``graph_<k>_<kernel>`` (with
  TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE), and extern calls as their op (``aten::mm``; a custom op,
  ``torch.library``'s, as ``<namespace>::<op>``);
- GPU kernels, each linked by ``External id`` to the CPU range that launched it (possibly nested
  inside the top-level one, such as ``aten::_efficient_attention_forward`` inside SDPA).

Each region is matched to a graph by its sequence of launch names, so graph breaks and backward
graphs (run on autograd's thread) are told apart; identical graphs (a recompile, repeated layers served from the
FX graph cache) by the compile id of Dynamo's ``Torch-Compiled Region`` around the call, or, for a backward call
(run outside it), of the one around its forward call, which autograd's ``CompiledFunction`` and
``CompiledFunctionBackward`` ranges tie to it by their ``Sequence number``; where the trace has neither, by the
order they first ran (``JOIN_METHODS`` names how each graph was joined). On GPU a launch's time is the sum of its kernels'
durations; on CPU it is the duration of its range. Kernels replayed from a CUDA graph (reduce-overhead)
have no launch range of their own: Inductor's Triton kernels among them are matched by name, the rest
is reported as device work not tied to a launch.

Work no graph explains is counted, never dropped: kernels (GPU) or top-level ATen ops outside compiled graphs
(CPU) inside a step are ``unattributed``; those outside every step are counted apart (``outside``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import statistics
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..exchange.files import REGION_MARK, STEP_MARKS
from ..parse import compat
from ..records import CollectiveTime, GraphRecord, Launch
from .collectives import collectives_per_step
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
    duration: float = 0.0  # the trace's own ``dur``: end - start rounds at the clock's magnitude (µs since a base)
    sequence: Any = None  # autograd's "Sequence number": a backward node's range carries its forward's


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
    steps_found: str = ""  # how the steps were delimited
    # graph id -> how its calls were recognised (JOIN_METHODS) and how many of them were joined, over the steps
    joins: dict[str, tuple[str, int]] = field(default_factory=dict)
    unjoined_calls: int = 0  # compiled-graph calls inside the steps that no graph explains
    unattributed_count: int = 0  # kernels (GPU) or ranges (CPU) behind ``unattributed``, over all steps
    outside_count: int = 0  # kernels (GPU) or top-level ATen ops (CPU) outside every step
    outside_us: float = 0.0  # their total duration
    # custom ops that left no range of their own, timed by the ranges of the ops they ran (``_by_their_ops``)
    by_ops: set[tuple[str, int]] = field(default_factory=set)
    # What the parts of a whole step are read from (``step_parts.py``), per step:
    step_wall_us: list[float] = field(default_factory=list)  # host wall time of the step's range
    graph_host_us: dict[str, list[float]] = field(default_factory=dict)  # graph id -> host time of its calls
    optimizer_us: list[float] = field(default_factory=list)  # host time under the optimizer's ranges (outermost)
    # GPU: device time of the kernels launched under them outside every compiled graph (an eager optimizer)
    optimizer_device_us: list[float] = field(default_factory=list)
    optimizer_graphs: set[str] = field(default_factory=set)  # graphs called under them (a compiled optimizer)
    optimizer_ranges: int = 0  # the optimizer's outermost ranges inside the steps, all steps
    # the collectives of the steps, in or outside the graphs (collectives.py)
    collectives: tuple[CollectiveTime, ...] = ()


# How a compiled-graph call in the trace was tied to a graph of the report.
JOIN_METHODS = {
    "key": "FX graph cache key",
    "code": "hash of the graph's output code",
    "names": "launch-name sequence",
    "names+id": "launch-name sequence and Dynamo compile id (other graphs launch the same kernels)",
    "names+seq": (
        "launch-name sequence and the compile id of its forward call, which autograd's sequence number ties it to "
        "(other backward graphs launch the same kernels)"
    ),
    "order": (
        "launch-name sequence and the order identical graphs first ran: nothing in the trace tells their calls "
        "apart, so each step's i-th call is the i-th of them Inductor compiled"
    ),
    "replay": "kernel names of its CUDA-graph replays",
}
JoinMethod = Literal["key", "code", "names", "names+id", "names+seq", "order", "replay"]
# a compiled-graph call: its range, its top-level ranges (each with those nested in it), its graph and how it was found
_Call = tuple[_Range, list[tuple[_Range, list[_Range]]], GraphRecord | None, JoinMethod | None]
COMPILED_REGION = "Torch-Compiled Region: "  # Dynamo's range around each call of a compiled frame, by compile id
# AOTAutograd's autograd function: its forward call's range, and the range autograd's engine runs its backward in;
# both carry the same "Sequence number" (the forward's), and the forward's sits inside Dynamo's compiled region
AUTOGRAD_FORWARD = "CompiledFunction"
AUTOGRAD_BACKWARD = "CompiledFunctionBackward"
# torch.optim's profiler ranges around each optimizer call: "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"
OPTIMIZER_MARKS = ("Optimizer.step#", "Optimizer.zero_grad#")


def load_trace(path: Path) -> dict[str, Any]:
    """A Chrome trace as torch.profiler's ``export_chrome_trace`` writes it (gzipped where it ends in .gz);
    its ``traceEvents`` must be a list."""
    raw = Path(path).read_bytes()
    document = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise ValueError("not a Chrome trace: no traceEvents list")
    return document


def launch_label(launch: Launch) -> str:
    """The name the profiler gives a launch's top-level range: an op called through ``torch.ops`` is
    ``<ns>::<op>`` (``aten::mm``, ``mkl::_mkl_linear``, a custom op's ``lens_demo::mix``)."""
    if launch.kind == "extern":
        found = compat.op_namespace(launch.target)
        if found is not None:
            return f"{found[0]}::{found[1]}"
        op = launch.aten_op or launch.target
        base = op.split(".")[1] if op.startswith("aten.") and "." in op else op
        return f"aten::{base}"
    return launch.target


def range_label(name: str) -> str:
    return _CPP_PROFILE_PREFIX.sub("", name)


def attribute(
    trace: Path | dict[str, Any],
    graphs: Iterable[GraphRecord],
    device: str,
    known: dict[LaunchKey, list[str]] | None = None,
    *,
    infer_steps: bool = False,
) -> Attribution:
    """``trace``: the file, or the document ``load_trace`` read; ``infer_steps``: a trace without step marks
    (recorded elsewhere) gets one step per call of its first compiled graph."""
    events = (load_trace(trace) if isinstance(trace, Path) else trace)["traceEvents"]
    ranges = [
        _Range(
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
    marked = [r for r in ranges if _step_number(r.name) is not None]
    steps = sorted(marked, key=lambda r: _step_number(r.name) or 0)
    graphs = list(graphs)
    by_thread: dict[Any, list[_Range]] = {}
    for r in ranges:
        by_thread.setdefault(r.tid, []).append(r)
    for items in by_thread.values():
        items.sort(key=lambda r: (r.start, -r.end))

    by_code = _by_output_code(graphs) if any(len(_region_key(r.name)) == 32 for r in ranges) else {}
    forwards: dict[Any, list[_Range]] = {}  # sequence number -> the forward calls' autograd ranges
    backwards: dict[Any, list[_Range]] = {}  # thread -> the ranges autograd's engine ran backward calls in
    for r in ranges:
        if r.name == AUTOGRAD_FORWARD and r.sequence is not None:
            forwards.setdefault(r.sequence, []).append(r)
        elif r.name.endswith(AUTOGRAD_BACKWARD):
            backwards.setdefault(r.tid, []).append(r)
    regions: list[_Call] = []
    for region in sorted((r for r in ranges if r.name.startswith(REGION_MARK)), key=lambda r: r.start):
        children = _top_level(by_thread[region.tid], region)
        names = [range_label(c.name) for c, _ in children]
        compile_id, backward = _call_compile_id(by_thread, forwards, backwards.get(region.tid, []), region)
        graph, how = _graph_of_region(graphs, by_code, region.name, names, compile_id, backward)
        regions.append((region, children, graph, how))
    if steps:
        steps_found = f"{len(steps)} steps marked {next(m for m in STEP_MARKS if steps[0].name.startswith(m))}<i>"
    elif infer_steps:
        steps, steps_found = _inferred_steps(regions, by_thread, ranges, kernels)
    else:
        steps_found = "no step marks"
    step_of_range = _step_index(steps)
    regions = _by_order(regions, graphs, step_of_range)
    optimizer_ranges = _outermost(r for r in ranges if r.name.startswith(OPTIMIZER_MARKS) and step_of_range(r) is not None)
    under_optimizer = _containment(optimizer_ranges)
    optimizer_us = [0.0] * len(steps)
    for r in optimizer_ranges:
        if (step := step_of_range(r)) is not None:
            optimizer_us[step] += r.duration
    optimizer_device_us = [0.0] * len(steps)
    graph_host_us: dict[str, list[float]] = {}

    launches: dict[tuple[str, int], LaunchTimes] = {}
    owner_of_id: dict[Any, tuple[str, int]] = {}  # external id -> (graph, position) of its top-level launch
    cpu_time: dict[tuple[str, int, int], float] = {}  # (graph, position, step) -> CPU range time
    region_time = [0.0] * len(steps)
    region_graphs: list[tuple[_Range, GraphRecord]] = []
    joins: dict[str, tuple[str, int]] = {}
    unjoined: list[_Range] = []  # calls in the steps of no graph (yet: a CUDA-graph replay may still tie one)
    unattributed: dict[str, list[float]] = {}
    unattributed_count = 0
    by_ops: set[LaunchKey] = set()
    for region, children, graph, how in regions:
        step = step_of_range(region)
        if step is None:
            continue
        region_time[step] += region.duration
        if graph is None or how is None:
            unjoined.append(region)
            continue
        joins[graph.id] = (JOIN_METHODS[how], joins.get(graph.id, ("", 0))[1] + 1)
        region_graphs.append((region, graph))
        graph_host_us.setdefault(graph.id, [0.0] * len(steps))[step] += region.duration
        pairs = _align(graph.launches, children)
        rangeless = _by_their_ops(graph.launches, children, pairs)
        by_ops.update((graph.id, launch.position) for launch, _ in rangeless)
        pairs += rangeless
        for launch, (child, nested) in pairs:
            key = (graph.id, launch.position)
            launches.setdefault(key, LaunchTimes())
            for r in nested:
                owner_of_id[r.external_id] = key
            cpu_time[(graph.id, launch.position, step)] = cpu_time.get(
                (graph.id, launch.position, step), 0.0
            ) + child.duration
        if device != "cuda":
            paired = {id(child) for _, (child, _) in pairs}
            for child, _ in children:
                if id(child) not in paired:
                    unattributed.setdefault(child.name, [0.0] * len(steps))[step] += child.duration
                    unattributed_count += 1

    per_step: dict[LaunchKey, list[float]] = {key: [0.0] * len(steps) for key in launches}
    per_step_calls: dict[LaunchKey, list[int]] = {key: [0] * len(steps) for key in launches}
    total = [0.0] * len(steps)
    intervals: list[list[tuple[float, float]]] = [[] for _ in steps]
    kernel_names: dict[LaunchKey, list[str]] = {}
    first_step: dict[LaunchKey, int] = {}
    replayed = [0.0] * len(steps)
    approximate = [0.0] * len(steps)
    replays: dict[Any, list[tuple[dict[str, Any], int, float]]] = {}
    exact = True
    outside_count, outside_us = 0, 0.0

    def charge(owner: LaunchKey | None, kernel: dict[str, Any], step: int, duration: float) -> None:
        nonlocal unattributed_count
        if owner is None:
            unattributed.setdefault(kernel["name"], [0.0] * len(steps))[step] += duration
            unattributed_count += 1
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
            duration = float(kernel.get("dur", 0))
            if step is None or source is None:
                outside_count, outside_us = outside_count + 1, outside_us + duration
                continue
            total[step] += duration
            start = float(kernel["ts"])
            intervals[step].append((start, start + duration))
            correlation = (kernel.get("args") or {}).get("correlation")
            if correlation in graph_launches:
                replays.setdefault(correlation, []).append((kernel, step, duration))
            else:
                owner = owner_of_id.get(ext)
                if owner is None and under_optimizer(source):
                    optimizer_device_us[step] += duration
                charge(owner, kernel, step, duration)
        for correlation, replay in replays.items():
            names = [kernel["name"] for kernel, _, _ in replay]
            launch_call = graph_launches[correlation]
            graph = _enclosing_graph(launch_call, region_graphs)
            if graph is None and (graph := best_graph(names, graphs)) is not None:
                joins[graph.id] = (JOIN_METHODS["replay"], joins.get(graph.id, ("", 0))[1] + 1)
                unjoined = [r for r in unjoined if not (r.tid == launch_call.tid and r.start <= launch_call.start <= r.end)]
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
        for op in _eager_ops(by_thread, regions):
            step = step_of_range(op)
            if step is None:
                outside_count, outside_us = outside_count + 1, outside_us + op.duration
            else:
                unattributed.setdefault(op.name, [0.0] * len(steps))[step] += op.duration
                unattributed_count += 1
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
        steps_found=steps_found,
        joins=joins,
        unjoined_calls=len(unjoined),
        unattributed_count=unattributed_count,
        outside_count=outside_count,
        outside_us=outside_us,
        by_ops=by_ops,
        step_wall_us=[s.duration or s.end - s.start for s in steps],
        graph_host_us=graph_host_us,
        optimizer_us=optimizer_us,
        optimizer_device_us=optimizer_device_us if device == "cuda" else [],
        optimizer_graphs={graph.id for region, graph in region_graphs if under_optimizer(region)},
        optimizer_ranges=len(optimizer_ranges),
        collectives=collectives_per_step(events, len(steps), device),
    )


def _outermost(candidates: Iterable[_Range]) -> list[_Range]:
    """The ranges not nested in another of them on their thread (a wrapped optimizer's step runs the inner one's)."""
    found: list[_Range] = []
    ends: dict[Any, float] = {}
    for r in sorted(candidates, key=lambda r: (r.start, -r.end)):
        if r.end <= ends.get(r.tid, float("-inf")):
            continue
        ends[r.tid] = r.end
        found.append(r)
    return found


def _containment(outer: list[_Range]) -> Callable[[_Range], bool]:
    """Whether a range starts inside one of ``outer`` (disjoint per thread) on its own thread."""
    by_thread: dict[Any, list[_Range]] = {}
    for r in outer:
        by_thread.setdefault(r.tid, []).append(r)
    starts = {tid: [r.start for r in items] for tid, items in by_thread.items()}

    def inside(r: _Range) -> bool:
        items = by_thread.get(r.tid)
        if not items:
            return False
        index = bisect_right(starts[r.tid], r.start) - 1
        return index >= 0 and r.start <= items[index].end

    return inside


def _inferred_steps(
    regions: list[tuple[_Range, Any, GraphRecord | None, Any]],
    by_thread: dict[Any, list[_Range]],
    ranges: list[_Range],
    kernels: list[dict[str, Any]],
) -> tuple[list[_Range], str]:
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
    steps = [_Range(f"step {i}", *window, None, None) for i, window in enumerate(zip(starts, ends, strict=True))]
    named = f"graph {opener}" if joined else f"the compiled graph of the call {opener.strip('# ')!r}"
    return steps, (
        f"no step marks in the trace: {len(steps)} steps, one per call of {named} (the first compiled graph to "
        "run), each from that call to the next (the last as long as the one before it)"
    )


def _eager_ops(
    by_thread: dict[Any, list[_Range]], regions: list[tuple[_Range, Any, Any, Any]]
) -> Iterator[_Range]:
    """CPU: the ATen ops run outside every compiled graph (eager code around them), outermost only."""
    regions_of: dict[Any, list[_Range]] = {}
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


def _compile_id(thread: list[_Range], region: _Range) -> str | None:
    """The Dynamo compile id (``0/1``) of the compiled frame whose call holds this region, where Dynamo marked it."""
    around = [r for r in thread if r.name.startswith(COMPILED_REGION) and r.start <= region.start and region.end <= r.end]
    return around[-1].name.removeprefix(COMPILED_REGION).strip() if around else None


def _call_compile_id(
    by_thread: dict[Any, list[_Range]], forwards: dict[Any, list[_Range]], backwards: list[_Range], region: _Range
) -> tuple[str | None, bool]:
    """The compile id of the call that ran this region, and whether it is a backward call. Autograd's engine runs
    a backward graph outside every compiled region (on CPU on the caller's thread, on GPU on its own), inside the
    ``CompiledFunctionBackward`` range of its forward call's autograd node: the two ranges share a sequence number,
    and the forward's compiled region names the compile id, the one its backward graph has too."""
    around = [r for r in backwards if r.start <= region.start and region.end <= r.end]
    node = max(around, key=lambda r: r.start, default=None)  # the innermost
    if node is not None and node.sequence is not None:
        forward = forwards.get(node.sequence, [])
        # sequence numbers count per forward thread: two forward threads could give one twice
        return (_compile_id(by_thread[forward[0].tid], forward[0]) if len(forward) == 1 else None), True
    return _compile_id(by_thread[region.tid], region), False


def _graph_of_region(
    graphs: list[GraphRecord],
    by_code: dict[str, list[GraphRecord]],
    region: str,
    names: list[str],
    compile_id: str | None = None,
    backward: bool = False,
) -> tuple[GraphRecord | None, JoinMethod | None]:
    """The graph a ``## Call CompiledFxGraph <key> ##`` region ran, and how it was found: by its FX graph
    cache key where the trace logged it (graphs of a recompile can launch the same kernels), or by the md5 of
    its output code (graph-free calls), else by its launches (a trace from another process, whose keys differ)."""
    key = _region_key(region)
    by_key = [g for g in graphs if g.fx_cache_key and g.fx_cache_key == key]
    if len(by_key) == 1:
        return by_key[0], "key"
    by_hash = [] if by_key else by_code.get(key, [])
    if len(by_hash) == 1:
        return by_hash[0], "code"
    return _match_graph(graphs, names, compile_id, backward)


def _by_order(
    regions: list[_Call],
    graphs: list[GraphRecord],
    step_of: Callable[[_Range | None], int | None],
) -> list[_Call]:
    """Calls of identical graphs that no compile id tells apart (a trace without Dynamo's compiled regions or
    autograd's sequence numbers): where a step holds one call of each, its i-th call goes to the i-th of them in the
    order Inductor compiled them, the order they first ran (a backward graph is compiled at its first backward)."""
    tied: dict[tuple[int, tuple[str, ...]], list[int]] = {}  # (step, the identical graphs) -> their calls' indices
    for index, (region, children, _, how) in enumerate(regions):
        step = step_of(region)
        if how != "names" or step is None:
            continue
        names = [range_label(c.name) for c, _ in children]
        same = tuple(g.id for g in graphs if _expected_labels(g) == names)
        if len(same) > 1:
            tied.setdefault((step, same), []).append(index)
    by_id = {g.id: g for g in graphs}
    found = list(regions)
    for (_, same), indices in tied.items():
        if len(indices) == len(same):
            for index, graph_id in zip(indices, same, strict=True):
                region, children, _, _ = found[index]
                found[index] = (region, children, by_id[graph_id], "order")
    return found


def _expected_labels(graph: GraphRecord) -> list[str]:
    """The top-level range names a call of this graph leaves, in order; a custom op's own range may be missing
    (compat.RANGELESS_CUSTOM_OPS): not expected."""
    return [launch_label(launch) for launch in graph.launches if compat.custom_op(launch.target) is None]


def _match_graph(
    graphs: list[GraphRecord], names: list[str], compile_id: str | None = None, backward: bool = False
) -> tuple[GraphRecord | None, JoinMethod | None]:
    """The graph whose launch sequence best matches the region's top-level range names; between graphs that
    match equally (a recompile launching the same kernels, identical layers' graphs served from the FX graph cache),
    the one of the compile id Dynamo marked the call with (a backward call: its forward call's, ``_call_compile_id``)."""
    scores: list[tuple[float, GraphRecord]] = []
    for graph in graphs:
        expected = _expected_labels(graph)
        if expected:
            scores.append((_count_in_order(expected, names) / len(expected), graph))
    best_score = max((score for score, _ in scores), default=0.0)
    if best_score < 0.8:
        return None, None
    best = [graph for score, graph in scores if score == best_score]
    if len(best) == 1:
        return best[0], "names"
    same_id = [
        g
        for g in best
        if compile_id and (g.compile_id or "").split("_")[0] == compile_id and (g.kind == "backward") == backward
    ]
    if len(same_id) == 1:
        return same_id[0], "names+seq" if backward else "names+id"
    return best[0], "names"


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


def _by_their_ops(
    launches: tuple[Launch, ...],
    children: list[tuple[_Range, list[_Range]]],
    pairs: list[tuple[Launch, tuple[_Range, list[_Range]]]],
) -> list[tuple[Launch, tuple[_Range, list[_Range]]]]:
    """Custom ops that left no range of their own (``compat.RANGELESS_CUSTOM_OPS``), each with the top-level
    ranges no launch claimed between its neighbours' ranges: the ops it ran. Only where it is the one launch
    without a range between those neighbours; otherwise whose ranges they are is not known, and they stay untied."""
    index_of = {id(child): index for index, (child, _) in enumerate(children)}
    placed = sorted((launch.position, index_of[id(child)]) for launch, (child, _) in pairs)
    has_range = {position for position, _ in placed}
    claimed = {index for _, index in placed}
    found: list[tuple[Launch, tuple[_Range, list[_Range]]]] = []
    for launch in launches:
        if launch.position in has_range or launch.kind != "extern" or compat.custom_op(launch.target) is None:
            continue
        low_position, low = max(((p, i) for p, i in placed if p < launch.position), default=(0, -1))
        high_position, high = min(((p, i) for p, i in placed if p > launch.position), default=(1 << 30, len(children)))
        alone = not any(
            other is not launch and other.position not in has_range and low_position < other.position < high_position
            for other in launches
        )
        if alone:
            found += [(launch, children[index]) for index in range(low + 1, high) if index not in claimed]
    return found


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
