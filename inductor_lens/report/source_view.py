"""Report stage: the view model of the source page: the user's code, each line annotated with the
kernels (and library calls) its ops ended up in, the graph breaks it caused, and the modules get_model()
built on it (for a model of torch's own modules, such as nn.Sequential, the only lines of it that are the
user's: its forward, and every frame and FX note of its compile, are torch's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..parse import compat
from ..records import CompileRun, GraphRecord, SourceLine
from .views import kernel_url, launch_category, launch_url


@dataclass(frozen=True)
class LineUse:
    label: str
    url: str
    category: str
    graph: str
    backward: bool = False


@dataclass
class AnnotatedLine:
    number: int
    text: str
    uses: list[LineUse] = field(default_factory=list)
    breaks: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)  # "0: Linear": a module get_model() built on this line


@dataclass(frozen=True)
class SourceFileView:
    path: str
    anchor: str
    lines: tuple[AnnotatedLine, ...]
    complete: bool  # True: the whole file; False: only the lines torch quoted


@dataclass(frozen=True)
class SourcePage:
    run: CompileRun
    files: tuple[SourceFileView, ...]
    # The model built by get_model() ("Sequential"), where its forward is torch's own code (compiled through
    # torch's wrap_inline frame): no line of the model file can have ops, only where its modules were built.
    torch_forward: str = ""


def line_anchor(file_index: int, line: int) -> str:
    return f"f{file_index}-L{line}"


def file_order(run: CompileRun) -> list[str]:
    """Every user file the report refers to: files with text first, then quoted-only ones."""
    names = dict.fromkeys(s.path for s in run.sources)
    for filename, _ in _uses(run):
        names.setdefault(filename, None)
    for site in run.capture.model_built if run.capture else ():
        names.setdefault(site.filename, None)
    return list(names)


def torch_forward(run: CompileRun) -> str:
    """The model's type where a frame compiled it through torch's wrap_inline frame (its forward is torch's)."""
    wrapped = any(f.stack and compat.is_wrap_inline_frame(f.stack[-1].filename, f.stack[-1].function)
                  for f in run.frames)  # fmt: skip
    built = run.capture.model_built if run.capture else ()
    return (built[0].function or "") if wrapped and built else ""


def line_urls(run: CompileRun) -> dict[tuple[str, int], str]:
    """(file, line) -> its anchor on the source page, for every line the report refers to."""
    index = {name: i for i, name in enumerate(file_order(run))}
    urls = {}
    for graph in run.graphs:
        for kernel in graph.kernels:
            for line in kernel.source_lines:
                if line.filename in index:
                    urls[(line.filename, line.line)] = (
                        f"source.html#{line_anchor(index[line.filename], line.line)}"
                    )
    for graph_break in run.graph_breaks:
        for stack_line in (graph_break.location, *graph_break.user_stack):
            if stack_line is not None and stack_line.filename in index:
                urls[(stack_line.filename, stack_line.line)] = (
                    f"source.html#{line_anchor(index[stack_line.filename], stack_line.line)}"
                )
    return urls


def _uses(run: CompileRun) -> dict[tuple[str, int], tuple[SourceLine, list[LineUse]]]:
    uses: dict[tuple[str, int], tuple[SourceLine, list[LineUse]]] = {}

    def add(line: SourceLine, use: LineUse) -> None:
        entry = uses.setdefault((line.filename, line.line), (line, []))
        if use not in entry[1]:
            entry[1].append(use)

    for graph in run.graphs:
        for kernel in graph.kernels:
            use = LineUse(
                kernel.name,
                kernel_url(graph, kernel.name),
                kernel.category,
                graph.id,
                graph.kind == "backward",
            )
            for line in kernel.source_lines:
                add(line, use)
        _extern_uses(graph, add)
    return uses


def _extern_uses(graph: GraphRecord, add: Callable[[SourceLine, LineUse], None]) -> None:
    """Library calls reach user lines through the FX nodes their provenance handle names."""
    fx = graph.fx_graph("transformed") or graph.fx_graph("readable")
    if fx is None or graph.provenance is None:
        return
    sources = {n.name: n.source for n in fx.nodes if n.source is not None}
    for launch in graph.launches:
        if launch.kind != "extern":
            continue
        use = LineUse(
            launch.label,
            launch_url(graph, launch),
            launch_category(graph, launch),
            graph.id,
            graph.kind == "backward",
        )
        for node in graph.provenance.kernel_to_post.get(launch.handle or "", ()):
            if node in sources:
                add(sources[node], use)


def source_page(run: CompileRun) -> SourcePage:
    uses = _uses(run)
    breaks: dict[tuple[str, int], list[str]] = {}
    for graph_break in run.graph_breaks:
        if graph_break.location is not None:
            key = (graph_break.location.filename, graph_break.location.line)
            breaks.setdefault(key, []).append(graph_break.reason)
    built: dict[tuple[str, int], list[SourceLine]] = {}
    for site in run.capture.model_built if run.capture else ():
        built.setdefault((site.filename, site.line), []).append(site)
    texts = {s.path: s.text for s in run.sources}
    files = []
    for index, name in enumerate(file_order(run)):
        if name in texts:
            lines = [AnnotatedLine(n, text) for n, text in enumerate(texts[name].splitlines(), start=1)]
            complete = True
        else:
            quoted = {line.line: line for (f, _), (line, _) in uses.items() if f == name}
            quoted.update({n: sites[0] for (f, n), sites in built.items() if f == name and n not in quoted})
            lines = [AnnotatedLine(n, quoted[n].code or "") for n in sorted(quoted)]
            complete = False
        for line in lines:
            line.uses = sorted(uses.get((name, line.number), (None, []))[1], key=lambda u: (u.graph, u.label))
            line.breaks = breaks.get((name, line.number), [])
            line.built = [site.function or "" for site in built.get((name, line.number), [])]
        files.append(SourceFileView(path=name, anchor=f"file-{index}", lines=tuple(lines), complete=complete))
    return SourcePage(run=run, files=tuple(files), torch_forward=torch_forward(run))
