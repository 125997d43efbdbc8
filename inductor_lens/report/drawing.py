"""Report stage: draw a graph's post-grad FX nodes with Graphviz, grouped by the kernel each ran in.

The DOT text is built with the ``graphviz`` package (it quotes every label) and laid out by the
``dot`` binary with a time limit; the SVG goes inline into the page. Where ``dot`` (or the package)
is missing, or the graph is too large to lay out quickly, the page shows a notice instead.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass

from markupsafe import Markup

from ..records import FxGraph

MAX_DRAWN_NODES = 600
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


def draw_fx_graph(fx_graph: FxGraph, groups: dict[str, KernelGroup]) -> Drawing:
    """``groups`` maps FX node names to the kernel group they were fused into."""
    try:
        import graphviz
    except ImportError:
        return Drawing(None, "The Python package 'graphviz' is not installed, so the graph is not drawn.", "")
    if len(fx_graph.nodes) > MAX_DRAWN_NODES:
        return Drawing(
            None,
            f"This graph has {len(fx_graph.nodes)} nodes; drawings are limited to {MAX_DRAWN_NODES} "
            "so the page stays usable. The kernel and launch tables below list everything.",
            "",
        )
    dot = graphviz.Digraph(
        "fx",
        graph_attr={
            "rankdir": "TB",
            "fontname": "Helvetica",
            "fontsize": "11",
            "nodesep": "0.25",
            "ranksep": "0.35",
            "bgcolor": "transparent",
        },
        node_attr={
            "fontname": "Helvetica",
            "fontsize": "10",
            "shape": "box",
            "style": "rounded,filled",
            "fillcolor": "white",
            "height": "0.3",
        },
        edge_attr={"arrowsize": "0.6", "color": "#64748b"},
    )
    members: dict[str, list[str]] = {}
    for node in fx_graph.nodes:
        if node.name in groups:
            members.setdefault(groups[node.name].key, []).append(node.name)
    by_key = {g.key: g for g in groups.values()}
    for index, (key, names) in enumerate(members.items()):
        group = by_key[key]
        with dot.subgraph(name=f"cluster_{index}") as cluster:
            cluster.attr(
                label=group.label,
                href=group.url,
                target="_top",
                tooltip=f"{group.label} ({group.category})",
                style="rounded,filled",
                color="#94a3b8",
                fillcolor=_lighter(CATEGORY_COLOURS.get(group.category, "#e2e8f0")),
                fontsize="10",
            )
            for name in names:
                cluster.node(name)
    for node in fx_graph.nodes:
        group = groups.get(node.name)
        label = node.name if node.op in ("placeholder", "output") else f"{node.name}\n{node.target}"
        if node.type:
            label += f"\n{node.type}"
        attrs = {"label": label, "tooltip": node.source or node.target}
        if node.op == "placeholder":
            attrs.update(shape="ellipse", fillcolor="#f1f5f9", style="filled")
        elif node.op == "output":
            attrs.update(shape="doubleoctagon", fillcolor="#f1f5f9", style="filled")
        elif group is not None:
            attrs.update(
                fillcolor=CATEGORY_COLOURS.get(group.category, "#e2e8f0"), href=group.url, target="_top"
            )
        else:
            attrs.update(style="rounded,dashed", color="#94a3b8")
        dot.node(node.name, **attrs)
        for source in node.inputs:
            dot.edge(source, node.name)
    source = dot.source
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
