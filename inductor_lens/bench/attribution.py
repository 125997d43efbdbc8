"""Stage 4 of the pipeline (bench): tie every kernel of a profiled step to the launch that issued it.

``attribute`` reads the profiler's Chrome trace (torch.profiler, Kineto) in steps:
1. its ranges, thread by thread, and its device work (``trace_ranges.read_trace``);
2. which graph each ``## Call CompiledFxGraph <key> ##`` range ran (``graph_calls.join_calls``);
3. the profiled steps (``inductor_lens_step_<i>`` from the model process, ``ProfilerStep#<i>`` from a profiled
   script or torch.profiler's schedule; a trace with neither, recorded elsewhere around a plain loop, gets its
   steps from the calls of its first compiled graph: ``trace_ranges.find_steps``), and the calls of identical
   graphs nothing else tells apart, by the order they first ran (``graph_calls.by_order``);
4. the optimizer's ranges (torch.optim's ``Optimizer.step#...``) in the steps;
5. each call's launches paired with their top-level ranges (``_time_calls``);
6. GPU: each kernel, linked by ``External id`` to the CPU range that launched it (possibly nested inside the
   top-level one, such as ``aten::_efficient_attention_forward`` inside SDPA), charged to its launch: a launch's
   time is the sum of its kernels' durations (``_charge_kernels``). Kernels replayed from a CUDA graph
   (reduce-overhead) have no launch range of their own: Inductor's Triton kernels among them are matched by name,
   the rest is reported as device work not tied to a launch (``_tie_replays``, ``graph_replay.py``);
   CPU: a launch's time is the duration of its range (``_time_cpu_launches``).

The step's total (``step_totals``: all kernel time on a GPU, the time inside compiled-graph calls on a CPU) and its
collectives need no graph: ``profiled_step.py`` reads them alone, for the landing page of several ranks
(ranked_light.py), by the same functions.

Work no graph explains is counted, never dropped: kernels (GPU) or top-level ATen ops outside compiled graphs
(CPU) inside a step are ``unattributed``; those outside every step are counted apart (``outside``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exchange.files import REGION_MARK
from ..records import CollectiveTime, GraphRecord, Launch
from .collectives import collective_sizes, collectives_per_step
from .graph_calls import JOIN_METHODS, Call, Child, JoinMethod, align, by_order, by_their_ops, join_calls
from .graph_replay import LaunchKey, best_graph, tie_replay
from .trace_ranges import (
    ProfiledTrace,
    TraceRange,
    containment,
    eager_ops,
    enclosing_graph,
    find_steps,
    load_trace,
    outermost,
    read_trace,
    step_index,
    union,
)


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


# torch.optim's profiler ranges around each optimizer call: "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"
OPTIMIZER_MARKS = ("Optimizer.step#", "Optimizer.zero_grad#")
StepOf = Callable[[TraceRange | None], int | None]  # the index of the step that holds a range, if any
# one kernel of a CUDA-graph replay: the kernel's event, its step and its duration
ReplayedKernel = tuple[dict[str, Any], int, float]


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
    profiled = read_trace((load_trace(trace) if isinstance(trace, Path) else trace)["traceEvents"])
    graphs = list(graphs)
    calls = join_calls(profiled, graphs)
    steps, steps_found = find_steps(profiled, calls, infer_steps)
    step_of = step_index(steps)
    calls = by_order(calls, graphs, step_of)
    optimizer = _optimizer_calls(profiled, step_of, len(steps))
    tally = _time_calls(calls, step_of, len(steps), device)
    launch_ranges = _launch_ranges(profiled) if device == "cuda" else {}
    if device == "cuda":
        device_time, replays = _charge_kernels(profiled, tally, step_of, optimizer.holds, launch_ranges)
        _tie_replays(replays, tally, device_time, graphs, known)
    else:
        device_time = _time_cpu_launches(profiled, calls, tally, step_of)
    device_time.total = step_totals(profiled, step_of, len(steps), device, launch_ranges)
    sizes = collective_sizes(trace, device) if isinstance(trace, Path) else None
    return _result(profiled, steps, steps_found, device, tally, device_time, optimizer, sizes)


def step_totals(
    trace: ProfiledTrace,
    step_of: StepOf,
    steps: int,
    device: str,
    launch_ranges: dict[Any, TraceRange] | None = None,
) -> list[float]:
    """Per step, what ``StepTiming.total_us`` is the median of: GPU, every kernel whose launch (its CUDA runtime
    call or CPU range, by External id: ``launch_ranges``, read here where not given) lies in the step; CPU, the
    time inside compiled-graph calls. Needs no graph: the light pass over a rank reads it alone (``profiled_step.py``)."""
    totals = [0.0] * steps
    if device == "cuda":
        launches = _launch_ranges(trace) if launch_ranges is None else launch_ranges
        for kernel in trace.kernels:
            source = launches.get((kernel.get("args") or {}).get("External id"))
            if source is not None and (step := step_of(source)) is not None:
                totals[step] += float(kernel.get("dur", 0))
    else:
        for region in trace.ranges:
            if region.name.startswith(REGION_MARK) and (step := step_of(region)) is not None:
                totals[step] += region.duration
    return totals


@dataclass
class _Tally:
    """The attribution as the steps of ``attribute`` work it out, over the profiled steps."""

    steps: int
    # the compiled-graph calls in the steps (``_time_calls``)
    launches: dict[LaunchKey, LaunchTimes] = field(default_factory=dict)
    joins: dict[str, tuple[str, int]] = field(default_factory=dict)  # graph id -> how, and how many of its calls
    unjoined: list[TraceRange] = field(default_factory=list)  # of no graph (yet: a CUDA-graph replay may tie one)
    by_ops: set[LaunchKey] = field(default_factory=set)
    owner_of_id: dict[Any, LaunchKey] = field(default_factory=dict)  # external id -> its top-level launch
    cpu_time: dict[tuple[str, int, int], float] = field(default_factory=dict)  # (graph, position, step) -> µs
    region_graphs: list[tuple[TraceRange, GraphRecord]] = field(default_factory=list)
    graph_host_us: dict[str, list[float]] = field(default_factory=dict)  # graph id -> host time of its calls
    # GPU: the kernels each launch issued in the first step it ran, in order (``charge``)
    kernel_names: dict[LaunchKey, list[str]] = field(default_factory=dict)
    first_step: dict[LaunchKey, int] = field(default_factory=dict)
    # what no launch explains: name -> µs per step, and how many kernels or ranges; what ran outside every step
    unattributed: dict[str, list[float]] = field(default_factory=dict)
    unattributed_count: int = 0
    outside_count: int = 0
    outside_us: float = 0.0

    def joined(self, graph_id: str, how: JoinMethod) -> None:
        self.joins[graph_id] = (JOIN_METHODS[how], self.joins.get(graph_id, ("", 0))[1] + 1)

    def times(self, key: LaunchKey) -> LaunchTimes:
        """The times of a launch, zero in every step the first time it is seen."""
        found = self.launches.get(key)
        if found is None:
            found = self.launches[key] = LaunchTimes([0.0] * self.steps, [0] * self.steps)
        return found

    def unexplained(self, name: str, step: int, duration: float) -> None:
        self.unattributed.setdefault(name, [0.0] * self.steps)[step] += duration
        self.unattributed_count += 1

    def outside(self, duration: float) -> None:
        self.outside_count, self.outside_us = self.outside_count + 1, self.outside_us + duration

    def charge(self, owner: LaunchKey | None, name: str, step: int, duration: float) -> None:
        """A kernel's time to the launch that issued it, or to ``unattributed``."""
        if owner is None:
            self.unexplained(name, step, duration)
            return
        times = self.times(owner)
        times.per_step_us[step] += duration
        times.per_step_calls[step] += 1
        if self.first_step.setdefault(owner, step) == step:
            self.kernel_names.setdefault(owner, []).append(name)


@dataclass
class _DeviceTime:
    """Per step: the device time (GPU: every kernel's; CPU: the time inside compiled graphs) and the kernels'
    intervals; GPU: the time inside CUDA-graph replays, of which tied by position only, and under the optimizer."""

    total: list[float]
    intervals: list[list[tuple[float, float]]]
    replayed: list[float]
    approximate: list[float]
    optimizer: list[float]
    replays_tied_exactly: bool = False

    @classmethod
    def zero(cls, steps: int) -> _DeviceTime:
        return cls([0.0] * steps, [[] for _ in range(steps)], [0.0] * steps, [0.0] * steps, [0.0] * steps)


@dataclass(frozen=True)
class _Optimizer:
    ranges: list[TraceRange]  # the optimizer's outermost ranges inside the steps
    holds: Callable[[TraceRange], bool]  # whether a range starts inside one of them
    host_us: list[float]  # per step


def _optimizer_calls(trace: ProfiledTrace, step_of: StepOf, steps: int) -> _Optimizer:
    ranges = outermost(r for r in trace.ranges if r.name.startswith(OPTIMIZER_MARKS) and step_of(r) is not None)
    host_us = [0.0] * steps
    for r in ranges:
        if (step := step_of(r)) is not None:
            host_us[step] += r.duration
    return _Optimizer(ranges, containment(ranges), host_us)


def _time_calls(calls: list[Call], step_of: StepOf, steps: int, device: str) -> _Tally:
    """The calls in the steps, each joined to its graph, with each launch paired with its top-level range (and the
    ranges nested in it, whose external ids its kernels carry); CPU: the ranges no launch claimed are unattributed."""
    tally = _Tally(steps)
    for region, children, graph, how in calls:
        step = step_of(region)
        if step is None:
            continue
        if graph is None or how is None:
            tally.unjoined.append(region)
            continue
        tally.joined(graph.id, how)
        tally.region_graphs.append((region, graph))
        tally.graph_host_us.setdefault(graph.id, [0.0] * steps)[step] += region.duration
        pairs = _pair_launches(graph, children, tally.by_ops)
        for launch, (child, nested) in pairs:
            key = (graph.id, launch.position)
            tally.times(key)
            for r in nested:
                tally.owner_of_id[r.external_id] = key
            cpu_key = (graph.id, launch.position, step)
            tally.cpu_time[cpu_key] = tally.cpu_time.get(cpu_key, 0.0) + child.duration
        if device != "cuda":
            paired = {id(child) for _, (child, _) in pairs}
            for child, _ in children:
                if id(child) not in paired:
                    tally.unexplained(child.name, step, child.duration)
    return tally


def _pair_launches(graph: GraphRecord, children: list[Child], by_ops: set[LaunchKey]) -> list[tuple[Launch, Child]]:
    """Each launch of a call with its top-level range; a custom op without a range of its own with the ranges of
    the ops it ran (added to ``by_ops``)."""
    pairs = align(graph.launches, children)
    rangeless = by_their_ops(graph.launches, children, pairs)
    by_ops.update((graph.id, launch.position) for launch, _ in rangeless)
    return pairs + rangeless


def _charge_kernels(
    trace: ProfiledTrace,
    tally: _Tally,
    step_of: StepOf,
    under_optimizer: Callable[[TraceRange], bool],
    launch_ranges: dict[Any, TraceRange],
) -> tuple[_DeviceTime, list[tuple[TraceRange, list[ReplayedKernel]]]]:
    """GPU: each kernel in the steps charged to the launch whose range issued it; the kernels of CUDA-graph
    replays set apart, each replay with the ``cudaGraphLaunch`` call that issued it, for ``_tie_replays``."""
    graph_launches = _graph_launches(trace.events)
    device = _DeviceTime.zero(tally.steps)
    replays: dict[Any, list[ReplayedKernel]] = {}
    for kernel in trace.kernels:
        ext = (kernel.get("args") or {}).get("External id")
        source = launch_ranges.get(ext)
        step = step_of(source) if source is not None else None
        duration = float(kernel.get("dur", 0))
        if step is None or source is None:
            tally.outside(duration)
            continue
        start = float(kernel["ts"])
        device.intervals[step].append((start, start + duration))
        correlation = (kernel.get("args") or {}).get("correlation")
        if correlation in graph_launches:
            replays.setdefault(correlation, []).append((kernel, step, duration))
        else:
            owner = tally.owner_of_id.get(ext)
            if owner is None and under_optimizer(source):
                device.optimizer[step] += duration
            tally.charge(owner, kernel["name"], step, duration)
    return device, [(graph_launches[correlation], replay) for correlation, replay in replays.items()]


def _launch_ranges(trace: ProfiledTrace) -> dict[Any, TraceRange]:
    """External id -> the range that carries it: CUDA runtime calls (which place every kernel in its step,
    cudaGraphLaunch ones included) and CPU ranges."""
    runtime = [
        TraceRange(e["name"], float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e.get("tid"), ext)
        for e in trace.events
        if e.get("ph") == "X"
        and e.get("cat") == "cuda_runtime"
        and (ext := (e.get("args") or {}).get("External id")) is not None
    ]
    return {r.external_id: r for r in [*runtime, *trace.ranges] if r.external_id is not None}


def _graph_launches(events: list[dict[str, Any]]) -> dict[Any, TraceRange]:
    """The ``cudaGraphLaunch`` calls by their correlation id: a kernel's ``correlation`` names the runtime call
    that issued it, one of these for a replayed kernel."""
    return {
        e["args"]["correlation"]: TraceRange(e["name"], float(e["ts"]), float(e["ts"]), e.get("tid"), None)
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "cuda_runtime"
        and e.get("name") == "cudaGraphLaunch"
        and isinstance(e.get("args"), dict)
        and e["args"].get("correlation") is not None
    }


def _tie_replays(
    replays: list[tuple[TraceRange, list[ReplayedKernel]]],
    tally: _Tally,
    device: _DeviceTime,
    graphs: list[GraphRecord],
    known: dict[LaunchKey, list[str]] | None,
) -> None:
    """GPU: each replay's kernels charged to the launches of the graph whose call issued it (else of the graph
    whose kernels they best match, which joins a call no launch names tied), or to ``unattributed``."""
    exact = True
    for launch_call, replay in replays:
        names = [kernel["name"] for kernel, _, _ in replay]
        graph = enclosing_graph(launch_call, tally.region_graphs)
        if graph is None and (graph := best_graph(names, graphs)) is not None:
            tally.joined(graph.id, "replay")
            tally.unjoined = [
                r for r in tally.unjoined if not (r.tid == launch_call.tid and r.start <= launch_call.start <= r.end)
            ]
        if graph is None:
            for kernel, step, duration in replay:
                tally.charge(None, kernel["name"], step, duration)
            continue
        tie = tie_replay(names, graph, known)
        exact = exact and not tie.approximate and bool(known)
        for index, ((kernel, step, duration), owner) in enumerate(zip(replay, tie.owners, strict=True)):
            device.replayed[step] += duration
            if index in tie.approximate:
                device.approximate[step] += duration
            tally.charge(owner, kernel["name"], step, duration)
    device.replays_tied_exactly = bool(replays) and exact


def _time_cpu_launches(trace: ProfiledTrace, calls: list[Call], tally: _Tally, step_of: StepOf) -> _DeviceTime:
    """CPU: each launch's time is its range's, once per step it ran in; the ATen ops outside every compiled graph
    are unattributed (in a step) or outside."""
    for (graph_id, position, step), duration in tally.cpu_time.items():
        times = tally.launches[(graph_id, position)]
        times.per_step_us[step] += duration
        times.per_step_calls[step] += 1
    for op in eager_ops(trace.by_thread, calls):
        op_step = step_of(op)
        if op_step is None:
            tally.outside(op.duration)
        else:
            tally.unexplained(op.name, op_step, op.duration)
    return _DeviceTime.zero(tally.steps)


def _result(
    trace: ProfiledTrace,
    steps: list[TraceRange],
    steps_found: str,
    device: str,
    tally: _Tally,
    device_time: _DeviceTime,
    optimizer: _Optimizer,
    sizes: dict[str, float] | None,
) -> Attribution:
    cuda = device == "cuda"
    intervals = device_time.intervals
    return Attribution(
        steps=len(steps),
        device=device,
        launches=tally.launches,
        step_total_us=device_time.total,
        step_span_us=[max(e for _, e in iv) - min(s for s, _ in iv) if iv else 0.0 for iv in intervals],
        step_busy_us=[union(iv) for iv in intervals],
        unattributed={name: statistics.median(v) for name, v in tally.unattributed.items()},
        kernel_names=tally.kernel_names,
        replayed_us=device_time.replayed if cuda else [],
        approximate_us=device_time.approximate if cuda else [],
        replays_tied_exactly=cuda and device_time.replays_tied_exactly,
        steps_found=steps_found,
        joins=tally.joins,
        unjoined_calls=len(tally.unjoined),
        unattributed_count=tally.unattributed_count,
        outside_count=tally.outside_count,
        outside_us=tally.outside_us,
        by_ops=tally.by_ops,
        step_wall_us=[s.duration or s.end - s.start for s in steps],
        graph_host_us=tally.graph_host_us,
        optimizer_us=optimizer.host_us,
        optimizer_device_us=device_time.optimizer if cuda else [],
        optimizer_graphs={graph.id for region, graph in tally.region_graphs if optimizer.holds(region)},
        optimizer_ranges=len(optimizer.ranges),
        collectives=collectives_per_step(trace.events, len(steps), device, sizes),
    )
