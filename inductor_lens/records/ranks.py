"""Records, ranks: one job of several processes (torchrun), a report per rank, and where the ranks diverged.

``RankedRun`` is the small document a multi-rank report keeps beside its pages (``ranks.json``): which
ranks there are, where each rank's own report is (``rank<r>/``, a full single-rank report with its own
lens.json, built for the ranks that differ and one of each group of identical ranks; the others on demand),
which TORCH_TRACE logs each rank left, and how the job was launched and ended. This module holds that document
and the records the ranks are compared by (``RankSummary``, ``RankGraph``, ``Collective``, ``Divergence`` and
its named causes); everything else is derived, in these modules only:

    rank_summary.py     ``summarize(run)`` reduces a rank's CompileRun to its ``RankSummary``, and so does the
                        light pass over a rank's logs (ranked_light.py), through the same ``summary_of``
    rank_normalise.py   what differs between the processes of one healthy job, normalised before anything is
                        compared (``NORMALISED``), and the pairing of a compile id's graphs across ranks
    rank_causes.py      ``divergences(summaries)``: where the ranks compiled differently, each difference as one
                        ``Divergence`` with a title naming its cause, the ranks and what to do
    rank_stragglers.py  the ranks slower than the others by more than the noise

The landing page (report/ranks_view.py) is built from these alone.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .codec import dumps, from_jsonable, lens_document, to_jsonable
from .timing import CollectiveTime

RANKS_SCHEMA_VERSION = 3
RANKS_JSON = "ranks.json"

Severity = Literal["bad", "warn"]


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
    # the profiled step's time in compiled code, and its collectives in or outside the graphs (DDP's all-reduce runs in
    # its hooks): from the rank's profile trace, by the light pass or its full report alike
    step_device_us: float | None = None
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
