"""Report stage: the graph page's view model (launches, drawings, IR, provenance, symbols), from records and
their analysis."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from ..records import CompileRun, DynamoFrame, GraphRecord, ShapeSymbol
from ..records.analysis import RunAnalysis
from .drawing import (
    CATEGORY_COLOURS,
    ROLE_LABELS,
    Drawing,
    DrawingPlan,
    KernelGroup,
    draw,
    plan_fx_drawings,
    plan_kernel_drawings,
)
from .text_view import GraphText, graph_texts
from .views import (
    code_line_url,
    file_name,
    frame_anchor,
    frame_of,
    kernel_url,
    launch_category,
    launch_url,
    text_url,
)

# Where a symbol's hint was read (ShapeSymbol.hint_from), as the graph page says it.
HINT_FROM_LABELS = {
    "benchmark harness": "the benchmark harness (get_args() in output_code.py)",
    "call()": "call(), from its arguments at the harness's values",
    "trace": "the trace (create_symbol)",
    "": "not recorded",
}


@dataclass(frozen=True)
class SymbolRow:
    symbol: ShapeSymbol
    hint_from: str
    text: str  # "s53=24"


@dataclass(frozen=True)
class GraphPage:
    run: CompileRun
    graph: GraphRecord
    launches: tuple[dict[str, Any], ...]
    kernel_drawings: tuple[Drawing, ...]
    fx_drawings: tuple[Drawing, ...]
    legend: tuple[tuple[str, str], ...]
    roles: tuple[tuple[str, str], ...]
    # (text, its page's url from this page): FX graphs, scheduler IR, generated code
    texts: tuple[tuple[GraphText, str], ...]
    fusion_summary: str
    provenance_rows: tuple[dict[str, Any], ...]
    frame: DynamoFrame | None
    frame_url: str | None
    unlaunched: tuple[str, ...] = field(default_factory=tuple)
    symbols: tuple[SymbolRow, ...] = ()

    @property
    def kernel_parts(self) -> tuple[Drawing, ...]:
        """The parts of a large graph's kernel drawing, each on a page of its own."""
        return tuple(d for d in self.kernel_drawings if d.page is not None)

    @property
    def fx_parts(self) -> tuple[Drawing, ...]:
        return tuple(d for d in self.fx_drawings if d.page is not None)

    @property
    def inline_kernel_drawings(self) -> tuple[Drawing, ...]:
        """What the graph page itself shows: the whole drawing, or the overview of its parts."""
        return tuple(d for d in self.kernel_drawings if d.page is None)

    @property
    def inline_fx_drawings(self) -> tuple[Drawing, ...]:
        return tuple(d for d in self.fx_drawings if d.page is None)

    @property
    def partitioned(self) -> bool:
        """Whether the launches carry CUDA-graph partition numbers (a column of their own)."""
        return any(launch.partition is not None for launch in self.graph.launches)

    @property
    def timed(self) -> bool:
        return any(launch.timing is not None for launch in self.graph.launches)


def node_groups(graph: GraphRecord, url_prefix: str = "") -> dict[str, KernelGroup]:
    """Post-grad FX node name -> the kernel (or extern call) it was computed in."""
    groups: dict[str, KernelGroup] = {}
    kernels = {k.name: k for k in graph.kernels}
    provenance = graph.provenance.kernel_to_post if graph.provenance else {}
    for launch in graph.launches:
        if launch.kind == "extern":
            nodes = provenance.get(launch.handle or "", ())
            group = KernelGroup(
                f"launch{launch.position}",
                f"#{launch.position} {launch.label}",
                "extern",
                url_prefix + launch_url(graph, launch),
            )
        else:
            kernel = kernels.get(launch.target)
            if kernel is None:
                continue
            nodes = tuple(n for m in kernel.node_mappings for n in m.aten_nodes) + kernel.post_grad_nodes
            group = KernelGroup(
                kernel.name, kernel.name, kernel.category, url_prefix + kernel_url(graph, kernel.name)
            )
        for node in nodes:
            groups.setdefault(node, group)
    return groups


@dataclass(frozen=True)
class DrawingPartPage:
    """One part of a large graph's drawing, on its own page, with its neighbours."""

    graph: GraphRecord
    drawing: Drawing
    view: str  # "kernels" or "fx"
    previous: Drawing | None
    next: Drawing | None
    legend: tuple[tuple[str, str], ...]
    roles: tuple[tuple[str, str], ...]

    def link(self, other: Drawing) -> str:
        return file_name(other.page or "")


def drawing_part_pages(page: GraphPage) -> dict[str, DrawingPartPage]:
    """``{url: page}`` for every part of the graph's drawings that has a page of its own."""
    pages = {}
    for view, parts, roles in (("kernels", page.kernel_parts, ()), ("fx", page.fx_parts, page.roles)):
        for index, part in enumerate(parts):
            pages[part.page or ""] = DrawingPartPage(
                page.graph,
                part,
                view,
                parts[index - 1] if index > 0 else None,
                parts[index + 1] if index + 1 < len(parts) else None,
                page.legend,
                roles,
            )
    return pages


@dataclass(frozen=True)
class GraphDrawings:
    kernels: tuple[Drawing, ...]
    fx: tuple[Drawing, ...]


def draw_graphs(run: CompileRun, analysis: RunAnalysis) -> dict[str, GraphDrawings]:
    """Every drawing of every graph, laid out in one go (in parallel, from the layout cache where it can)."""
    planned: list[tuple[str, list[DrawingPlan], list[DrawingPlan]]] = []
    for graph in run.graphs:
        kernel_plans = plan_kernel_drawings(
            graph,
            functools.partial(launch_url, graph),
            functools.partial(launch_category, graph, custom_ops=analysis.custom_ops),
            analysis.graph(graph.id),
        )
        fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
        fx_plans = (
            plan_fx_drawings(graph, fx, node_groups(graph), analysis.graph(graph.id)) if fx is not None else []
        )
        planned.append((graph.id, kernel_plans, fx_plans))
    drawings = iter(draw([plan for _, kernels, fx in planned for plan in (*kernels, *fx)]))
    return {
        graph_id: GraphDrawings(
            tuple(next(drawings) for _ in kernels), tuple(next(drawings) for _ in fx)
        )
        for graph_id, kernels, fx in planned
    }


def graph_page(
    run: CompileRun, graph: GraphRecord, analysis: RunAnalysis, drawings: GraphDrawings | None = None
) -> GraphPage:
    autotuned = {t.chosen_launch: t for t in run.autotune if t.graph_id == graph.id and t.chosen_launch}
    launches = tuple(
        {
            "launch": launch,
            "url": "../" + launch_url(graph, launch),
            "code_url": "../" + code_line_url(graph, launch.line),
            "label": launch.label,
            "category": launch_category(graph, launch, analysis.custom_ops),
            "autotune": autotuned.get(launch.position),
        }
        for launch in graph.launches
    )
    fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
    legend: tuple[tuple[str, str], ...] = ()
    roles: tuple[tuple[str, str], ...] = ()
    if drawings is not None:
        categories = dict.fromkeys(launch_category(graph, launch, analysis.custom_ops) for launch in graph.launches)
        legend = tuple((c, CATEGORY_COLOURS.get(c, "#e2e8f0")) for c in categories)
        if fx is not None:
            used = dict.fromkeys(n.role or "input" for n in fx.nodes if n.op == "placeholder")
            roles = tuple((role, ROLE_LABELS.get(role, role)) for role in used)
    pre_fusion, post_fusion = graph.ir_dump("pre_fusion"), graph.ir_dump("post_fusion")
    fusion_summary = ""
    if pre_fusion is not None and post_fusion is not None:
        fused = sum(1 for n in post_fusion.nodes if len(n.members) > 1)
        fusion_summary = (
            f"{len(pre_fusion.nodes)} scheduler nodes before fusion, {len(post_fusion.nodes)} after "
            f"({fused} fused group{'s' if fused != 1 else ''})"
        )
    provenance_rows: list[dict[str, Any]] = []
    if graph.provenance is not None:
        for handle, nodes in graph.provenance.kernel_to_post.items():
            pre = tuple(dict.fromkeys(p for n in nodes for p in graph.provenance.post_to_pre.get(n, ())))
            provenance_rows.append({"handle": handle, "post": nodes, "pre": pre})
    launched = {launch.target for launch in graph.launches}
    frame = frame_of(run, graph)
    return GraphPage(
        run=run,
        graph=graph,
        launches=launches,
        kernel_drawings=drawings.kernels if drawings is not None else (),
        fx_drawings=drawings.fx if drawings is not None else (),
        legend=legend,
        roles=roles,
        texts=tuple((text, "../" + text_url(graph, text.name)) for text in graph_texts(graph)),
        fusion_summary=fusion_summary,
        provenance_rows=tuple(provenance_rows),
        frame=frame,
        frame_url=f"../compile.html#{frame_anchor(graph.compile_id)}" if graph.compile_id else None,
        unlaunched=tuple(k.name for k in graph.kernels if k.name not in launched),
        symbols=tuple(
            SymbolRow(
                s,
                HINT_FROM_LABELS.get(s.hint_from, s.hint_from),
                f"{s.name}={s.hint}" if s.hint is not None else f"{s.name} (no hint)",
            )
            for s in graph.symbols
        ),
    )
