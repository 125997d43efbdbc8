"""Parse stage: the TORCH_TRACE structured log (``dedicated_log_torch_trace_*.log``).

Each record is a glog-prefixed line holding a JSON envelope, followed by its payload on lines that
start with a TAB; ``has_payload`` is the payload's md5 (the format tlparse reads). Logs can be
hundreds of MB, so they are streamed and only the payloads this stage uses are kept.

What is read here, per compile id (``frame/frame_compile``, ``_attempt`` after a restart):
- ``inductor_output_code``: its md5 equals the md5 of the graph folder's ``output_code.py``, which
  ties each folder to its compile id; the provenance artifacts that follow it belong to that graph;
- ``dynamo_start`` (the Python stack that triggered the compile), ``dynamo_output_graph`` (its
  placeholders name the model's parameters), ``dynamo_cpp_guards_str``, the artifacts
  ``dynamo_graph_break_reason`` and ``recompile_reasons``, and ``compilation_metrics`` /
  ``bwd_compilation_metrics`` (timings, versions);
- ``triton_kernel_info`` artifacts: per Triton kernel, the configs Inductor tried or fixed, coordinate
  descent, the autotune cache state and the kernel's compile time;
- ``str`` records: the interned file names the stacks refer to.
Other record kinds are valid content this version does not show; they are counted, not warned.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import SourceLine
from . import compat
from .diagnostics import Diagnostics

# Artifacts whose payload is kept, and the attribute of GraphTrace / FrameTrace it goes to.
_GRAPH_ARTIFACTS = {
    "inductor_provenance_tracking_node_mappings": "mappings",
    "inductor_provenance_tracking_kernel_stack_traces": "stack_traces",
}
_FRAME_ARTIFACTS = {"dynamo_graph_break_reason", "recompile_reasons", "triton_kernel_info"}
_FRAME_PAYLOADS = {"dynamo_cpp_guards_str", "dynamo_output_graph"}
_PLACEHOLDER = re.compile(r'(\w+): "([^"]*)"')


@dataclass
class GraphTrace:
    """What the trace says about one compiled graph, keyed by its output code's md5."""

    compile_id: str
    mappings: dict[str, Any] | None = None
    stack_traces: dict[str, Any] | None = None


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


@dataclass
class TraceSummary:
    files: list[str] = field(default_factory=list)
    graphs: dict[str, GraphTrace] = field(default_factory=dict)
    frames: dict[str, FrameTrace] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    record_kinds: Counter[str] = field(default_factory=Counter)

    def frame(self, compile_id: str) -> FrameTrace:
        return self.frames.setdefault(compile_id, FrameTrace(compile_id))


@dataclass(frozen=True)
class _Envelope:
    kind: str
    body: Any
    meta: dict[str, Any]
    payload: str | None


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


def read_traces(paths: list[Path], root: Path, diagnostics: Diagnostics) -> TraceSummary:
    summary = TraceSummary()
    for path in paths:
        where = _relative(path, root)
        summary.files.append(where)
        diagnostics.files_seen += 1
        strings: dict[int, str] = {}
        last_graph: GraphTrace | None = None
        for envelope in _envelopes(path, where, diagnostics):
            summary.record_kinds[envelope.kind] += 1
            compile_id = format_compile_id(envelope.meta)
            if envelope.kind == "str" and isinstance(envelope.body, list) and len(envelope.body) == 2:
                strings[int(envelope.body[1])] = str(envelope.body[0])
            elif envelope.kind == "inductor_output_code" and compile_id is not None:
                md5 = envelope.meta.get("has_payload")
                if isinstance(md5, str):
                    last_graph = summary.graphs.setdefault(md5, GraphTrace(compile_id=compile_id))
            elif envelope.kind == "artifact" and isinstance(envelope.body, dict):
                _artifact(envelope, compile_id, last_graph, summary, where, diagnostics)
            elif compile_id is None:
                continue
            elif envelope.kind == "dynamo_start" and isinstance(envelope.body, dict):
                summary.frame(compile_id).stack = _stack(envelope.body.get("stack"), strings)
            elif envelope.kind == "dynamo_cpp_guards_str" and envelope.payload:
                summary.frame(compile_id).guards = envelope.payload.strip("\n")
            elif envelope.kind == "dynamo_output_graph" and envelope.payload:
                summary.frame(compile_id).placeholders = _placeholders(envelope.payload)
            elif envelope.kind == "compilation_metrics" and isinstance(envelope.body, dict):
                summary.frame(compile_id).metrics = envelope.body
                _versions(envelope.body, summary)
            elif envelope.kind == "bwd_compilation_metrics" and isinstance(envelope.body, dict):
                summary.frame(compile_id).backward_metrics.append(envelope.body)
        diagnostics.files_parsed += 1
    return summary


def _artifact(
    envelope: _Envelope,
    compile_id: str | None,
    last_graph: GraphTrace | None,
    summary: TraceSummary,
    where: str,
    diagnostics: Diagnostics,
) -> None:
    name = str(envelope.body.get("name"))
    if name in _GRAPH_ARTIFACTS:
        if last_graph is not None and last_graph.compile_id == compile_id and envelope.payload:
            try:
                setattr(last_graph, _GRAPH_ARTIFACTS[name], json.loads(envelope.payload))
            except json.JSONDecodeError:
                diagnostics.warn(where, f"artifact {name}: payload is not JSON")
    elif name in _FRAME_ARTIFACTS and compile_id is not None and envelope.payload:
        frame = summary.frame(compile_id)
        if name == "dynamo_graph_break_reason":
            frame.graph_breaks.append(envelope.payload)
        elif name == "triton_kernel_info":
            try:
                info = json.loads(envelope.payload)
            except json.JSONDecodeError:
                diagnostics.warn(where, "artifact triton_kernel_info: payload is not JSON")
                return
            if isinstance(info, dict):
                frame.kernel_info.update({str(k): v for k, v in info.items() if isinstance(v, dict)})
        else:
            frame.recompile_reasons.extend(
                line.strip() for line in envelope.payload.splitlines() if line.strip()
            )


def _versions(metrics: dict[str, Any], summary: TraceSummary) -> None:
    for key, name in (
        ("pytorch_version", "torch"),
        ("triton_version", "triton"),
        ("cuda_version", "cuda"),
        ("python_version", "python"),
    ):
        if isinstance(metrics.get(key), str) and metrics[key].strip():
            summary.versions[name] = metrics[key].split(" ")[0]


def _stack(frames: Any, strings: dict[int, str]) -> list[SourceLine]:
    if not isinstance(frames, list):
        return []
    stack = []
    for frame in frames:
        if not isinstance(frame, dict) or not isinstance(frame.get("line"), int):
            continue
        filename = frame.get("filename")
        path = strings.get(filename, str(filename)) if isinstance(filename, int) else str(filename)
        stack.append(SourceLine(path, frame["line"], frame.get("name"), frame.get("loc")))
    return stack


def _placeholders(payload: str) -> list[tuple[str, str]]:
    """The ``forward(self, L_x_: "f32[...]", ...)`` parameters of Dynamo's output graph."""
    for line in payload.splitlines():
        stripped = line.strip()
        if stripped.startswith("def forward(self"):
            return _PLACEHOLDER.findall(stripped)
    return []


def _envelopes(path: Path, where: str, diagnostics: Diagnostics) -> Iterator[_Envelope]:
    header: dict[str, Any] | None = None
    payload: list[str] | None = None
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        diagnostics.warn(where, f"cannot read: {exc.strerror}")
        return
    with handle:
        for number, line in enumerate(handle, start=1):
            if line.startswith("\t"):
                if payload is not None:
                    payload.append(line[1:].rstrip("\n"))
                continue
            if header is not None:
                yield _finish(header, payload)
                header, payload = None, None
            if not line.strip():
                continue
            match = compat.TRACE_LINE.match(line.rstrip("\n"))
            if match is None:
                diagnostics.warn(where, f"line {number}: not a structured-trace record")
                continue
            try:
                parsed = json.loads(match["json"])
            except json.JSONDecodeError:
                diagnostics.warn(where, f"line {number}: envelope is not valid JSON")
                continue
            if not isinstance(parsed, dict):
                diagnostics.warn(where, f"line {number}: envelope is not a JSON object")
                continue
            header = parsed
            payload = [] if _keeps_payload(parsed) else None
        if header is not None:
            yield _finish(header, payload)


def _keeps_payload(header: dict[str, Any]) -> bool:
    kind = _kind(header)
    if kind == "artifact":
        artifact = header.get("artifact")
        name = artifact.get("name") if isinstance(artifact, dict) else None
        return name in _GRAPH_ARTIFACTS or name in _FRAME_ARTIFACTS
    return kind in _FRAME_PAYLOADS


def _kind(header: dict[str, Any]) -> str:
    return next((k for k in header if k not in compat.TRACE_ENVELOPE_FIELDS), "unknown")


def _finish(header: dict[str, Any], payload: list[str] | None) -> _Envelope:
    kind = _kind(header)
    meta = {k: v for k, v in header.items() if k in compat.TRACE_ENVELOPE_FIELDS}
    return _Envelope(
        kind=kind, body=header.get(kind), meta=meta, payload="\n".join(payload) if payload else None
    )


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name
