"""Report stage: Graphviz drawings of a graph, inline as SVG.

Two views of one compiled graph:
- ``draw_fx_graph``: the post-grad FX graph, one box per ATen op, clustered by the kernel each op
  ended up in (click a cluster to open the kernel); inputs, parameters and outputs drawn apart.
- ``draw_kernel_graph``: one node per launch, in launch order, with the buffers passing between
  them: the data flow at the level that runs on the device. It stays readable when the FX graph
  has thousands of nodes.

The DOT text is built with the ``graphviz`` package (which quotes every label) and laid out by the
``dot`` binary under a time limit. Where ``dot`` or the package is missing, the graph is too large,
or the layout takes too long, the page shows a notice instead of hanging.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..parse.symbolic import Hints, annotate
from ..records import FxGraph, GraphRecord, Launch
from .dataflow import output_producers, reads_by_launch

MAX_DRAWN_NODES = 600
MAX_DRAWN_LAUNCHES = 1500
LABELLED_LAUNCHES = 80
DOT_TIMEOUT_S = 30.0

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
class Drawing:
    svg: Markup | None
    notice: str | None
    dot_source: str


@functools.lru_cache(maxsize=1)
def dot_binary() -> str | None:
    return shutil.which("dot")


# For large graphs, dot's network-simplex passes dominate; capping them keeps the layout to about a
# second for hundreds of nodes (measured: 193 launches, 632 edges: over 30 s uncapped, 0.8 s capped).
_LARGE_GRAPH_ATTRS = {"mclimit": "0.1", "nslimit": "1", "nslimit1": "1"}
LARGE_GRAPH_NODES = 150


def _digraph(name: str, nodes: int) -> Any:
    import graphviz

    attrs = {**_GRAPH_ATTRS, **(_LARGE_GRAPH_ATTRS if nodes > LARGE_GRAPH_NODES else {})}
    return graphviz.Digraph(name, graph_attr=attrs, node_attr=_NODE_ATTRS, edge_attr=_EDGE_ATTRS)


def _graphviz_missing() -> Drawing | None:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return Drawing(None, "The Python package 'graphviz' is not installed, so the graph is not drawn.", "")
    return None


def draw_fx_graph(fx_graph: FxGraph, groups: dict[str, KernelGroup], hints: Hints | None = None) -> Drawing:
    """``groups`` maps FX node names to the kernel group they were fused into; symbolic sizes in the
    types are shown with their ``hints`` (``f32[s53=24, 32]``)."""
    if missing := _graphviz_missing():
        return missing
    if len(fx_graph.nodes) > MAX_DRAWN_NODES:
        return Drawing(
            None,
            f"This graph has {len(fx_graph.nodes)} FX nodes; op-level drawings stop at {MAX_DRAWN_NODES} so the "
            "page stays usable. The kernel-level drawing above shows the same graph one node per kernel.",
            "",
        )
    dot = _digraph("fx", len(fx_graph.nodes))
    members: dict[str, list[str]] = {}
    for node in fx_graph.nodes:
        if node.name in groups:
            members.setdefault(groups[node.name].key, []).append(node.name)
    by_key = {g.key: g for g in groups.values()}
    for index, (key, names) in enumerate(members.items()):
        group = by_key[key]
        with dot.subgraph(name=f"cluster_{index}") as cluster:
            cluster.attr(label=group.label, href=group.url, target="_top", tooltip=f"{group.label} ({group.category})",
                         style="rounded,filled", color="#94a3b8",
                         fillcolor=_lighter(CATEGORY_COLOURS.get(group.category, "#e2e8f0")), fontsize="10")  # fmt: skip
            for name in names:
                cluster.node(name)
    for node in fx_graph.nodes:
        node_group = groups.get(node.name)
        tooltip = node.target
        if node.source is not None:
            tooltip = f"{node.source.label}: {node.source.code or ''}"
        attrs: dict[str, str] = {"tooltip": tooltip}
        if node.op == "placeholder":
            role = node.role or "input"
            title = node.origin or node.name
            attrs.update(ROLE_STYLES.get(role, ROLE_STYLES["input"]))
            attrs["label"] = f"{title}\n{ROLE_LABELS.get(role, role)}" + (
                f"\n{annotate(node.type, hints or {})}" if node.type else ""
            )
            attrs["tooltip"] = f"{node.name}: {ROLE_LABELS.get(role, role)}"
        elif node.op == "output":
            attrs.update(shape="doubleoctagon", fillcolor="#f1f5f9", style="filled", label="output")
        else:
            attrs["label"] = f"{node.name}\n{node.target}" + (
                f"\n{annotate(node.type, hints or {})}" if node.type else ""
            )
            if node_group is not None:
                attrs.update(
                    fillcolor=CATEGORY_COLOURS.get(node_group.category, "#e2e8f0"),
                    href=node_group.url,
                    target="_top",
                )
            else:
                attrs.update(style="rounded,dashed", color="#94a3b8")
        dot.node(node.name, **attrs)
        for source in node.inputs:
            dot.edge(source, node.name)
    return render_dot(dot.source)


def draw_kernel_graph(
    graph: GraphRecord, url_for: Callable[[Launch], str], category_for: Callable[[Launch], str]
) -> Drawing:
    """One node per launch; an edge where a launch reads what an earlier launch wrote (same storage)."""
    if missing := _graphviz_missing():
        return missing
    if not graph.launches:
        return Drawing(None, "No launches, so there is nothing to draw.", "")
    if len(graph.launches) > MAX_DRAWN_LAUNCHES:
        return Drawing(
            None,
            f"This graph launches {len(graph.launches)} kernels; drawings stop at {MAX_DRAWN_LAUNCHES}.",
            "",
        )
    roles = {n.name: (n.role, n.origin) for fx in graph.fx_graphs for n in fx.nodes if n.op == "placeholder"}
    dot = _digraph("kernels", len(graph.launches))

    # Edge labels make dot's layout much slower; large graphs get them as tooltips only.
    labelled = len(graph.launches) <= LABELLED_LAUNCHES

    hints = graph.hints

    def edge(source: str, target: str, name: str, kind: str | None) -> None:
        text = f"{name}\n{annotate(kind, hints)}" if kind else name
        if labelled:
            dot.edge(source, target, label=text, tooltip=text)
        else:
            dot.edge(source, target, tooltip=text)

    drawn_inputs: set[str] = set()
    reads = reads_by_launch(graph)
    for launch in graph.launches:
        node = f"launch{launch.position}"
        category = category_for(launch)
        label = launch.label
        inputs = [r for r in reads[launch.position] if r.producer is None]
        hidden = [r for r in inputs if roles.get(r.name, (None, None))[0] in ("parameter", "buffer")]
        text = f"#{launch.position} {label}\n{category}"
        if hidden:
            text += f"\n+ {len(hidden)} parameter{'s' if len(hidden) != 1 else ''}"
        dot.node(node, label=text, href=url_for(launch), target="_top", tooltip=launch.code[:300],
                 fillcolor=CATEGORY_COLOURS.get(category, "#e2e8f0"))  # fmt: skip
        for read in reads[launch.position]:
            if read.producer is not None:
                if read.producer != launch.position:
                    edge(f"launch{read.producer}", node, read.name, read.kind)
            elif read not in hidden:
                role, origin = roles.get(read.name, ("input", None))
                input_node = f"in_{read.name}"
                if input_node not in drawn_inputs:
                    drawn_inputs.add(input_node)
                    style = ROLE_STYLES.get(role or "input", ROLE_STYLES["input"])
                    dot.node(
                        input_node,
                        label=f"{origin or read.name}\n{ROLE_LABELS.get(role or 'input', role)}",
                        **style,
                    )
                edge(input_node, node, read.name, read.kind)
    if graph.outputs:
        dot.node("outputs", label="outputs", shape="doubleoctagon", fillcolor="#f1f5f9", style="filled")
        for read in output_producers(graph):
            if read.producer is not None:
                edge(f"launch{read.producer}", "outputs", read.name, read.kind)
    return render_dot(dot.source)


def render_dot(source: str) -> Drawing:
    binary = dot_binary()
    if binary is None:
        return Drawing(
            None,
            "Graphviz's 'dot' program is not installed here, so the graph is not drawn "
            "(install it with e.g. 'apt-get install graphviz' and re-render with 'inductor-lens report').",
            source,
        )
    try:
        completed = subprocess.run(
            [binary, "-Tsvg"], input=source.encode(), capture_output=True, timeout=DOT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return Drawing(
            None, f"Graphviz took over {DOT_TIMEOUT_S:.0f} s to lay out this graph; drawing skipped.", source
        )
    if completed.returncode != 0:
        reason = completed.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        return Drawing(None, f"Graphviz could not draw this graph: {reason[0]}", source)
    return Drawing(_inline_svg(completed.stdout.decode("utf-8", errors="replace")), None, source)


def _inline_svg(svg: str) -> Markup:
    """Drop the XML prolog, DOCTYPE and comments so the SVG can sit inside an HTML page."""
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else svg
    body = re.sub(r"<!--.*?-->", "", body, flags=re.S)
    return Markup(body)


def _lighter(colour: str) -> str:
    """A paler version of a #rrggbb colour, for cluster backgrounds."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*((c + 255 * 2) // 3 for c in (red, green, blue)))
