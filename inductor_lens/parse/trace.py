"""Parse stage: the TORCH_TRACE structured log (``dedicated_log_torch_trace_*.log``).

Each record is a glog-prefixed line holding a JSON envelope, followed by its payload on lines that
start with a TAB; ``has_payload`` is the payload's md5 (the format tlparse reads). Logs can be
hundreds of MB, so they are streamed and only the payloads a registered reader asks for are kept.

Every record goes through the registry (``readers.py``): its kind, and for the ``artifact`` kind its
name, picks the reader in ``trace_kinds.py`` or ``trace_artifacts.py``, or is known and not shown (counted
only), or is not known to this version: a counted warning, an error under ``--strict``. Every kind is counted in
``TraceSummary.record_kinds``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import compat, registry
from .diagnostics import Diagnostics
from .readers import REGISTRY
from .trace_graphs import keep_graph_file
from .trace_records import (
    FrameTrace,
    GraphTrace,
    TracedGraph,
    TraceRecord,
    TraceState,
    TraceSummary,
    format_compile_id,
)
from .trace_timeline import glog_process

__all__ = ["FrameTrace", "GraphTrace", "TraceSummary", "TracedGraph", "format_compile_id", "read_traces"]

# Envelope fields that hold a compile id; torch writes them as integers.
_ID_FIELDS = ("frame_id", "frame_compile_id", "attempt", "compiled_autograd_id")


def read_traces(
    paths: list[Path], root: Path, diagnostics: Diagnostics, *, keep_graphs: bool = False
) -> TraceSummary:
    """``keep_graphs``: a bare trace (no debug folder): also keep the payloads that stand for a graph
    folder's files (``compat.TRACE_GRAPH_FILES``), as ``TraceSummary.traced_graphs``."""
    summary = TraceSummary()
    for path in paths:
        where = _relative(path, root)
        summary.files.append(where)
        diagnostics.files_seen += 1
        state = TraceState(summary=summary, registry=REGISTRY)
        for record in _records(path, where, diagnostics, keep_graphs):
            summary.record_kinds[record.kind or "unknown"] += 1
            if not record.kind:
                diagnostics.warn(where, f"line {record.line}: record has no kind; skipped")
                continue
            parser = REGISTRY.find("trace record", record.kind)
            if parser is None:
                diagnostics.warn(where, registry.not_known("trace record", record.kind))
            elif (parser.parse is not None or keep_graphs) and _ids_are_ints(record, diagnostics):
                if keep_graphs and (file_name := compat.trace_graph_file(record.kind, record.body)):
                    keep_graph_file(record, state, file_name)
                if parser.parse is not None:
                    registry.run(parser, where, diagnostics, record, state, diagnostics)
        diagnostics.files_parsed += 1
    return summary


def _ids_are_ints(record: TraceRecord, diagnostics: Diagnostics) -> bool:
    for key in _ID_FIELDS:
        value = record.meta.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            record.skip(diagnostics, f"has a {key} that is not an integer")
            return False
    return True


def _records(path: Path, where: str, diagnostics: Diagnostics, keep_graphs: bool) -> Iterator[TraceRecord]:
    header: dict[str, Any] | None = None
    header_line = 0
    process: int | None = None
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
                yield _finish(header, payload, where, header_line, process)
                header, payload = None, None
            if not line.strip():
                continue
            match = compat.TRACE_LINE.match(line.rstrip("\n"))
            if match is None:
                diagnostics.warn(where, f"line {number}: not a structured-trace record")
                continue
            try:
                parsed = json.loads(match["json"])
            except (ValueError, RecursionError):
                diagnostics.warn(where, f"line {number}: envelope is not valid JSON")
                continue
            if not isinstance(parsed, dict):
                diagnostics.warn(where, f"line {number}: envelope is not a JSON object")
                continue
            header, header_line, process = parsed, number, glog_process(line)
            keep = _keeps_payload(parsed) or (keep_graphs and compat.trace_graph_file(_kind(parsed), parsed.get(_kind(parsed))) is not None)
            payload = [] if keep else None
        if header is not None:
            yield _finish(header, payload, where, header_line, process)


def _keeps_payload(header: dict[str, Any]) -> bool:
    """Only the payloads a registered reader asks for are kept (a log may be hundreds of MB)."""
    kind = _kind(header)
    if kind == "artifact":
        artifact = header.get("artifact")
        parser = REGISTRY.find("trace artifact", artifact.get("name") if isinstance(artifact, dict) else None)
    else:
        parser = REGISTRY.find("trace record", kind)
    return parser is not None and parser.payload


def _kind(header: dict[str, Any]) -> str:
    return next((k for k in header if k not in compat.TRACE_ENVELOPE_FIELDS), "")


def _finish(
    header: dict[str, Any], payload: list[str] | None, where: str, line: int, process: int | None
) -> TraceRecord:
    kind = _kind(header)
    meta = {k: v for k, v in header.items() if k in compat.TRACE_ENVELOPE_FIELDS}
    return TraceRecord(
        kind=kind,
        body=header.get(kind),
        meta=meta,
        payload="\n".join(payload) if payload else None,
        where=where,
        line=line,
        process=process,
    )


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name
