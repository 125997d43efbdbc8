"""Stage 2 of the pipeline (capture -> parse -> records -> bench -> report): debug folder -> CompileRun.

``parse_debug_folder(path)`` reads a TORCH_COMPILE_DEBUG tree (plus the TORCH_TRACE log and the
process log when they are there) into the data model of ``records.py``. One module per artifact:
``output_code``, ``fx_graph``, ``ir``, ``provenance``, ``trace`` / ``trace_records`` (its readers:
``trace_kinds``, ``trace_artifacts``, ``trace_shapes``, ``trace_graphs``), ``logs``,
``autotune``; ``registry`` dispatches every file, trace record kind and artifact to the parser
``readers`` declares for it (``known`` lists what is valid and not shown); ``layout`` finds the files,
``graph`` joins them per graph, ``frames`` builds Dynamo frames and graph breaks, ``compat`` holds
every torch-version difference. Unknown content and content of the wrong shape are counted in
``CompileRun.stats``; ``strict=True`` raises ParseError instead.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..options import MODE_OPTIONS, infer_mode
from ..records import CaptureOutcome, CompileRun, CompileSettings, Environment, GraphBreak, GraphRecord
from ..version import __version__
from . import compat, readers, registry
from .autotune import link_tables
from .diagnostics import Diagnostics
from .frames import dynamo_frame, fold_restarts, graph_breaks, own_frame, own_graph_breaks
from .graph import (
    GraphContext,
    parse_graph_files,
    parse_graph_folder,
    traced_folders,
    traced_graph_files,
)
from .layout import DebugLayout, locate
from .readers import REGISTRY
from .sources import read_sources
from .trace import TraceSummary, read_traces

__all__ = ["parse_debug_folder"]

LOG_TEXT_LIMIT = 2 * 1024 * 1024


def parse_debug_folder(
    folder: Path,
    *,
    strict: bool = False,
    allow_empty: bool = False,
    title: str | None = None,
    settings: CompileSettings | None = None,
    environment: Environment | None = None,
    capture: CaptureOutcome | None = None,
    now: Callable[[], _dt.datetime] | None = None,
    layout: DebugLayout | None = None,
) -> CompileRun:
    """Read everything under ``folder``; what the capture stage measured can be passed in.

    ``allow_empty`` accepts a folder without any debug output (a capture that failed early). ``layout``:
    the files to read, where ``folder`` holds more than one process's (one rank of several, ``parse/ranks.py``).
    """
    layout = layout or locate(folder, allow_empty=allow_empty)
    diagnostics = Diagnostics(strict=strict)
    bare_trace = not layout.graph_folders and bool(layout.trace_files)
    # The trace's copies of each graph's files stand in for what an FX graph cache hit leaves out: the files of
    # its folder, or (an AOTAutograd cache hit) the folder itself.
    traces = read_traces(list(layout.trace_files), layout.root, diagnostics, keep_graphs=bool(layout.trace_files))
    log_text = _read_logs(layout, diagnostics)
    context = GraphContext(
        layout=layout,
        traces=traces,
        logged_compile_ids=_from_log(readers.COMPILE_IDS, log_text, diagnostics, {}),
        diagnostics=diagnostics,
        multiple_runs=len(layout.run_dirs) > 1,
    )
    if bare_trace:
        graphs = _unique_ids(parse_graph_files(traced_graph_files(t), context) for t in traces.traced_graphs)
        if graphs:
            _note_bare_trace(layout, traces, diagnostics)
    else:
        graphs = _unique_ids(_folder_graphs(layout, traces, context))
    frame_traces = fold_restarts(traces.frames)
    own_breaks = own_graph_breaks(frame_traces)
    built = capture.model_built if capture is not None else ()
    frames = tuple(own_frame(dynamo_frame(trace, own_breaks.get(trace.compile_id)), built) for trace in frame_traces)
    breaks = tuple(b for trace in frame_traces for b in graph_breaks(trace))
    if not layout.trace_files:
        breaks = tuple(_debug_log_breaks(layout, diagnostics))
    if not graphs and (capture is None or capture.status == "ok"):
        diagnostics.warn(
            layout.relative(layout.root),
            "no graph output code in the TORCH_TRACE log, and no debug folder"
            if bare_trace
            else "no graph folders (a warm cache leaves them empty)",
        )
    runnable_facts, runnable_config = _runnable_header(layout, diagnostics)
    inferred = _infer_environment(traces, runnable_facts, graphs, "TORCH_TRACE log" if bare_trace else "debug folder")
    clock = now or (lambda: _dt.datetime.now(_dt.timezone.utc))
    timeline = traces.timeline.finish(diagnostics)
    return CompileRun(
        title=title or _default_title(layout, capture),
        created=clock().replace(microsecond=0).isoformat(),
        tool_version=__version__,
        source_dir=str(layout.root),
        environment=_merge_environment(environment, inferred),
        settings=settings or _settings_from_options(runnable_config, bool(runnable_facts or runnable_config)),
        capture=capture,
        frames=frames,
        graphs=graphs,
        graph_breaks=breaks,
        autotune=link_tables(_from_log(readers.AUTOTUNE, log_text, diagnostics, []), graphs),
        sources=read_sources(graphs, frames, breaks, diagnostics),
        log_text=log_text,
        stats=diagnostics.stats(),
        timeline=timeline,
    )


def _folder_graphs(layout: DebugLayout, traces: TraceSummary, context: GraphContext) -> Iterator[GraphRecord]:
    """Each graph folder's graph, then each graph of the trace that Inductor's caches served without a folder."""
    traced = traces.traced_graphs
    matched = traced_folders(layout.graph_folders, traced, context.logged_compile_ids)
    if len(layout.trace_files) != 1 or context.multiple_runs:
        matched = None  # compile ids and folder names repeat across processes
    for folder in layout.graph_folders:
        index = matched.get(folder.path) if matched is not None else None
        yield parse_graph_folder(folder, context, traced[index] if index is not None else None)
    used = set(matched.values()) if matched is not None else set(range(len(traced)))
    for index, graph in enumerate(traced):
        if index not in used and graph.fx_cache == "hit":
            yield parse_graph_files(traced_graph_files(graph), context)


def _note_bare_trace(layout: DebugLayout, traces: TraceSummary, diagnostics: Diagnostics) -> None:
    """What a report of a TORCH_TRACE log alone lacks, said once."""
    where = ", ".join(traces.files) or layout.relative(layout.root)
    diagnostics.note(
        where,
        f"no debug folder: {len(traces.traced_graphs)} graph(s) rebuilt from the TORCH_TRACE log's output code and "
        f"FX graphs; not in a trace: Inductor's IR dumps ({', '.join(compat.TRACE_MISSING_FILES)})",
    )


def _unique_ids(graphs: Iterable[GraphRecord]) -> tuple[GraphRecord, ...]:
    """Graph ids name files; two folder names that slug to the same id get a numeric suffix."""
    seen: set[str] = set()
    unique = []
    for graph in graphs:
        graph_id, n = graph.id, 1
        while graph_id in seen:
            n += 1
            graph_id = f"{graph.id}-{n}"
        seen.add(graph_id)
        unique.append(replace(graph, id=graph_id))
    return tuple(unique)


def _read_logs(layout: DebugLayout, diagnostics: Diagnostics) -> str:
    parts = []
    for path in layout.log_files:
        diagnostics.files_seen += 1
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            diagnostics.warn(layout.relative(path), f"cannot read: {exc.strerror}")
            continue
        diagnostics.files_parsed += 1
        if len(layout.log_files) > 1:
            text = f"==> {layout.relative(path)} <==\n{text}"
        parts.append(text)
    text = "\n".join(parts)
    if len(text) > LOG_TEXT_LIMIT:
        text = text[:LOG_TEXT_LIMIT] + f"\n[... {len(text) - LOG_TEXT_LIMIT} more characters not shown]\n"
    return text


def _from_log(goes_to: str, log_text: str, diagnostics: Diagnostics, default: Any) -> Any:
    (parser,) = REGISTRY.of("process log", goes_to)
    return registry.run(parser, "process log", diagnostics, log_text, default=default)


def _debug_log_breaks(layout: DebugLayout, diagnostics: Diagnostics) -> list[GraphBreak]:
    """Without a TORCH_TRACE log, the graph breaks Dynamo's own debug log names."""
    found: list[GraphBreak] = []
    for run_dir in layout.run_dirs:
        path = run_dir / "torchdynamo" / "debug.log"
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            diagnostics.warn(layout.relative(path), f"cannot read: {exc.strerror}")
            continue
        found.extend(_from_log(readers.DEBUG_LOG_BREAKS, text, diagnostics, []))
    return found


def _runnable_header(layout: DebugLayout, diagnostics: Diagnostics) -> tuple[dict[str, str], dict[str, Any]]:
    """Versions, GPU and non-default config, from the first graph folder's repro script."""
    for folder in layout.graph_folders:
        for parser in REGISTRY.of("graph file", readers.SETTINGS):
            path = folder.path / parser.reads
            if path.is_file():
                where = layout.relative(path)
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError as exc:
                    diagnostics.warn(where, f"cannot read: {exc.strerror}")
                    continue
                return registry.run(parser, where, diagnostics, text, where, diagnostics, default=({}, {}))
    return {}, {}


def _infer_environment(
    traces: TraceSummary, facts: dict[str, str], graphs: tuple[GraphRecord, ...], source: str
) -> Environment:
    device: Mapping[str, Any] = {}
    backends = set()
    for graph in graphs:
        for kernel in graph.kernels:
            backends.add(kernel.backend)
            described = kernel.launch_config.get("device")
            if isinstance(described, dict):
                device = described
    capability = None
    if isinstance(device.get("major"), int) and isinstance(device.get("cc"), int):
        capability = f"{device['major']}.{device['cc'] % 10}"
    device_type = device.get("type") or ("cpu" if backends == {"cpp"} else None)
    return Environment(
        torch_version=traces.versions.get("torch") or facts.get("version"),
        triton_version=traces.versions.get("triton"),
        python_version=traces.versions.get("python"),
        cuda_version=traces.versions.get("cuda") or facts.get("cuda version"),
        device_type=device_type if isinstance(device_type, str) else None,
        device_name=facts.get("gpu"),
        device_capability=capability,
        multiprocessor_count=device.get("multi_processor_count")
        if isinstance(device.get("multi_processor_count"), int)
        else None,
        source=source,
    )


def _merge_environment(measured: Environment | None, inferred: Environment) -> Environment:
    """Measured facts win; the debug folder fills the gaps."""
    if measured is None:
        return inferred
    filled = {
        name: getattr(inferred, name)
        for name in Environment.__dataclass_fields__
        if getattr(measured, name) is None and name != "source"
    }
    return replace(measured, **filled)


def _settings_from_options(config: dict[str, Any], read: bool) -> CompileSettings:
    """Settings of a debug folder alone: the options fx_graph_runnable.py wrote (``read``: one was found),
    and the mode they pin."""
    options = _compile_choices(config)
    mode = infer_mode(options) if read else None
    if mode is None:
        return CompileSettings(mode="unknown", options=options)
    mode_options = {k: v for k, v in options.items() if k in MODE_OPTIONS.get(mode, {})}
    rest = {k: v for k, v in options.items() if k not in mode_options}
    return CompileSettings(mode=mode, options=rest, mode_options=mode_options, mode_inferred=True)


def _compile_choices(config: dict[str, Any]) -> dict[str, Any]:
    """Non-default Inductor config minus the ``trace.*`` settings, which steer debug output, not code."""
    return {k: v for k, v in config.items() if not k.startswith("trace.")}


def _default_title(layout: DebugLayout, capture: CaptureOutcome | None) -> str:
    if capture is not None:
        return capture.model_name
    # a capture folder copied off another machine names its model in the spec the capture ran with
    try:
        model_path = json.loads((layout.root / "spec.json").read_text(encoding="utf-8"))["model_path"]
        return Path(model_path).stem or layout.root.name
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return layout.root.name
