"""Records, ranks: one job of several processes (torchrun), a report per rank, and where the ranks diverged.

``RankedRun`` is the small document a multi-rank report keeps beside its pages (``ranks.json``): which
ranks there are, where each rank's own report is (``rank<r>/``, a full single-rank report with its own
lens.json), and how the job was launched and ended. Everything else is derived from the ranks' runs,
here and only here: ``summarize(run)`` reduces a rank's CompileRun to what is compared across ranks
(``RankSummary``), and ``divergences(summaries)`` says where the ranks compiled differently, each
difference as one ``Divergence`` naming the ranks and what differs. The landing page (report/ranks_view.py)
is built from these alone, so it re-renders from the ranks' lens.json files.

Schema history of the ranks document (bump RANKS_SCHEMA_VERSION on any change an older reader would misread):
  1: first version: the ranks with their report folders and outcomes, the launch and its error.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from .codec import dumps, from_jsonable, lens_document, to_jsonable
from .graph import GraphRecord
from .run import CompileRun

RANKS_SCHEMA_VERSION = 1
RANKS_JSON = "ranks.json"

Severity = Literal["bad", "warn"]
T = TypeVar("T", bound=Hashable)

# The collective ops of torch.distributed as they appear in FX graphs and output code: the functional
# collectives (``_c10d_functional.all_reduce``), the legacy in-place ops (``c10d.allreduce_``).
_COLLECTIVE = re.compile(r"(?:^|\.)(?:_c10d_functional|c10d_functional|c10d)\.(?P<op>\w+)")
_NOT_COLLECTIVES = {"wait_tensor", "wait"}
# What differs between processes of one job without the compile being different: object ids in
# guards (``___check_obj_id(G['dist'], 140607858087696)``) and absolute paths in output code.
_OBJECT_ID = re.compile(r"\b\d{6,}\b")
_GUARD_COMMENT = re.compile(r"\s+#\s.*$")  # the user line the guard came from, after the guard
_KERNEL_PATH = re.compile(r"^\s*# kernel path: .*$", re.MULTILINE)
_QUOTED_PATH = re.compile(r"(['\"])/[^'\"\n]*\1")
_SHOWN = 3  # guard lines, kernel names... named per divergence before "and N more"


@dataclass(frozen=True)
class RankEntry:
    """One rank of the job: its report folder (relative to the multi-rank report) and how its process ended."""

    rank: int
    folder: str  # "rank0"
    status: str = "ok"  # "ok", "failed", "timeout" (its capture's status), "missing" (no output)
    error: str | None = None
    source: str = ""  # what the rank's report was built from


@dataclass(frozen=True)
class RankedRun:
    """The ``ranks.json`` document of a multi-rank report."""

    title: str
    created: str
    tool_version: str
    source_dir: str
    ranks: tuple[RankEntry, ...] = ()
    launch: str = ""  # how the ranks were started: "compile --nproc 2 (gloo)", a torchrun command line, or ""
    error: str | None = None  # the job's failure, one line naming the rank

    def to_json(self) -> str:
        return dumps({"schema_version": RANKS_SCHEMA_VERSION, "ranks": to_jsonable(self)})

    @classmethod
    def from_json(cls, text: str) -> RankedRun:
        return from_jsonable(cls, lens_document(text, "ranks", RANKS_SCHEMA_VERSION))


@dataclass(frozen=True)
class Collective:
    """A collective op in a compiled graph: ``all_reduce`` of ``f32[32]`` in graph ``0/0 inference``."""

    op: str
    graph: str
    tensor: str = ""

    @property
    def label(self) -> str:
        return f"{self.op}({self.tensor})" if self.tensor else self.op


@dataclass(frozen=True)
class RankGraph:
    """A rank's compiled graph as compared across ranks: matched by ``key``, equal when ``code_hash`` is."""

    key: str  # "0/0 inference": its compile id and kind (its graph id where it has no compile id)
    graph_id: str
    code_hash: str  # of its output code, without paths (each rank has its own cache folders)
    kernels: tuple[str, ...]  # its launches, in order
    collectives: tuple[Collective, ...] = ()


@dataclass(frozen=True)
class RankSummary:
    """What is compared across ranks, from one rank's CompileRun."""

    rank: int
    folder: str
    status: str = "ok"
    error: str | None = None
    compile_ids: tuple[str, ...] = ()
    recompile_reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    graphs: tuple[RankGraph, ...] = ()
    # compile id -> its guard lines, normalised (normalized_guards)
    guards: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    guard_counts: Mapping[str, int | None] = field(default_factory=dict)
    # compile id -> "FX graph cache: 0 hit(s), 1 miss(es)"
    cache: Mapping[str, str] = field(default_factory=dict)
    graph_breaks: tuple[str, ...] = ()  # "model.py:12: reason"
    compile_times: Mapping[str, float | None] = field(default_factory=dict)  # compile id -> seconds
    cold_compile_s: float | None = None  # the first compiled call (a capture)
    step_ms: float | None = None  # the compiled step, end to end (median)
    step_device_us: float | None = None  # the profiled step's time in compiled code
    kernel_us: Mapping[str, float] = field(default_factory=dict)  # kernel -> in-context µs per step

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for g in self.graphs for k in g.kernels))

    @property
    def collectives(self) -> tuple[Collective, ...]:
        return tuple(c for g in self.graphs for c in g.collectives)

    @property
    def compile_s(self) -> float | None:
        times = [t for t in self.compile_times.values() if t is not None]
        return sum(times) if times else None


@dataclass(frozen=True)
class Divergence:
    """One way the ranks compiled differently."""

    # "status", "compile ids", "graphs", "guards", "cache", "kernels", "collectives", "graph breaks"
    aspect: str
    text: str  # one sentence naming the ranks and what differs
    ranks: tuple[int, ...]  # the ranks that differ from the reference rank (the lowest)
    severity: Severity = "warn"  # "bad": the job itself is at risk (collectives that do not match hang)
    details: tuple[str, ...] = ()  # the differing lines, kernels, guards


def summarize(
    rank: int, folder: str, run: CompileRun, *, status: str = "ok", error: str | None = None
) -> RankSummary:
    """The comparable facts of one rank's run."""
    bench = run.bench
    end_to_end = bench.end_to_end if bench is not None else None
    step = bench.step if bench is not None else None
    kernel_us = {kernel.name: kernel.timing.in_context_us for _, kernel in run.all_kernels() if kernel.timing}
    return RankSummary(
        rank=rank,
        folder=folder,
        status=status,
        error=error,
        compile_ids=tuple(f.compile_id for f in run.frames),
        recompile_reasons={f.compile_id: f.recompile_reasons for f in run.frames if f.recompile_reasons},
        graphs=tuple(_rank_graph(g) for g in run.graphs),
        guards={f.compile_id: normalized_guards(f.guards) for f in run.frames if f.guards},
        guard_counts={f.compile_id: f.guard_count for f in run.frames},
        cache={f.compile_id: f.cache for f in run.frames if f.cache},
        graph_breaks=tuple(
            _break_label(b.location.label if b.location else "", b.reason) for b in run.graph_breaks
        ),
        compile_times={f.compile_id: f.compile_time_s for f in run.frames},
        cold_compile_s=run.capture.cold_compile_s if run.capture else None,
        step_ms=end_to_end.compiled.median_ms if end_to_end is not None else None,
        step_device_us=step.total_us if step is not None else None,
        kernel_us=kernel_us,
    )


def graph_key(graph: GraphRecord) -> str:
    return f"{graph.compile_id} {graph.kind}" if graph.compile_id else graph.id


def code_hash(output_code: str) -> str:
    """The output code's hash, blind to what differs between processes compiling the same graph (the paths of
    their kernel files in their own caches)."""
    text = _QUOTED_PATH.sub(r"\1<path>\1", _KERNEL_PATH.sub("", output_code))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def normalized_guards(text: str) -> tuple[str, ...]:
    """A frame's guards, one per line, without the tree drawing and the object ids that differ in every process."""
    lines = []
    for line in text.splitlines():
        guard = _GUARD_COMMENT.sub("", line.lstrip("| +-")).strip()
        if guard and not guard.startswith(
            ("GuardManager:", "RootGuardManager", "TREE_GUARD_MANAGER", "Guard latency")
        ):
            lines.append(_OBJECT_ID.sub("<id>", guard))
    return tuple(lines)


def collectives_of(graph: GraphRecord) -> tuple[Collective, ...]:
    """The collective ops of a graph, in order: from the FX graph Inductor received, else from the launches."""
    key = graph_key(graph)
    fx = graph.fx_graph("readable") or graph.fx_graph("transformed")
    if fx is not None:
        found = [(_collective_op(n.target), n.type or "") for n in fx.nodes]
    else:
        found = [(_collective_op(launch.aten_op or launch.target), "") for launch in graph.launches]
    return tuple(Collective(op, key, tensor) for op, tensor in found if op)


def divergences(summaries: Sequence[RankSummary]) -> tuple[Divergence, ...]:
    """Where the ranks compiled differently, each against the lowest rank; nothing for identical ranks."""
    if len(summaries) < 2:
        return ()
    found: list[Divergence] = []
    for check in (_status, _compile_ids, _graphs, _guards, _cache, _kernels, _collectives, _breaks):
        found.extend(check(summaries))
    return tuple(found)


def _rank_graph(graph: GraphRecord) -> RankGraph:
    return RankGraph(
        key=graph_key(graph),
        graph_id=graph.id,
        code_hash=code_hash(graph.output_code),
        kernels=tuple(launch.label for launch in graph.launches),
        collectives=collectives_of(graph),
    )


def _collective_op(target: str) -> str | None:
    match = _COLLECTIVE.search(target)
    if match is None:
        return None
    op = match["op"].rstrip("_")
    return None if op in _NOT_COLLECTIVES else op


def _break_label(location: str, reason: str) -> str:
    return f"{location}: {reason}" if location else reason


def _ranks(numbers: Sequence[int]) -> str:
    return ("rank " if len(numbers) == 1 else "ranks ") + ", ".join(str(n) for n in numbers)


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _groups(summaries: Sequence[RankSummary], value: Callable[[RankSummary], T]) -> list[tuple[T, list[int]]]:
    """The ranks grouped by ``value``, the reference rank's group first."""
    groups: dict[T, list[int]] = {}
    for summary in summaries:
        groups.setdefault(value(summary), []).append(summary.rank)
    return list(groups.items())


def _status(summaries: Sequence[RankSummary]) -> list[Divergence]:
    failed = [s for s in summaries if s.status != "ok"]
    return [
        Divergence(
            "status", f"rank {s.rank} {s.status}" + (f": {s.error}" if s.error else ""), (s.rank,), "bad"
        )
        for s in failed
    ]


def _compile_ids(summaries: Sequence[RankSummary]) -> list[Divergence]:
    reference = summaries[0]
    found = []
    for ids, ranks in _groups(summaries, lambda s: s.compile_ids)[1:]:
        other = next(s for s in summaries if s.rank == ranks[0])
        extra = [i for i in ids if i not in reference.compile_ids]
        missing = [i for i in reference.compile_ids if i not in ids]
        parts = []
        if extra:
            reasons = [r for i in extra for r in other.recompile_reasons.get(i, ())]
            why = f" (recompiled because {reasons[0]})" if reasons else ""
            parts.append(f"{_ranks(ranks)} compiled {_listed(extra)} that rank {reference.rank} did not{why}")
        if missing:
            parts.append(
                f"{_ranks(ranks)} did not compile {_listed(missing)}, which rank {reference.rank} did"
            )
        text = "; ".join(parts) or f"{_ranks(ranks)} compiled {', '.join(ids)} in another order"
        found.append(Divergence("compile ids", text, tuple(ranks), details=tuple(extra + missing)))
    return found


def _graphs(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """Graphs present on some ranks only are the compile ids' divergence; here: the same graph, other code."""
    reference = summaries[0]
    own = {g.key: g for g in reference.graphs}
    found = []
    for key, graph in own.items():
        groups: dict[str, list[int]] = {}
        graphs = {}
        for summary in summaries[1:]:
            other = next((g for g in summary.graphs if g.key == key), None)
            if other is not None and other.code_hash != graph.code_hash:
                groups.setdefault(other.code_hash, []).append(summary.rank)
                graphs[other.code_hash] = other
        for code, ranks in groups.items():
            other = graphs[code]
            only_other = [k for k in other.kernels if k not in graph.kernels]
            only_ref = [k for k in graph.kernels if k not in other.kernels]
            what = []
            if only_other:
                what.append(f"{_listed(only_other)} only on {_ranks(ranks)}")
            if only_ref:
                what.append(f"{_listed(only_ref)} only on rank {reference.rank}")
            text = (
                f"graph {key} was compiled to other code on {_ranks(ranks)} than on rank {reference.rank}"
                + (f": {'; '.join(what)}" if what else " (the same launches, other kernel code)")
            )
            found.append(Divergence("graphs", text, tuple(ranks), details=tuple(only_other + only_ref)))
    return found


def _guards(summaries: Sequence[RankSummary]) -> list[Divergence]:
    reference = summaries[0]
    found = []
    for compile_id, lines in reference.guards.items():
        groups: dict[tuple[str, ...], list[int]] = {}
        for summary in summaries[1:]:
            other = summary.guards.get(compile_id)
            if other is not None and other != lines:
                groups.setdefault(other, []).append(summary.rank)
        for other, ranks in groups.items():
            only_other = [g for g in other if g not in lines]
            only_ref = [g for g in lines if g not in other]
            text = f"the guards of {compile_id} differ: {_ranks(ranks)} check " + (
                f"{_listed(only_other)} where rank {reference.rank} checks {_listed(only_ref)}"
                if only_other and only_ref
                else f"{len(other)} guard(s), rank {reference.rank} {len(lines)}"
            )
            found.append(Divergence("guards", text, tuple(ranks), details=tuple(only_other + only_ref)))
    return found


def _cache(summaries: Sequence[RankSummary]) -> list[Divergence]:
    reference = summaries[0]
    found = []
    for compile_id, state in reference.cache.items():
        groups: dict[str, list[int]] = {}
        for summary in summaries[1:]:
            other = summary.cache.get(compile_id)
            if other is not None and other != state:
                groups.setdefault(other, []).append(summary.rank)
        for other, ranks in groups.items():
            text = f"{compile_id}: {other} on {_ranks(ranks)}, {state} on rank {reference.rank}"
            found.append(Divergence("cache", text, tuple(ranks)))
    return found


def _kernels(summaries: Sequence[RankSummary]) -> list[Divergence]:
    reference = summaries[0]
    found = []
    for kernels, ranks in _groups(summaries, lambda s: tuple(sorted(s.kernels)))[1:]:
        only_other = [k for k in kernels if k not in reference.kernels]
        only_ref = [k for k in reference.kernels if k not in kernels]
        if not only_other and not only_ref:
            continue
        text = f"{_ranks(ranks)} launch {len(kernels)} distinct kernel(s) and library call(s), rank {reference.rank} {len(reference.kernels)}"
        if only_other:
            text += f"; only on {_ranks(ranks)}: {_listed(only_other)}"
        if only_ref:
            text += f"; only on rank {reference.rank}: {_listed(only_ref)}"
        found.append(Divergence("kernels", text, tuple(ranks), details=tuple(only_other + only_ref)))
    return found


def _collectives(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """Every rank must issue the same collectives in the same order, or the job hangs or mixes up data: a graph
    that holds other collectives on another rank is flagged bad; graphs compiled by some ranks only, a warning."""
    reference = summaries[0]
    found = []
    for graph in reference.graphs:
        mine = [c.label for c in graph.collectives]
        groups: dict[tuple[str, ...], list[int]] = {}
        for summary in summaries[1:]:
            other = next((g for g in summary.graphs if g.key == graph.key), None)
            if other is not None and [c.label for c in other.collectives] != mine:
                groups.setdefault(tuple(c.label for c in other.collectives), []).append(summary.rank)
        for theirs, ranks in groups.items():
            text = (
                f"graph {graph.key} issues {_sequence(theirs)} on {_ranks(ranks)} but {_sequence(mine)} on rank "
                f"{reference.rank}: collectives that do not match across ranks hang or mix up data"
            )
            found.append(Divergence("collectives", text, tuple(ranks), "bad", details=theirs))
    mine_all = [c.label for c in reference.collectives]
    for labels, ranks in _groups(summaries, lambda s: tuple(c.label for c in s.collectives))[1:]:
        if sorted(set(labels)) == sorted(set(mine_all)) and any(d.aspect == "collectives" for d in found):
            continue
        peer = next(s for s in summaries if s.rank == ranks[0])
        shared = {g.key for g in reference.graphs} & {g.key for g in peer.graphs}
        extra = [g.key for g in peer.graphs if g.key not in shared and g.collectives]
        missing = [g.key for g in reference.graphs if g.key not in shared and g.collectives]
        where = []
        if extra:
            where.append(f"in graphs only {_ranks(ranks)} compiled ({_listed(extra)})")
        if missing:
            where.append(f"in graphs only rank {reference.rank} compiled ({_listed(missing)})")
        text = (
            f"the compiled graphs of {_ranks(ranks)} hold {_sequence(labels)}, rank {reference.rank}'s "
            f"{_sequence(mine_all)}" + (f": the difference is {' and '.join(where)}" if where else "")
        )
        found.append(Divergence("collectives", text, tuple(ranks), details=labels))
    return found


def _sequence(labels: Sequence[str]) -> str:
    """``2 collective(s): all_reduce(f32[32]) x2`` (the distinct ops, each with its count)."""
    if not labels:
        return "no collective"
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    ops = ", ".join(f"{label} x{n}" if n > 1 else label for label, n in counts.items())
    return f"{len(labels)} collective(s): {ops}"


def _breaks(summaries: Sequence[RankSummary]) -> list[Divergence]:
    reference = summaries[0]
    found = []
    for breaks, ranks in _groups(summaries, lambda s: s.graph_breaks)[1:]:
        only_other = [b for b in breaks if b not in reference.graph_breaks]
        only_ref = [b for b in reference.graph_breaks if b not in breaks]
        text = f"{_ranks(ranks)} broke the graph {len(breaks)} time(s), rank {reference.rank} {len(reference.graph_breaks)}"
        if only_other:
            text += f"; only on {_ranks(ranks)}: {_listed(only_other)}"
        if only_ref:
            text += f"; only on rank {reference.rank}: {_listed(only_ref)}"
        found.append(Divergence("graph breaks", text, tuple(ranks), details=tuple(only_other + only_ref)))
    return found
