"""Report stage: the view model of the compilation page (Dynamo frames, graph breaks, recompiles,
guards, compile time and autotuning), built from a CompileRun."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from ..records import (
    AutotuneTable,
    CompilePhase,
    CompileRun,
    DynamoFrame,
    GraphBreak,
    GraphRecord,
    IrStage,
    ShapeSymbol,
)
from ..records.analysis import RunAnalysis
from .kernel_view import autotune_summary
from .outcome_view import (
    OUTCOMES,
    FailureRow,
    LookupView,
    StackNode,
    compile_outcome,
    failure_rows,
    lookup_views,
    stack_trie,
    trie_stack,
)
from .views import compile_summary, frame_anchor, graph_url, kernel_url, stage_url


@dataclass(frozen=True)
class PhaseBar:
    phase: CompilePhase
    percent: float  # of the frame's compile time (the sum of the non-"within" phases)
    slot: int | None  # colour of a slice of the bar; None for "within" items


@dataclass(frozen=True)
class SymbolRow:
    """A symbol a frame created, and what became of it: still dynamic, specialized, or unified with another."""

    symbol: ShapeSymbol
    became: str


@dataclass(frozen=True)
class FrameView:
    frame: DynamoFrame
    anchor: str
    graphs: tuple[GraphRecord, ...]
    breaks: tuple[GraphBreak, ...]
    bars: tuple[PhaseBar, ...]
    total_s: float
    symbols: tuple[SymbolRow, ...] = ()
    dynamic_summary: str = ""
    # "compile 2 of 2 of this frame" where the Python frame was compiled more than once.
    compile_of: str = ""
    outcome: str = "compiled"  # a key of outcome_view.OUTCOMES

    @property
    def outcome_label(self) -> str:
        return OUTCOMES[self.outcome][0]

    @property
    def cache_lookups(self) -> tuple[LookupView, ...]:
        return lookup_views(self.frame, self.graphs)

    @property
    def stages(self) -> tuple[tuple[str, IrStage], ...]:
        """Each IR stage of the compile with its page."""
        return tuple((stage_url(self.frame, i, s.name), s) for i, s in enumerate(self.frame.stages, start=1))


@dataclass(frozen=True)
class AutotuneView:
    table: AutotuneTable
    graph: GraphRecord | None
    chosen_url: str | None
    chosen_label: str | None
    slowest_ms: float
    # The failed choices by reason, the most frequent first: (reason, count).
    failures: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class KernelTuning:
    """How one Triton kernel's launch config was chosen, from the trace's triton_kernel_info."""

    graph: GraphRecord
    kernel: str
    url: str
    value: str
    detail: str


@dataclass(frozen=True)
class BreakSite:
    """One place Dynamo broke the graph, with every compile that broke there (a loop's body breaks each time)."""

    first: GraphBreak
    compile_ids: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.compile_ids)


def break_sites(breaks: tuple[GraphBreak, ...]) -> tuple[BreakSite, ...]:
    """The graph breaks deduplicated by where they happened and why (registry code, else the reason), most first."""
    sites: dict[tuple[str, str], list[GraphBreak]] = {}
    for b in breaks:
        where = b.location.label if b.location else ""
        sites.setdefault((where, b.code or b.reason), []).append(b)
    found = [BreakSite(group[0], tuple(b.compile_id for b in group)) for group in sites.values()]
    return tuple(sorted(found, key=lambda site: -site.count))


@dataclass(frozen=True)
class CompilePage:
    run: CompileRun
    frames: tuple[FrameView, ...]
    autotune: tuple[AutotuneView, ...]
    unframed_graphs: tuple[GraphRecord, ...]
    kernel_tuning: tuple[KernelTuning, ...]
    summary: str = ""
    # Breaks of no known compile (read from Dynamo's debug.log when there is no TORCH_TRACE log).
    unframed_breaks: tuple[GraphBreak, ...] = ()
    break_sites: tuple[BreakSite, ...] = ()
    # The stacks that triggered the compiles, merged (outcome_view.stack_trie), and the compiles without one.
    trie: tuple[StackNode, ...] = ()
    unstacked: tuple[FrameView, ...] = ()
    failures: tuple[FailureRow, ...] = ()
    outcomes: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(OUTCOMES))

    @property
    def recompiles(self) -> tuple[FrameView, ...]:
        return tuple(view for view in self.frames if view.frame.recompile_reasons)

    @property
    def failed_choices(self) -> int:
        return sum(len(view.table.failed) for view in self.autotune)


def compile_page(run: CompileRun, analysis: RunAnalysis) -> CompilePage:
    frames = []
    compiles = Counter(f.frame_key for f in run.frames)
    seen: Counter[str] = Counter()
    outcomes = {}
    for frame in run.frames:
        graphs = tuple(g for g in run.graphs if g.compile_id == frame.compile_id)
        outcomes[frame.compile_id] = compile_outcome(frame, len(graphs))
        seen[frame.frame_key] += 1
        compile_of = (
            f"compile {seen[frame.frame_key]} of {compiles[frame.frame_key]} of frame {frame.frame_key}"
            if compiles[frame.frame_key] > 1
            else ""
        )
        slices = [p for p in frame.phases if not p.within]
        total = sum(p.seconds for p in slices)
        slots = {id(p): index for index, p in enumerate(slices, start=1)}
        bars = tuple(
            PhaseBar(p, 100.0 * p.seconds / total if total > 0 else 0.0, slots.get(id(p)))
            for p in frame.phases
        )
        frames.append(
            FrameView(
                frame=frame,
                anchor=frame_anchor(frame.compile_id),
                graphs=graphs,
                breaks=tuple(b for b in run.graph_breaks if b.compile_id == frame.compile_id),
                bars=bars,
                total_s=total,
                symbols=_symbol_rows(frame, run.graphs, analysis),
                dynamic_summary=_dynamic_summary(frame),
                compile_of=compile_of,
                outcome=outcomes[frame.compile_id],
            )
        )
    framed = {f.compile_id for f in run.frames}
    return CompilePage(
        run=run,
        frames=tuple(frames),
        autotune=tuple(_autotune_view(run, table) for table in run.autotune),
        unframed_graphs=tuple(g for g in run.graphs if g.compile_id not in framed),
        kernel_tuning=tuple(
            KernelTuning(
                graph, kernel.name, kernel_url(graph, kernel.name), *autotune_summary(kernel.autotune_info)
            )
            for graph, kernel in run.all_kernels()
            if kernel.autotune_info
        ),
        summary=compile_summary(run),
        unframed_breaks=tuple(b for b in run.graph_breaks if b.compile_id not in framed),
        break_sites=break_sites(run.graph_breaks),
        trie=tuple(stack_trie(run.frames, outcomes)),
        unstacked=tuple(view for view in frames if not trie_stack(view.frame.stack)),
        failures=failure_rows(run.frames, run.graph_breaks),
    )


def _symbol_rows(
    frame: DynamoFrame, graphs: tuple[GraphRecord, ...], analysis: RunAnalysis
) -> tuple[SymbolRow, ...]:
    """Each symbol the frame created: specialized to a constant, a size of its graphs, or neither
    (replaced by an equal symbol, ``Eq(s70, s53)``, or not used by the compiled code)."""
    specialized = {s.symbol: s.value for s in frame.specializations}
    used = {s.name for g in graphs if g.compile_id == frame.compile_id for s in g.symbols}
    rows = []
    for symbol in frame.symbols:
        equal = [
            g.expr
            for g in frame.shape_guards
            if g.expr.startswith("Eq(") and symbol.name in analysis.guard_symbols[g.expr]
        ]
        if symbol.name in specialized:
            became = f"specialized to {specialized[symbol.name]}"
        elif symbol.name in used:
            became = f"dynamic, {equal[0]}" if equal else "dynamic"
        elif equal:
            became = f"replaced: {equal[0]}"
        else:
            became = "not in the compiled graphs"
        rows.append(SymbolRow(symbol, became))
    return tuple(rows)


def _dynamic_summary(frame: DynamoFrame) -> str:
    if not (frame.symbols or frame.shape_guards):
        return ""

    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    return ", ".join(
        (
            count(len(frame.symbols), "symbol"),
            f"{len(frame.specializations)} specialized",
            count(len(frame.shape_guards), "guard") + " on sizes",
        )
    )


def _autotune_view(run: CompileRun, table: AutotuneTable) -> AutotuneView:
    graph = run.graph(table.graph_id) if table.graph_id else None
    url = label = None
    if graph is not None and table.chosen_kernel:
        url, label = kernel_url(graph, table.chosen_kernel), table.chosen_kernel
    elif graph is not None and table.chosen_launch:
        launch = next((x for x in graph.launches if x.position == table.chosen_launch), None)
        url = f"{graph_url(graph)}#launch-{table.chosen_launch}"
        label = f"launch #{table.chosen_launch}" + (f" {launch.label}" if launch is not None else "")
    slowest = max((c.ms for c in table.choices if math.isfinite(c.ms)), default=0.0)
    failures = Counter(f.reason for f in table.failed).most_common()
    return AutotuneView(
        table=table,
        graph=graph,
        chosen_url=url,
        chosen_label=label,
        slowest_ms=slowest,
        failures=tuple(failures),
    )
