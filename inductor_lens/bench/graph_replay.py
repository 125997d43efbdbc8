"""Stage 4 of the pipeline (bench): kernels replayed from a CUDA graph, tied to the launches that recorded them.

Under CUDA graphs a compiled graph runs as one ``cudaGraphLaunch``: the profiler links each replayed kernel
to that single call, not to a launch. A replay issues the kernels in the order the graph's code launched
them while it was recorded, so the replay's kernel sequence is the launches' sequences laid end to end,
and the two can be aligned:

- exactly, where the same compiled code was also profiled without CUDA graphs (``worker/graph_free.py``):
  each launch's own kernel names are known; the replay is matched against the concatenation of those
  names (``difflib.SequenceMatcher``: the longest common blocks, so a partition replayed alone, or a kernel
  the replay lacks, shifts nothing);
- else by anchors: Inductor's Triton kernels keep their names in a replay, so each Triton launch claims the
  next kernel of its name; the kernels between two anchors go to the extern launches between them (one
  each when the counts agree; otherwise one each in order and the rest to the last). Those ties are
  counted as approximate, and the page says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from ..records import GraphRecord, Launch

LaunchKey = tuple[str, int]  # (graph id, launch position)


@dataclass(frozen=True)
class ReplayTie:
    """For each kernel of one replay, in order, the launch it is tied to (None: not tied)."""

    owners: tuple[LaunchKey | None, ...]
    approximate: frozenset[int]  # indexes of kernels tied by position only


def tie_replay(
    names: Sequence[str], graph: GraphRecord, known: Mapping[LaunchKey, Sequence[str]] | None = None
) -> ReplayTie:
    """Tie the kernels of one CUDA-graph replay of ``graph`` (their names, in replay order) to its launches."""
    known = known or {}
    mine = {key: seq for key, seq in known.items() if key[0] == graph.id}
    if mine and all(
        (graph.id, launch.position) in mine for launch in graph.launches if launch.kind != "triton"
    ):
        return _tie_exactly(names, graph, mine)
    return _tie_by_anchors(names, graph)


def _tie_exactly(
    names: Sequence[str], graph: GraphRecord, known: Mapping[LaunchKey, Sequence[str]]
) -> ReplayTie:
    expected: list[str] = []
    expected_owner: list[LaunchKey] = []
    for launch in graph.launches:
        key = (graph.id, launch.position)
        issued = known.get(key) or ([launch.target] if launch.kind == "triton" else [])
        expected.extend(issued)
        expected_owner.extend([key] * len(issued))
    owners: list[LaunchKey | None] = [None] * len(names)
    matcher = SequenceMatcher(None, list(names), expected, autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            owners[block.a + offset] = expected_owner[block.b + offset]
    return ReplayTie(tuple(owners), frozenset())


def _tie_by_anchors(names: Sequence[str], graph: GraphRecord) -> ReplayTie:
    owners: list[LaunchKey | None] = [None] * len(names)
    approximate: set[int] = set()
    cursor = 0
    waiting: list[Launch] = []  # extern launches since the last anchor

    def share(end: int) -> None:
        """Give the kernels before ``end`` to the extern launches waiting for them."""
        run = list(range(cursor, end))
        if waiting and run:
            exact = len(run) == len(waiting) or len(waiting) == 1
            for index, kernel in enumerate(run):
                launch = waiting[min(index, len(waiting) - 1)]
                owners[kernel] = (graph.id, launch.position)
                if not exact:
                    approximate.add(kernel)
        waiting.clear()

    for launch in graph.launches:
        if launch.kind != "triton":
            waiting.append(launch)
            continue
        try:
            found = names.index(launch.target, cursor)
        except ValueError:
            continue  # not in this replay (another partition, or launched outside the graph)
        share(found)
        owners[found] = (graph.id, launch.position)
        cursor = found + 1
    share(len(names))
    return ReplayTie(tuple(owners), frozenset(approximate))


def best_graph(names: Sequence[str], graphs: Sequence[GraphRecord]) -> GraphRecord | None:
    """The graph a replay most likely belongs to, by how many of its Triton kernel names the replay holds
    (used only where no ``## Call CompiledFxGraph`` range around the replay names the graph)."""
    present = set(names)
    best, best_count = None, 0
    for graph in graphs:
        count = sum(1 for launch in graph.launches if launch.kind == "triton" and launch.target in present)
        if count > best_count:
            best, best_count = graph, count
    return best
