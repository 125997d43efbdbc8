"""Report stage: the graph page's view model (launches, drawings, IR, provenance, symbols), from records only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from ..records import CompileRun, DynamoFrame, GraphRecord, ShapeSymbol
from .drawing import CATEGORY_COLOURS, ROLE_LABELS, Drawing, KernelGroup, draw_fx_graph, draw_kernel_graph
from .highlight import highlight
from .views import frame_anchor, frame_of, kernel_url, launch_category, launch_url

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
    kernel_drawing: Drawing | None
    fx_drawing: Drawing | None
    legend: tuple[tuple[str, str], ...]
    roles: tuple[tuple[str, str], ...]
    fx_code: Markup | None
    fx_readable_code: Markup | None
    ir_pre_text: Markup | None
    ir_text: Markup | None
    fusion_summary: str
    output_code: Markup
    provenance_rows: tuple[dict[str, Any], ...]
    frame: DynamoFrame | None
    frame_url: str | None
    unlaunched: tuple[str, ...] = field(default_factory=tuple)
    symbols: tuple[SymbolRow, ...] = ()

    @property
    def timed(self) -> bool:
        return any(launch.timing is not None for launch in self.graph.launches)


def node_groups(graph: GraphRecord, url_prefix: str = "../") -> dict[str, KernelGroup]:
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


def graph_page(run: CompileRun, graph: GraphRecord, draw: bool = True) -> GraphPage:
    autotuned = {t.chosen_launch: t for t in run.autotune if t.graph_id == graph.id and t.chosen_launch}
    launches = tuple(
        {
            "launch": launch,
            "url": "../" + launch_url(graph, launch),
            "label": launch.label,
            "category": launch_category(graph, launch),
            "autotune": autotuned.get(launch.position),
        }
        for launch in graph.launches
    )
    fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
    kernel_drawing = fx_drawing = None
    legend: tuple[tuple[str, str], ...] = ()
    roles: tuple[tuple[str, str], ...] = ()
    if draw:
        kernel_drawing = draw_kernel_graph(
            graph,
            lambda launch: "../" + launch_url(graph, launch),
            lambda launch: launch_category(graph, launch),
        )
        categories = dict.fromkeys(launch_category(graph, launch) for launch in graph.launches)
        legend = tuple((c, CATEGORY_COLOURS.get(c, "#e2e8f0")) for c in categories)
        if fx is not None:
            fx_drawing = draw_fx_graph(fx, node_groups(graph), graph.hints)
            used = dict.fromkeys(n.role or "input" for n in fx.nodes if n.op == "placeholder")
            roles = tuple((role, ROLE_LABELS.get(role, role)) for role in used)
    readable = graph.fx_graph("readable")
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
        kernel_drawing=kernel_drawing,
        fx_drawing=fx_drawing,
        legend=legend,
        roles=roles,
        fx_code=highlight(fx.code, "python", "fx") if fx is not None else None,
        fx_readable_code=highlight(readable.code, "python", "fxr")
        if readable is not None and fx is not readable
        else None,
        ir_pre_text=highlight(pre_fusion.text, "text", "irpre") if pre_fusion is not None else None,
        ir_text=highlight(post_fusion.text, "text", "ir") if post_fusion is not None else None,
        fusion_summary=fusion_summary,
        output_code=highlight(graph.output_code, "python", "code"),
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
