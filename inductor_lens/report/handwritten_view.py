"""Report stage: the view model of the hand-written equivalents: each Inductor kernel next to the
hand-written Triton kernel(s) that do its job, their agreement with torch, and their times.

The hand-written kernels (their source, formula, summary and dimensions) are read from the run's
records, as they were when the report was built; only the highlighting is done here. A report saved
before they were recorded (run schema 5) says their source was not recorded rather than showing
today's kernels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from markupsafe import Markup

from ..records import (
    CompileRun,
    GraphRecord,
    HandwrittenKernel,
    HandwrittenMatch,
    HandwrittenRun,
    Launch,
    Timing,
    shape_text,
)
from .highlight import highlight
from .views import SummaryItem, graph_url, launch_url

MATCH_LABELS = {
    "exact": "exact: does the same work",
    "composed": "composed: the same work in several launches",
    "partial": "partial: part of the work",
    "none": "no hand-written equivalent",
}
# Faster or slower by less than this is reported as a tie.
TIE = 0.05
# A do_bench time this many times the CUDA-graph time is mostly launch overhead.
LAUNCH_BOUND = 1.5


@dataclass(frozen=True)
class HandwrittenStep:
    run: HandwrittenRun
    kernel: HandwrittenKernel | None  # None in a report saved before the kernels were recorded
    source: Markup
    shape_text: str
    checked_text: str  # "" when the full shape was checked

    @property
    def name(self) -> str:
        return self.run.name


@dataclass(frozen=True)
class HandwrittenRow:
    match: HandwrittenMatch
    graph: GraphRecord
    launch: Launch | None
    url: str
    steps: tuple[HandwrittenStep, ...]
    inductor_us: float | None  # per launch
    inductor_method: str
    handwritten_us: float | None  # all steps, per launch
    eager_us: float | None
    verdict: str
    tone: str
    correctness: str  # "ok", "mismatch", "error", "not run"
    gpu_alone_us: float | None  # all steps, replayed from a CUDA graph: no launch overhead
    launch_bound: str  # why the hand-written time is mostly host time, or ""

    @property
    def label(self) -> str:
        return MATCH_LABELS[self.match.kind]


@dataclass(frozen=True)
class HandwrittenPage:
    run: CompileRun
    rows: tuple[HandwrittenRow, ...]
    summary: tuple[SummaryItem, ...]


def handwritten_rows(run: CompileRun) -> tuple[HandwrittenRow, ...]:
    rows = []
    for match in run.handwritten:
        graph = run.graph(match.graph_id)
        if graph is not None:
            rows.append(_row(run, match, graph, _launch(graph, match)))
    return tuple(rows)


def handwritten_row(run: CompileRun, graph: GraphRecord, target: str) -> HandwrittenRow | None:
    match = run.handwritten_for(graph.id, target)
    if match is None:
        return None
    return _row(run, match, graph, _launch(graph, match))


def _launch(graph: GraphRecord, match: HandwrittenMatch) -> Launch | None:
    return next((x for x in graph.launches if x.position == match.launch), None)


def handwritten_page(run: CompileRun) -> HandwrittenPage:
    rows = handwritten_rows(run)
    matched = [r for r in rows if r.match.kind != "none"]
    # (Inductor's time, the hand-written time) of the rows that have both
    timed = [(r.inductor_us, r.handwritten_us) for r in matched if r.inductor_us and r.handwritten_us]
    faster = sum(1 for inductor, handwritten in timed if handwritten < inductor * (1 - TIE))
    slower = sum(1 for inductor, handwritten in timed if handwritten > inductor * (1 + TIE))
    bad = sum(1 for r in matched if r.correctness in ("mismatch", "error"))
    checked = [r for r in matched if r.correctness != "not run"]
    summary = [
        SummaryItem("Matched", f"{len(matched)} of {len(rows)}", "kernels and extern matmul/attention calls"),
        SummaryItem(
            "Exact / composed / partial",
            " / ".join(
                str(sum(1 for r in rows if r.match.kind == k)) for k in ("exact", "composed", "partial")
            ),
        ),
        SummaryItem(
            "Agree with torch",
            f"{sum(1 for r in checked if r.correctness == 'ok')} of {len(checked)} checked",
            f"{bad} disagree or failed"
            if bad
            else "every check within tolerance"
            if checked
            else "not run here",
            "bad" if bad else "",
        ),
    ]
    if timed:
        summary.append(
            SummaryItem(
                "Hand-written faster", f"{faster} of {len(timed)}", f"slower on {slower}, the rest within 5%"
            )
        )
    return HandwrittenPage(run, rows, tuple(summary))


def _row(
    run: CompileRun, match: HandwrittenMatch, graph: GraphRecord, launch: Launch | None
) -> HandwrittenRow:
    steps = tuple(_step(r, run.handwritten_kernel(r.name)) for r in match.runs)
    inductor_us, method = _inductor_time(graph, match, launch)
    handwritten_us = _total_us([r.timing for r in match.runs])
    eager_us = _total_us([r.eager for r in match.runs])
    verdict, tone = _verdict(match, inductor_us, handwritten_us)
    alone_us = _total_us([r.gpu_alone for r in match.runs])
    launch_bound = ""
    if handwritten_us and alone_us and handwritten_us > LAUNCH_BOUND * alone_us:
        launch_bound = (f"Launch-bound at this size: the hand-written GPU time alone (replayed from a CUDA graph) is "
                        f"{alone_us:,.1f} µs; the rest is host time, launching from Python through Triton's launcher")  # fmt: skip
        in_context = _in_context_us(graph, match, launch)
        if in_context is not None:
            launch_bound += f". GPU time against GPU time: {alone_us:,.1f} µs by hand, {in_context:,.1f} µs for Inductor's in the profiled step"
    url = launch_url(graph, launch) if launch else graph_url(graph)
    return HandwrittenRow(match, graph, launch, url, steps, inductor_us, method, handwritten_us, eager_us,
                          verdict, tone, _correctness(match.runs), alone_us, launch_bound)  # fmt: skip


def _total_us(timings: list[Timing | None]) -> float | None:
    """The steps' times added up, in µs; None unless every step was timed."""
    known = [t.median_ms for t in timings if t is not None]
    return sum(known) * 1e3 if known and len(known) == len(timings) else None


def _step(run: HandwrittenRun, kernel: HandwrittenKernel | None) -> HandwrittenStep:
    # Without the kernel's record (an older report), its shapes' own order: they were written in the
    # order of its dimensions.
    dims = kernel.dims if kernel else tuple(run.shape)
    checked = ""
    if run.checked_shape and dict(run.checked_shape) != dict(run.shape):
        checked = shape_text(run.checked_shape, dims)
    shape = shape_text(run.shape, dims) if run.shape else "—"
    source = _highlighted(kernel.name, kernel.source) if kernel and kernel.source else Markup("")
    return HandwrittenStep(run, kernel, source, shape, checked)


def _inductor_time(
    graph: GraphRecord, match: HandwrittenMatch, launch: Launch | None
) -> tuple[float | None, str]:
    kernel = graph.kernel(match.target)
    if kernel is not None and kernel.timing is not None and kernel.timing.isolated is not None:
        return kernel.timing.isolated.median_ms * 1e3, "isolated (do_bench on a copy of its real arguments)"
    in_context = _in_context_us(graph, match, launch)
    return (in_context, "in context (profiled steps)") if in_context is not None else (None, "")


def _in_context_us(graph: GraphRecord, match: HandwrittenMatch, launch: Launch | None) -> float | None:
    """Inductor's kernel's GPU time per launch in the profiled steps (no launch overhead in it)."""
    kernel = graph.kernel(match.target)
    if kernel is not None and kernel.timing is not None and kernel.timing.launches:
        return kernel.timing.in_context_us / kernel.timing.launches
    if launch is not None and launch.timing is not None:
        return launch.timing.median_us
    return None


def _verdict(
    match: HandwrittenMatch, inductor_us: float | None, handwritten_us: float | None
) -> tuple[str, str]:
    if match.kind == "none":
        return "nothing hand-written does this job", "muted"
    if inductor_us is None or handwritten_us is None:
        return "not timed (timing needs a GPU)", "muted"
    ratio = inductor_us / handwritten_us
    launches = f" in {len(match.runs)} launches" if len(match.runs) > 1 else ""
    if ratio > 1 + TIE:
        return f"hand-written {ratio:.2f}x faster{launches}", "good" if match.kind != "partial" else ""
    if ratio < 1 - TIE:
        return (
            f"Inductor {1 / ratio:.2f}x faster{' (fusion pays)' if launches else ''}",
            "warn" if not launches else "",
        )
    return f"within 5% of Inductor{launches}", ""


def _correctness(runs: tuple[HandwrittenRun, ...]) -> str:
    if not runs or all(r.ok is None and r.error is None for r in runs):
        return "not run"
    if any(r.ok is False for r in runs):
        return "mismatch"
    if any(r.error for r in runs):
        return "error"
    return "ok"


@functools.lru_cache(maxsize=64)
def _highlighted(name: str, source: str) -> Markup:
    """A hand-written kernel's recorded source, highlighted (cached: many rows and kernel pages show one kernel)."""
    return highlight(source, "python", f"hw-{name}")
