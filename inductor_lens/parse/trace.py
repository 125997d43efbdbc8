"""Parse stage: the TORCH_TRACE structured log (``dedicated_log_torch_trace_*.log``).

Each record is a glog-prefixed line holding a JSON envelope, followed by its payload on lines that
start with a TAB; ``has_payload`` is the payload's md5 (the format tlparse reads). Logs can be
hundreds of MB, so they are streamed and only the payloads this stage uses are kept.

What is read here:
- ``inductor_output_code``: its md5 equals the md5 of the graph folder's ``output_code.py``, which
  ties each folder to its Dynamo compile id, and the provenance artifacts that follow it in the same
  compile id belong to that graph;
- ``compilation_metrics``: one DynamoFrame per compile id, plus torch/triton/CUDA versions.
Other record kinds are valid content that this version does not show; they are counted, not warned.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import DynamoFrame
from . import compat
from .diagnostics import Diagnostics

_KEPT_ARTIFACTS = {
    "inductor_provenance_tracking_node_mappings": "mappings",
    "inductor_provenance_tracking_kernel_stack_traces": "stack_traces",
}


@dataclass
class GraphTrace:
    """What the trace says about one compiled graph, keyed by its output code's md5."""

    compile_id: str
    mappings: dict[str, Any] | None = None
    stack_traces: dict[str, Any] | None = None


@dataclass
class TraceSummary:
    files: list[str] = field(default_factory=list)
    graphs: dict[str, GraphTrace] = field(default_factory=dict)
    frames: dict[str, DynamoFrame] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    record_kinds: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class _Envelope:
    kind: str
    body: Any
    meta: dict[str, Any]
    payload: str | None


def format_compile_id(meta: dict[str, Any]) -> str | None:
    """``[frame/frame_compile]``, ``_attempt`` when > 0, ``!ca/`` for compiled autograd (tlparse's style)."""
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
        last_graph: GraphTrace | None = None
        for envelope in _envelopes(path, where, diagnostics):
            summary.record_kinds[envelope.kind] += 1
            compile_id = format_compile_id(envelope.meta)
            if envelope.kind == "inductor_output_code" and compile_id is not None:
                md5 = envelope.meta.get("has_payload")
                if isinstance(md5, str):
                    last_graph = summary.graphs.setdefault(md5, GraphTrace(compile_id=compile_id))
            elif envelope.kind == "artifact" and isinstance(envelope.body, dict):
                slot = _KEPT_ARTIFACTS.get(str(envelope.body.get("name")))
                if (
                    slot
                    and last_graph is not None
                    and last_graph.compile_id == compile_id
                    and envelope.payload
                ):
                    try:
                        setattr(last_graph, slot, json.loads(envelope.payload))
                    except json.JSONDecodeError:
                        diagnostics.warn(where, f"artifact {envelope.body.get('name')}: payload is not JSON")
            elif envelope.kind == "compilation_metrics" and isinstance(envelope.body, dict):
                _metrics(envelope.body, compile_id, summary)
        diagnostics.files_parsed += 1
    return summary


def _metrics(metrics: dict[str, Any], compile_id: str | None, summary: TraceSummary) -> None:
    for key, name in (
        ("pytorch_version", "torch"),
        ("triton_version", "triton"),
        ("cuda_version", "cuda"),
        ("python_version", "python"),
    ):
        if isinstance(metrics.get(key), str) and metrics[key].strip():
            summary.versions[name] = metrics[key].split(" ")[0]
    frame_id = compile_id or metrics.get("compile_id")
    if not isinstance(frame_id, str):
        return
    summary.frames[frame_id] = DynamoFrame(
        compile_id=frame_id,
        function=metrics.get("co_name"),
        filename=metrics.get("co_filename"),
        line=metrics.get("co_firstlineno"),
        compile_time_s=metrics.get("entire_frame_compile_time_s"),
        graph_breaks=metrics.get("num_graph_breaks"),
        fail_reason=metrics.get("fail_reason"),
    )


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
            kind = _kind(parsed)
            keep = kind == "artifact" and str(parsed.get("artifact", {}).get("name")) in _KEPT_ARTIFACTS
            payload = [] if keep else None
        if header is not None:
            yield _finish(header, payload)


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
