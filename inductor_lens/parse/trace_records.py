"""Parse stage: one reader per TORCH_TRACE record kind and artifact this version shows.

Each reader gets one ``TraceRecord`` (its kind, JSON body, envelope fields and, when the registry
asked for it, its payload) and files what it finds in ``TraceSummary``, per compile id:
- ``str``: the interned file names the stacks refer to;
- ``inductor_output_code``: its payload md5 equals the md5 of a graph folder's ``output_code.py``,
  which ties the folder to its compile id; the provenance artifacts that follow belong to that graph;
- ``chromium_event``: every span goes to the compile timeline (``trace_timeline.py``); CUDA-graph recordings
  (``CUDAGraphNode.record``) are also counted per compile id;
- ``dynamo_start`` (the Python stack that triggered the compile), ``dynamo_output_graph`` (its
  placeholders name the model's parameters), ``dynamo_cpp_guards_str``, ``compilation_metrics`` /
  ``bwd_compilation_metrics`` (timings, versions);
- dynamic shapes (``create_symbol``, ``symbolic_shape_specialization``, ``guard_added``): in
  ``trace_shapes.py``;
- the ``artifact`` kind, dispatched on its name through the registry: the provenance maps,
  ``dynamo_graph_break_reason``, ``recompile_reasons``, ``triton_kernel_info`` (per Triton kernel,
  the configs Inductor tried or fixed, coordinate descent, autotune cache state and compile time) and the
  lookups in AOTAutograd's cache and the FX graph cache (``aotautograd_cache_*``, ``fx_graph_cache_*``).
Before using a record, each reader checks that it has the shape torch writes (the JSON types of the
fields it reads); a record of another shape is a counted warning naming its line, never an exception.
Records logged outside any compile (no compile id) are skipped, except ``triton_kernel_info`` from a
process that ran a graph's ``output_code.py`` (a sibling log in the same trace folder): it carries the
config each kernel's autotuner chose at run time (``best_config``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from ..records import CacheLookup, IrStage, ShapeGuard, ShapeSpecialization, ShapeSymbol, SourceLine
from ..records.codec import int_or_none
from ..records.wording import CACHE_COMPONENT_CHARS, CACHE_COMPONENTS_KEPT
from . import compat, registry
from .diagnostics import Diagnostics
from .trace_timeline import TimelineCollector

_PLACEHOLDER = re.compile(r'(\w+): "([^"]*)"')
# An IR stage's text is kept up to this many characters (a report of a 48-layer model stays small).
IR_STAGE_LIMIT = 1 << 20
_NUMBER = (int, float)


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


# --- record kinds ----------------------------------------------------------------------------


def read_str(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    body = record.body
    if not (isinstance(body, list) and len(body) == 2 and isinstance(body[0], str) and int_or_none(body[1]) is not None):
        record.skip(diagnostics, "is not [text, index]")
        return
    state.strings[body[1]] = body[0]


def read_output_code(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is None:
        return
    md5 = record.meta.get("has_payload")
    if not isinstance(md5, str):
        record.skip(diagnostics, "has no payload md5")
        return
    state.last_graph = state.summary.graphs.setdefault(md5, GraphTrace(compile_id=compile_id))


def read_artifact(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """The ``artifact`` kind: dispatched on the artifact's name."""
    name = record.body.get("name") if isinstance(record.body, dict) else None
    if not isinstance(name, str):
        record.skip(diagnostics, "has no name string")
        return
    parser = state.registry.find("trace artifact", name)
    if parser is None:
        diagnostics.warn(record.where, registry.not_known("trace artifact", name))
    elif parser.parse is not None:
        registry.run(parser, record.where, diagnostics, record, state, diagnostics)


def read_dynamo_start(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is None:
        return
    stack = record.body.get("stack") if isinstance(record.body, dict) else None
    if not isinstance(stack, list):
        record.skip(diagnostics, "has no stack list")
        return
    state.summary.frame(compile_id).stack = stack_lines(stack, record, state, diagnostics)


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


def read_guards(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is not None and record.payload:
        state.summary.frame(compile_id).guards = record.payload.strip("\n")


def read_output_graph(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """The ``forward(self, L_x_: "f32[...]", ...)`` parameters of Dynamo's output graph, and the graph as
    the compile's first IR stage."""
    compile_id = record.compile_id
    if compile_id is None or not record.payload:
        return
    read_ir_stage(record, state, diagnostics)
    for line in record.payload.splitlines():
        stripped = line.strip()
        if stripped.startswith("def forward(self"):
            state.summary.frame(compile_id).placeholders = _PLACEHOLDER.findall(stripped)
            return
    state.summary.frame(compile_id).placeholders = []


def read_ir_stage(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """A form of the compile's graph (or AOTAutograd's metadata of it), kept as text in the order logged;
    past IR_STAGE_LIMIT characters it is cut at a line's end, and what was cut is counted."""
    compile_id = record.compile_id
    if compile_id is None or record.payload is None:
        return
    name = record.body.get("name") if record.kind == "artifact" and isinstance(record.body, dict) else record.kind
    text = record.payload
    if len(text) > IR_STAGE_LIMIT:
        text = text[:IR_STAGE_LIMIT].rsplit("\n", 1)[0] + "\n"
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    state.summary.frame(compile_id).stages.append(IrStage(str(name), text, lines, len(record.payload) - len(text)))


# The compilation_metrics fields the report reads, with the JSON type torch writes (null allowed).
_METRIC_TYPES: dict[str, tuple[type, ...]] = {
    "co_name": (str,),
    "co_filename": (str,),
    "co_firstlineno": (int,),
    "entire_frame_compile_time_s": _NUMBER,
    "num_graph_breaks": (int,),
    "fail_reason": (str,),
    "fail_type": (str,),
    "fail_user_frame_filename": (str,),
    "fail_user_frame_lineno": (int,),
    "graph_op_count": (int,),
    "graph_node_count": (int,),
    "graph_input_count": (int,),
    "cache_size": (int,),
    "accumulated_cache_size": (int,),
    "non_compliant_ops": (list,),
    "compliant_custom_ops": (list,),
    "guard_count": (int,),
    "restart_reasons": (list,),
    "recompile_reason": (str,),
    "cudagraph_skip_reason": (str,),
}


def read_metrics(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is None:
        return
    if not isinstance(record.body, dict):
        record.skip(diagnostics, "is not a JSON object")
        return
    metrics = dict(record.body)
    for key, types in _METRIC_TYPES.items():
        value = metrics.get(key)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            diagnostics.warn(
                record.where,
                f"line {record.line}: compilation_metrics {key} is a JSON {json_type(value)}; left out",
            )
            del metrics[key]
    state.summary.frame(compile_id).metrics = metrics
    for key, name in (
        ("pytorch_version", "torch"),
        ("triton_version", "triton"),
        ("cuda_version", "cuda"),
        ("python_version", "python"),
    ):
        if isinstance(metrics.get(key), str) and metrics[key].strip():
            state.summary.versions[name] = metrics[key].split(" ")[0]


def read_backward_metrics(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is None:
        return
    if not isinstance(record.body, dict):
        record.skip(diagnostics, "is not a JSON object")
        return
    state.summary.frame(compile_id).backward_metrics.append(record.body)


_CUDAGRAPH_RECORD = "CUDAGraphNode.record"


def read_chromium_event(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """A timeline event: kept in the compile timeline; CUDA-graph recordings (cudagraph trees'
    ``CUDAGraphNode.record``) are also counted under the compile id in their args."""
    event = record.json_payload(diagnostics, "chromium_event")
    if event is None:
        return
    state.summary.timeline.add(event, record, diagnostics)
    if event.get("name") != _CUDAGRAPH_RECORD:
        return
    args, ts, ph = event.get("args"), event.get("ts"), event.get("ph")
    compile_id = args.get("compile_id") if isinstance(args, dict) else None
    if not isinstance(compile_id, str) or not isinstance(ts, _NUMBER) or ph not in ("B", "E"):
        record.skip(diagnostics, "is a CUDA-graph recording without a compile id, time or phase")
        return
    frame = state.summary.frame(compile_id)
    if ph == "B":
        frame.cudagraph_open.append(float(ts))
    elif frame.cudagraph_open:
        frame.cudagraph_recordings += 1
        frame.cudagraph_record_us += max(float(ts) - frame.cudagraph_open.pop(), 0.0)


# --- a bare trace's graphs ------------------------------------------------------------------------


def keep_graph_file(record: TraceRecord, state: TraceState, file_name: str) -> None:
    """A payload that stands for a graph folder's file: held for the compile id until its output code,
    which closes the graph; its kind is ``traced_graph_kind``'s."""
    compile_id = record.compile_id
    if compile_id is None or record.payload is None:
        return
    files = state.pending_files.setdefault(compile_id, {})
    files[file_name] = compat.plain_fx_types(record.payload) if file_name.startswith("fx_graph_") else record.payload
    if file_name != "output_code.py":
        return
    del state.pending_files[compile_id]
    kind = traced_graph_kind(compile_id, files, state)
    where = f"{record.where}:{record.line}"
    state.summary.traced_graphs.append(TracedGraph(compile_id, kind, where, files))


def traced_graph_kind(compile_id: str, files: dict[str, str], state: TraceState) -> str:
    """The kind of the graph whose output code closes now, from the AOTAutograd graphs logged since the compile
    id's last output code. One compile id can make several graphs: DDP's optimizer splits a frame into one
    submodule per bucket, each traced by AOTAutograd (joint, forward and backward graphs logged) and its forward
    compiled at once, while each backward is compiled when it first runs, with no AOTAutograd graph logged
    before it. So: an inference graph logged since: inference; a forward graph: forward. With none (a backward,
    or graphs served from AOTAutograd's cache), the graph's own inputs tell: a backward takes the gradients of
    the forward's outputs (``tangents_1``), a forward its inputs as ``primals_1``; else a graph after a forward
    of this compile id is its backward; else unknown."""
    frame = state.summary.frames.get(compile_id)
    stages = frame.stages if frame else []
    since = stages[state.stages_closed.get(compile_id, 0):]
    state.stages_closed[compile_id] = len(stages)
    kinds = {compat.TRACE_AOT_GRAPH_KINDS[s.name] for s in since if s.name in compat.TRACE_AOT_GRAPH_KINDS}
    if "inference" in kinds:
        return "inference"
    if "forward" in kinds:
        return "forward"
    texts = (files.get("fx_graph_readable.py"), files.get("fx_graph_transformed.py"))
    signature = next((line for text in texts for line in (text or "").splitlines()
                      if line.strip().startswith("def forward(self")), "")  # fmt: skip
    if "tangents_" in signature:
        return "backward"
    if "primals_" in signature:
        return "forward"
    if any(g.compile_id == compile_id and g.kind == "forward" for g in state.summary.traced_graphs):
        return "backward"
    return "unknown"


# --- artifacts -------------------------------------------------------------------------------


def read_node_mappings(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    _graph_json(record, state, diagnostics, "inductor_provenance_tracking_node_mappings", "mappings")


def read_kernel_stack_traces(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    _graph_json(
        record, state, diagnostics, "inductor_provenance_tracking_kernel_stack_traces", "stack_traces"
    )


def _graph_json(
    record: TraceRecord, state: TraceState, diagnostics: Diagnostics, name: str, attribute: str
) -> None:
    """Provenance artifacts belong to the graph whose output code was logged just before them."""
    graph = state.last_graph
    if graph is None or graph.compile_id != record.compile_id or not record.payload:
        return
    data = record.json_payload(diagnostics, name)
    if data is not None:
        setattr(graph, attribute, data)


def read_cache_lookup(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """A lookup in AOTAutograd's cache or Inductor's FX graph cache (``compat.CACHE_LOOKUP_ARTIFACTS``), filed
    under its compile id. An FX graph cache key also names the graph just logged: profiles name graphs by it."""
    compile_id = record.compile_id
    name = record.body.get("name") if isinstance(record.body, dict) else None
    if compile_id is None or not record.payload or name not in compat.CACHE_LOOKUP_ARTIFACTS:
        return
    data = record.json_payload(diagnostics, str(name))
    if data is None:
        return
    for key, types in compat.CACHE_LOOKUP_FIELDS.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            diagnostics.warn(
                record.where,
                f"line {record.line}: artifact {name} {key} is a JSON {json_type(value)}; left out",
            )
            del data[key]
    cache, result = compat.CACHE_LOOKUP_ARTIFACTS[name]
    components = [_readable_component(str(c)) for c in data.get("components") or ()]
    kept = components[:CACHE_COMPONENTS_KEPT]
    nanoseconds = data.get("time_saved_ns" if result == "hit" else "time_taken_ns")
    lookup = CacheLookup(
        cache=cache,
        result=result,
        compile_id=compile_id,
        key=data.get("key"),
        detail=data.get("cache_status_detailed") or "",
        bypass_reason=data.get("cache_bypass_reason") or "",
        seconds=nanoseconds / 1e9 if nanoseconds is not None else None,
        components=tuple(c[:CACHE_COMPONENT_CHARS] for c in kept),
        components_total=len(components),
        components_cut=sum(len(c) > CACHE_COMPONENT_CHARS for c in kept),
    )
    state.summary.frame(compile_id).cache_lookups.append(lookup)
    graph = state.last_graph
    if cache == "FX graph" and lookup.key and graph is not None and graph.compile_id == compile_id:
        graph.cache_key = lookup.key
    traced = state.summary.traced_graphs
    if cache == "FX graph" and traced and traced[-1].compile_id == compile_id and traced[-1].fx_cache is None:
        traced[-1] = replace(traced[-1], fx_cache=result)


# Control characters (and U+FFFD, what torch's decoding left of other bytes) in a component: a pickle printed as text.
_BINARY = re.compile("[\x00-\x08\x0b-\x1f\x7f\ufffd]")


def _readable_component(text: str) -> str:
    """A key component as shown: ``[hash] autograd_config: <pickled bytes>`` keeps its name, not its bytes."""
    if not _BINARY.search(text):
        return text
    name = text.split(": ", 1)[0]
    return f"{name}: <{len(text):,} characters of binary data (a pickled value), not shown>"


def read_graph_break(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is not None and record.payload:
        state.summary.frame(compile_id).graph_breaks.append(record.payload)


def read_recompile_reasons(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is not None and record.payload:
        state.summary.frame(compile_id).recompile_reasons.extend(
            line.strip() for line in record.payload.splitlines() if line.strip()
        )


# triton_kernel_info fields holding configs: lists of [name, value] pairs (or, in older releases, text).
_CONFIG_FIELDS = ("best_config", "only_config", "coordesc_tuning_start_config")


def read_kernel_info(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """Per compile id; a record without one comes from another process that loaded a graph's module (a
    sibling log: ``python output_code.py``, a compile worker) and is filed under that module's folder."""
    compile_id = record.compile_id
    if not record.payload:
        return
    if compile_id is None:
        folder = _module_folder(record, state)
        if folder is None:
            return
        kernels = state.summary.module_kernel_info.setdefault(folder, {})
    else:
        kernels = state.summary.frame(compile_id).kernel_info
    info = record.json_payload(diagnostics, "triton_kernel_info")
    if info is None:
        return
    for kernel, entry in info.items():
        if not isinstance(entry, dict):
            diagnostics.warn(
                record.where,
                f"line {record.line}: triton_kernel_info of {kernel} is a JSON {json_type(entry)}; skipped",
            )
            continue
        entry = dict(entry)
        for key in (*_CONFIG_FIELDS, "autotune_cache_state"):
            value = entry.get(key)
            if key == "autotune_cache_state":
                wrong = value is not None and not isinstance(value, str)
            else:
                wrong = isinstance(value, list) and not all(
                    isinstance(pair, list) and len(pair) == 2 for pair in value
                )
            if wrong:
                diagnostics.warn(
                    record.where,
                    f"line {record.line}: triton_kernel_info {key} of {kernel} has another shape; left out",
                )
                del entry[key]
        if compile_id is None:
            entry["logged_in"] = record.where
        kernels[kernel] = entry


def _module_folder(record: TraceRecord, state: TraceState) -> tuple[str, str] | None:
    """(run folder, graph folder) of the ``output_code.py`` on the record's stack, if any."""
    stack = record.meta.get("stack")
    for frame in stack if isinstance(stack, list) else ():
        filename = frame.get("filename") if isinstance(frame, dict) else None
        path = state.strings.get(filename) if isinstance(filename, int) else filename
        if isinstance(path, str) and path.endswith("/output_code.py"):
            parts = path.split("/")
            return (parts[-4] if len(parts) >= 4 else "", parts[-2])
    return None
