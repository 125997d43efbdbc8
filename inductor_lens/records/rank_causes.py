"""Records, ranks (causes): where the ranks compiled differently, each against the lowest rank, each difference
one ``Divergence`` with a title naming its cause (``TITLE_*`` in ranks.py), the ranks and what to do: a failed
rank, other compile ids (a recompile on some ranks only), other code for the same graph, other guards, other
cache outcomes (a hang risk), other kernels, collectives in another order or shape (traced into the graphs, or
issued in the profiled steps), graph breaks on some ranks only, and the stragglers (rank_stragglers.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from ..units import format_bytes
from .rank_normalise import compile_of, paired
from .rank_stragglers import stragglers
from .ranks import (
    TITLE_BREAK,
    TITLE_CACHE,
    TITLE_CACHE_OTHER,
    TITLE_CODE,
    TITLE_COLLECTIVES,
    TITLE_FAILED,
    TITLE_GUARDS,
    TITLE_KERNELS,
    TITLE_RECOMPILE,
    Collective,
    Divergence,
    RankGraph,
    RankSummary,
)
from .timing import CollectiveTime

T = TypeVar("T", bound=Hashable)
_SHOWN = 3  # guard lines, kernel names... named per divergence before "and N more"


def divergences(summaries: Sequence[RankSummary]) -> tuple[Divergence, ...]:
    """Where the ranks compiled differently, each against the lowest rank; nothing for identical ranks."""
    if len(summaries) < 2:
        return ()
    found: list[Divergence] = []
    for check in (
        _status, _compile_ids, _graphs, _guards, _cache, _kernels, _collectives, _step_collectives, _breaks,
        stragglers,
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
            if theirs is None and compile_of(mine) not in summary.compile_ids:
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
        reads = [g for g in reference.guards.get(compile_of(mine), ()) if "<rank>" in g]
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
                graphs = [g.name for g in reference.graphs if compile_of(g) == compile_id]
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


def _step_collectives(summaries: Sequence[RankSummary]) -> list[Divergence]:
    """The collectives of the profiled steps (DDP's all-reduces and FSDP2's all-gathers run in hooks, outside the
    graphs): ops, calls and bytes per step compared with the first rank that has them; ranks without a profiled step
    are left out. A warning, as the job ran through them: a per-step difference is a rank-dependent collective
    (a barrier or broadcast on one rank) or a bucket of another size, the next change away from a hang."""
    timed = [s for s in summaries if s.step_collectives]
    if len(timed) < 2:
        return []
    reference = timed[0]
    found = []
    for _shape, ranks in _groups(timed, lambda s: _per_step(s.step_collectives))[1:]:
        peer = next(s for s in timed if s.rank == ranks[0])
        text = (
            f"in the profiled steps {_ranks(ranks)} issued {_step_sequence(peer.step_collectives)} a step, rank "
            f"{reference.rank} {_step_sequence(reference.step_collectives)}"
        )
        found.append(Divergence("collectives", text, tuple(ranks), title=TITLE_COLLECTIVES, action=_COLLECTIVE_ACTION))
    return found


def _per_step(collectives: Sequence[CollectiveTime]) -> tuple[tuple[str, float, float | None], ...]:
    """Op, calls and bytes per step, as compared across ranks (calls to a tenth: they are means over the steps;
    bytes to the kilobyte: the same messages give the same sum)."""
    return tuple(sorted(
        (c.op, round(c.calls_per_step, 1), None if c.bytes_per_step is None else round(c.bytes_per_step, -3))
        for c in collectives
    ))  # fmt: skip


def _step_sequence(collectives: Sequence[CollectiveTime]) -> str:
    """``all_reduce x2 (264.7 KB), broadcast x1 (4 B)``."""
    return ", ".join(
        f"{c.op} x{c.calls_per_step:g}" + (f" ({format_bytes(c.bytes_per_step)})" if c.bytes_per_step is not None else "")
        for c in sorted(collectives, key=lambda c: c.op)
    )


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
