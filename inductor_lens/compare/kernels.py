"""The comparison stage, kernel diff: match the launches of two runs by the work they do.

Kernel names are no help (``triton_poi_fused_gelu_0`` in one mode is ``triton_tem_fused_addmm_gelu_t_2``
in another), so a launch is identified by the post-grad FX nodes it computes (Inductor's
"Topologically Sorted Source Nodes"), which stay the same across modes and options of one model:

1. graphs are paired by kind and order (the first forward with the first forward, ...);
2. launches with the same FX nodes are paired: *unchanged* when the code is the same once the
   kernel's own name is taken out, else *changed* (other code, or extern call against a kernel; the same
   code under another autotuner pick is marked ``same_code``: compare/summary.py counts it as unchanged
   where its time moved within the noise);
3. the launches left over are grouped by shared FX nodes: *regrouped* where the same work is split
   into different launches (fused differently), *added* or *removed* where the other side has none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..records import (
    CompileRun,
    ConfigDiff,
    DiffSide,
    GraphPairing,
    GraphRecord,
    JsonValue,
    KernelChange,
    Launch,
)

_DEF = re.compile(r"^\s*def \w+\(")
# inductor_meta entries that name or count rather than set how the kernel is tuned
IGNORED_META = frozenset({"kernel_name", "backend_hash", "kernel_num_gb", "kernel_flop", "mutated_arg_names"})


@dataclass(frozen=True)
class _Unit:
    graph: GraphRecord
    launch: Launch
    nodes: frozenset[str]
    ops: tuple[str, ...]
    kind: str
    time_us: float | None
    code: str  # the kernel's body (name, comments and decorators taken out), or the extern call line
    config: str | None  # the launch config the run-time autotuner kept
    meta: Mapping[str, JsonValue]  # Inductor's inductor_meta of the kernel (its tuning settings)


def launch_kind(graph: GraphRecord, launch: Launch) -> str:
    """``extern``, or the kernel's backend and category: ``triton pointwise``, ``cpp reduction``, ..."""
    category = graph.launch_category(launch)
    return category if launch.kind == "extern" else f"{launch.kind} {category}"


def diff_runs(base_name: str, base: CompileRun, other_name: str, other: CompileRun) -> ConfigDiff:
    pairings = pair_graphs(base.graphs, other.graphs)
    changes: list[KernelChange] = []
    for before, after in pairings:
        changes += diff_graphs(before, after)
    graphs = tuple(
        GraphPairing(b.id if b else None, a.id if a else None, (b or a).kind)  # type: ignore[union-attr]
        for b, a in pairings
    )
    return ConfigDiff(base_name, other_name, graphs, tuple(changes))


def pair_graphs(
    before: Sequence[GraphRecord], after: Sequence[GraphRecord]
) -> list[tuple[GraphRecord | None, GraphRecord | None]]:
    """The n-th graph of each kind in one run with the n-th of the same kind in the other."""
    pairs: list[tuple[GraphRecord | None, GraphRecord | None]] = []
    kinds = dict.fromkeys(g.kind for g in (*before, *after))
    for kind in kinds:
        left = [g for g in before if g.kind == kind]
        right = [g for g in after if g.kind == kind]
        for i in range(max(len(left), len(right))):
            pairs.append((left[i] if i < len(left) else None, right[i] if i < len(right) else None))
    return pairs


def diff_graphs(before: GraphRecord | None, after: GraphRecord | None) -> list[KernelChange]:
    left = _units(before)
    right = _units(after)
    if not left or not right:  # a graph only one run has: each of its launches on its own
        kind = "removed" if left else "added"
        return [_change(kind, [u], [], "") if left else _change(kind, [], [u], "") for u in left or right]
    changes: list[tuple[int, KernelChange]] = []
    unmatched_left: list[_Unit] = []
    for unit in left:
        twin = next((u for u in right if u.nodes == unit.nodes), None)
        if twin is None:
            unmatched_left.append(unit)
            continue
        right.remove(twin)
        changes.append((unit.launch.position, _pair(unit, twin)))
    for group_left, group_right in _overlap_groups(unmatched_left, right):
        kind = "regrouped" if group_left and group_right else "removed" if group_left else "added"
        position = (group_left or group_right)[0].launch.position
        changes.append(
            (position, _change(kind, group_left, group_right, _regroup_note(group_left, group_right)))
        )
    return [c for _, c in sorted(changes, key=lambda item: item[0])]


def _units(graph: GraphRecord | None) -> list[_Unit]:
    if graph is None:
        return []
    units = []
    for launch in graph.launches:
        kernel = graph.kernel(launch.target) if launch.kind != "extern" else None
        nodes = launch.source_nodes or (kernel.source_nodes if kernel else ())
        ops = (
            launch.aten_ops
            or (kernel.aten_ops if kernel else ())
            or ((launch.aten_op,) if launch.aten_op else ())
        )
        # without FX nodes (e.g. C++ backward kernels), the ops and the call stand in for them
        key = frozenset(nodes) if nodes else frozenset({f"{launch.target}#{launch.position}", *ops})
        code = kernel_body(kernel.source, kernel.name) if kernel else launch.code
        config = kernel.timing.config if kernel and kernel.timing else None
        time_us = launch.timing.median_us if launch.timing else None
        meta = kernel.inductor_meta if kernel else {}
        units.append(
            _Unit(graph, launch, key, tuple(ops), launch_kind(graph, launch), time_us, code, config, meta)
        )
    return units


def _pair(before: _Unit, after: _Unit) -> KernelChange:
    if before.kind == "extern" and after.kind == "extern":
        same = (before.launch.target, before.launch.aten_op) == (after.launch.target, after.launch.aten_op)
        note = "" if same else f"{before.launch.target} → {after.launch.target}"
        return _change("unchanged" if same else "changed", [before], [after], note)
    if before.kind == "extern" or after.kind == "extern":
        note = f"{_what(before)} → {_what(after)}"
        return _change("changed", [before], [after], note)
    if before.code != after.code:
        note = (
            f"different code ({before.kind} → {after.kind})"
            if before.kind != after.kind
            else "different code"
        )
        return _change("changed", [before], [after], note)
    if before.config and after.config and before.config != after.config:
        note = f"same code; the run-time autotuner kept {before.config} against {after.config}"
        return replace(_change("changed", [before], [after], note), same_code=True)
    settings = sorted(
        k for k in {*before.meta, *after.meta} - IGNORED_META if before.meta.get(k) != after.meta.get(k)
    )
    note = f"same code; Inductor's tuning settings differ: {', '.join(settings)}" if settings else ""
    return _change("unchanged", [before], [after], note)


def _what(unit: _Unit) -> str:
    kind = unit.kind.replace("cpp", "C++").replace("triton", "Triton").replace("_", " ")
    return unit.launch.target if unit.kind == "extern" else f"a {kind} kernel"


def _regroup_note(left: Sequence[_Unit], right: Sequence[_Unit]) -> str:
    if not (left and right):
        return ""
    if len(left) == len(right) == 1:
        only_before = sorted(left[0].nodes - right[0].nodes)
        only_after = sorted(right[0].nodes - left[0].nodes)
        parts = [f"only before: {', '.join(only_before)}" if only_before else "",
                 f"only after: {', '.join(only_after)}" if only_after else ""]  # fmt: skip
        return "the fusion boundary moved (" + "; ".join(p for p in parts if p) + ")"
    return f"the same work in {len(left)} launch(es) before and {len(right)} after: fused differently"


def _change(kind: str, left: Sequence[_Unit], right: Sequence[_Unit], note: str) -> KernelChange:
    nodes = sorted(set().union(*(u.nodes for u in (*left, *right))))
    ops = tuple(dict.fromkeys(op for u in (*left, *right) for op in u.ops))
    return KernelChange(kind, tuple(nodes), ops, _side(left), _side(right), note)  # type: ignore[arg-type]


def _side(units: Sequence[_Unit]) -> DiffSide | None:
    if not units:
        return None
    times = [u.time_us for u in units if u.time_us is not None]
    return DiffSide(
        graph_id=units[0].graph.id,
        launches=tuple(u.launch.position for u in units),
        targets=tuple(u.launch.target for u in units),
        kinds=tuple(u.kind for u in units),
        time_us=sum(times) if len(times) == len(units) else None,  # None unless every launch was timed
        source="\n\n".join(_display_code(u) for u in units),
    )


def _display_code(unit: _Unit) -> str:
    if unit.kind == "extern":
        return unit.launch.code
    kernel = unit.graph.kernel(unit.launch.target)
    return kernel.source if kernel else unit.code


def kernel_body(source: str, name: str) -> str:
    """What a kernel computes: from its ``def`` on, without comments, blank lines or its own name.

    The same code under two names, with other ORIGIN comments or another heuristics decorator (the
    tuning settings, compared separately), compares equal.
    """
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if _DEF.match(line)), 0)
    kept = [
        line.rstrip() for line in lines[start:] if line.strip() and not line.strip().startswith(("#", "//"))
    ]
    body = "\n".join(kept)
    return re.sub(rf"\b{re.escape(name)}\b", "KERNEL", body) if name else body


def _overlap_groups(left: Iterable[_Unit], right: Iterable[_Unit]) -> list[tuple[list[_Unit], list[_Unit]]]:
    """Connected groups of launches that share FX nodes (union-find over both sides)."""
    units = [(0, u) for u in left] + [(1, u) for u in right]
    parent = list(range(len(units)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(units)):
        for j in range(i + 1, len(units)):
            if units[i][1].nodes & units[j][1].nodes:
                parent[find(i)] = find(j)
    groups: dict[int, tuple[list[_Unit], list[_Unit]]] = {}
    for i, (side, unit) in enumerate(units):
        groups.setdefault(find(i), ([], []))[side].append(unit)
    return list(groups.values())
