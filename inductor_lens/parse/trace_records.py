"""Parse stage: a TORCH_TRACE record, and what its readers file it in.

``TraceRecord`` is one record (its kind, JSON body, envelope fields and, when the registry asked for it, its
payload). The readers file what they find in ``TraceSummary``: per compile id (``FrameTrace``), per graph
(``GraphTrace``, keyed by its output code's md5; ``TracedGraph``, a graph of a bare trace); ``TraceState`` is
what they share while one trace file is read. The readers, one per record kind and artifact this version shows
(each declared in ``readers.py``):

    trace_kinds.py      the record kinds: interned file names, output code, the compile's stack, guards, Dynamo's
                        output graph, the IR stages, compilation metrics, timeline events
    trace_artifacts.py  the ``artifact`` kind, dispatched on its name: provenance, cache lookups, graph breaks,
                        recompile reasons, ``triton_kernel_info``
    trace_shapes.py     dynamic shapes
    trace_graphs.py     a bare trace's graphs, from the payloads that stand for a graph folder's files

Before using a record, each reader checks that it has the shape torch writes (the JSON types of the
fields it reads); a record of another shape is a counted warning naming its line, never an exception.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..records import CacheLookup, IrStage, ShapeGuard, ShapeSpecialization, ShapeSymbol, SourceLine
from . import registry
from .diagnostics import Diagnostics
from .trace_timeline import TimelineCollector


@dataclass
class GraphTrace:
    """What the trace says about one compiled graph, keyed by its output code's md5."""

    compile_id: str
    mappings: dict[str, Any] | None = None
    stack_traces: dict[str, Any] | None = None
    cache_key: str | None = None


@dataclass
class FrameTrace:
    """What the trace says about one compile id."""

    compile_id: str
    metrics: dict[str, Any] = field(default_factory=dict)
    backward_metrics: list[dict[str, Any]] = field(default_factory=list)
    stack: list[SourceLine] = field(default_factory=list)
    guards: str = ""
    graph_breaks: list[str] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    # Placeholders of Dynamo's output graph, in order: (name, type) such as
    # ("L_self_modules_fc1_parameters_weight_", "f32[4096, 1024][1024, 1]cuda:0").
    placeholders: list[tuple[str, str]] = field(default_factory=list)
    # Triton kernel name -> what Inductor recorded when compiling it (configs, autotune cache, time).
    kernel_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Dynamic shapes, in the order the trace logged them.
    symbols: list[ShapeSymbol] = field(default_factory=list)
    specializations: list[ShapeSpecialization] = field(default_factory=list)
    shape_guards: list[ShapeGuard] = field(default_factory=list)
    # CUDA graphs recorded at run time for this compile's graphs: the CUDAGraphNode.record spans.
    cudagraph_recordings: int = 0
    cudagraph_record_us: float = 0.0
    cudagraph_open: list[float] = field(default_factory=list)
    # The graph's forms the trace logged (Dynamo's, pre-grad, AOT, post-grad), in order.
    stages: list[IrStage] = field(default_factory=list)
    # Its lookups in AOTAutograd's cache and the FX graph cache, in order.
    cache_lookups: list[CacheLookup] = field(default_factory=list)
    # The attempts folded into this one (frames.fold_restarts): "0/0" for "0/0_1".
    restarted: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TracedGraph:
    """A graph rebuilt from a bare TORCH_TRACE log: the graph-folder files its records stand for."""

    compile_id: str
    kind: str  # "forward", "backward", "inference", or "unknown"
    where: str  # the trace file and the line of its output code
    files: dict[str, str]  # file name (as in a graph folder) -> text
    # The result of its FX graph cache lookup ("hit", "miss", "bypass"), logged just after its output code.
    fx_cache: str | None = None


@dataclass
class TraceSummary:
    files: list[str] = field(default_factory=list)
    # Only when read for a bare trace (read_traces(keep_graphs=True)), in the order they were logged.
    traced_graphs: list[TracedGraph] = field(default_factory=list)
    graphs: dict[str, GraphTrace] = field(default_factory=dict)
    frames: dict[str, FrameTrace] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    record_kinds: Counter[str] = field(default_factory=Counter)
    # triton_kernel_info logged by other processes that ran a graph's module, by (run folder, graph folder).
    module_kernel_info: dict[tuple[str, str], dict[str, dict[str, Any]]] = field(default_factory=dict)
    # Every chromium_event span of every log (trace_timeline.py).
    timeline: TimelineCollector = field(default_factory=TimelineCollector)

    def frame(self, compile_id: str) -> FrameTrace:
        return self.frames.setdefault(compile_id, FrameTrace(compile_id))


@dataclass(frozen=True)
class TraceRecord:
    kind: str
    body: Any
    meta: dict[str, Any]
    payload: str | None
    where: str  # the trace file
    line: int  # the line of its envelope
    process: int | None = None  # the process id of the line's glog prefix

    @property
    def compile_id(self) -> str | None:
        return format_compile_id(self.meta)

    def skip(self, diagnostics: Diagnostics, problem: str) -> None:
        """A record of the wrong shape: counted, named by its line, and left out."""
        diagnostics.warn(self.where, f"line {self.line}: {self.kind} record {problem}; skipped")

    def json_payload(self, diagnostics: Diagnostics, name: str) -> dict[str, Any] | None:
        """The payload as a JSON object, or a warning."""
        try:
            data = json.loads(self.payload or "")
        except (ValueError, RecursionError):
            diagnostics.warn(self.where, f"line {self.line}: artifact {name}: payload is not JSON")
            return None
        if not isinstance(data, dict):
            diagnostics.warn(
                self.where,
                f"line {self.line}: artifact {name}: payload is a JSON {json_type(data)}, not an object",
            )
            return None
        return data


@dataclass
class TraceState:
    """What the readers share while one trace file is read."""

    summary: TraceSummary
    registry: registry.Registry
    strings: dict[int, str] = field(default_factory=dict)
    last_graph: GraphTrace | None = None
    # A bare trace: per compile id, the graph files logged since its last output code.
    pending_files: dict[str, dict[str, str]] = field(default_factory=dict)
    # A bare trace: per compile id, how many of its IR stages were logged up to its last output code.
    stages_closed: dict[str, int] = field(default_factory=dict)


def format_compile_id(meta: dict[str, Any]) -> str | None:
    """``frame/frame_compile``, ``_attempt`` when > 0, ``!ca/`` for compiled autograd (tlparse's style)."""
    frame, compile_ = meta.get("frame_id"), meta.get("frame_compile_id")
    if frame is None or compile_ is None:
        return None
    text = f"{frame}/{compile_}"
    if meta.get("attempt"):
        text += f"_{meta['attempt']}"
    if meta.get("compiled_autograd_id") is not None:
        text = f"!{meta['compiled_autograd_id']}/{text}"
    return text


def json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def stack_lines(
    frames: list[Any], record: TraceRecord, state: TraceState, diagnostics: Diagnostics
) -> list[SourceLine]:
    stack = []
    for frame in frames:
        if not isinstance(frame, dict) or not isinstance(frame.get("line"), int):
            continue
        name, loc = frame.get("name"), frame.get("loc")
        if not isinstance(name, (str, type(None))) or not isinstance(loc, (str, type(None))):
            record.skip(diagnostics, "has a stack frame whose name or code is not a string")
            continue
        filename = frame.get("filename")
        path = state.strings.get(filename, str(filename)) if isinstance(filename, int) else str(filename)
        stack.append(SourceLine(path, frame["line"], name, loc))
    return stack
