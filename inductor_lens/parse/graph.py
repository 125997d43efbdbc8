"""Parse stage: one graph folder -> GraphRecord, joining what each file says about its kernels.

Each file goes to the parser the registry declares for it (``readers.py``), and what it finds lands
in the record field the declaration names. Kernels come from ``output_code.py``. Provenance (the
folder's json, or the TORCH_TRACE copy for backward graphs, which get no json file) adds the
post-grad FX nodes of each kernel; through the FX graph those give C++ kernels the ATen ops that
Triton kernels carry in their header comments. A folder Inductor left without output code because its FX
graph cache served the graph (a repeated layer's graph, a recompile of the same graph) is read from the
TORCH_TRACE log's copies of its files, as a bare trace's graphs are, and marked as a cache hit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import Any, cast, get_args

from ..records import (
    FxGraph,
    GraphKind,
    GraphRecord,
    InductorBenchmark,
    KernelRecord,
    Launch,
    Provenance,
    SourceLine,
)
from ..records.wording import TRACE_GRAPH_PREFIX
from . import compat, readers, registry
from .diagnostics import Diagnostics
from .dynamic import graph_symbols
from .layout import DebugLayout, GraphFolder
from .output_code import OutputCode
from .provenance import build_provenance
from .readers import REGISTRY
from .source_lines import distinct_lines, from_traceback, user_frames
from .symbolic import SYM_TYPE
from .trace import GraphTrace, TracedGraph, TraceSummary

_MAX_FILE_BYTES = 32 * 1024 * 1024
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# The file of a graph's kernels and launches (the one registered parser of readers.KERNELS).
OUTPUT_CODE = next(p.reads for p in REGISTRY.of("graph file", readers.KERNELS))


@dataclass(frozen=True)
class GraphContext:
    layout: DebugLayout
    traces: TraceSummary
    logged_compile_ids: dict[str, str]
    diagnostics: Diagnostics
    multiple_runs: bool


@dataclass(frozen=True)
class GraphFiles:
    """One graph's files: a graph folder's, or those a bare TORCH_TRACE log holds."""

    id: str
    name: str  # the folder's name
    where: str  # the folder, or the trace file and line of the output code
    files: tuple[str, ...]
    texts: dict[str, str]  # the text of each file a registered parser reads
    kind: GraphKind | None = None  # None: from the folder's name
    compile_id: str | None = None  # None: from the trace (or log) through the output code's md5
    sibling_key: tuple[str, str] | None = None  # (run folder, graph folder): other processes' kernel info
    cache_hit: bool = False  # served from Inductor's FX graph cache (its trace lookup says so)


def parse_graph_folder(
    folder: GraphFolder, context: GraphContext, traced: TracedGraph | None = None
) -> GraphRecord:
    """``traced``: the trace's record of this graph (``traced_folders``), read in place of a folder Inductor left
    without output code (a graph served from its FX graph cache)."""
    where_folder = context.layout.relative(folder.path)
    files, texts = _read_files(folder, where_folder, context.diagnostics)
    name = folder.path.name
    graph = GraphFiles(_graph_id(folder, context), name, where_folder, tuple(files), texts,
                       sibling_key=(folder.path.parent.parent.name, name))  # fmt: skip
    if traced is not None and OUTPUT_CODE not in texts:
        graph = replace(graph, files=tuple(dict.fromkeys((*files, *traced.files))), texts={**traced.files, **texts},
                        compile_id=traced.compile_id, cache_hit=traced.fx_cache == "hit")  # fmt: skip
    return parse_graph_files(graph, context)


def traced_graph_files(traced: TracedGraph) -> GraphFiles:
    """A graph of a bare trace, named by its compile id and kind (``0/1 inference``)."""
    kind = cast(GraphKind, traced.kind if traced.kind in get_args(GraphKind) else "unknown")
    name = f"{traced.compile_id} {traced.kind}"
    graph_id = TRACE_GRAPH_PREFIX + (_SLUG_UNSAFE.sub("_", f"{traced.compile_id}_{traced.kind}").strip("._") or "graph")
    return GraphFiles(graph_id, name, traced.where, tuple(traced.files), dict(traced.files), kind=kind,
                      compile_id=traced.compile_id, cache_hit=traced.fx_cache == "hit")  # fmt: skip


def lacks_output_code(folder: GraphFolder) -> bool:
    return not (folder.path / OUTPUT_CODE).is_file()


def traced_folders(
    folders: Sequence[GraphFolder], traced: Sequence[TracedGraph], logged_compile_ids: Mapping[str, str]
) -> dict[Path, int] | None:
    """Each graph folder's graph in the trace (its index in ``traced``), or None where they cannot be told.

    A folder is its compile's graph of its kind, by the compile id the process log gives it (Inductor's
    ``debug trace:`` lines); without a log, by order, when there are as many of each: a folder's ``.<k>``
    counts the graphs of its process, and the trace logs their output code in the same order."""
    names = {f.path: compat.GRAPH_FOLDER.match(f.path.name) for f in folders}
    if any(f.path.name in logged_compile_ids for f in folders):
        unused: dict[tuple[str, str], list[int]] = {}
        for index, graph in enumerate(traced):
            unused.setdefault((graph.compile_id, graph.kind), []).append(index)
        found: dict[Path, int] = {}
        for folder in folders:
            match, compile_id = names[folder.path], logged_compile_ids.get(folder.path.name)
            same = unused.get((compile_id, match["kind"])) if match and compile_id else None
            if same:
                found[folder.path] = same.pop(0)
        return found
    if len(folders) != len(traced) or not all(names.values()):
        return None
    ordered = sorted(folders, key=lambda f: int(names[f.path]["counter"] or 0))  # type: ignore[index]
    if any(names[f.path]["kind"] != g.kind for f, g in zip(ordered, traced, strict=True)):  # type: ignore[index]
        return None
    return {f.path: index for index, f in enumerate(ordered)}


def parse_graph_files(graph: GraphFiles, context: GraphContext) -> GraphRecord:
    diagnostics = context.diagnostics
    where_folder, files, texts = graph.where, graph.files, graph.texts

    def where(name: str) -> str:
        return f"{where_folder}/{name}"

    def results(goes_to: str) -> list[Any]:
        """What the registered parsers of the files present found for one record field, in order."""
        found = []
        for parser in REGISTRY.of("graph file", goes_to):
            if parser.reads in texts:
                text, at = texts[parser.reads], where(parser.reads)
                found.append(registry.run(parser, at, diagnostics, text, at, diagnostics))
        return [r for r in found if r is not None]

    parsed = OutputCode(kernels=(), launches=())
    output_code = texts.get(OUTPUT_CODE, "")
    if output_code:
        parsed = next(iter(results(readers.KERNELS)), parsed)
    else:
        diagnostics.warn(where_folder, f"no {OUTPUT_CODE} (the compile of this graph may have failed)")
    fx_graphs = tuple(results(readers.FX_GRAPHS))
    ir = tuple(results(readers.IR_DUMPS))
    for dump in ir:
        if not dump.nodes and not dump.text.strip() and parsed.launches:
            diagnostics.warn(
                where(f"ir_{dump.stage}.txt"), f"empty, but the graph makes {len(parsed.launches)} launch(es)"
            )

    md5 = hashlib.md5(output_code.encode("utf-8")).hexdigest() if output_code else None
    traced = context.traces.graphs.get(md5) if md5 else None
    provenance = _provenance(texts, results(readers.PROVENANCE), traced, where, diagnostics)
    name = graph.name
    compile_id = graph.compile_id or (traced.compile_id if traced else context.logged_compile_ids.get(name))
    match = compat.GRAPH_FOLDER.match(name)
    kind: GraphKind = graph.kind or (match["kind"] if match else "unknown")  # type: ignore[assignment]

    frame = context.traces.frames.get(compile_id) if compile_id else None
    fx_graphs = tuple(_with_roles(g, kind, frame.placeholders if frame else []) for g in fx_graphs)
    transformed = next((g for g in fx_graphs if g.stage == "transformed"), None) or (
        fx_graphs[0] if fx_graphs else None
    )
    kernels, launches = parsed.kernels, parsed.launches
    if provenance is not None:
        kernels, launches = _join_provenance(
            kernels, launches, provenance, transformed, where_folder, diagnostics
        )
    kernel_info = frame.kernel_info if frame else {}
    sibling_info = context.traces.module_kernel_info.get(graph.sibling_key, {}) if graph.sibling_key else {}
    kernels = tuple(
        replace(
            k,
            source_lines=_kernel_source_lines(k, transformed),
            autotune_info=_kernel_info(kernel_info.get(k.name, {}), sibling_info.get(k.name, {})),
        )
        for k in kernels
    )
    for benchmarks in results(readers.BENCHMARKS):
        kernels = _join_benchmarks(kernels, benchmarks)

    if match is None and graph.kind is None:
        diagnostics.note(where_folder, "folder name does not follow <model>__<aot>_<kind>_<n>.<k>")
    buffers = {n.name: n.type for g in fx_graphs for n in g.nodes if n.op == "placeholder" and n.type}
    buffers.update(parsed.buffers)
    symbols = graph_symbols(fx_graphs, parsed, frame, where_folder, diagnostics)
    return GraphRecord(
        id=graph.id,
        name=match.group(0).rsplit(".", 1)[0] if match and match["counter"] else name,
        folder=where_folder,
        kind=kind,
        aot_id=int(match["aot_id"]) if match else None,
        nth=int(match["nth"]) if match else None,
        compile_id=compile_id,
        files=tuple(files),
        output_code=output_code,
        kernels=kernels,
        launches=launches,
        fx_graphs=fx_graphs,
        ir=ir,
        provenance=provenance,
        buffers=buffers,
        aliases=parsed.aliases,
        outputs=parsed.outputs,
        symbols=symbols,
        fx_cache_key=traced.cache_key if traced else None,
        cache_hit=graph.cache_hit,
    )


def _read_files(
    folder: GraphFolder, where_folder: str, diagnostics: Diagnostics
) -> tuple[list[str], dict[str, str]]:
    """Every file's name, and the text of each file a registered parser reads; unknown files are warned."""
    files: list[str] = []
    texts: dict[str, str] = {}
    for path in sorted(folder.path.iterdir()):
        if not path.is_file() or path.is_symlink():
            continue
        files.append(path.name)
        diagnostics.files_seen += 1
        parser = REGISTRY.find("graph file", path.name)
        if parser is None:
            diagnostics.warn(f"{where_folder}/{path.name}", registry.not_known("graph file", path.name))
            continue
        if parser.shown:
            text = _read_text(path, f"{where_folder}/{path.name}", diagnostics)
            if text is None:
                continue
            texts[path.name] = text
        diagnostics.files_parsed += 1
    return files, texts


def _read_text(path: Path, where: str, diagnostics: Diagnostics) -> str | None:
    try:
        size = path.stat().st_size
        if size > _MAX_FILE_BYTES:
            diagnostics.warn(
                where, f"{size / 1e6:.0f} MB is over the {_MAX_FILE_BYTES // 2**20} MiB limit; skipped"
            )
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        diagnostics.warn(where, f"cannot read: {exc.strerror}")
        return None


def _graph_id(folder: GraphFolder, context: GraphContext) -> str:
    """A file-name-safe id, prefixed with the run folder when several runs share one tree."""
    name = _SLUG_UNSAFE.sub("_", folder.path.name).strip("._") or "graph"
    if context.multiple_runs and folder.run_dir is not None:
        run = _SLUG_UNSAFE.sub("_", folder.run_dir.name).strip("._")
        return f"{run}--{name}"
    return name


def _provenance(
    texts: dict[str, str],
    mappings: list[dict[str, Any]],
    traced: GraphTrace | None,
    where: Callable[[str], str],
    diagnostics: Diagnostics,
) -> Provenance | None:
    """The folder's provenance json when there is one (its parser gave ``mappings``, or a warning),
    else the copy in the TORCH_TRACE log (backward graphs get no json file)."""
    present = [p.reads for p in REGISTRY.of("graph file", readers.PROVENANCE) if p.reads in texts]
    if present:
        stack = traced.stack_traces if traced else None
        return build_provenance(
            mappings[0] if mappings else None, stack, "debug folder", where(present[0]), diagnostics
        )
    if traced and (traced.mappings or traced.stack_traces):
        return build_provenance(
            traced.mappings, traced.stack_traces, "TORCH_TRACE log", "TORCH_TRACE", diagnostics
        )
    return None


def _join_provenance(
    kernels: tuple[KernelRecord, ...],
    launches: tuple[Launch, ...],
    provenance: Provenance,
    fx_graph: FxGraph | None,
    where: str,
    diagnostics: Diagnostics,
) -> tuple[tuple[KernelRecord, ...], tuple[Launch, ...]]:
    targets = (
        {n.name: _op_name(n.target) for n in fx_graph.nodes if n.op == "call_function"} if fx_graph else {}
    )
    handles = {launch.handle for launch in launches if launch.handle}
    stray = [h for h in provenance.kernel_to_post if h not in handles]
    if stray and handles:
        diagnostics.note(
            where, f"provenance names {len(stray)} kernel handle(s) this graph does not launch; ignored"
        )

    def nodes_for(handle: str | None) -> tuple[str, ...]:
        return provenance.kernel_to_post.get(handle, ()) if handle in handles else ()

    def aten_for(nodes: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(targets[n] for n in nodes if n in targets))

    def pre_grad_for(nodes: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for n in nodes for p in provenance.post_to_pre.get(n, ())))

    new_launches = []
    for launch in launches:
        nodes = nodes_for(launch.handle)
        if launch.kind == "extern":
            # Inductor's comment above a library call lists its neighbours' ops too (an mm under
            # "aten.gelu"); the call computes its own FX node only.
            own = tuple(n for n in nodes if targets.get(n) == _op_name(launch.aten_op or ""))
            if own:
                new_launches.append(replace(launch, aten_ops=aten_for(own), source_nodes=pre_grad_for(own)))
                continue
        new_launches.append(
            replace(
                launch,
                aten_ops=launch.aten_ops or aten_for(nodes),
                source_nodes=launch.source_nodes or pre_grad_for(nodes),
            )
        )
    new_kernels = []
    for kernel in kernels:
        kernel_handles = [
            launch.handle for launch in launches if launch.target == kernel.name and launch.handle
        ]
        nodes = tuple(dict.fromkeys(n for h in kernel_handles for n in nodes_for(h)))
        stacks = tuple(
            dict.fromkeys(
                s for h in kernel_handles if h in handles for s in provenance.kernel_stack_traces.get(h, ())
            )
        )
        new_kernels.append(
            replace(
                kernel,
                post_grad_nodes=nodes,
                aten_ops=kernel.aten_ops or aten_for(nodes),
                source_nodes=kernel.source_nodes or pre_grad_for(nodes),
                user_stack=stacks,
            )
        )
    return tuple(new_kernels), tuple(new_launches)


def _kernel_info(own: dict[str, Any], sibling: dict[str, Any]) -> dict[str, Any]:
    """The compile's triton_kernel_info, plus the run-time choice another process logged for the same
    kernel (the compiling process records the configs it tried, not the one its autotuner kept)."""
    if "best_config" in own or "best_config" not in sibling:
        return own
    return {**own, "best_config": sibling["best_config"], "best_config_logged_in": sibling.get("logged_in", "")}


def _op_name(target: str) -> str:
    """``aten.addmm.default`` -> ``aten.addmm`` (the form Inductor's ``Original ATen`` comments use)."""
    parts = target.split(".")
    return ".".join(parts[:2]) if len(parts) >= 3 and parts[0] in ("aten", "prims") else target


def _join_benchmarks(
    kernels: tuple[KernelRecord, ...], results: dict[str, InductorBenchmark]
) -> tuple[KernelRecord, ...]:
    joined = []
    for kernel in kernels:
        stem = PurePath(kernel.kernel_path).stem if kernel.kernel_path else ""
        result = next((r for prefix, r in results.items() if stem.startswith(prefix)), None)
        joined.append(replace(kernel, inductor_benchmark=result) if result else kernel)
    return tuple(joined)


# --- placeholders and source lines ----------------------------------------------------------------

_DYNAMO_NAME = re.compile(r"^L_(?P<path>.+?)_?$")


def _with_roles(fx_graph: FxGraph, kind: str, placeholders: list[tuple[str, str]]) -> FxGraph:
    """Mark each placeholder as a model input, parameter or buffer (forward/inference graphs, from
    Dynamo's own graph, whose placeholders come in the same order) or as a tangent / saved tensor
    (backward graphs)."""
    inputs = [n for n in fx_graph.nodes if n.op == "placeholder"]
    roles: dict[str, tuple[str, str | None]] = {}
    # A Sym(...) placeholder is a size passed as an int (dynamic shapes), in every kind of graph.
    sizes = {n.name: ("size", None) for n in inputs if SYM_TYPE.match(n.type or "")}
    if kind == "backward":
        roles = {n.name: ("tangent" if n.name.startswith("tangents_") else "saved", None) for n in inputs}
    elif len(placeholders) == len(inputs) and all(
        (n.type or "").split("[")[0] == t.split("[")[0] and _shape(n.type) == _shape(t)
        for n, (_, t) in zip(inputs, placeholders, strict=True)
    ):
        for node, (dynamo_name, _) in zip(inputs, placeholders, strict=True):
            roles[node.name] = _dynamo_role(dynamo_name)
    roles.update(sizes)
    if not roles:
        return fx_graph
    nodes = tuple(
        replace(n, role=roles[n.name][0], origin=roles[n.name][1]) if n.name in roles else n
        for n in fx_graph.nodes
    )
    return replace(fx_graph, nodes=nodes)


def _shape(type_text: str | None) -> str:
    """``f32[8, 256, 512][131072, 512, 1]cuda:0`` -> ``8, 256, 512``."""
    return (type_text or "").split("[", 1)[-1].split("]", 1)[0]


def _dynamo_role(name: str) -> tuple[str, str | None]:
    """``L_self_modules_fc1_parameters_weight_`` -> ("parameter", "self.fc1.weight")."""
    match = _DYNAMO_NAME.match(name)
    path = match["path"] if match else name
    readable = path.replace("_modules_", ".").replace("_parameters_", ".").replace("_buffers_", ".")
    if "_parameters_" in path:
        return "parameter", readable
    if "_buffers_" in path:
        return "buffer", readable
    return "input", readable


def _kernel_source_lines(kernel: KernelRecord, fx_graph: FxGraph | None) -> tuple[SourceLine, ...]:
    """The user lines a kernel's ops came from: FX node comments, provenance stack traces, ORIGIN blocks."""
    names = {n for m in kernel.node_mappings for n in m.aten_nodes} | set(kernel.post_grad_nodes)
    found: list[SourceLine] = []
    if fx_graph is not None:
        found.extend(n.source for n in fx_graph.nodes if n.name in names and n.source is not None)
    for trace in kernel.user_stack:
        found.extend(user_frames(from_traceback(trace)))
    for segment in kernel.origins:
        found.extend(segment.source)
    return distinct_lines(found)
