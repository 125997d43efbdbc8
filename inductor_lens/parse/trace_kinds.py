"""Parse stage: the readers of the TORCH_TRACE record kinds this version shows (declared in ``readers.py``).

Each reader gets one ``TraceRecord`` (trace_records.py) and files what it finds in ``TraceSummary``, per
compile id:
- ``str``: the interned file names the stacks refer to;
- ``inductor_output_code``: its payload md5 equals the md5 of a graph folder's ``output_code.py``,
  which ties the folder to its compile id; the provenance artifacts that follow belong to that graph;
- ``chromium_event``: every span goes to the compile timeline (``trace_timeline.py``); CUDA-graph recordings
  (``CUDAGraphNode.record``) are also counted per compile id;
- ``dynamo_start`` (the Python stack that triggered the compile), ``dynamo_output_graph`` (its
  placeholders name the model's parameters), ``dynamo_cpp_guards_str``, ``compilation_metrics`` /
  ``bwd_compilation_metrics`` (timings, versions);
- the compile's IR stages: AOTAutograd's graphs and the pre- and post-grad graphs, as records or artifacts.
Dynamic shapes are read in ``trace_shapes.py``, the ``artifact`` kind in ``trace_artifacts.py``.
Records logged outside any compile (no compile id) are skipped.
"""

from __future__ import annotations

import re

from ..records import IrStage
from ..records.codec import int_or_none
from .diagnostics import Diagnostics
from .trace_records import GraphTrace, TraceRecord, TraceState, json_type, stack_lines

_PLACEHOLDER = re.compile(r'(\w+): "([^"]*)"')
# An IR stage's text is kept up to this many characters (a report of a 48-layer model stays small).
IR_STAGE_LIMIT = 1 << 20
_NUMBER = (int, float)


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


def read_dynamo_start(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    compile_id = record.compile_id
    if compile_id is None:
        return
    stack = record.body.get("stack") if isinstance(record.body, dict) else None
    if not isinstance(stack, list):
        record.skip(diagnostics, "has no stack list")
        return
    state.summary.frame(compile_id).stack = stack_lines(stack, record, state, diagnostics)


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
