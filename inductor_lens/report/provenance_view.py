"""Report stage: a graph's provenance page, three linked panes (pre-grad graph, post-grad graph, output code).

Built from records and their analysis (a report re-rendered from lens.json, from a debug folder or a bare
TORCH_TRACE log): the pre-grad graph is the compile's ``before_pre_grad_graph`` IR stage, parsed by the
analysis (``RunAnalysis.pre_grad_graphs``; where the trace holds none,
the graph before the post-grad passes stands in, its nodes tied to the post-grad ones by name), the
post-grad graph and the output code are the graph's own, and the links are Inductor's provenance maps
(``preToPost``/``postToPre``, kernel debug handle -> post-grad nodes), with the kernels' own node lists
where a launch has no handle in them. Each pane is the same highlighted block the text pages show (so a
render highlights nothing twice); the links travel as one small JSON block, indexed by the page's script
(``templates/static/provenance.js``), which marks the lines on a click: nothing per line is computed twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..records import CompileRun, FxGraph, GraphRecord, KernelRecord, Launch
from ..records.analysis import PRE_GRAD_STAGES, RunAnalysis
from . import views
from .highlight import highlight, is_highlighted, reanchored


def provenance_url(graph: GraphRecord) -> str:
    return f"graphs/{graph.id}/provenance.html"


@dataclass(frozen=True)
class Pane:
    key: str  # "pre", "post" or "code": also the prefix of its line anchors (pre-12)
    title: str
    origin: str  # where the text comes from, as a sentence's end
    code: Markup | None  # None: no such text for this graph
    lines: int
    mapped_lines: int
    too_large_to_highlight: bool = False
    url: str | None = None  # the text's own page, from the provenance page


@dataclass(frozen=True)
class ProvenancePage:
    run: CompileRun
    graph: GraphRecord
    panes: tuple[Pane, Pane, Pane]
    # {"pre": [{n, t, l, post}], "post": [{n, t, l, pre, code}], "code": [{n, k, l, r, post, url}]}: node or
    # launch name, its target or kind, its line, the line ranges it spans, and indexes into the other lists.
    data: dict[str, Any]
    mapping_source: str  # "debug folder", "TORCH_TRACE log" or "" (no provenance maps, or empty ones)
    pre_is_stand_in: bool  # the pre-grad pane shows the graph before the post-grad passes instead
    missing: tuple[str, ...]  # mapped node names no pane shows ("pre-grad: x_3")

    @property
    def graph_url(self) -> str:
        return "../../" + views.graph_url(self.graph)


@dataclass
class _Node:
    name: str
    target: str
    line: int
    links: dict[str, list[int]]


def provenance_page(run: CompileRun, graph: GraphRecord, analysis: RunAnalysis) -> ProvenancePage:
    pre_to_post = _pre_to_post(graph)
    post_fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
    pre_grad = _pre_grad_graph(run, graph, analysis, post_fx, set(pre_to_post))
    pre_fx = pre_grad.fx
    if pre_grad.stand_in and pre_fx is not None:
        # FX keeps a node's name through the post-grad passes: the stand-in's nodes are the post-grad nodes
        pre_to_post = {n.name: [n.name] for n in pre_fx.nodes if n.op == "call_function"}

    pre_nodes = _graph_nodes(pre_fx, set(pre_to_post))
    post_nodes = _graph_nodes(post_fx, {post for posts in pre_to_post.values() for post in posts})
    pre_index = {node.name: i for i, node in enumerate(pre_nodes)}
    post_index = {node.name: i for i, node in enumerate(post_nodes)}
    missing: dict[str, None] = {}  # in the order met, once each
    for pre, posts in pre_to_post.items():
        if pre not in pre_index:
            missing[f"pre-grad: {pre}"] = None
            continue
        for post in dict.fromkeys(posts):
            if post in post_index:
                _link(pre_nodes[pre_index[pre]], "post", post_index[post])
                _link(post_nodes[post_index[post]], "pre", pre_index[pre])

    code_entries = _code_entries(graph, graph.output_code.splitlines(), set(post_index))
    for number, (entry, computed) in enumerate(code_entries):
        for post in dict.fromkeys(computed):
            if post not in post_index:
                missing[f"post-grad: {post}"] = None
                continue
            entry["post"].append(post_index[post])
            # a post-grad node points at its launches (each marks its kernel's code), not at the kernels
            if entry["k"] != "kernel":
                _link(post_nodes[post_index[post]], "code", number)

    data = {
        "pre": [
            {"n": n.name, "t": n.target, "l": n.line, "post": n.links.get("post", [])} for n in pre_nodes
        ],
        "post": [
            {
                "n": n.name,
                "t": n.target,
                "l": n.line,
                "pre": n.links.get("pre", []),
                "code": n.links.get("code", []),
            }
            for n in post_nodes
        ],
        "code": [entry for entry, _ in code_entries],
    }
    mapped_code = {
        line for entry, _ in code_entries if entry["post"] for a, b in entry["r"] for line in range(a, b + 1)
    }
    post_page = (
        "fx_graph_transformed"
        if post_fx is not None and post_fx.stage == "transformed"
        else "fx_graph_readable"
    )
    panes = (
        _pane("pre", pre_grad.title, pre_grad.origin, pre_fx, pre_grad.anchor, sum(1 for n in pre_nodes if n.links),
              pre_grad.url),
        _pane("post", "Post-grad graph", "the graph Inductor lowered, after its post-grad passes", post_fx, "fx",
              sum(1 for n in post_nodes if n.links), _text_page(graph, post_page)),
        _code_pane(graph, len(mapped_code)),
    )  # fmt: skip
    return ProvenancePage(
        run=run,
        graph=graph,
        panes=panes,
        data=data,
        mapping_source=_mapping_source(graph),
        pre_is_stand_in=pre_grad.stand_in,
        missing=tuple(missing),
    )


def _pre_to_post(graph: GraphRecord) -> dict[str, list[str]]:
    """Pre-grad node -> the post-grad nodes it became, read from both of Inductor's maps, so that a pair logged
    one way only is kept."""
    pre_to_post: dict[str, list[str]] = {}
    if graph.provenance is not None:
        for pre, posts in graph.provenance.pre_to_post.items():
            pre_to_post.setdefault(pre, []).extend(posts)
        for post, pres in graph.provenance.post_to_pre.items():
            for pre in pres:
                pre_to_post.setdefault(pre, []).append(post)
    return pre_to_post


def _mapping_source(graph: GraphRecord) -> str:
    """Where Inductor's maps were read, or "" where it logged them empty (a backward graph in torch 2.13)."""
    maps = graph.provenance
    if maps is None or not (maps.pre_to_post or maps.post_to_pre or maps.kernel_to_post):
        return ""
    return maps.source


@dataclass(frozen=True)
class _PreGrad:
    fx: FxGraph | None
    title: str
    origin: str
    anchor: str  # the line anchors of the text's own page (its highlighted block is shared with it)
    url: str | None
    stand_in: bool = False


def _pre_grad_graph(
    run: CompileRun, graph: GraphRecord, analysis: RunAnalysis, post_fx: FxGraph | None, mapped: set[str]
) -> _PreGrad:
    """The compile's pre-grad IR stage that holds the most of the mapped nodes (the first, of equals), else the
    graph before the post-grad passes."""
    frame = views.frame_of(run, graph)
    compile_id = frame.compile_id if frame is not None else ""
    best: tuple[int, int, FxGraph] | None = None
    stages = list(enumerate(frame.stages, start=1)) if frame is not None else []
    for name in PRE_GRAD_STAGES:
        for index, stage in stages:
            if stage.name == name:
                fx = analysis.pre_grad_graphs[(compile_id, index)]
                found = sum(1 for node in fx.nodes if node.name in mapped)
                if best is None or found > best[0]:
                    best = (found, index, fx)
    if best is not None and frame is not None:
        _, index, fx = best
        name = frame.stages[index - 1].name
        url = "../../" + views.stage_url(frame, index, name)
        return _PreGrad(
            fx, "Pre-grad graph", f"the compile's {name} stage, from the TORCH_TRACE log", "L", url
        )
    readable = graph.fx_graph("readable")
    if readable is None or readable is post_fx:
        return _PreGrad(
            None, "Pre-grad graph", "not recorded: no TORCH_TRACE log holds this compile's graphs", "L", None
        )
    return _PreGrad(
        readable,
        "Before the post-grad passes",
        "no TORCH_TRACE log holds this compile's pre-grad graph, so the graph Inductor received stands in",
        "fxr",
        _text_page(graph, "fx_graph_readable"),
        stand_in=True,
    )


def _graph_nodes(fx: FxGraph | None, wanted: set[str]) -> list[_Node]:
    """The nodes a click can select: one per line (placeholders share the signature's line, so none of them).
    A wanted node the FX reader did not list (``x @ y``, or an in-place op printed as ``out_7 += y;  out_8:
    "f32[...]" = out_7``) is found by its annotated name on a line, its target the statement that made it."""
    if fx is None:
        return []
    nodes = [
        _Node(n.name, n.target, n.line, {})
        for n in fx.nodes
        if n.op not in ("placeholder", "output") and n.line
    ]
    lost = wanted - {n.name for n in fx.nodes}
    if lost:
        taken = {n.line for n in nodes}
        for number, text in enumerate(fx.code.splitlines(), start=1):
            for match in _ANNOTATED.finditer(text):
                if match["name"] in lost and number not in taken:
                    statement = text[match.end() :] if match.start() == 0 else text[: match.start()]
                    nodes.append(_Node(match["name"], statement.strip().split(";")[0].strip(), number, {}))
                    taken.add(number)
        nodes.sort(key=lambda node: node.line)
    return nodes


# A node's name where FX prints it, at a line's start or after another statement: ``out_8: "f32[8]" =``
_ANNOTATED = re.compile(r'(?:^\s*|;\s+)(?P<name>\w+)\s*:\s*"[^"]*"\s*=')


def _link(node: _Node, pane: str, index: int) -> None:
    targets = node.links.setdefault(pane, [])
    if index not in targets:
        targets.append(index)


def _code_entries(
    graph: GraphRecord, lines: list[str], post_names: set[str]
) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """One entry per launch in call() (its line and the comments above it, with its kernel's definition) and one
    per generated kernel (its definition, with its launches), each with the post-grad nodes it computes: by its
    debug handle in the provenance maps, else the kernel's own node lists, else the launch's source nodes that
    are post-grad nodes (torch 2.13 maps no handle of a backward graph)."""
    kernel_to_post = graph.provenance.kernel_to_post if graph.provenance is not None else {}
    kernels = {kernel.name: kernel for kernel in graph.kernels}
    definitions = {name: _definition_lines(kernel, lines) for name, kernel in kernels.items()}
    entries: list[tuple[dict[str, Any], tuple[str, ...]]] = []
    launched: dict[str, list[int]] = {}
    posts_of: dict[str, list[str]] = {}
    for launch in graph.launches:
        kernel = kernels.get(launch.target) if launch.kind != "extern" else None
        posts = (
            kernel_to_post.get(launch.handle or "")
            or (_kernel_nodes(kernel) if kernel is not None else ())
            or tuple(n for n in launch.source_nodes if n in post_names)
        )
        ranges = [_launch_lines(launch, lines)]
        if kernel is not None:
            ranges.append(definitions[kernel.name])
            launched.setdefault(kernel.name, []).append(launch.line)
            posts_of.setdefault(kernel.name, []).extend(posts)
        entry = {
            "n": launch.label,
            "k": launch.kind,
            "h": launch.handle or "",
            "p": launch.position,
            "l": launch.line,
            "r": [list(r) for r in ranges],
            "post": [],
            "url": "../../" + views.launch_url(graph, launch),
        }
        entries.append((entry, tuple(posts)))
    for name, kernel in kernels.items():
        first, last = definitions[name]
        entry = {
            "n": name,
            "k": "kernel",
            "h": "",
            "p": 0,
            "l": first,
            "r": [[first, last]] + [[line, line] for line in launched.get(name, [])],
            "post": [],
            "url": "../../" + views.kernel_url(graph, name),
        }
        entries.append((entry, tuple(posts_of.get(name, ())) or _kernel_nodes(kernel)))
    return entries


def _kernel_nodes(kernel: KernelRecord) -> tuple[str, ...]:
    return kernel.post_grad_nodes or tuple(n for m in kernel.node_mappings for n in m.aten_nodes)


def _launch_lines(launch: Launch, lines: list[str]) -> tuple[int, int]:
    """The launch's line and what Inductor wrote just above it for it: the comments naming its source nodes and
    debug handle, and a Triton launch's stream."""
    first = launch.line
    while first > 1 and first - 2 < len(lines) and _LAUNCH_PREAMBLE.match(lines[first - 2]):
        first -= 1
    return first, launch.line


_LAUNCH_PREAMBLE = re.compile(r"\s*(#|stream\d+ = get_raw_stream\()")


def _definition_lines(kernel: KernelRecord, lines: list[str]) -> tuple[int, int]:
    """The kernel's definition in output_code.py: the comments above it (kernel path, node mapping, graph
    fragment), the statement that compiles its source and the line closing it."""
    first = kernel.definition_line
    while first > 1 and first - 2 < len(lines) and lines[first - 2].startswith("#"):
        first -= 1
    last = kernel.definition_line + max(kernel.source.count("\n"), 0)
    return first, min(max(last, kernel.definition_line), max(len(lines), kernel.definition_line))


def _text_page(graph: GraphRecord, name: str) -> str:
    return "../../" + views.text_url(graph, name)


def _pane(
    key: str, title: str, origin: str, fx: FxGraph | None, anchor: str, mapped: int, url: str | None
) -> Pane:
    if fx is None:
        return Pane(key, title, origin, None, 0, 0)
    return _text_pane(key, title, origin, fx.code, anchor, mapped, url)


def _code_pane(graph: GraphRecord, mapped: int) -> Pane:
    title, origin = "Output code", "output_code.py: the kernels, and call() launching them in order"
    if not graph.output_code:
        return Pane("code", title, origin, None, 0, 0)
    return _text_pane(
        "code", title, origin, graph.output_code, "code", mapped, _text_page(graph, "output_code")
    )


def _text_pane(
    key: str, title: str, origin: str, text: str, anchor: str, mapped: int, url: str | None
) -> Pane:
    # highlighted with the anchors of the text's own page, so the block comes from the render cache; renamed
    code = highlight(text, "python", anchor)
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return Pane(
        key,
        title,
        origin,
        reanchored(code, anchor, key),
        lines,
        mapped,
        not is_highlighted(text, "python"),
        url,
    )
