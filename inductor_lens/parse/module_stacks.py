"""Parse stage: which ``nn.Module`` each launch ran under, from capture/module_stacks.json.

The model process records, for every graph Inductor received (by Dynamo compile id), each FX node's module
stack and stack trace (``worker/module_stacks.py``). A launch reaches those nodes two ways:

- forward and inference graphs: its debug handle -> post-grad nodes (``Provenance.kernel_to_post``) ->
  pre-grad nodes (``post_to_pre``), the nodes the file names; a kernel that only reads parameters (a weight's
  layout copy) goes to the module owning them;
- backward graphs, which have no pre-grad nodes: its stack traces (``kernel_stack_traces``, the kernel's
  ``user_stack``) are the forward nodes' traces, so the modules of the nodes with the same trace. A repeated
  layer runs one trace in each instance: which instance a backward launch belongs to is unknown, and the
  launch holds the folded path (``layers.*.mlp``).

The paths become ``Launch.modules`` (innermost, normalized) and ``GraphRecord.module_classes``. Without the
file (captures before it was recorded) nothing changes and no time is given per module.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..exchange.files import MODULE_STACKS_FILE, GraphModuleStacks, ModuleStacks, read_json_file
from ..records import CompileRun, Diagnostic, GraphRecord, Launch, SourceLine
from . import compat
from .diagnostics import unreadable_capture_file
from .source_lines import from_traceback, is_tool_file, is_torch_file

FOLDED = "*"
_INDEX = re.compile(r"-?\d+")


def normalize_module_path(raw: str) -> str:
    """A module path as Dynamo wrote it, as the model names it: ``L['self'].layers[0]._modules['mlp']``,
    ``getattr(L['self'].layers, '0').mlp`` and ``L['self'].layers.0.mlp`` are all ``layers.0.mlp``; the root
    module itself is ``""``."""
    path = raw.strip()
    while (unwrapped := compat.MODULE_PATH_GETATTR.sub(r"\g<base>.\g<member>", path)) != path:
        path = unwrapped
    path = compat.MODULE_PATH_ROOT.sub("", path, count=1)
    path = compat.MODULE_PATH_ITEM.sub(r".\g<key>", path)
    return path.strip(".")


def fold_module_path(path: str, mixed: Collection[str] = ()) -> str:
    """Repeated instances as one: ``layers.3.mlp`` -> ``layers.*.mlp``. Every numeric component is folded but
    those under a parent in ``mixed`` (``mixed_parents``): an ``nn.Sequential(conv, bn)``'s ``0`` and ``1`` are
    different modules, not instances."""
    parts = path.split(".")
    folded = [
        FOLDED if _INDEX.fullmatch(part) and ".".join(folded_parts(parts[:index])) not in mixed else part
        for index, part in enumerate(parts)
    ]
    return ".".join(folded)


def folded_parts(parts: list[str]) -> list[str]:
    return [FOLDED if _INDEX.fullmatch(part) else part for part in parts]


def mixed_parents(classes: Mapping[str, str]) -> frozenset[str]:
    """The parents (fully folded) whose numeric children are modules of more than one class: not folded."""
    children: dict[str, set[str]] = {}
    for path, class_name in classes.items():
        parent, _, last = path.rpartition(".")
        if _INDEX.fullmatch(last):
            children.setdefault(".".join(folded_parts(parent.split("."))) if parent else "", set()).add(class_name)
    return frozenset(parent for parent, found in children.items() if len(found) > 1)


def module_depth(path: str) -> int:
    return path.count(".")


def ancestors(path: str) -> tuple[str, ...]:
    """``a.b.c`` -> (``a``, ``a.b``, ``a.b.c``): the modules whose time includes what ``path`` runs."""
    parts = path.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


def attach_module_stacks(run: CompileRun, capture_dir: Path, *, strict: bool = False) -> CompileRun:
    """The run with each launch's module paths from capture/module_stacks.json, where the capture kept one.
    A file that cannot be read leaves the launches as they were, with a warning (``strict``: ParseError)."""
    path = capture_dir / MODULE_STACKS_FILE
    try:
        found = read_json_file(path, ModuleStacks)
        graphs = tuple(_graph_with(graph, found) for graph in run.graphs) if found is not None else run.graphs
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, IndexError) as exc:
        return unreadable_capture_file(run, path, exc, "module stacks not read, no time per module", strict)
    if found is None:
        return run
    run = replace(run, graphs=graphs)
    if not found.errors:
        return run
    warnings = tuple(
        Diagnostic("warning", str(path), f"a graph's module stacks were not recorded ({error})"[:300])
        for error in found.errors
    )
    return replace(run, stats=replace(run.stats, diagnostics=(*run.stats.diagnostics, *warnings)))


@dataclass(frozen=True)
class _CompileModules:
    """One compile's nodes and traces, with normalized paths."""

    node_module: Mapping[str, str]  # pre-grad node -> its innermost module path (nodes under the root omitted)
    trace_modules: Mapping[str, frozenset[str]]  # cleaned stack trace -> the innermost paths of its nodes
    classes: Mapping[str, str]  # every path of the stacks -> its class
    mixed: frozenset[str]  # mixed_parents(classes)


def _compile_modules(found: ModuleStacks, graphs: Iterable[GraphModuleStacks]) -> _CompileModules:
    stacks = [
        [(normalize_module_path(raw), class_name) for raw, class_name in stack] for stack in found.stacks
    ]
    node_module: dict[str, str] = {}
    trace_modules: dict[str, set[str]] = {}
    classes: dict[str, str] = {}
    for graph in graphs:
        for node, (stack_index, trace_index) in graph.nodes.items():
            stack = [(path, class_name) for path, class_name in stacks[stack_index] if path]
            classes.update(stack)
            if not stack:
                continue
            node_module[node] = stack[-1][0]
            trace_modules.setdefault(_clean_trace(found.traces[trace_index]), set()).add(stack[-1][0])
    traced = {trace: frozenset(paths) for trace, paths in trace_modules.items()}
    return _CompileModules(node_module, traced, classes, mixed_parents(classes))


def _clean_trace(trace: str) -> str:
    return trace.replace(compat.GRADIENT_ADDITION_NOTE, "").strip()


def _graph_with(graph: GraphRecord, found: ModuleStacks) -> GraphRecord:
    # The compile Inductor received this graph in; a backward compiled lazily may carry no compile id: its stack
    # traces are then matched to every compile's (a trace names the whole call chain).
    same = [g for g in found.graphs if g.compile_id == graph.compile_id]
    if not same and graph.compile_id is None:
        same = list(found.graphs)
    if not same:
        return graph
    modules = _compile_modules(found, same)
    constants = _constant_traces(graph)
    launches = tuple(
        replace(launch, modules=_launch_modules(graph, launch, modules, constants)) for launch in graph.launches
    )
    return replace(graph, launches=launches, module_classes=modules.classes)


def _launch_modules(
    graph: GraphRecord, launch: Launch, modules: _CompileModules, constant_traces: frozenset[str]
) -> tuple[str, ...]:
    provenance = graph.provenance
    post = launch_nodes(graph, launch)
    if provenance is not None:
        pre = {node for name in post for node in provenance.post_to_pre.get(name, ())}
        if paths := {modules.node_module[node] for node in pre if node in modules.node_module}:
            return tuple(sorted(paths))
    if owners := _parameter_owners(graph, post, modules.classes):
        return owners
    traces = {_clean_trace(trace) for trace in launch_traces(graph, launch)}
    traces = (traces - constant_traces) or traces
    if launch.kind == "extern":  # a library call's traces include its inputs' views: its op's line is its own
        lines = {(line.filename, line.line) for line in node_lines(graph, post)}
        traces = {t for t in traces if (line := innermost_line(t)) and (line.filename, line.line) in lines} or traces
    traced = {path for trace in traces for path in modules.trace_modules.get(trace, ())}
    return _folded_where_repeated(traced, modules.mixed)


def _constant_traces(graph: GraphRecord) -> frozenset[str]:
    """The stack traces of the constants Inductor shares between ops (one ``full_default``, the 0 of every
    ReLU's backward, fused into each kernel that uses it): a constant keeps the trace of the op it was first
    made for, so that trace is in every launch running the constant (the traces they all share), and is no
    launch's own where the launch has others."""
    constants = constant_nodes(graph)
    shared: dict[str, set[str]] = {}
    for launch in graph.launches:
        traces = {_clean_trace(trace) for trace in launch_traces(graph, launch)}
        for node in launch_nodes(graph, launch) & constants if traces else ():
            shared[node] = shared[node] & traces if node in shared else traces
    return frozenset(trace for traces in shared.values() for trace in traces)


def constant_nodes(graph: GraphRecord) -> frozenset[str]:
    """The graph's post-grad nodes that make a value from nothing (``full_default``), under each name the
    kernels' node mappings give them (``scalar_tensor``)."""
    fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
    if fx is None:
        return frozenset()
    constants = {n.name for n in fx.nodes if n.op == "call_function" and not n.inputs}
    for kernel in graph.kernels:
        constants.update(m.source_node for m in kernel.node_mappings if m.aten_nodes and set(m.aten_nodes) <= constants)
    return frozenset(constants)


def launch_nodes(graph: GraphRecord, launch: Launch) -> frozenset[str]:
    """The post-grad FX nodes a launch runs: its provenance handle's, else call()'s comment above it, else its
    kernel's (those of every launch of the kernel: a kernel that each layer launches lists every layer's). A
    library call's handle also names the views and masks that make its inputs: its own op's node, where found,
    is what it runs."""
    provenance = graph.provenance
    if nodes := (provenance.kernel_to_post.get(launch.handle or "") if provenance else None) or launch.source_nodes:
        return _op_nodes(graph, launch, frozenset(nodes)) or frozenset(nodes)
    if launch.kind != "extern" and (kernel := graph.kernel(launch.target)) is not None:
        return frozenset(kernel.post_grad_nodes) | {n for m in kernel.node_mappings for n in m.aten_nodes}
    return frozenset()


def _op_nodes(graph: GraphRecord, launch: Launch, nodes: frozenset[str]) -> frozenset[str]:
    if launch.kind != "extern" or not launch.aten_op:
        return frozenset()
    fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
    op = launch.aten_op.removesuffix(".default")
    return frozenset(
        n.name for n in (fx.nodes if fx else ()) if n.name in nodes and n.target.removesuffix(".default") == op
    )


def launch_traces(graph: GraphRecord, launch: Launch) -> tuple[str, ...]:
    """The stack traces of a launch's nodes, as provenance tracking or the kernel recorded them."""
    traces = graph.provenance.kernel_stack_traces.get(launch.handle or "", ()) if graph.provenance else ()
    if not traces and launch.kind != "extern" and (kernel := graph.kernel(launch.target)) is not None:
        traces = kernel.user_stack
    return traces


def node_lines(graph: GraphRecord, nodes: Collection[str]) -> tuple[SourceLine, ...]:
    """The user lines of these post-grad nodes, from the FX graph's ``# File:`` notes."""
    fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
    return tuple(n.source for n in fx.nodes if n.name in nodes and n.source is not None) if fx is not None else ()


def innermost_line(trace: str) -> SourceLine | None:
    """The line a stack trace's op was written on: its last frame outside torch and inductor-lens."""
    frames = from_traceback(trace.replace(compat.GRADIENT_ADDITION_NOTE, ""))
    mine = [f for f in frames if not is_torch_file(f.filename) and not is_tool_file(f.filename)]
    return mine[-1] if mine else None


def _parameter_owners(graph: GraphRecord, post: Iterable[str], classes: Mapping[str, str]) -> tuple[str, ...]:
    """The modules owning the parameters and buffers a launch reads as graph inputs (``self.conv1.weight``)."""
    fx = graph.fx_graph("readable") or graph.fx_graph("transformed")
    if fx is None:
        return ()
    origins = {n.name: n.origin for n in fx.nodes if n.role in ("parameter", "buffer") and n.origin}
    owners = {
        owner for name in post if (origin := origins.get(name))
        if (owner := normalize_module_path(origin.rpartition(".")[0])) in classes
    }  # fmt: skip
    return tuple(sorted(owners))


def _folded_where_repeated(paths: Iterable[str], mixed: Collection[str]) -> tuple[str, ...]:
    """Paths that one trace ran in several instances of (``layers.0.mlp``, ``layers.1.mlp``) as the folded
    path; a path alone in its fold stays as it is."""
    by_fold: dict[str, set[str]] = {}
    for path in paths:
        by_fold.setdefault(fold_module_path(path, mixed), set()).add(path)
    return tuple(sorted(fold if len(group) > 1 else next(iter(group)) for fold, group in by_fold.items()))
