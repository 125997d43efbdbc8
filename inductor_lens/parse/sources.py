"""Parse stage: the text of the source files that graphs, kernels and graph breaks point to.

Every such file that exists where the report is built is read, up to a size limit, wherever it lives:
a model from a library (transformers, torchvision) has its code under site-packages, and the ``# File:``
notes of its FX graphs point there. Only inductor-lens's own model process and torch's own files (the
wrapper frame of a compiled nn.Sequential, say) are left out. A report built
from a folder copied off another machine usually finds none; it then shows the code lines that torch
copied into its comments instead.
"""

from __future__ import annotations

from pathlib import Path

from ..records import DynamoFrame, GraphBreak, GraphRecord, SourceFile
from .diagnostics import Diagnostics
from .source_lines import is_tool_file, is_torch_file

SOURCE_SIZE_LIMIT = 1024 * 1024


def referenced_files(
    graphs: tuple[GraphRecord, ...], frames: tuple[DynamoFrame, ...], breaks: tuple[GraphBreak, ...]
) -> list[str]:
    names: dict[str, None] = {}
    for graph in graphs:
        for fx in graph.fx_graphs:
            names.update((n.source.filename, None) for n in fx.nodes if n.source is not None)
        for kernel in graph.kernels:
            names.update((s.filename, None) for s in kernel.source_lines)
    for frame in frames:
        if frame.filename:
            names[frame.filename] = None
    for graph_break in breaks:
        names.update((s.filename, None) for s in graph_break.user_stack)
    return [name for name in names if not is_tool_file(name) and not is_torch_file(name)]


def read_sources(
    graphs: tuple[GraphRecord, ...],
    frames: tuple[DynamoFrame, ...],
    breaks: tuple[GraphBreak, ...],
    diagnostics: Diagnostics,
) -> tuple[SourceFile, ...]:
    sources = []
    for name in referenced_files(graphs, frames, breaks):
        path = Path(name)
        try:
            if not path.is_file() or path.stat().st_size > SOURCE_SIZE_LIMIT:
                continue
            sources.append(SourceFile(path=name, text=path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            diagnostics.note(name, "source file could not be read")
    return tuple(sources)
