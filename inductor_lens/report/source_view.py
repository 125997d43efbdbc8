"""Report stage: the view model of the source page: the time per ``nn.Module`` path (repeated layers folded)
and per line (bench/modules.py, through the analysis), then the user's code, each line annotated with its time, the kernels (and
library calls) its ops ended up in, the graph breaks it caused, and the modules get_model() built on it (for a
model of torch's own modules, such as nn.Sequential, the only lines of it that are the user's: its forward,
and every frame and FX note of its compile, are torch's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..records import CompileRun, GraphRecord, SourceLine
from ..records.analysis import RunAnalysis
from ..records.answers import NO_MODULE_STACKS, OUTSIDE, LineTime, ModuleTime
from .views import kernel_url, launch_category, launch_url


@dataclass(frozen=True)
class LineUse:
    label: str
    url: str
    category: str
    graph: str
    backward: bool = False
    count: int = 1  # launches of the same library op in the same graph, shown once (the first one's url)


@dataclass
class AnnotatedLine:
    number: int
    text: str
    uses: list[LineUse] = field(default_factory=list)
    breaks: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)  # "0: Linear": a module get_model() built on this line
    time: LineTime | None = None  # its launches' time per step (bench/modules.py line_times)


@dataclass(frozen=True)
class LineRow:
    """A line of the time-per-line table, with its anchor in the file view below (None: not shown there)."""

    time: LineTime
    label: str  # "modeling_gpt2.py:239"
    path: str
    url: str | None


@dataclass(frozen=True)
class SourceTimes:
    """What the page says of time: the modules' and the lines', ranked, and what the shares are of."""

    modules: tuple[ModuleTime, ...]
    lines: tuple[LineRow, ...]
    basis: str  # "of the device time per step"
    module_note: str  # why there is no time per module, or how backward launches were tied to modules
    lines_share: float  # the lines' shares added up (launches with no user line are not in the table)


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
    times: SourceTimes | None = None  # None: nothing was timed


def line_anchor(file_index: int, line: int) -> str:
    return f"f{file_index}-L{line}"


def file_order(run: CompileRun, analysis: RunAnalysis) -> list[str]:
    """Every user file the report refers to: files with text first, then quoted-only ones."""
    names = dict.fromkeys(s.path for s in run.sources)
    for filename, _ in _uses(run, analysis):
        names.setdefault(filename, None)
    for line in analysis.line_times:
        names.setdefault(line.filename, None)
    for site in run.capture.model_built if run.capture else ():
        names.setdefault(site.filename, None)
    return list(names)


def torch_forward(run: CompileRun, analysis: RunAnalysis) -> str:
    """The model's type where a frame compiled it through torch's wrap_inline frame (its forward is torch's)."""
    built = run.capture.model_built if run.capture else ()
    return (built[0].function or "") if analysis.wrapped_forward and built else ""


def line_urls(run: CompileRun, analysis: RunAnalysis) -> dict[tuple[str, int], str]:
    """(file, line) -> its anchor on the source page, for every line the report refers to."""
    index = {name: i for i, name in enumerate(file_order(run, analysis))}
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


def _uses(run: CompileRun, analysis: RunAnalysis) -> dict[tuple[str, int], tuple[SourceLine, list[LineUse]]]:
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
        _extern_uses(graph, analysis, add)
    return uses


def _extern_uses(graph: GraphRecord, analysis: RunAnalysis, add: Callable[[SourceLine, LineUse], None]) -> None:
    """Library calls reach user lines through the FX nodes their provenance handle names, or their stack traces."""
    for launch in graph.launches:
        if launch.kind != "extern":
            continue
        use = LineUse(
            launch.label,
            launch_url(graph, launch),
            launch_category(graph, launch, analysis.custom_ops),
            graph.id,
            graph.kind == "backward",
        )
        for line in analysis.graph(graph.id).launch_lines[launch.position]:
            add(line, use)


def _times(run: CompileRun, analysis: RunAnalysis, order: list[str]) -> SourceTimes | None:
    timed = analysis.line_times
    modules = analysis.module_times
    if not timed and not modules:
        return None
    index = {name: i for i, name in enumerate(order)}
    rows = tuple(
        LineRow(t, f"{t.filename.rsplit('/', 1)[-1]}:{t.line}", t.filename,
                f"#{line_anchor(index[t.filename], t.line)}" if t.filename in index else None)
        for t in timed
    )  # fmt: skip
    gpu = run.bench is not None and run.bench.device == "cuda"
    if not any(graph.module_classes for graph in run.graphs):
        note = NO_MODULE_STACKS
    elif any(m.path != OUTSIDE and "stack traces" in m.method for m in modules):
        note = (
            "Backward kernels have no FX node of the forward: they are tied to modules by their stack traces, which "
            "are the same in every instance of a repeated layer, so their time counts for the folded path "
            "(layers.*) and not for one instance; the spread across instances is of the forward's time."
        )
    else:
        note = ""
    return SourceTimes(
        modules=modules,
        lines=rows,
        basis="of the device time per step" if gpu else "of the time in kernels per step",
        module_note=note,
        lines_share=sum(t.share for t in timed),
    )


def _grouped(uses: list[LineUse]) -> list[LineUse]:
    """A line's uses, one badge per kernel or library op and graph (``×N`` for an op launched N times)."""
    first: dict[tuple[str, str], LineUse] = {}
    counts: dict[tuple[str, str], int] = {}
    for use in uses:
        key = (use.graph, use.label)
        first.setdefault(key, use)
        counts[key] = counts.get(key, 0) + 1
    return [replace(first[key], count=counts[key]) for key in sorted(first)]


def source_page(run: CompileRun, analysis: RunAnalysis) -> SourcePage:
    uses = _uses(run, analysis)
    breaks: dict[tuple[str, int], list[str]] = {}
    for graph_break in run.graph_breaks:
        if graph_break.location is not None:
            key = (graph_break.location.filename, graph_break.location.line)
            breaks.setdefault(key, []).append(graph_break.reason)
    built: dict[tuple[str, int], list[SourceLine]] = {}
    for site in run.capture.model_built if run.capture else ():
        built.setdefault((site.filename, site.line), []).append(site)
    texts = {s.path: s.text for s in run.sources}
    order = file_order(run, analysis)
    times = _times(run, analysis, order)
    timed = {(row.path, row.time.line): row.time for row in times.lines} if times else {}
    files = []
    for index, name in enumerate(order):
        if name in texts:
            lines = [AnnotatedLine(n, text) for n, text in enumerate(texts[name].splitlines(), start=1)]
            complete = True
        else:
            quoted = {line.line: line.code for (f, _), (line, _) in uses.items() if f == name}
            quoted.update({n: sites[0].code for (f, n), sites in built.items() if f == name and n not in quoted})
            quoted.update({n: t.code for (f, n), t in timed.items() if f == name and n not in quoted})
            lines = [AnnotatedLine(n, quoted[n] or "") for n in sorted(quoted)]
            complete = False
        for line in lines:
            line.uses = _grouped(uses.get((name, line.number), (None, []))[1])
            line.breaks = breaks.get((name, line.number), [])
            line.built = [site.function or "" for site in built.get((name, line.number), [])]
            line.time = timed.get((name, line.number))
        files.append(SourceFileView(path=name, anchor=f"file-{index}", lines=tuple(lines), complete=complete))
    return SourcePage(run=run, files=tuple(files), torch_forward=torch_forward(run, analysis), times=times)
