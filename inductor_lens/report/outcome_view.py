"""Report stage: what became of each compile, as tlparse shows it, built from the Dynamo frames of a CompileRun.

- each compile's *outcome*, by tlparse's rules (its stack trie's colours): failed, produced no graph, compiled
  with graph breaks, compiled after a restart, compiled; or no compilation metrics;
- the *stack trie*: the Python stacks that triggered the compiles (``dynamo_start``), common prefixes merged,
  each compile at the line its stack ends on;
- the *failures and restarts*: one row per attempt that failed or restarted;
- each compile's lookups in AOTAutograd's cache and the FX graph cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..records import CacheLookup, DynamoFrame, GraphBreak, GraphRecord, SourceLine
from ..records.wording import CACHE_COMPONENT_CHARS, is_tool_file, is_user_file
from .views import frame_anchor

# Each outcome: its legend label and what it means, in the order of the legend. A compile gets the first that holds.
OUTCOMES: dict[str, tuple[str, str]] = {
    "failed": (
        "failed",
        "Dynamo, AOTAutograd or Inductor raised (compilation_metrics' fail_type): the frame runs without compiled code",
    ),
    "no-graph": (
        "produced no graph",
        "Dynamo traced the frame but found no op to compile (graph_op_count is 0 or absent and no graph was compiled)",
    ),
    "graph-breaks": ("compiled, with graph breaks", "the graph ends at a graph break; the code after it is a frame of its own"),
    "restarted": (
        "compiled after a restart",
        "Dynamo restarted the analysis (restart_reasons) and then compiled the frame whole",
    ),
    "compiled": ("compiled", "one graph, compiled on the first attempt"),
    "no-metrics": ("no compilation metrics", "the trace has no compilation_metrics record of it: it did not finish"),
}  # fmt: skip

# The trailing frames of Dynamo's own frame conversion, which tlparse also drops (older releases log them).
_CONVERT_FRAME = "torch/_dynamo/convert_frame.py"
# A library file is named from its package on: ".../site-packages/torch/nn/modules/module.py" -> "torch/nn/...".
_PACKAGES = re.compile(r"^.*/(?:site|dist)-packages/")


def compile_outcome(frame: DynamoFrame, compiled_graphs: int) -> str:
    """tlparse's rules, with its "success with restart" split into graph breaks and other restarts."""
    if frame.fail_type:
        return "failed"
    if frame.compile_time_s is None and frame.function is None:
        return "no-metrics"
    if frame.graph_op_count == 0 or (frame.graph_op_count is None and not compiled_graphs):
        return "no-graph"
    if frame.graph_breaks:
        return "graph-breaks"
    if frame.restart_reasons:
        return "restarted"
    return "compiled"


@dataclass(frozen=True)
class TrieCompile:
    """A compile at the end of its stack in the trie."""

    compile_id: str
    anchor: str
    outcome: str


@dataclass(frozen=True)
class TrieLine:
    """A line of a stack as the trie shows it: library files named from their package on, and told apart."""

    line: SourceLine

    @property
    def label(self) -> str:
        return f"{_PACKAGES.sub('', self.line.filename)}:{self.line.line}"

    @property
    def library(self) -> bool:
        return not is_user_file(self.line.filename)


@dataclass
class StackNode:
    """A run of stack lines with no branch between them, the compiles whose stack ends at its last line, and
    the runs that follow it."""

    lines: list[TrieLine]
    compiles: list[TrieCompile] = field(default_factory=list)
    children: list[StackNode] = field(default_factory=list)

    @property
    def segments(self) -> list[tuple[bool, list[TrieLine]]]:
        """The lines in runs of library lines and of the user's own: (library, lines); the page folds a run
        of several library lines (torch's module call and compile wrappers) under one line."""
        runs: list[tuple[bool, list[TrieLine]]] = []
        for line in self.lines:
            if runs and runs[-1][0] == line.library:
                runs[-1][1].append(line)
            else:
                runs.append((line.library, [line]))
        return runs


def trie_stack(stack: tuple[SourceLine, ...]) -> tuple[SourceLine, ...]:
    """The stack as the trie shows it: without inductor-lens's own frames (its model process, runpy) and
    without Dynamo's frame-conversion frames at the end."""
    lines = [line for line in stack if not is_tool_file(line.filename)]
    while lines and lines[-1].filename.endswith(_CONVERT_FRAME):
        lines.pop()
    return tuple(lines)


def stack_trie(frames: tuple[DynamoFrame, ...], outcomes: dict[str, str]) -> list[StackNode]:
    """The stacks of the frames that have one, merged on common prefixes; lines compare by file, line and
    function. Children keep the order in which their first compile came."""
    root = StackNode(lines=[])
    for frame in frames:
        lines = trie_stack(frame.stack)
        if not lines:
            continue
        node = root
        for line in lines:
            child = next((c for c in node.children if _same_line(c.lines[0].line, line)), None)
            if child is None:
                child = StackNode(lines=[TrieLine(line)])
                node.children.append(child)
            node = child
        node.compiles.append(
            TrieCompile(frame.compile_id, frame_anchor(frame.compile_id), outcomes[frame.compile_id])
        )
    for child in root.children:
        _merge_runs(child)
    return root.children


def _same_line(a: SourceLine, b: SourceLine) -> bool:
    return (a.filename, a.line, a.function) == (b.filename, b.line, b.function)


def _merge_runs(node: StackNode) -> None:
    """Fold each line with one child and no compile of its own into one run with the lines that follow it."""
    while len(node.children) == 1 and not node.compiles:
        (only,) = node.children
        node.lines.extend(only.lines)
        node.compiles, node.children = only.compiles, only.children
    for child in node.children:
        _merge_runs(child)


@dataclass(frozen=True)
class FailureRow:
    """An attempt that failed (its exception's type and message) or restarted (Dynamo's restart reason)."""

    compile_id: str  # the attempt
    anchor: str  # the section of the compile it belongs to
    kind: str  # the exception's type, or "restart"
    reason: str
    where: SourceLine | None  # the user line it failed at; for a restart at a graph break, the break's line
    restarted_as: str = ""  # a restart: the attempt that followed it

    @property
    def headline(self) -> str:
        return next((line.strip() for line in self.reason.splitlines() if line.strip()), "")

    @property
    def more(self) -> bool:
        """The reason has more than its first line (torch's explanation and hints)."""
        return self.reason.strip() != self.headline


def failure_rows(frames: tuple[DynamoFrame, ...], breaks: tuple[GraphBreak, ...]) -> tuple[FailureRow, ...]:
    """Per compile, its restarts, then its failure. A restart's attempt is the stub folded into the compile
    (``0/0`` before ``0/0_1``), paired with the restart reasons in order; where the compile broke the graph
    as many times as it restarted, each restart gets its break's line."""
    rows = []
    for frame in frames:
        anchor = frame_anchor(frame.compile_id)
        attempts = (*frame.restarted, frame.compile_id)
        own_breaks = [b for b in breaks if b.compile_id == frame.compile_id]
        for index, reason in enumerate(frame.restart_reasons):
            attempt = attempts[min(index, len(attempts) - 1)]
            following = attempts[index + 1] if index + 1 < len(attempts) else ""
            where = own_breaks[index].location if len(own_breaks) == len(frame.restart_reasons) else None
            rows.append(FailureRow(attempt, anchor, "restart", reason, where, following))
        if frame.fail_type:
            rows.append(
                FailureRow(
                    frame.compile_id, anchor, frame.fail_type, frame.fail_reason or "", frame.fail_user_frame
                )
            )
    return tuple(rows)


@dataclass(frozen=True)
class LookupView:
    """A cache lookup of a compile, with the graph its FX graph cache key names (if it is in the report)."""

    lookup: CacheLookup
    graph: GraphRecord | None

    @property
    def components_note(self) -> str:
        """What of the key's components is shown: "the first 100 of 637; 2 of them cut at 1,000 characters"."""
        lookup = self.lookup
        kept = len(lookup.components)
        shown = (
            f"all {kept}"
            if kept == lookup.components_total
            else f"the first {kept} of {lookup.components_total}"
        )
        if lookup.components_cut:
            shown += f"; {lookup.components_cut} of them cut at {CACHE_COMPONENT_CHARS:,} characters"
        return shown


def lookup_views(frame: DynamoFrame, graphs: tuple[GraphRecord, ...]) -> tuple[LookupView, ...]:
    def named(lookup: CacheLookup) -> GraphRecord | None:
        if lookup.cache != "FX graph" or not lookup.key:
            return None
        return next((g for g in graphs if g.fx_cache_key == lookup.key), None)

    return tuple(LookupView(lookup, named(lookup)) for lookup in frame.cache_lookups)
