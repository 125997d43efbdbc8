"""Report stage: the first kernel whose output diverges (``compile --find-divergence``), for the overview.

Each buffer the search judged is joined to the report's own graph (by its output code's hash, or failing
that by its kernels' names), so its kernel links to its page and its model line to source.html.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import CompileRun, GraphRecord
from ..records.numerics import (
    BufferCheck,
    NumericDivergence,
    OptionTrial,
    divergence_headline,
    output_code_hash,
)
from ..records.pages import launch_page


@dataclass(frozen=True)
class BufferRow:
    check: BufferCheck
    label: str  # the kernel, or the extern call
    href: str | None  # its page (an extern call: its launch on the graph page)
    line: str  # "model.py:20"
    line_href: str | None
    nodes: tuple[str, ...] = ()  # every post-grad node the kernel fuses

    @property
    def first(self) -> bool:
        return not self.check.within


@dataclass(frozen=True)
class DivergenceView:
    record: NumericDivergence
    rows: tuple[BufferRow, ...]
    first: BufferRow | None
    fixes: tuple[OptionTrial, ...]
    headline: str


def divergence_view(run: CompileRun, line_urls: dict[tuple[str, int], str]) -> DivergenceView | None:
    found = run.capture.divergence if run.capture else None
    if found is None:
        return None
    graphs = {g.index: _report_graph(run, g.code_hash, g.kernels) for g in found.graphs}
    rows = tuple(_row(check, graphs.get(check.graph), line_urls) for check in found.checks)
    first = rows[-1] if found.first is not None and rows else None
    return DivergenceView(found, rows, first, found.fixes, divergence_headline(found))


def _report_graph(run: CompileRun, code_hash: str, kernels: tuple[str, ...]) -> GraphRecord | None:
    by_hash = next((g for g in run.graphs if output_code_hash(g.output_code) == code_hash), None)
    if by_hash is not None or not kernels:
        return by_hash
    return next((g for g in run.graphs if set(kernels) <= {k.name for k in g.kernels}), None)


def _row(check: BufferCheck, graph: GraphRecord | None, line_urls: dict[tuple[str, int], str]) -> BufferRow:
    label = check.target.removeprefix("extern_kernels.") if check.kind == "extern" else check.target
    href = None if graph is None else launch_page(graph.id, check.kind == "extern", check.target, check.launch)
    kernel = graph.kernel(check.target) if graph is not None else None
    source = check.source
    line = source.label.rsplit("/", 1)[-1] if source else ""
    line_href = line_urls.get((source.filename, source.line)) if source else None
    nodes = kernel.post_grad_nodes if kernel is not None else ()
    return BufferRow(check, label, href, line, line_href, nodes)
