"""Records, ranks: one job of several processes (torchrun), a report per rank, and where the ranks diverged.

``RankedRun`` is the small document a multi-rank report keeps beside its pages (``ranks.json``): which
ranks there are, where each rank's own report is (``rank<r>/``, a full single-rank report with its own
lens.json, built for the ranks that differ and one of each group of identical ranks; the others on demand),
which TORCH_TRACE logs each rank left, and how the job was launched and ended. Everything else is derived,
here and only here: ``summarize(run)`` reduces a rank's CompileRun to what is compared across ranks
(``RankSummary``), and so does the light pass over a rank's logs (parse/rank_light.py), through the same
``summary_of``; ``divergences(summaries)`` says where the ranks compiled differently, each difference as one
``Divergence`` with a title naming its cause, the ranks and what to do. The landing page
(report/ranks_view.py) is built from these alone.

What differs between the processes of one healthy job is normalised before anything is compared
(``NORMALISED``): device indices, object addresses and ids, the rank's own number and seeds in guards, the
paths of kernel files; graphs of one compile id are paired by their code first, then by their order.

Schema history of the ranks document (bump RANKS_SCHEMA_VERSION on any change an older reader would misread):
  1: first version: the ranks with their report folders and outcomes, the launch and its error.
  2: each rank's TORCH_TRACE logs (``logs``, for the light pass and ``report --rank``) and whether its full
     report was built (``report``).
  3: the ranks whose full report ran the hand-written stage (``handwritten``: compile --nproc and run -- torchrun
     run it for the ranks reported at once only).
"""

from __future__ import annotations

import functools
import hashlib
import re
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

from .codec import dumps, from_jsonable, lens_document, to_jsonable
from .frames import CacheLookup, DynamoFrame, GraphBreak
from .graph import GraphRecord
from .run import CompileRun
from .timing import CollectiveTime

RANKS_SCHEMA_VERSION = 3
RANKS_JSON = "ranks.json"

Severity = Literal["bad", "warn"]
T = TypeVar("T", bound=Hashable)

# The collective ops of torch.distributed as they appear in FX graphs and output code: the functional
# collectives (``_c10d_functional.all_reduce``), the legacy in-place ops (``c10d.allreduce_``).
_COLLECTIVE = re.compile(r"(?:^|\.)(?:_c10d_functional|c10d_functional|c10d)\.(?P<op>\w+)")
_NOT_COLLECTIVES = {"wait_tensor", "wait"}
# What differs between processes of one job without the compile being different (NORMALISED says it in words).
# ``___check_obj_id(G['dist'], 140607858087696)``, and the ids Dynamo names globals after: ``G['_140003668582832_c14']``,
# ``__dtensor_spec_140003668582832``, ``___check_opaque_guard_fn_139750064709264_c0`` (FSDP2, tensor parallel)
_OBJECT_ID = re.compile(r"(?:\b|(?<=_))\d{6,}(?=\b|_)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")  # ``<code object inner at 0x7f74...>``
_DEVICE_INDEX = re.compile(
    r"\b(?P<name>(?:cuda|xpu|hpu|npu|mps):|(?:device|device_index)=|type='\w+', index=|"
    r"(?:get_raw_stream|_DeviceGuard|set_device|device)\(|stream(?=\d+\b))\d+"
)  # ``stream1 = get_raw_stream(1)``: Inductor names a GPU's stream variable after its index (torch 2.11, H100)
_RANK_VALUE = re.compile(r"(?P<source>\w*rank\w*['\"]?\]?)\s*(?P<op>==|!=)\s*(?P<value>\d+)\b", re.I)
_SEED_VALUE = re.compile(r"(?P<source>\w*seed\w*['\"]?\]?)\s*(?P<op>==|!=)\s*(?P<value>\d+)\b", re.I)
_GUARD_COMMENT = re.compile(r"\s+#\s.*$")  # the user line the guard came from, after the guard
_KERNEL_PATH = re.compile(r"^\s*# kernel path: .*$", re.MULTILINE)
_QUOTED_PATH = re.compile(r"(['\"])/[^'\"\n]*\1")
_FX_NODE = re.compile(r'^\s*\w+: "(?P<type>[^"]*)" = torch\.ops\.(?P<target>[\w.]+)\(', re.MULTILINE)
_SHOWN = 3  # guard lines, kernel names... named per divergence before "and N more"
# A rank is a straggler where it is slower than the ranks' median by this fraction and by more than the noise
# (_NOISE_SPREADS times the median absolute deviation), and by at least _STRAGGLER_FLOOR_S.
_STRAGGLER_FRACTION = 0.25
_NOISE_SPREADS = 3.0
_STRAGGLER_FLOOR_S = 0.005

NORMALISED = (
    "device indices (cuda:1, device=1, index=1, stream1 = get_raw_stream(1)) read as the rank's own device",
    "object addresses (0x7f74...) and object ids in guards, also in the names Dynamo gives globals "
    "(G['_140003668582832_c14']), left out",
    "rank numbers and seeds in guards (G['rank'] == 1, L['self'].seed == 1234) read as <rank>, <seed>: a "
    "branch on the rank shows as other code",
    "the paths of kernel files in output code left out (each process has its own cache folders)",
    "graphs of one compile id (DDP's optimizer splits a frame into several) paired by their code first, "
    "then by their order within the compile id",
)


@dataclass(frozen=True)
class RankEntry:
    """One rank of the job: its report folder (relative to the multi-rank report) and how its process ended."""

    rank: int
    folder: str  # "rank0"
    status: str = "ok"  # "ok", "failed", "timeout" (its capture's status), "missing" (no output)
    error: str | None = None
    source: str = ""  # what the rank's report was built from
    logs: tuple[str, ...] = ()  # its TORCH_TRACE logs, absolute paths
    report: bool = True  # whether ``folder`` holds its full report (else: ``report SOURCE --rank R``)


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
    handwritten: tuple[int, ...] = ()  # the ranks whose full report ran the hand-written stage (none: it was off)

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
    """A rank's compiled graph as compared across ranks: paired by ``key`` (code first, then ``nth``), equal
    when ``code_hash`` is."""

    key: str  # "0/0 inference": its compile id and kind (its graph id where it has no compile id)
    graph_id: str
    code_hash: str  # of its output code, normalised (code_hash)
    kernels: tuple[str, ...]  # its launches, in order
    collectives: tuple[Collective, ...] = ()
    nth: int = 0  # its place among the graphs of its key, in the order logged (DDP's optimizer makes several)

    @property
    def name(self) -> str:
        return self.key if not self.nth else f"{self.key} #{self.nth + 1}"


@dataclass(frozen=True)
class RankSummary:
    """What is compared across ranks, from one rank's CompileRun or the light pass over its logs."""

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
    # compile id -> "AOTAutograd miss, FX graph miss" (its cache lookups), else "FX graph cache: 0 hit(s), 1 miss(es)"
    cache: Mapping[str, str] = field(default_factory=dict)
    graph_breaks: tuple[str, ...] = ()  # "model.py:12: reason"
    compile_times: Mapping[str, float | None] = field(default_factory=dict)  # compile id -> seconds
    cold_compile_s: float | None = None  # the first compiled call (a capture)
    step_ms: float | None = None  # the compiled step, end to end (median)
    step_device_us: float | None = None  # the profiled step's time in compiled code
    # the profiled steps' collectives, in or outside the graphs (DDP's all-reduce runs in its hooks), from a full report
    step_collectives: tuple[CollectiveTime, ...] = ()
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

    @functools.cached_property
    def fingerprint(self) -> str:
        """Equal for ranks that compiled the same (status, compile ids, graphs, guards, cache, breaks)."""
        parts = (
            self.status,
            self.compile_ids,
            sorted(self.recompile_reasons.items()),
            sorted((g.key, g.code_hash, tuple(c.label for c in g.collectives)) for g in self.graphs),
            sorted(self.guards.items()),
            sorted(self.cache.items()),
            self.graph_breaks,
        )
        return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Divergence:
    """One way the ranks compiled (or ran) differently: its cause named in ``title``, what to do in ``action``."""

    # "status", "compile ids", "graphs", "guards", "cache", "kernels", "collectives", "graph breaks", "stragglers"
    aspect: str
    text: str  # one sentence naming the ranks and what differs
    ranks: tuple[int, ...]  # the ranks that differ from the reference rank (the lowest)
    severity: Severity = "warn"  # "bad": the job itself is at risk (collectives that do not match hang)
    details: tuple[str, ...] = ()  # the differing lines, kernels, guards
    title: str = ""  # the cause: "HANG RISK: compile cache outcome differs across ranks", ...
    action: str = ""  # what to do about it


# The named causes, stable words the pages and the tests rely on.
TITLE_FAILED = "A rank failed"
TITLE_CACHE = "HANG RISK: compile cache outcome differs across ranks"
TITLE_CACHE_OTHER = "Compile cache lookups differ"  # both compiled, or both served, in other ways (a bypass)
TITLE_RECOMPILE = "Recompile on some ranks only"
TITLE_BREAK = "Graph break on some ranks only"
TITLE_COLLECTIVES = "Collectives in another order or shape"
TITLE_STRAGGLER = "Straggler rank"
TITLE_CODE = "Rank-dependent code"
TITLE_GUARDS = "Guards differ"
TITLE_KERNELS = "Kernels differ"


def summarize(
    rank: int, folder: str, run: CompileRun, *, status: str = "ok", error: str | None = None
) -> RankSummary:
    """The comparable facts of one rank's run."""
    bench = run.bench
    end_to_end = bench.end_to_end if bench is not None else None
    step = bench.step if bench is not None else None
    kernel_us = {kernel.name: kernel.timing.in_context_us for _, kernel in run.all_kernels() if kernel.timing}
    graphs = numbered(
        rank_graph(graph_key(g), g.id, g.output_code, [launch.label for launch in g.launches], _fx_text(g))
        for g in run.graphs
    )
    summary = summary_of(rank, folder, run.frames, graphs, run.graph_breaks, status=status, error=error)
    return replace(
        summary,
        cold_compile_s=run.capture.cold_compile_s if run.capture else None,
        step_ms=end_to_end.compiled.median_ms if end_to_end is not None else None,
        step_device_us=step.total_us if step is not None else None,
        step_collectives=step.collectives if step is not None else (),
        kernel_us=kernel_us,
    )


def summary_of(
    rank: int,
    folder: str,
    frames: Sequence[DynamoFrame],
    graphs: Sequence[RankGraph],
    breaks: Sequence[GraphBreak],
    *,
    status: str = "ok",
    error: str | None = None,
) -> RankSummary:
    """The comparable facts of a rank from its frames, graphs and graph breaks (a full run's or the light pass's)."""
    return RankSummary(
        rank=rank,
        folder=folder,
        status=status,
        error=error,
        compile_ids=tuple(f.compile_id for f in frames),
        recompile_reasons={f.compile_id: f.recompile_reasons for f in frames if f.recompile_reasons},
        graphs=tuple(graphs),
        guards={f.compile_id: normalized_guards(f.guards) for f in frames if f.guards},
        guard_counts={f.compile_id: f.guard_count for f in frames},
        cache={f.compile_id: state for f in frames if (state := cache_state(f.cache_lookups, f.cache))},
        graph_breaks=tuple(_break_label(b.location.label if b.location else "", b.reason) for b in breaks),
        compile_times={f.compile_id: f.compile_time_s for f in frames},
    )


def cache_state(lookups: Sequence[CacheLookup], metrics_state: str | None) -> str | None:
    """A compile's cache outcome: its lookups in order (``AOTAutograd miss, FX graph miss``), else the counts."""
    if lookups:
        return ", ".join(f"{lookup.cache} {lookup.result}" for lookup in lookups)
    return metrics_state


def rank_graph(
    key: str,
    graph_id: str,
    output_code: str,
    kernels: Sequence[str],
    fx_text: str | None,
    digest: str | None = None,
) -> RankGraph:
    """A graph as compared across ranks, from its output code (``digest``: its code_hash, where known), its
    launches and its FX graph's text."""
    found = [(_collective_op(t["target"]), t["type"]) for t in _FX_NODE.finditer(fx_text or "")]
    if fx_text is None:
        found = [(_collective_op(k), "") for k in kernels]
    return RankGraph(
        key=key,
        graph_id=graph_id,
        code_hash=digest if digest is not None else code_hash(output_code),
        kernels=tuple(kernels),
        collectives=tuple(Collective(op, key, _plain_type(tensor)) for op, tensor in found if op),
    )


def numbered(graphs: Iterable[RankGraph]) -> tuple[RankGraph, ...]:
    """Each graph's place among the graphs of its key (``nth``), in the order given."""
    seen: dict[str, int] = {}
    out = []
    for graph in graphs:
        nth = seen.get(graph.key, 0)
        seen[graph.key] = nth + 1
        out.append(RankGraph(graph.key, graph.graph_id, graph.code_hash, graph.kernels, graph.collectives, nth))
    return tuple(out)


def graph_key(graph: GraphRecord) -> str:
    return f"{graph.compile_id} {graph.kind}" if graph.compile_id else graph.id


def code_hash(output_code: str) -> str:
    """The output code's hash, blind to what differs between processes compiling the same graph: the paths of
    their kernel files in their own caches, their device index, object addresses."""
    text = _QUOTED_PATH.sub(r"\1<path>\1", _KERNEL_PATH.sub("", output_code))
    return hashlib.sha1(_per_process(text).strip().encode()).hexdigest()[:12]


def _per_process(text: str) -> str:
    """``text`` with its object addresses and device indices written as placeholders."""
    if "0x" in text:
        text = _ADDRESS.sub("0x<addr>", text)
    return _DEVICE_INDEX.sub(lambda m: m["name"] + "<i>", text)


def normalized_guards(text: str) -> tuple[str, ...]:
    """A frame's guards, one per line, without the tree drawing and what differs in every process: object ids
    and addresses, the device index, the rank's number and seeds (a branch on the rank shows as other code)."""
    lines = []
    for line in text.splitlines():
        guard = _GUARD_COMMENT.sub("", line.lstrip("| +-")).strip()
        if guard and not guard.startswith(
            ("GuardManager:", "RootGuardManager", "TREE_GUARD_MANAGER", "Guard latency")
        ):
            guard = _per_process(guard)
            lowered = guard.lower()  # the patterns below are slow: tried only where they can match
            if "rank" in lowered:
                guard = _RANK_VALUE.sub(lambda m: f"{m['source']} {m['op']} <rank>", guard)
            if "seed" in lowered:
                guard = _SEED_VALUE.sub(lambda m: f"{m['source']} {m['op']} <seed>", guard)
            lines.append(_OBJECT_ID.sub("<id>", guard))
    return tuple(lines)


def collectives_of(graph: GraphRecord) -> tuple[Collective, ...]:
    """The collective ops of a graph, in order: from the FX graph Inductor received, else from the launches."""
    return rank_graph(graph_key(graph), graph.id, "", [lt.aten_op or lt.target for lt in graph.launches],
                      _fx_text(graph)).collectives  # fmt: skip


def divergences(summaries: Sequence[RankSummary]) -> tuple[Divergence, ...]:
    """Where the ranks compiled differently, each against the lowest rank; nothing for identical ranks."""
    if len(summaries) < 2:
        return ()
    found: list[Divergence] = []
    for check in (
        _status, _compile_ids, _graphs, _guards, _cache, _kernels, _collectives, _breaks, _stragglers
    ):  # fmt: skip
        found.extend(check(summaries))
    return tuple(found)


def rank_list(numbers: Iterable[int], shown: int = 12) -> str:
    """``0, 2-5, 9``: runs of three or more consecutive ranks written as a range; past ``shown`` parts, the
    count of the rest (``1, 3, 5 ... and 29 more of 32 ranks``)."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        if end - start >= 2:
            parts.append(f"{ordered[start]}-{ordered[end]}")
        else:
            parts.extend(str(n) for n in ordered[start : end + 1])
        start = end + 1
    if len(parts) > shown:
        return f"{', '.join(parts[:shown])} and {len(parts) - shown} more of {len(ordered)} ranks"
    return ", ".join(parts)


def _fx_text(graph: GraphRecord) -> str | None:
    fx = graph.fx_graph("readable") or graph.fx_graph("transformed")
    return fx.code if fx is not None else None


def _plain_type(text: str) -> str:
    """``f32[32]`` of an FX type that may carry strides and a device (``f32[32][1]cuda:0``)."""
    match = re.match(r"^[a-z]\w*\[[^\]]*\]", text)
    return match.group(0) if match else text


def _collective_op(target: str) -> str | None:
    match = _COLLECTIVE.search(target)
    if match is None:
        return None
    op = match["op"].rstrip("_")
    return None if op in _NOT_COLLECTIVES else op


def _break_label(location: str, reason: str) -> str:
    return f"{location}: {reason}" if location else reason


def _ranks(numbers: Sequence[int]) -> str:
    return ("rank " if len(numbers) == 1 else "ranks ") + rank_list(numbers)


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _groups(summaries: Sequence[RankSummary], value: Callable[[RankSummary], T]) -> list[tuple[T, list[int]]]:
    """The ranks grouped by ``value``, the reference rank's group first."""
    groups: dict[T, list[int]] = {}
    for summary in summaries:
        groups.setdefault(value(summary), []).append(summary.rank)
    return list(groups.items())


def paired(
    mine: Sequence[RankGraph], theirs: Sequence[RankGraph]
) -> list[tuple[RankGraph | None, RankGraph | None]]:
    """The graphs of two ranks paired within each compile id: equal code first (the order DDP's split graphs were
    compiled in may differ), then the same kind in order, then the rest in order (a cache hit's trace may not
    say a graph's kind); a graph without a partner is paired with None."""
    pairs: list[tuple[RankGraph | None, RankGraph | None]] = []
    for compile_id in dict.fromkeys([_compile_of(g) for g in mine] + [_compile_of(g) for g in theirs]):
        left = [g for g in mine if _compile_of(g) == compile_id]
        right = [g for g in theirs if _compile_of(g) == compile_id]
        for match in (
            lambda a, b: a.key == b.key and a.code_hash == b.code_hash,
            lambda a, b: a.code_hash == b.code_hash,
            lambda a, b: a.key == b.key,
            lambda a, b: True,
        ):
            for graph in list(left):
                partner = next((g for g in right if match(graph, g)), None)
                if partner is not None:
                    left.remove(graph)
                    right.remove(partner)
                    pairs.append((graph, partner))
        pairs.extend([(g, None) for g in left] + [(None, g) for g in right])
    return pairs


def _compile_of(graph: RankGraph) -> str:
    return graph.key.split(" ")[0]


def _same_collectives(mine: Sequence[Collective], theirs: Sequence[Collective]) -> bool:
    """The same ops in the same order, on the same tensors where both say (a cache hit's trace has no FX graph
    to read the tensors from)."""
    return len(mine) == len(theirs) and all(
        a.op == b.op and (a.tensor == b.tensor or not a.tensor or not b.tensor) for a, b in zip(mine, theirs, strict=True)
    )


def _status(summaries: Sequence[RankSummary]) -> list[Divergence]:
    failed = [s for s in summaries if s.status != "ok"]
    return [
        Divergence(
            "status", f"rank {s.rank} {s.status}" + (f": {s.error}" if s.error else ""), (s.rank,), "bad",
            title=TITLE_FAILED, action="open its report: its capture log says where it stopped",
        )
        for s in failed
    ]  # fmt: skip


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
        found.append(Divergence(
            "compile ids", text, tuple(ranks), details=tuple(extra + missing), title=TITLE_RECOMPILE,
            action="a guard failed on these ranks only (a rank-dependent shape or value): make the inputs "
            "the same on every rank, or mark the dimension dynamic (torch._dynamo.mark_dynamic)",
        ))  # fmt: skip
    return found


def _graphs(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """Graphs present on some ranks only are the compile ids' divergence; here: the same graph, other code (or
    one compile id split into another number of graphs)."""
    reference = summaries[0]
    found = []
    # (graph name, the other code or None for a missing graph) -> ranks
    groups: dict[tuple[str, str | None], list[int]] = {}
    partners: dict[tuple[str, str | None], tuple[RankGraph, RankGraph | None]] = {}
    order: dict[str, int] = {}
    for summary in summaries[1:]:
        for mine, theirs in paired(reference.graphs, summary.graphs):
            if mine is None or (theirs is not None and theirs.code_hash == mine.code_hash):
                continue
            if theirs is None and _compile_of(mine) not in summary.compile_ids:
                continue  # the whole compile is missing: the compile ids' divergence says it
            entry = (mine.name, theirs.code_hash if theirs is not None else None)
            groups.setdefault(entry, []).append(summary.rank)
            partners.setdefault(entry, (mine, theirs))
            order.setdefault(mine.name, len(order))
    for entry, ranks in sorted(groups.items(), key=lambda item: order[item[0][0]]):
        mine, theirs = partners[entry]
        if theirs is None:
            text = f"graph {mine.name} of rank {reference.rank} has no counterpart on {_ranks(ranks)}"
            found.append(Divergence("graphs", text, tuple(ranks), title=TITLE_CODE, action=_CODE_ACTION))
            continue
        only_other = [k for k in theirs.kernels if k not in mine.kernels]
        only_ref = [k for k in mine.kernels if k not in theirs.kernels]
        what = []
        if only_other:
            what.append(f"{_listed(only_other)} only on {_ranks(ranks)}")
        if only_ref:
            what.append(f"{_listed(only_ref)} only on rank {reference.rank}")
        text = (
            f"graph {mine.name} was compiled to other code on {_ranks(ranks)} than on rank {reference.rank}"
            + (f": {'; '.join(what)}" if what else " (the same launches, other kernel code)")
        )
        reads = [g for g in reference.guards.get(_compile_of(mine), ()) if "<rank>" in g]
        if reads:
            text += f"; the compile reads the rank ({_listed(reads)}): code that branches on the rank"
        found.append(Divergence("graphs", text, tuple(ranks), details=tuple(only_other + only_ref),
                                title=TITLE_CODE, action=_CODE_ACTION))  # fmt: skip
    return found


_CODE_ACTION = (
    "the same compile became other code on these ranks: look for code that reads the rank or per-rank data "
    "(a branch on dist.get_rank(), a per-rank shape), open both ranks' reports and compare the graph"
)


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
            found.append(Divergence(
                "guards", text, tuple(ranks), details=tuple(only_other + only_ref), title=TITLE_GUARDS,
                action="a guard that differs recompiles one rank and not the other on the next change",
            ))  # fmt: skip
    return found


def _cache(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """A compile served by a cache on some ranks and compiled on others: the served ranks run ahead while the
    others compile, and a collective waits past NCCL's watchdog timeout (a hang, then the job killed)."""
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
            hang = _hits(other) != _hits(state)
            if hang:
                graphs = [g.name for g in reference.graphs if _compile_of(g) == compile_id]
                text = (
                    f"the compile cache served {compile_id} on {_ranks(ranks) if _hits(other) else f'rank {reference.rank}'}"
                    f" but not on {f'rank {reference.rank}' if _hits(other) else _ranks(ranks)} ({text}"
                    + (f"; graphs {_listed(graphs)}" if graphs else "")
                    + "): the served ranks run ahead while the others compile, and the first collective waits "
                    "past the watchdog's timeout"
                )
            found.append(Divergence(
                "cache", text, tuple(ranks), "bad" if hang else "warn", title=TITLE_CACHE if hang else TITLE_CACHE_OTHER,
                action="warm every rank's cache the same way (the same TORCHINDUCTOR_CACHE_DIR contents on every "
                "node, or none), or raise the process group's timeout for the first steps" if hang else "",
            ))  # fmt: skip
    return found


def _hits(state: str) -> bool:
    return " hit" in state and not state.startswith("FX graph cache: 0 hit")


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
        found.append(Divergence("kernels", text, tuple(ranks), details=tuple(only_other + only_ref),
                                title=TITLE_KERNELS))  # fmt: skip
    return found


_COLLECTIVE_ACTION = (
    "every rank must issue the same collectives in the same order and shapes: find the code that makes them "
    "depend on the rank (a branch, a per-rank shape, a graph break on one rank)"
)


def _collectives(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """Every rank must issue the same collectives in the same order, or the job hangs or mixes up data: a graph
    that holds other collectives on another rank is flagged bad; graphs compiled by some ranks only, a warning."""
    reference = summaries[0]
    found = []
    groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    order: dict[str, int] = {}
    for summary in summaries[1:]:
        for mine, theirs in paired(reference.graphs, summary.graphs):
            if mine is None or theirs is None:
                continue
            if not _same_collectives(mine.collectives, theirs.collectives):
                groups.setdefault((mine.name, tuple(c.label for c in theirs.collectives)), []).append(summary.rank)
                order.setdefault(mine.name, len(order))
    graphs = {g.name: g for g in reference.graphs}
    for (name, other_labels), ranks in sorted(groups.items(), key=lambda item: order[item[0][0]]):
        own_labels = [c.label for c in graphs[name].collectives]
        how = "in another order" if sorted(other_labels) == sorted(own_labels) else "another shape or op"
        text = (
            f"graph {name} issues {_sequence(other_labels)} on {_ranks(ranks)} but {_sequence(own_labels)} on rank "
            f"{reference.rank} ({how}): collectives that do not match across ranks hang or mix up data"
        )
        found.append(Divergence("collectives", text, tuple(ranks), "bad", details=other_labels,
                                title=TITLE_COLLECTIVES, action=_COLLECTIVE_ACTION))  # fmt: skip
    mine_all = [c.label for c in reference.collectives]
    for _ops, ranks in _groups(summaries, lambda s: tuple(sorted(c.op for c in s.collectives)))[1:]:
        peer = next(s for s in summaries if s.rank == ranks[0])
        labels = tuple(c.label for c in peer.collectives)
        if sorted(set(labels)) == sorted(set(mine_all)) and found:
            continue
        shared = {g.key for g in reference.graphs} & {g.key for g in peer.graphs}
        extra = [g.name for g in peer.graphs if g.key not in shared and g.collectives]
        missing = [g.name for g in reference.graphs if g.key not in shared and g.collectives]
        where = []
        if extra:
            where.append(f"in graphs only {_ranks(ranks)} compiled ({_listed(extra)})")
        if missing:
            where.append(f"in graphs only rank {reference.rank} compiled ({_listed(missing)})")
        text = (
            f"the compiled graphs of {_ranks(ranks)} hold {_sequence(labels)}, rank {reference.rank}'s "
            f"{_sequence(mine_all)}" + (f": the difference is {' and '.join(where)}" if where else "")
        )
        found.append(Divergence("collectives", text, tuple(ranks), details=labels, title=TITLE_COLLECTIVES,
                                action=_COLLECTIVE_ACTION))  # fmt: skip
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
        found.append(Divergence(
            "graph breaks", text, tuple(ranks), details=tuple(only_other + only_ref), title=TITLE_BREAK,
            action="a break on some ranks only splits their graphs, and their collectives, differently: "
            "remove the break (see the rank's report) or make it happen on every rank",
        ))  # fmt: skip
    return found


# Where a straggler is slower: (what, its value in seconds).
_PHASES: tuple[tuple[str, Callable[[RankSummary], float | None]], ...] = (
    ("compile time", lambda s: s.compile_s),
    ("first call", lambda s: s.cold_compile_s),
    ("step time", lambda s: s.step_ms / 1000 if s.step_ms is not None else None),
)


def _stragglers(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """Ranks slower than the others by more than the noise, each with where: its compile, its first compiled
    call, its step. The others wait for it at every collective."""
    slow: dict[int, list[str]] = {}
    for phase, value in _PHASES:
        times = {s.rank: v for s in summaries if (v := value(s)) is not None}
        if len(times) < 2:
            continue
        median = statistics.median(times.values())
        spread = statistics.median(abs(v - median) for v in times.values()) if len(times) >= 3 else 0.0
        for rank, seconds in times.items():
            over = seconds - median
            if over > max(_STRAGGLER_FRACTION * median, _NOISE_SPREADS * spread, _STRAGGLER_FLOOR_S):
                slow.setdefault(rank, []).append(
                    f"{phase} {_seconds(seconds)} against the ranks' median {_seconds(median)}"
                )
    return [
        Divergence(
            "stragglers", f"rank {rank} is slower than the others: {'; '.join(where)}", (rank,),
            details=tuple(where), title=TITLE_STRAGGLER,
            action="the other ranks wait for it at each collective: compare its report with the others' "
            "(its compile, its cache, its host and device)",
        )
        for rank, where in sorted(slow.items())
    ]  # fmt: skip


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
