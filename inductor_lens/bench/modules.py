"""Bench stage (analysis): the time of each ``nn.Module`` path and each user source line.

Each timed launch's per-step time (``LaunchTiming.median_us``, and its ``share`` of the same total the
launches' shares use) goes to the modules it ran under (``Launch.modules``, parse/module_stacks.py) and to
every module containing them: the time of a module is inclusive. Repeated layers are folded
(``layers.*.mlp``): their time added up, the instances counted and their spread kept. A launch fusing the ops
of several modules (or several lines) splits its time evenly between them; a launch under no module is
"(outside any module)". ``bench/answers.py`` puts the results on the first page, the Source page shows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ..parse.module_stacks import (
    FOLDED,
    ancestors,
    constant_nodes,
    fold_module_path,
    innermost_line,
    launch_nodes,
    launch_traces,
    mixed_parents,
    module_depth,
    node_lines,
)
from ..parse.source_lines import distinct_lines
from ..records import CompileRun, GraphRecord, Launch, SourceLine
from ..records.answers import OUTSIDE, LineTime, ModuleTime

DOMINANT_CHILD = 0.9  # a module whose child holds this much of its time is shown as that child
FX_METHOD = "module stacks of the FX nodes"
TRACE_METHOD = "stack traces of the backward's kernels (instances unknown)"


@dataclass
class _Tally:
    per_step_us: float = 0.0
    share: float = 0.0
    # unfolded path -> per-step us, of the forward: a backward launch, tied by its stack traces, is no instance's
    by_instance: dict[str, float] = field(default_factory=dict)
    forward: bool = False
    backward: bool = False


def _timed(run: CompileRun) -> Iterator[tuple[GraphRecord, Launch, float, float]]:
    for graph in run.graphs:
        for launch in graph.launches:
            if launch.timing is not None:
                yield graph, launch, launch.timing.median_us, launch.timing.share


def module_classes(run: CompileRun) -> dict[str, str]:
    """Every unfolded module path of the run's module stacks -> its class."""
    classes: dict[str, str] = {}
    for graph in run.graphs:
        classes.update(graph.module_classes)
    return classes


def module_times(run: CompileRun) -> tuple[ModuleTime, ...]:
    """Every folded module path's inclusive time per step, ranked; () where the capture recorded no module
    stacks (``NO_MODULE_STACKS`` says why)."""
    classes = module_classes(run)
    if not classes:
        return ()
    mixed = mixed_parents(classes)
    tallies: dict[str, _Tally] = {}
    outside = _Tally()
    for graph, launch, per_step_us, share in _timed(run):
        if not launch.modules:
            outside.per_step_us += per_step_us
            outside.share += share
            continue
        weight = 1.0 / len(launch.modules)
        for module in launch.modules:
            for path in ancestors(module):
                tally = tallies.setdefault(fold_module_path(path, mixed), _Tally())
                tally.per_step_us += per_step_us * weight
                tally.share += share * weight
                if FOLDED not in path and graph.kind != "backward":
                    tally.by_instance[path] = tally.by_instance.get(path, 0.0) + per_step_us * weight
                tally.backward |= graph.kind == "backward"
                tally.forward |= graph.kind != "backward"
    instances: dict[str, list[str]] = {}
    for path in classes:
        instances.setdefault(fold_module_path(path, mixed), []).append(path)
    found = [_module_time(path, tally, instances.get(path, []), classes) for path, tally in tallies.items()]
    if outside.per_step_us or outside.share:
        found.append(ModuleTime(OUTSIDE, "", 0, 0, outside.per_step_us, outside.share))
    return tuple(sorted(found, key=lambda m: (-m.per_step_us, m.path)))


def _module_time(path: str, tally: _Tally, instances: list[str], classes: Mapping[str, str]) -> ModuleTime:
    known = sorted(set(instances) | tally.by_instance.keys())
    spread = [tally.by_instance.get(instance, 0.0) for instance in known] if len(known) > 1 else []
    names = dict.fromkeys(classes[i] for i in known if i in classes)
    method = FX_METHOD if not tally.backward else TRACE_METHOD if not tally.forward else (
        f"{FX_METHOD} (forward); {TRACE_METHOD}: the spread is of the forward's time"
    )  # fmt: skip
    return ModuleTime(
        path=path,
        class_name=" / ".join(names),
        depth=module_depth(path),
        instances=max(len(known), 1),
        per_step_us=tally.per_step_us,
        share=tally.share,
        instance_min_us=min(spread) if spread and tally.by_instance else None,
        instance_max_us=max(spread) if spread and tally.by_instance else None,
        method=method,
    )


def top_modules(modules: Iterable[ModuleTime], n: int = 5) -> tuple[ModuleTime, ...]:
    """The modules worth naming first: ranked by time, without the root (never a path here) nor a module one
    of whose children holds ``DOMINANT_CHILD`` of its time (the child says more: ``layers`` -> ``layers.*``).
    "(outside any module)" takes its rank like the others: time no module explains is an answer too."""
    ranked = sorted(modules, key=lambda m: (-m.per_step_us, m.path))
    by_parent: dict[str, list[ModuleTime]] = {}
    for module in ranked:
        if module.path != OUTSIDE and "." in module.path:
            by_parent.setdefault(module.path.rpartition(".")[0], []).append(module)
    shown = [
        m for m in ranked
        if m.path and not any(c.per_step_us >= DOMINANT_CHILD * m.per_step_us for c in by_parent.get(m.path, ()))
    ]  # fmt: skip
    return tuple(shown[:n])


def launch_lines(
    graph: GraphRecord, launch: Launch, constants: frozenset[str] | None = None
) -> tuple[SourceLine, ...]:
    """The user lines a launch's ops were written on, innermost (the line of the op, not the lines calling
    it): its FX nodes' ``# File:`` notes (a constant shared between kernels, ``constant_nodes``, keeps the line
    of the op it was made for: not counted where the launch has other nodes), else the innermost line of its
    stack traces, else what its kernel lists (``KernelRecord.source_lines``)."""
    nodes = launch_nodes(graph, launch)
    nodes = (nodes - (constant_nodes(graph) if constants is None else constants)) or nodes
    found = list(node_lines(graph, nodes))
    if not found:
        found = [line for trace in launch_traces(graph, launch) if (line := innermost_line(trace)) is not None]
    if not found and launch.kind != "extern" and (kernel := graph.kernel(launch.target)) is not None:
        found = list(kernel.source_lines)
    return distinct_lines(found)


def line_times(run: CompileRun) -> tuple[LineTime, ...]:
    """Each user source line's time per step (its launches', split evenly where a launch has several lines),
    ranked. ``launches_per_step`` counts call() launches, once per step each (split the same way)."""
    tallies: dict[tuple[str, int], list[float]] = {}
    code: dict[tuple[str, int], str | None] = {}
    constants = {graph.id: constant_nodes(graph) for graph in run.graphs}
    for graph, launch, per_step_us, share in _timed(run):
        lines = launch_lines(graph, launch, constants[graph.id])
        for line in lines:
            key = (line.filename, line.line)
            tally = tallies.setdefault(key, [0.0, 0.0, 0.0])
            tally[0] += per_step_us / len(lines)
            tally[1] += share / len(lines)
            tally[2] += 1 / len(lines)
            code[key] = code.get(key) or line.code
    found = [LineTime(f, n, code[(f, n)], us, share, launches) for (f, n), (us, share, launches) in tallies.items()]
    return tuple(sorted(found, key=lambda t: (-t.per_step_us, t.filename, t.line)))
