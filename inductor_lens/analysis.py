"""Stage "analysis" of the pipeline (records -> analysis -> report): everything the report's views read
besides the records, worked out from the records alone before any page is rendered.

``analyze(run)`` gathers what the parse, bench and hand-written stages say of a finished run (the
diagnosis, the answers, the bound verdict, time per module and per line, the pre-grad stages' FX graphs,
symbolic sizes at their hints, kernels' bytes, the coverage of the hand-written kernels) into a
``RunAnalysis`` (``records/analysis.py``); ``analyze_comparison`` does the same for a comparison. The report
imports none of those stages: ``render_report(run, analyze(run))``. Nothing here is written to lens.json, so a
saved report re-renders with the analysis of the code that renders it.
"""

from __future__ import annotations

from .bench import bound, diagnosis, roofline
from .bench.answers import build_answers
from .bench.modules import launch_lines, line_times, module_times
from .compare.comparability import headline
from .compare.summary import against_eager, change_threshold
from .handwritten.match import coverage, run_device
from .parse import compat
from .parse.diagnostics import Diagnostics
from .parse.fx_graph import parse_fx_graph
from .parse.module_stacks import constant_nodes
from .parse.symbolic import annotate, symbols_in
from .parse.trace_timeline import nesting
from .records import Comparison, CompileRun, GraphRecord
from .records.analysis import (
    PRE_GRAD_STAGES,
    ComparisonAnalysis,
    DiagnosisRules,
    GraphAnalysis,
    KernelCost,
    RunAnalysis,
)

__all__ = ["analyze", "analyze_comparison"]

RULES = DiagnosisRules(
    bound.rule_text(True), bound.rule_text(False),
    diagnosis.OVERHEAD_SHARE, diagnosis.PRECISION_SHARE, diagnosis.AUTOTUNE_UNDER, diagnosis.CLOSE_CALL, diagnosis.NOISE_SHARE,
    roofline.FAR_FROM_ROOF, roofline.TINY_KERNEL_S,
)  # fmt: skip


def analyze(run: CompileRun) -> RunAnalysis:
    return RunAnalysis(
        diagnosis=diagnosis.diagnose(run),
        rules=RULES,
        answers=run.answers if run.answers is not None else build_answers(run),
        bound=bound.bound_verdict(run),
        line_times=line_times(run),
        module_times=module_times(run),
        graphs={graph.id: _graph(graph) for graph in run.graphs},
        pre_grad_graphs={
            (frame.compile_id, index): parse_fx_graph(stage.text, "readable", stage.name, Diagnostics())
            for frame in run.frames
            for index, stage in enumerate(frame.stages, start=1)
            if stage.name in PRE_GRAD_STAGES
        },
        span_nesting=nesting(run.timeline.spans),
        guard_symbols={g.expr: symbols_in(g.expr) for frame in run.frames for g in frame.shape_guards},
        custom_ops=frozenset(
            launch.target
            for graph in run.graphs
            for launch in graph.launches
            if launch.kind == "extern" and compat.custom_op(launch.target) is not None
        ),
        coverage=coverage(run),
        device=run_device(run),
        wrapped_forward=any(
            f.stack and compat.is_wrap_inline_frame(f.stack[-1].filename, f.stack[-1].function) for f in run.frames
        ),
    )


def _graph(graph: GraphRecord) -> GraphAnalysis:
    types = {*graph.buffers.values(), *(node.type for fx in graph.fx_graphs for node in fx.nodes if node.type)}
    constants = constant_nodes(graph)
    costs = {}
    for kernel in graph.kernels:
        first = next((launch for launch in graph.launches if launch.target == kernel.name), None)
        moved, _, source = roofline.kernel_cost(graph, kernel, first)
        passed = roofline.passed_bytes(graph, kernel, first)[0] if first is not None else None
        costs[kernel.name] = KernelCost(moved, source, passed)
    return GraphAnalysis(
        annotated={text: annotate(text, graph.hints) for text in types},
        launch_lines={launch.position: launch_lines(graph, launch, constants) for launch in graph.launches},
        kernel_costs=costs,
    )


def analyze_comparison(comparison: Comparison) -> ComparisonAnalysis:
    return ComparisonAnalysis(
        headline=headline(comparison.differences),
        against_eager=tuple(against_eager(config) for config in comparison.configs),
        change_thresholds=tuple(
            change_threshold(diff.noise) if diff.noise is not None else "" for diff in comparison.diffs
        ),
    )
