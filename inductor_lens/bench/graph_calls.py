"""Stage 4 of the pipeline (bench): which graph each compiled-graph call in a profiler trace ran, and which of its
ranges each launch left.

A trace holds one ``## Call CompiledFxGraph <key> ##`` CPU range per compiled graph that ran and, inside it, one
top-level CPU range per launch, in launch order: Inductor names each Triton launch after its kernel, C++ kernels
appear as ``graph_<k>_<kernel>`` (with TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE), and extern calls as their op
(``aten::mm``; a custom op, ``torch.library``'s, as ``<namespace>::<op>``).

Each call is matched to a graph by its FX graph cache key or the hash of its output code where the trace names
them, else by its sequence of launch names, so graph breaks and backward graphs (run on autograd's thread) are
told apart; identical graphs (a recompile, repeated layers served from the FX graph cache) by the compile id of
Dynamo's ``Torch-Compiled Region`` around the call, or, for a backward call (run outside it), of the one around
its forward call, which autograd's ``CompiledFunction`` and ``CompiledFunctionBackward`` ranges tie to it by
their ``Sequence number``; where the trace has neither, by the order they first ran (``JOIN_METHODS`` names how
each graph was joined).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Literal

from ..exchange.files import REGION_MARK
from ..parse import compat
from ..records import GraphRecord, Launch
from .trace_ranges import ProfiledTrace, TraceRange, range_label, top_level

# How a compiled-graph call in the trace was tied to a graph of the report.
JOIN_METHODS = {
    "key": "FX graph cache key",
    "code": "hash of the graph's output code",
    "names": "launch-name sequence",
    "names+id": "launch-name sequence and Dynamo compile id (other graphs launch the same kernels)",
    "names+seq": (
        "launch-name sequence and the compile id of its forward call, which autograd's sequence number ties it to "
        "(other backward graphs launch the same kernels)"
    ),
    "order": (
        "launch-name sequence and the order identical graphs first ran: nothing in the trace tells their calls "
        "apart, so each step's i-th call is the i-th of them Inductor compiled"
    ),
    "replay": "kernel names of its CUDA-graph replays",
}
JoinMethod = Literal["key", "code", "names", "names+id", "names+seq", "order", "replay"]
# A call's top-level range, with the ranges nested in it (itself included).
Child = tuple[TraceRange, list[TraceRange]]
# a compiled-graph call: its range, its top-level ranges (each with those nested in it), its graph and how it was found
Call = tuple[TraceRange, list[Child], GraphRecord | None, JoinMethod | None]
COMPILED_REGION = "Torch-Compiled Region: "  # Dynamo's range around each call of a compiled frame, by compile id
# AOTAutograd's autograd function: its forward call's range, and the range autograd's engine runs its backward in;
# both carry the same "Sequence number" (the forward's), and the forward's sits inside Dynamo's compiled region
AUTOGRAD_FORWARD = "CompiledFunction"
AUTOGRAD_BACKWARD = "CompiledFunctionBackward"


def launch_label(launch: Launch) -> str:
    """The name the profiler gives a launch's top-level range: an op called through ``torch.ops`` is
    ``<ns>::<op>`` (``aten::mm``, ``mkl::_mkl_linear``, a custom op's ``lens_demo::mix``)."""
    if launch.kind == "extern":
        found = compat.op_namespace(launch.target)
        if found is not None:
            return f"{found[0]}::{found[1]}"
        op = launch.aten_op or launch.target
        base = op.split(".")[1] if op.startswith("aten.") and "." in op else op
        return f"aten::{base}"
    return launch.target


def join_calls(trace: ProfiledTrace, graphs: list[GraphRecord]) -> list[Call]:
    """Every compiled-graph call of the trace, in the order they started, with the graph it ran (None where no
    graph of the report explains it)."""
    ranges, by_thread = trace.ranges, trace.by_thread
    by_code = _by_output_code(graphs) if any(len(_region_key(r.name)) == 32 for r in ranges) else {}
    forwards: dict[Any, list[TraceRange]] = {}  # sequence number -> the forward calls' autograd ranges
    backwards: dict[Any, list[TraceRange]] = {}  # thread -> the ranges autograd's engine ran backward calls in
    for r in ranges:
        if r.name == AUTOGRAD_FORWARD and r.sequence is not None:
            forwards.setdefault(r.sequence, []).append(r)
        elif r.name.endswith(AUTOGRAD_BACKWARD):
            backwards.setdefault(r.tid, []).append(r)
    calls: list[Call] = []
    for region in sorted((r for r in ranges if r.name.startswith(REGION_MARK)), key=lambda r: r.start):
        children = top_level(by_thread[region.tid], region)
        names = [range_label(c.name) for c, _ in children]
        compile_id, backward = _call_compile_id(by_thread, forwards, backwards.get(region.tid, []), region)
        graph, how = _graph_of_region(graphs, by_code, region.name, names, compile_id, backward)
        calls.append((region, children, graph, how))
    return calls


def _region_key(name: str) -> str:
    return name.removeprefix(REGION_MARK).strip(" #") if name.startswith(REGION_MARK) else ""


def _by_output_code(graphs: list[GraphRecord]) -> dict[str, list[GraphRecord]]:
    """md5 of output_code.py -> its graphs: graph_free.py's ranges name a graph by it."""
    found: dict[str, list[GraphRecord]] = {}
    for graph in graphs:
        found.setdefault(hashlib.md5(graph.output_code.encode()).hexdigest(), []).append(graph)
    return found


def _compile_id(thread: list[TraceRange], region: TraceRange) -> str | None:
    """The Dynamo compile id (``0/1``) of the compiled frame whose call holds this region, where Dynamo marked it."""
    around = [r for r in thread if r.name.startswith(COMPILED_REGION) and r.start <= region.start and region.end <= r.end]
    return around[-1].name.removeprefix(COMPILED_REGION).strip() if around else None


def _call_compile_id(
    by_thread: dict[Any, list[TraceRange]],
    forwards: dict[Any, list[TraceRange]],
    backwards: list[TraceRange],
    region: TraceRange,
) -> tuple[str | None, bool]:
    """The compile id of the call that ran this region, and whether it is a backward call. Autograd's engine runs
    a backward graph outside every compiled region (on CPU on the caller's thread, on GPU on its own), inside the
    ``CompiledFunctionBackward`` range of its forward call's autograd node: the two ranges share a sequence number,
    and the forward's compiled region names the compile id, the one its backward graph has too."""
    around = [r for r in backwards if r.start <= region.start and region.end <= r.end]
    node = max(around, key=lambda r: r.start, default=None)  # the innermost
    if node is not None and node.sequence is not None:
        forward = forwards.get(node.sequence, [])
        # sequence numbers count per forward thread: two forward threads could give one twice
        return (_compile_id(by_thread[forward[0].tid], forward[0]) if len(forward) == 1 else None), True
    return _compile_id(by_thread[region.tid], region), False


def _graph_of_region(
    graphs: list[GraphRecord],
    by_code: dict[str, list[GraphRecord]],
    region: str,
    names: list[str],
    compile_id: str | None = None,
    backward: bool = False,
) -> tuple[GraphRecord | None, JoinMethod | None]:
    """The graph a ``## Call CompiledFxGraph <key> ##`` region ran, and how it was found: by its FX graph
    cache key where the trace logged it (graphs of a recompile can launch the same kernels), or by the md5 of
    its output code (graph-free calls), else by its launches (a trace from another process, whose keys differ)."""
    key = _region_key(region)
    by_key = [g for g in graphs if g.fx_cache_key and g.fx_cache_key == key]
    if len(by_key) == 1:
        return by_key[0], "key"
    by_hash = [] if by_key else by_code.get(key, [])
    if len(by_hash) == 1:
        return by_hash[0], "code"
    return _match_graph(graphs, names, compile_id, backward)


def by_order(
    regions: list[Call],
    graphs: list[GraphRecord],
    step_of: Callable[[TraceRange | None], int | None],
) -> list[Call]:
    """Calls of identical graphs that no compile id tells apart (a trace without Dynamo's compiled regions or
    autograd's sequence numbers): where a step holds one call of each, its i-th call goes to the i-th of them in the
    order Inductor compiled them, the order they first ran (a backward graph is compiled at its first backward)."""
    tied: dict[tuple[int, tuple[str, ...]], list[int]] = {}  # (step, the identical graphs) -> their calls' indices
    for index, (region, children, _, how) in enumerate(regions):
        step = step_of(region)
        if how != "names" or step is None:
            continue
        names = [range_label(c.name) for c, _ in children]
        same = tuple(g.id for g in graphs if _expected_labels(g) == names)
        if len(same) > 1:
            tied.setdefault((step, same), []).append(index)
    by_id = {g.id: g for g in graphs}
    found = list(regions)
    for (_, same), indices in tied.items():
        if len(indices) == len(same):
            for index, graph_id in zip(indices, same, strict=True):
                region, children, _, _ = found[index]
                found[index] = (region, children, by_id[graph_id], "order")
    return found


def _expected_labels(graph: GraphRecord) -> list[str]:
    """The top-level range names a call of this graph leaves, in order; a custom op's own range may be missing
    (compat.RANGELESS_CUSTOM_OPS): not expected."""
    return [launch_label(launch) for launch in graph.launches if compat.custom_op(launch.target) is None]


def _match_graph(
    graphs: list[GraphRecord], names: list[str], compile_id: str | None = None, backward: bool = False
) -> tuple[GraphRecord | None, JoinMethod | None]:
    """The graph whose launch sequence best matches the region's top-level range names; between graphs that
    match equally (a recompile launching the same kernels, identical layers' graphs served from the FX graph cache),
    the one of the compile id Dynamo marked the call with (a backward call: its forward call's, ``_call_compile_id``)."""
    scores: list[tuple[float, GraphRecord]] = []
    for graph in graphs:
        expected = _expected_labels(graph)
        if expected:
            scores.append((_count_in_order(expected, names) / len(expected), graph))
    best_score = max((score for score, _ in scores), default=0.0)
    if best_score < 0.8:
        return None, None
    best = [graph for score, graph in scores if score == best_score]
    if len(best) == 1:
        return best[0], "names"
    same_id = [
        g
        for g in best
        if compile_id and (g.compile_id or "").split("_")[0] == compile_id and (g.kind == "backward") == backward
    ]
    if len(same_id) == 1:
        return same_id[0], "names+seq" if backward else "names+id"
    return best[0], "names"


def _count_in_order(expected: list[str], names: list[str]) -> int:
    position, matched = 0, 0
    for want in expected:
        try:
            position = names.index(want, position) + 1
            matched += 1
        except ValueError:
            continue
    return matched


def align(launches: tuple[Launch, ...], children: list[Child]) -> list[tuple[Launch, Child]]:
    """Pair each launch with the next top-level range of the same name, in order."""
    pairs: list[tuple[Launch, Child]] = []
    position = 0
    names = [range_label(c.name) for c, _ in children]
    for launch in launches:
        try:
            index = names.index(launch_label(launch), position)
        except ValueError:
            continue
        pairs.append((launch, children[index]))
        position = index + 1
    return pairs


def by_their_ops(
    launches: tuple[Launch, ...], children: list[Child], pairs: list[tuple[Launch, Child]]
) -> list[tuple[Launch, Child]]:
    """Custom ops that left no range of their own (``compat.RANGELESS_CUSTOM_OPS``), each with the top-level
    ranges no launch claimed between its neighbours' ranges: the ops it ran. Only where it is the one launch
    without a range between those neighbours; otherwise whose ranges they are is not known, and they stay untied."""
    index_of = {id(child): index for index, (child, _) in enumerate(children)}
    placed = sorted((launch.position, index_of[id(child)]) for launch, (child, _) in pairs)
    has_range = {position for position, _ in placed}
    claimed = {index for _, index in placed}
    found: list[tuple[Launch, Child]] = []
    for launch in launches:
        if launch.position in has_range or launch.kind != "extern" or compat.custom_op(launch.target) is None:
            continue
        low_position, low = max(((p, i) for p, i in placed if p < launch.position), default=(0, -1))
        high_position, high = min(((p, i) for p, i in placed if p > launch.position), default=(1 << 30, len(children)))
        alone = not any(
            other is not launch and other.position not in has_range and low_position < other.position < high_position
            for other in launches
        )
        if alone:
            found += [(launch, children[index]) for index in range(low + 1, high) if index not in claimed]
    return found
