"""Report stage: Graphviz drawings of a graph, inline as SVG.

Two views of one compiled graph:
- the kernel drawing: one node per launch, in launch order, with the buffers passing between them:
  the data flow at the level that runs on the device;
- the FX drawing: the post-grad FX graph, one box per ATen op, clustered by the kernel each op ended
  up in (click a cluster to open the kernel); inputs, parameters and outputs drawn apart.

Every graph is drawn, in time about linear in its size: ``dot``'s layout grows much faster than
linearly (long edges become chains of virtual nodes: a 339-launch backward graph took 16 s at once),
so a large graph is cut into parts of about ``KERNEL_PART_LAUNCHES`` launches (``FX_PART_NODES`` ops),
at the points where the fewest buffers cross (between layers, in a layered model), each part drawn on
its own with a stub for every value it reads from an earlier part, and an overview of the parts that
links down to them. Building the DOT text is separate from laying it out (``plan_*`` here, then
``dot_layout.lay_out`` for every drawing of the report at once, in parallel and cached).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..records import FxGraph, GraphRecord, Launch
from ..records.analysis import GraphAnalysis
from .dataflow import output_producers, reads_by_launch
from .dot_layout import Layout, lay_out
from .views import file_name

# Part sizes: dot lays out a part of this size in well under a second at the effort below (measured on
# a 48-layer --train graph: 60 launches 0.05 s; 120 FX ops about 0.1 s, where 250 took 0.7 s). A graph
# of several parts gets a page per part, so no page grows with the graph.
KERNEL_PART_LAUNCHES = 60
FX_PART_NODES = 120
# Edge labels make dot's layout much slower; larger parts get them as tooltips only.
LABELLED_LAUNCHES = 80
# Above this many graph outputs in a drawing, the launches that write one say so in their box.
MAX_OUTPUT_EDGES = 12
# Above this many nodes a drawing's network-simplex and crossing-minimisation passes are capped.
LARGE_GRAPH_NODES = 150
_LARGE_GRAPH_ATTRS = {"mclimit": "0.1", "nslimit": "0.2", "nslimit1": "1"}

# Fill colours by kernel category (extern kernels and nodes outside any kernel are grey/white).
CATEGORY_COLOURS = {
    "pointwise": "#dbeafe",
    "reduction": "#fde68a",
    "persistent reduction": "#fed7aa",
    "template": "#e9d5ff",
    "foreach": "#ccfbf1",
    "user": "#fbcfe8",
    "other": "#e2e8f0",
    "extern": "#e5e7eb",
    "custom op": "#fecdd3",
}
# Placeholder styles by role.
ROLE_STYLES = {
    "input": {"shape": "ellipse", "fillcolor": "#dcfce7", "style": "filled"},
    "parameter": {"shape": "box", "fillcolor": "#fef9c3", "style": "filled,rounded,dashed"},
    "buffer": {"shape": "box", "fillcolor": "#fef3c7", "style": "filled,rounded,dashed"},
    "tangent": {"shape": "ellipse", "fillcolor": "#fce7f3", "style": "filled"},
    "saved": {"shape": "ellipse", "fillcolor": "#f1f5f9", "style": "filled"},
    "size": {"shape": "note", "fillcolor": "#e0f2fe", "style": "filled"},
}
ROLE_LABELS = {
    "input": "model input",
    "parameter": "parameter",
    "buffer": "module buffer",
    "tangent": "incoming gradient",
    "saved": "saved for backward",
    "size": "symbolic size",
}
_GRAPH_ATTRS = {"rankdir": "TB", "fontname": "Helvetica", "fontsize": "11", "nodesep": "0.25", "ranksep": "0.35",
                "bgcolor": "transparent"}  # fmt: skip
_NODE_ATTRS = {"fontname": "Helvetica", "fontsize": "10", "shape": "box", "style": "rounded,filled",
               "fillcolor": "white", "height": "0.3"}  # fmt: skip
_EDGE_ATTRS = {
    "arrowsize": "0.6",
    "color": "#64748b",
    "fontname": "Helvetica",
    "fontsize": "8",
    "fontcolor": "#475569",
}


@dataclass(frozen=True)
class KernelGroup:
    """The kernel (or extern call) a set of FX nodes ended up in."""

    key: str
    label: str
    category: str
    url: str


@dataclass(frozen=True)
class DrawingPlan:
    """A drawing before its layout: its DOT text (None: nothing to lay out, only the notice)."""

    title: str
    anchor: str
    dot_source: str | None
    notice: str | None = None
    summary: str = ""  # what the drawing holds, one line
    page: str | None = None  # a part's own page (relative to the report's root); None: on the graph page


@dataclass(frozen=True)
class Drawing:
    title: str
    anchor: str
    svg: Markup | None
    notice: str | None
    dot_source: str
    summary: str = ""
    layout_note: str = ""  # "laid out in 0.8 s" / "layout from the cache"
    page: str | None = None


def _digraph(name: str, nodes: int) -> Any:
    import graphviz

    attrs = {**_GRAPH_ATTRS, **(_LARGE_GRAPH_ATTRS if nodes > LARGE_GRAPH_NODES else {})}
    return graphviz.Digraph(name, graph_attr=attrs, node_attr=_NODE_ATTRS, edge_attr=_EDGE_ATTRS)


def _graphviz_missing(title: str, anchor: str) -> DrawingPlan | None:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return DrawingPlan(title, anchor, None, "The Python package 'graphviz' is not installed, so the graph is not drawn.")
    return None


def split_in_parts(producers: Sequence[Iterable[int]], target: int) -> list[tuple[int, int]]:
    """Cut items ``0..n-1`` (``producers[i]``: the earlier items item ``i`` reads) into consecutive parts of
    ``target`` items give or take a third, each cut where the fewest reads cross it; ``[(start, stop), ...]``."""
    count = len(producers)
    if count <= target * 3 // 2:
        return [(0, count)]
    # crossing[i]: reads that cross a cut just before item i (a read of p by c crosses cuts p+1..c)
    delta = [0] * (count + 2)
    for consumer, sources in enumerate(producers):
        for producer in set(sources):
            if producer < consumer:
                delta[producer + 1] += 1
                delta[consumer + 1] -= 1
    crossing, running = [], 0
    for value in delta:
        running += value
        crossing.append(running)
    parts, start = [], 0
    while count - start > target * 3 // 2:
        ideal = start + target
        window = range(start + target * 2 // 3, min(start + target * 4 // 3, count - target // 2) + 1)
        cut = min(window, key=lambda i: (crossing[i], abs(i - ideal)))
        parts.append((start, cut))
        start = cut
    parts.append((start, count))
    return parts


def part_page(graph: GraphRecord, view: str, number: int) -> str:
    """The page of part ``number`` (from 1) of a graph's ``kernels`` or ``fx`` drawing, from the report's root."""
    return f"graphs/{graph.id}/drawing-{view}-{number}.html"


@dataclass(frozen=True)
class _Parts:
    """How one drawing of a graph is split: each part's item range, anchor and page, and each item's part."""

    ranges: list[tuple[int, int]]
    part_of: list[int]
    anchors: list[str]
    pages: list[str | None]  # None: the one drawing, on the graph page
    root: str  # the report's root from where the parts are shown

    @property
    def split(self) -> bool:
        return len(self.ranges) > 1

    def stub(self, other: int, label: str, tooltip: str) -> dict[str, str]:
        """A dashed box for a value computed in part ``other``, linking to that part's page."""
        return {"label": f"{label}\n(part {other + 1})", "href": file_name(self.pages[other] or ""), "target": "_top",
                "style": "rounded,dashed", "color": "#94a3b8", "fillcolor": "white",
                "tooltip": f"computed in part {other + 1}{tooltip}"}  # fmt: skip


def _parts(graph: GraphRecord, view: str, producers: Sequence[Iterable[int]], target: int) -> _Parts:
    ranges = split_in_parts(producers, target)
    split = len(ranges) > 1
    return _Parts(
        ranges=ranges,
        part_of=[number for number, (start, stop) in enumerate(ranges) for _ in range(start, stop)],
        anchors=[f"{view}-part-{n + 1}" if split else view for n in range(len(ranges))],
        pages=[part_page(graph, view, n + 1) for n in range(len(ranges))] if split else [None],
        root="../../" if split else "../",
    )


def plan_kernel_drawings(
    graph: GraphRecord,
    url_for: Callable[[Launch], str],
    category_for: Callable[[Launch], str],
    analysis: GraphAnalysis,
) -> list[DrawingPlan]:
    """The kernel drawing of ``graph``: one plan, or an overview and one plan per part of a large graph.
    ``url_for`` gives a launch's page from the report's root."""
    title = "Kernels and the data between them"
    if missing := _graphviz_missing(title, "kernels"):
        return [missing]
    if not graph.launches:
        return [DrawingPlan(title, "kernels", None, "No launches, so there is nothing to draw.")]
    reads = reads_by_launch(graph)
    index_of = {launch.position: i for i, launch in enumerate(graph.launches)}
    producers = [
        [index_of[r.producer] for r in reads[launch.position] if r.producer is not None and r.producer in index_of]
        for launch in graph.launches
    ]
    parts = _parts(graph, "kernels", producers, KERNEL_PART_LAUNCHES)
    part_of = parts.part_of
    roles = {n.name: (n.role, n.origin) for fx in graph.fx_graphs for n in fx.nodes if n.op == "placeholder"}
    outputs = [r for r in output_producers(graph) if r.producer is not None and r.producer in index_of]
    plans = []
    for number, (start, stop) in enumerate(parts.ranges):
        launches = graph.launches[start:stop]
        dot = _digraph("kernels", len(launches))
        edge = functools.partial(_data_edge, dot, analysis, len(launches) <= LABELLED_LAUNCHES)
        drawn: set[str] = set()
        # A forward graph returns most of what it computes (saved for backward): an arrow from each
        # to one "outputs" box costs dot seconds and draws a fan, so the boxes say it instead.
        part_outputs = [r for r in outputs if part_of[index_of[r.producer or 0]] == number]
        many_outputs = len(part_outputs) > MAX_OUTPUT_EDGES
        output_writers = {r.producer for r in part_outputs}
        for launch in launches:
            node = f"launch{launch.position}"
            category = category_for(launch)
            inputs = [r for r in reads[launch.position] if r.producer is None]
            hidden = [r for r in inputs if roles.get(r.name, (None, None))[0] in ("parameter", "buffer")]
            text = f"#{launch.position} {launch.label}\n{category}"
            if many_outputs and launch.position in output_writers:
                text += "\nwrites a graph output"
            if hidden:
                text += f"\n+ {len(hidden)} parameter{'s' if len(hidden) != 1 else ''}"
            dot.node(node, label=text, href=parts.root + url_for(launch), target="_top", tooltip=launch.code[:300],
                     fillcolor=CATEGORY_COLOURS.get(category, "#e2e8f0"))  # fmt: skip
            for read in reads[launch.position]:
                if read.producer is not None and read.producer in index_of:
                    if read.producer == launch.position:
                        continue
                    producer_part = part_of[index_of[read.producer]]
                    source = f"launch{read.producer}"
                    if producer_part != number and source not in drawn:
                        drawn.add(source)
                        producer = graph.launches[index_of[read.producer]]
                        dot.node(source, **parts.stub(producer_part, f"#{producer.position} {producer.label}",
                                                      f": {producer.code[:200]}"))  # fmt: skip
                    edge(source, node, read.name, read.kind)
                elif read not in hidden:
                    role, origin = roles.get(read.name, ("input", None))
                    input_node = f"in_{read.name}"
                    if input_node not in drawn:
                        drawn.add(input_node)
                        style = ROLE_STYLES.get(role or "input", ROLE_STYLES["input"])
                        dot.node(input_node, label=f"{origin or read.name}\n{ROLE_LABELS.get(role or 'input', role)}",
                                 **style)  # fmt: skip
                    edge(input_node, node, read.name, read.kind)
        if part_outputs and not many_outputs:
            dot.node("outputs", label="outputs", shape="doubleoctagon", fillcolor="#f1f5f9", style="filled")
            for read in part_outputs:
                edge(f"launch{read.producer}", "outputs", read.name, read.kind)
        first, last = launches[0].position, launches[-1].position
        plans.append(
            DrawingPlan(
                f"Part {number + 1}: launches #{first}–#{last}" if parts.split else title,
                parts.anchors[number],
                dot.source,
                summary=_launch_summary(launches),
                page=parts.pages[number],
            )
        )
    if parts.split:
        plans.insert(0, _overview(graph, parts, producers))
    return plans


def _data_edge(
    dot: Any, analysis: GraphAnalysis, labelled: bool, source: str, target: str, name: str, kind: str | None
) -> None:
    """An arrow carrying buffer ``name`` (with its type): labelled in small drawings, a tooltip in large ones."""
    text = f"{name}\n{analysis.annotate(kind)}" if kind else name
    if labelled:
        dot.edge(source, target, label=text, tooltip=text)
    else:
        dot.edge(source, target, tooltip=text)


def _launch_summary(launches: Sequence[Launch]) -> str:
    externs = sum(1 for launch in launches if launch.kind == "extern")
    return f"{len(launches)} launches: {len(launches) - externs} kernels, {externs} extern calls"


def _overview(graph: GraphRecord, parts: _Parts, producers: list[list[int]]) -> DrawingPlan:
    """One box per part, an arrow where a part reads what an earlier one wrote (with the count)."""
    dot = _digraph("parts", len(parts.ranges))
    timed = any(launch.timing is not None for launch in graph.launches)
    for number, (start, stop) in enumerate(parts.ranges):
        launches = graph.launches[start:stop]
        label = f"Part {number + 1}: launches #{launches[0].position}–#{launches[-1].position}\n{_launch_summary(launches)}"
        if timed:
            share = sum(launch.timing.share or 0 for launch in launches if launch.timing is not None)
            label += f"\n{100 * share:.1f}% of the graph's device time"
        dot.node(f"part{number}", label=label, href="../" + (parts.pages[number] or ""), target="_top",
                 tooltip=f"open part {number + 1}", fillcolor="#f8fafc")  # fmt: skip
    flows: dict[tuple[int, int], int] = {}
    for consumer, sources in enumerate(producers):
        for producer in set(sources):
            pair = (parts.part_of[producer], parts.part_of[consumer])
            if pair[0] != pair[1]:
                flows[pair] = flows.get(pair, 0) + 1
    for (source, target), count in sorted(flows.items()):
        text = f"{count} read{'s' if count != 1 else ''}"
        dot.edge(f"part{source}", f"part{target}", label=text, tooltip=text)
    return DrawingPlan(
        "Overview: the graph in parts",
        "kernels-overview",
        dot.source,
        summary=f"{len(graph.launches)} launches in {len(parts.ranges)} parts, cut where the fewest buffers pass between them",
    )


def plan_fx_drawings(
    graph: GraphRecord, fx_graph: FxGraph, groups: Mapping[str, KernelGroup], analysis: GraphAnalysis
) -> list[DrawingPlan]:
    """The op-level drawing: ``groups`` maps FX node names to the kernel group they were fused into (its
    url from the report's root);
    symbolic sizes in the types are shown with their hints (``f32[s53=24, 32]``, ``GraphAnalysis.annotate``).
    A large graph is drawn in parts of about ``FX_PART_NODES`` ops."""
    title = "The FX graph, clustered by kernel"
    if missing := _graphviz_missing(title, "fx"):
        return [missing]
    ops = [node for node in fx_graph.nodes if node.op not in ("placeholder", "output")]
    placeholders = {node.name: node for node in fx_graph.nodes if node.op == "placeholder"}
    index_of = {node.name: i for i, node in enumerate(ops)}
    parts = _parts(graph, "fx", [[index_of[n] for n in node.inputs if n in index_of] for node in ops], FX_PART_NODES)
    output_inputs = {n for node in fx_graph.nodes if node.op == "output" for n in node.inputs}
    by_key = {g.key: g for g in groups.values()}
    plans = []
    for number, (start, stop) in enumerate(parts.ranges):
        members = ops[start:stop]
        dot = _digraph("fx", len(members))
        clusters: dict[str, list[str]] = {}
        for node in members:
            if node.name in groups:
                clusters.setdefault(groups[node.name].key, []).append(node.name)
        for index, (key, names) in enumerate(clusters.items()):
            group = by_key[key]
            with dot.subgraph(name=f"cluster_{index}") as cluster:
                cluster.attr(label=group.label, href=parts.root + group.url, target="_top", tooltip=f"{group.label} ({group.category})",
                             style="rounded,filled", color="#94a3b8",
                             fillcolor=_lighter(CATEGORY_COLOURS.get(group.category, "#e2e8f0")), fontsize="10")  # fmt: skip
                for name in names:
                    cluster.node(name)
        drawn: set[str] = set()
        for node in members:
            node_group = groups.get(node.name)
            attrs: dict[str, str] = {
                "tooltip": f"{node.source.label}: {node.source.code or ''}" if node.source is not None else node.target,
                "label": f"{node.name}\n{node.target}" + (f"\n{analysis.annotate(node.type)}" if node.type else ""),
            }
            if node_group is not None:
                attrs.update(fillcolor=CATEGORY_COLOURS.get(node_group.category, "#e2e8f0"), href=parts.root + node_group.url,
                             target="_top")  # fmt: skip
            else:
                attrs.update(style="rounded,dashed", color="#94a3b8")
            dot.node(node.name, **attrs)
            for source in node.inputs:
                if source not in drawn and source in placeholders:
                    drawn.add(source)
                    dot.node(source, **_placeholder_attrs(placeholders[source], analysis))
                elif source not in drawn and source in index_of and parts.part_of[index_of[source]] != number:
                    drawn.add(source)
                    dot.node(source, **parts.stub(parts.part_of[index_of[source]], source, ""))
                dot.edge(source, node.name)
        outputs = [node.name for node in members if node.name in output_inputs]
        if outputs:
            dot.node("output", shape="doubleoctagon", fillcolor="#f1f5f9", style="filled", label="output")
            for name in outputs:
                dot.edge(name, "output")
        plans.append(
            DrawingPlan(
                f"Part {number + 1}: ops {members[0].name} to {members[-1].name}" if parts.split else title,
                parts.anchors[number],
                dot.source,
                summary=f"{len(members)} ops",
                page=parts.pages[number],
            )
        )
    if not ops:
        return [DrawingPlan(title, "fx", None, "This FX graph has no ops, so there is nothing to draw.")]
    return plans


def _placeholder_attrs(node: Any, analysis: GraphAnalysis) -> dict[str, str]:
    role = node.role or "input"
    title = node.origin or node.name
    return {
        **ROLE_STYLES.get(role, ROLE_STYLES["input"]),
        "label": f"{title}\n{ROLE_LABELS.get(role, role)}" + (f"\n{analysis.annotate(node.type)}" if node.type else ""),
        "tooltip": f"{node.name}: {ROLE_LABELS.get(role, role)}",
    }


def draw(plans: Sequence[DrawingPlan]) -> list[Drawing]:
    """Lay out every plan (in parallel, from the layout cache where it can) and return the drawings."""
    sources = [plan.dot_source for plan in plans if plan.dot_source is not None]
    layouts = iter(lay_out(sources))
    drawings = []
    for plan in plans:
        layout = next(layouts) if plan.dot_source is not None else Layout(None, plan.notice)
        note = "Layout from the cache." if layout.cached else f"Laid out in {layout.seconds:.1f} s." if layout.svg else ""
        drawings.append(
            Drawing(
                plan.title,
                plan.anchor,
                Markup(layout.svg) if layout.svg is not None else None,
                layout.notice if layout.svg is None else None,
                plan.dot_source or "",
                plan.summary,
                note,
                plan.page,
            )
        )
    return drawings


def _lighter(colour: str) -> str:
    """A paler version of a #rrggbb colour, for cluster backgrounds."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*((c + 255 * 2) // 3 for c in (red, green, blue)))
