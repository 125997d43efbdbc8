"""Report stage: the compile timeline on the compilation page, and its Chrome trace-event export.

Built from ``CompileRun.timeline`` alone (a report re-rendered from lens.json draws the same). Processes whose
spans overlap in time share a chart and its time axis; a process that ran later (a graph's ``output_code.py``
run on its own) gets a chart of its own, so a compile of seconds is not squeezed by a gap of minutes. Each
process and thread is a lane; spans are stacked by nesting depth and coloured by the part of torch.compile
they belong to. ``timeline_export`` writes the spans as a Chrome trace (``compile_timeline.json``) that
Perfetto and chrome://tracing open, with each process under its own id (torch writes pid 0 in every event).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..records import CompileRun, CompileTimeline, TimelineSpan
from ..records.analysis import RunAnalysis
from ..version import __version__
from .env import format_seconds
from .folders import TIMELINE_EXPORT

# Past this many spans, the inline chart draws the longest (unfinished ones always); the export has them all.
MAX_DRAWN = 4_000
TOP_SPANS = 20
ROW_PX = 15
MARKER_PX = 10  # the strip above a lane's spans where its instant events are marked
# A span is labelled inside its box where the box is at least this share of the chart (about 40 px of 1,300).
LABEL_PERCENT = 3.0
NARROW_PERCENT = 0.3  # about 4 px of 1,300: the box is drawn wider than it is


@dataclass(frozen=True)
class Family:
    key: str
    label: str
    pattern: re.Pattern[str]


# The part of torch.compile a span belongs to, by its name: the first family that matches (names seen in torch
# 2.11, 2.13 and 2.14.1 logs; Scheduler.simple_overlap first seen 2.14.1; tests/unit/test_compile_timeline.py
# checks that none of them falls to "other").
FAMILIES = tuple(
    Family(key, label, re.compile(pattern))
    for key, label, pattern in (
        ("cudagraphs", "CUDA graphs", r"CUDAGraph|cudagraph"),
        ("autotune", "autotuning, benchmarking", r"[Aa]utotun|benchmark|_precompiling$"),
        ("dynamo", "Dynamo: tracing, guards", r"^(dynamo|entire_frame_compile|compile_attempt_|bytecode_tracing|"
         r"insert_deferred_runtime_asserts|build_guards|gc$|automatic_dynamic|pgo\.)"),
        ("aot", "AOTAutograd", r"^(aot_|create_aot|backend_compile|min_cut|entire_backward_compile|compile_fx\.<locals>)"),
        ("inductor", "Inductor: passes, lowering, scheduling", r"^(inductor_compile|fx_codegen_and_compile|_recursive_|"
         r"pass\.|GraphLowering\.(run|compile_to_fn)|Scheduler\.(__init__|fused_nodes|simple_overlap)|additional_fake_tensor_prop)"),
        ("codegen", "code generation, compiling kernels", r"[Cc]odegen|code_gen|generate|compile_file|PyCodeCache|"
         r"async_compile|reload_kernel"),
        ("cache", "caches", r"(?i)cache|TritonBundler|_key$"),
        ("other", "other", r""),
    )
)  # fmt: skip


def family_of(name: str) -> str:
    return next(f.key for f in FAMILIES if f.pattern.search(name))


@dataclass(frozen=True)
class SpanBox:
    left: float  # percent of the chart's width
    width: float
    top_px: int
    family: str
    label: str  # drawn inside the box where it is wide enough
    tip: str
    unfinished: bool = False

    @property
    def narrow(self) -> bool:
        """Drawn over its neighbours, so that it can still be hovered."""
        return self.width < NARROW_PERCENT


@dataclass(frozen=True)
class Marker:
    """An instant event (a cache hit or miss, an automatic-dynamic decision)."""

    left: float
    family: str
    tip: str


@dataclass(frozen=True)
class Lane:
    title: str  # "process 994"
    detail: str  # its log, its compiles, its spans
    height_px: int
    boxes: tuple[SpanBox, ...]
    markers: tuple[Marker, ...]


@dataclass(frozen=True)
class Chart:
    title: str
    ticks: tuple[tuple[float, str], ...]  # (percent, label)
    lanes: tuple[Lane, ...]


@dataclass(frozen=True)
class SpanTotal:
    """All spans of one name: how often, how long in all, and how much of that in no nested span (self)."""

    name: str
    family: str
    count: int
    total_s: float
    self_s: float
    longest_s: float
    compile_ids: str


@dataclass(frozen=True)
class TimelineView:
    timeline: CompileTimeline
    charts: tuple[Chart, ...] = ()
    totals: tuple[SpanTotal, ...] = ()
    names: int = 0  # distinct span names
    families: tuple[Family, ...] = ()  # those drawn, in FAMILIES' order
    spans: int = 0  # spans and instants kept
    instants: int = 0
    unfinished: int = 0
    not_drawn: int = 0
    wall_s: float = 0.0  # first event to last
    compile_ids: int = 0
    export_url: str = ""

    @property
    def empty(self) -> bool:
        return not self.timeline.spans


def timeline_view(run: CompileRun, analysis: RunAnalysis) -> TimelineView:
    timeline = run.timeline
    spans = timeline.spans
    if not spans:
        return TimelineView(timeline)
    origin = min(s.start_us for s in spans)
    drawn = _drawn(spans)
    charts = tuple(_chart(timeline, group, drawn, origin) for group in _groups(timeline))
    families = {family_of(s.name) for s in spans}
    return TimelineView(
        timeline=timeline,
        charts=charts,
        totals=_totals(spans, analysis.span_nesting)[:TOP_SPANS],
        names=len({s.name for s in spans if s.kind != "instant"}),
        families=tuple(f for f in FAMILIES if f.key in families),
        spans=len(spans),
        instants=sum(s.kind == "instant" for s in spans),
        unfinished=sum(s.kind == "unfinished" for s in spans),
        not_drawn=len(spans) - len(drawn),
        wall_s=(max(s.end_us for s in spans) - origin) / 1e6,
        compile_ids=len({s.compile_id for s in spans if s.compile_id}),
        export_url=TIMELINE_EXPORT,
    )


def _drawn(spans: Sequence[TimelineSpan]) -> set[int]:
    """Indexes of the spans the chart draws: all, or past MAX_DRAWN the unfinished, the instants and the longest."""
    if len(spans) <= MAX_DRAWN:
        return set(range(len(spans)))
    must = [i for i, s in enumerate(spans) if s.kind != "span"]
    longest = sorted(
        (i for i, s in enumerate(spans) if s.kind == "span"), key=lambda i: -spans[i].duration_us
    )
    return set(must[:MAX_DRAWN]) | set(longest[: max(MAX_DRAWN - len(must), 0)])


def _groups(timeline: CompileTimeline) -> list[list[int]]:
    """Processes whose spans overlap in time, together (each group one chart), in the order they started."""
    extent: dict[int, tuple[float, float]] = {}
    for s in timeline.spans:
        first, last = extent.get(s.process, (s.start_us, s.end_us))
        extent[s.process] = (min(first, s.start_us), max(last, s.end_us))
    groups: list[list[int]] = []
    group_end = -math.inf
    for process in sorted(extent, key=lambda p: extent[p]):
        start, end = extent[process]
        if groups and start <= group_end:
            groups[-1].append(process)
            group_end = max(group_end, end)
        else:
            groups.append([process])
            group_end = end
    return groups


def _chart(timeline: CompileTimeline, processes: list[int], drawn: set[int], origin: float) -> Chart:
    members = [(i, s) for i, s in enumerate(timeline.spans) if s.process in processes]
    start = min(s.start_us for _, s in members)
    length = max(max(s.end_us for _, s in members) - start, 1.0)
    lanes = []
    for process in processes:
        threads = sorted({s.thread for _, s in members if s.process == process})
        for thread in threads:
            lane = [(i, s) for i, s in members if s.process == process and s.thread == thread]
            lanes.append(
                _lane(timeline, process, thread, len(threads) > 1, lane, drawn, start, length, origin)
            )
    names = ", ".join(_process_name(timeline, p) for p in processes)
    offset = (start - origin) / 1e6
    title = f"{names}: {format_seconds(length / 1e6)}" + (
        f", starting {format_seconds(offset)} after the first event" if offset > 0 else ""
    )
    return Chart(title=title, ticks=_ticks(length / 1e6), lanes=tuple(lanes))


def _lane(
    timeline: CompileTimeline,
    process: int,
    thread: int,
    several_threads: bool,
    lane: list[tuple[int, TimelineSpan]],
    drawn: set[int],
    start: float,
    length: float,
    origin: float,
) -> Lane:
    instants = [s for i, s in lane if s.kind == "instant" and i in drawn]
    offset = MARKER_PX if instants else 0
    boxes = []
    depth = 0
    for i, s in lane:
        if s.kind == "instant" or i not in drawn:
            continue
        depth = max(depth, s.depth)
        width = 100.0 * s.duration_us / length
        boxes.append(
            SpanBox(
                left=round(100.0 * (s.start_us - start) / length, 3),
                width=round(width, 3),
                top_px=offset + s.depth * ROW_PX,
                family=family_of(s.name),
                label=s.name if width >= LABEL_PERCENT else "",
                tip=_tip(s, origin),
                unfinished=s.kind == "unfinished",
            )
        )
    markers = tuple(
        Marker(round(100.0 * (s.start_us - start) / length, 3), family_of(s.name), _tip(s, origin))
        for s in instants
    )
    info = timeline.processes[process]
    compiles = list(dict.fromkeys(s.compile_id for _, s in lane if s.compile_id))
    detail = [info.trace_file.rsplit("/", 1)[-1]]
    detail.append(
        f"compile{'s' if len(compiles) > 1 else ''} {', '.join(compiles[:8])}{' …' if len(compiles) > 8 else ''}"
        if compiles
        else "no compile ids: a process that ran compiled code or a compile worker"
    )
    detail.append(f"{len(lane)} span{'s' if len(lane) != 1 else ''}")
    title = _process_name(timeline, process) + (f", thread {thread}" if several_threads else "")
    height = offset + ((depth + 1) * ROW_PX if boxes else 0)
    return Lane(title=title, detail=" · ".join(detail), height_px=height, boxes=tuple(boxes), markers=markers)


def _process_name(timeline: CompileTimeline, process: int) -> str:
    pid = timeline.processes[process].pid
    return f"process {pid}" if pid is not None else f"log {timeline.processes[process].trace_file}"


def _tip(span: TimelineSpan, origin: float) -> str:
    if span.kind == "instant":
        head = f"{span.name} (instant)"
    else:
        head = f"{span.name}: {format_seconds(span.duration_us / 1e6)}"
    where = [
        f"[{span.compile_id}]" if span.compile_id else "no compile id",
        f"at +{(span.start_us - origin) / 1e6:.3f} s",
    ]
    lines = [head, " · ".join(where)]
    if span.kind == "unfinished":
        lines.append("unfinished: the log has no end for it (drawn to its process's last event)")
    lines.extend(f"{key}: {value}" for key, value in span.args.items())
    return "\n".join(lines)


def _ticks(seconds: float) -> tuple[tuple[float, str], ...]:
    """About 8 evenly spaced round times across the chart."""
    raw = seconds / 8
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    ticks = []
    value = 0.0
    while value <= seconds * 1.0001:
        ticks.append((round(100.0 * value / seconds, 3), format_seconds(value) if value else "0"))
        value += step
    return tuple(ticks)


def _totals(spans: Sequence[TimelineSpan], placed: Mapping[int, tuple[int, int | None]]) -> tuple[SpanTotal, ...]:
    """Per span name, by total time: its self time is what no span nested in it covers (``placed``: each span's
    row and innermost parent, ``RunAnalysis.span_nesting``)."""
    nested: dict[int, float] = {}
    for i, (_, parent) in placed.items():
        if parent is not None:
            nested[parent] = nested.get(parent, 0.0) + spans[i].duration_us
    rows: dict[str, list[int]] = {}
    for i in sorted(placed):
        rows.setdefault(spans[i].name, []).append(i)
    totals = []
    for name, members in rows.items():
        ids = list(dict.fromkeys(cid for i in members if (cid := spans[i].compile_id)))
        totals.append(
            SpanTotal(
                name=name,
                family=family_of(name),
                count=len(members),
                total_s=sum(spans[i].duration_us for i in members) / 1e6,
                self_s=sum(max(spans[i].duration_us - nested.get(i, 0.0), 0.0) for i in members) / 1e6,
                longest_s=max(spans[i].duration_us for i in members) / 1e6,
                compile_ids=", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else ""),
            )
        )
    return tuple(sorted(totals, key=lambda t: (-t.total_s, t.name)))


def timeline_export(run: CompileRun) -> str:
    """The spans as a Chrome trace (``{"traceEvents": [...]}``): complete events (``X``) for spans, instants as
    they were, each process under its own pid with its log as its name."""
    timeline = run.timeline
    pids = _export_pids(timeline)
    events: list[dict[str, object]] = []
    for index, process in enumerate(timeline.processes):
        label = f"{_process_name(timeline, index)} · {process.trace_file}"
        events.append(
            {"name": "process_name", "ph": "M", "pid": pids[index], "tid": 0, "args": {"name": label}}
        )
    for span in timeline.spans:
        args: dict[str, object] = {"compile_id": span.compile_id or "None", **span.args}
        event: dict[str, object] = {
            "name": span.name,
            "cat": "dynamo_timed",
            "ph": "i" if span.kind == "instant" else "X",
            "ts": span.start_us,
            "pid": pids[span.process],
            "tid": span.thread,
            "args": args,
        }
        if span.kind == "instant":
            event["s"] = "p"
        else:
            event["dur"] = span.duration_us
        if span.kind == "unfinished":
            args["unfinished"] = "the log has no end event: drawn to the process's last event"
        events.append(event)
    other = {
        "generator": f"inductor-lens {__version__}",
        "source": run.source_dir,
        "spans_left_out": timeline.cut,
        "longest_left_out_us": timeline.cut_longest_us,
        "unmatched_begins": timeline.unmatched_begins,
        "unmatched_ends": timeline.unmatched_ends,
    }
    return (
        json.dumps(
            {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}, separators=(",", ":")
        )
        + "\n"
    )


def _export_pids(timeline: CompileTimeline) -> list[int]:
    """Each process's own id; a process without one, or whose id another log also used, a free number."""
    pids: list[int] = []
    for process in timeline.processes:
        pid = process.pid
        if pid is None or pid in pids:
            pid = max([*pids, *(p.pid or 0 for p in timeline.processes)]) + 1
        pids.append(pid)
    return pids
