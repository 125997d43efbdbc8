"""Report stage: the view model of the hand-written equivalents: each Inductor kernel next to the
hand-written Triton kernel(s) that do its job, their agreement with torch, and their times.

The hand-written kernels (their source, formula, summary and dimensions) are read from the run's
records, as they were when the report was built; only the highlighting is done here. A report saved
before they were recorded (run schema 5) says their source was not recorded rather than showing
today's kernels.

A deep model repeats itself: one extern matmul of one shape is launched once per layer, and several
catalog kernels launch the same Triton source. So the page has one row per distinct job (matches
equal but for their launch position, with every launch they stand for) and shows each distinct
source once, in a section of its own that the rows link to.

The first report of a capture is written before the hand-written checks run (``pipeline``): its pages say
"hand-written: running" where the results will be, and a report read back in that state says the checks did
not finish (``handwritten_status``).
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

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
    to_jsonable,
)
from ..records.analysis import RunAnalysis
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
class HandwrittenStatusNote:
    """Where the run's hand-written stage stood when the report was written, where that is worth saying."""

    headline: str  # "Hand-written: running"
    text: str
    tone: str  # the banner's: "info" or "warn"


def handwritten_status(run: CompileRun, analysis: RunAnalysis) -> HandwrittenStatusNote | None:
    """The note of a report written before its hand-written checks ended (None once they have, or where none ran)."""
    if run.handwritten_status == "running":
        on_gpu = analysis.device == "cuda"
        doing = "checked and timed on the GPU" if on_gpu else "checked under Triton's interpreter"
        return HandwrittenStatusNote(
            "Hand-written: running",
            f"The hand-written kernels are being {doing}, in a process of their own, after the rest of this report "
            "was written. The report is rewritten with their results when they finish: reload the page then.",
            "info",
        )
    if run.handwritten_status == "stopped":
        return HandwrittenStatusNote(
            "Hand-written: did not finish",
            "inductor-lens was stopped while the hand-written kernels were checked, so their results here are "
            "missing or incomplete. To get them, compile (or run) the model again; inductor-lens report re-renders "
            "a report from what its capture holds and does not run the checks.",
            "warn",
        )
    return None


@dataclass(frozen=True)
class HandwrittenStep:
    run: HandwrittenRun
    kernel: HandwrittenKernel | None  # None in a report saved before the kernels were recorded
    source: Markup
    source_anchor: str  # the id of its source's block on the hand-written page ("" when not recorded)
    shape_text: str
    checked_text: str  # "" when the full shape was checked

    @property
    def name(self) -> str:
        return self.run.name


@dataclass(frozen=True)
class HandwrittenRow:
    match: HandwrittenMatch  # the first of the equal matches the row stands for
    graph: GraphRecord
    launch: Launch | None  # the first launch
    launches: tuple[Launch, ...]  # every launch the row stands for, in order
    url: str
    steps: tuple[HandwrittenStep, ...]
    inductor_us: float | None  # per launch
    inductor_method: str
    handwritten_us: float | None  # all steps, per launch
    eager_us: float | None
    verdict: str
    tone: str
    # "ok", "mismatch", "error", "not run", "running" (the checks had not ended when the report was written),
    # "skipped" (the stage's budget was spent before it), "rejected" (computes something else than Inductor's)
    correctness: str
    gpu_alone_us: float | None  # all steps, replayed from a CUDA graph: no launch overhead
    launch_bound: str  # why the hand-written time is mostly host time, or ""

    @property
    def label(self) -> str:
        return MATCH_LABELS[self.match.kind]

    @property
    def anchor(self) -> str:
        """The id of the row's section: its first match's key, unique on the page."""
        return self.match.key

    @property
    def count(self) -> int:
        return max(1, len(self.launches))

    @property
    def launch_links(self) -> tuple[tuple[int, str], ...]:
        """(position, where it is shown) of each launch the row stands for."""
        return tuple((x.position, launch_url(self.graph, x)) for x in self.launches)


@dataclass(frozen=True)
class HandwrittenSource:
    """One distinct hand-written source, shown once, with the catalog kernels that launch it."""

    anchor: str
    kernels: tuple[HandwrittenKernel, ...]
    code: Markup


@dataclass(frozen=True)
class HandwrittenPage:
    run: CompileRun
    rows: tuple[HandwrittenRow, ...]
    summary: tuple[SummaryItem, ...]
    sources: tuple[HandwrittenSource, ...]
    # Some step's kernel has no recorded source (a report saved before they were recorded).
    unrecorded: bool
    status: HandwrittenStatusNote | None = None


def handwritten_rows(run: CompileRun) -> tuple[HandwrittenRow, ...]:
    """One row per distinct job: matches equal but for their launch position make one row."""
    groups: dict[tuple[str, str], list[HandwrittenMatch]] = {}
    for match in run.handwritten:
        groups.setdefault((match.graph_id, _identity(match)), []).append(match)
    anchors = _source_anchors(run)
    rows = []
    for (graph_id, _), matches in groups.items():
        graph = run.graph(graph_id)
        if graph is not None:
            rows.append(_row(run, matches, graph, anchors))
    return tuple(rows)


def handwritten_row(run: CompileRun, graph: GraphRecord, target: str) -> HandwrittenRow | None:
    """The row of a generated kernel (one match, covering every launch of the kernel)."""
    match = run.handwritten_for(graph.id, target)
    if match is None:
        return None
    return _row(run, [match], graph, _source_anchors(run))


def _identity(match: HandwrittenMatch) -> str:
    """Everything about a match but its launch position, as text."""
    return json.dumps(to_jsonable(replace(match, launch=None)), sort_keys=True)


def _launches(graph: GraphRecord, matches: Sequence[HandwrittenMatch]) -> tuple[Launch, ...]:
    """The launches the matches stand for: an extern call's own, or every launch of a generated kernel
    (it is matched once, at its first launch)."""
    positions = {m.launch for m in matches}
    target = matches[0].target
    return tuple(
        x for x in graph.launches if x.position in positions or (x.kind != "extern" and x.target == target)
    )


def _source_anchors(run: CompileRun) -> dict[str, str]:
    """Each recorded kernel's name -> the id of its source's block (kernels sharing a source share one)."""
    first_with: dict[str, str] = {}
    anchors = {}
    for kernel in run.handwritten_kernels:
        if kernel.source:
            anchors[kernel.name] = "source-" + first_with.setdefault(kernel.source, kernel.name)
    return anchors


def handwritten_sources(run: CompileRun) -> tuple[HandwrittenSource, ...]:
    """Every distinct recorded source once, highlighted, in the order the kernels were recorded."""
    by_source: dict[str, list[HandwrittenKernel]] = {}
    for kernel in run.handwritten_kernels:
        if kernel.source:
            by_source.setdefault(kernel.source, []).append(kernel)
    return tuple(
        HandwrittenSource(f"source-{kernels[0].name}", tuple(kernels), _highlighted(kernels[0].name, source))
        for source, kernels in by_source.items()
    )


def handwritten_page(run: CompileRun, analysis: RunAnalysis) -> HandwrittenPage:
    rows = handwritten_rows(run)
    matched = [r for r in rows if r.match.kind != "none"]
    # (Inductor's time, the hand-written time) of the rows that have both
    timed = [(r.inductor_us, r.handwritten_us) for r in matched if r.inductor_us and r.handwritten_us]
    faster = sum(1 for inductor, handwritten in timed if handwritten < inductor * (1 - TIE))
    slower = sum(1 for inductor, handwritten in timed if handwritten > inductor * (1 + TIE))
    bad = sum(1 for r in matched if r.correctness in ("mismatch", "error", "rejected"))
    checked = [r for r in matched if r.correctness not in ("not run", "running", "skipped")]
    running = run.handwritten_status == "running"
    launches = sum(r.count for r in rows)
    summary = [
        SummaryItem(
            "Matched",
            f"{len(matched)} of {len(rows)}",
            f"distinct kernels and extern matmul/attention calls ({launches:,} launches)",
        ),
        SummaryItem(
            "Exact / composed / partial",
            " / ".join(
                str(sum(1 for r in rows if r.match.kind == k)) for k in ("exact", "composed", "partial")
            ),
        ),
        SummaryItem("Agree with torch", "running", "the checks had not ended when this page was written")
        if running
        else SummaryItem(
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
    verified = [r for r in matched if r.match.verified is not None]
    if verified:
        rejected = sum(1 for r in verified if r.match.rejected)
        summary.append(
            SummaryItem(
                "Compute what Inductor's kernel computes",
                f"{len(verified) - rejected} of {len(verified)} verified",
                f"{rejected} rejected: they compute something else, and are not timed"
                if rejected
                else "each in float64 on its launch's shapes, against the kernel's own FX nodes",
                "bad" if rejected else "",
            )
        )
    if (share := analysis.coverage) is not None:
        agreed = f"; {share.agreeing_share:.0%} with every check agreeing with torch" if checked else ""
        summary.append(
            SummaryItem(
                "Profiled time with an equivalent",
                f"{share.matched_share:.0%}",
                f"exact or composed, of {share.total_us:,.0f} µs profiled per step over {share.launches:,} launches"
                f"{agreed}",
            )
        )
    if timed:
        summary.append(
            SummaryItem(
                "Hand-written faster", f"{faster} of {len(timed)}", f"slower on {slower}, the rest within 5%"
            )
        )
    # each check's configurations once (rows of equal shapes share a check)
    configs = {
        (step.name, tuple(sorted(step.run.shape.items())), step.run.dtype, c.kernel, c.origin)
        for r in rows
        for step in r.steps
        for c in step.run.configs
    }
    if configs:
        cached = sum(1 for *_, origin in configs if origin in ("cache", "table"))
        summary.append(
            SummaryItem(
                "Launch configs from the autotune cache or the shipped table",
                f"{cached} of {len(configs)}",
                "the rest autotuned in this run" if cached < len(configs) else "nothing was autotuned",
            )
        )
    skipped = {(step.name, tuple(sorted(step.run.shape.items())), step.run.dtype): step.run.skipped
               for r in rows for step in r.steps if step.run.skipped}  # fmt: skip
    if skipped:
        cut_short = sum(1 for reason in skipped.values() if reason.startswith("cut short"))
        summary.append(
            SummaryItem(
                "Skipped by the budget",
                f"{len(skipped)} check(s)",
                f"{len(skipped) - cut_short} not started, {cut_short} cut short (each row says why); "
                "--handwritten-budget SECONDS gives the stage more time, 0 runs every check to its end",
                "warn",
            )
        )
    unrecorded = any(not s.source_anchor for r in rows for s in r.steps)
    return HandwrittenPage(run, rows, tuple(summary), handwritten_sources(run), unrecorded,
                           handwritten_status(run, analysis))


def _row(
    run: CompileRun, matches: Sequence[HandwrittenMatch], graph: GraphRecord, anchors: dict[str, str]
) -> HandwrittenRow:
    match = matches[0]
    launches = _launches(graph, matches)
    launch = next((x for x in launches if x.position == match.launch), None)
    steps = tuple(_step(r, run.handwritten_kernel(r.name), anchors.get(r.name, "")) for r in match.runs)
    inductor_us, method = _inductor_time(graph, match, launches)
    handwritten_us = _total_us([r.timing for r in match.runs])
    eager_us = _total_us([r.eager for r in match.runs])
    correctness = _correctness(match, run.handwritten_status == "running")
    verdict, tone = _verdict(match, inductor_us, handwritten_us)
    if correctness == "running":
        verdict, tone = "hand-written: running", "muted"
    alone_us = _total_us([r.gpu_alone for r in match.runs])
    launch_bound = ""
    if handwritten_us and alone_us and handwritten_us > LAUNCH_BOUND * alone_us:
        launch_bound = (f"Launch-bound at this size: the hand-written GPU time alone (replayed from a CUDA graph) is "
                        f"{alone_us:,.1f} µs; the rest is host time, launching from Python through Triton's launcher")  # fmt: skip
        in_context = _in_context_us(graph, match, launches)[0]
        if in_context is not None:
            launch_bound += f". GPU time against GPU time: {alone_us:,.1f} µs by hand, {in_context:,.1f} µs for Inductor's in the profiled step"
    url = launch_url(graph, launch) if launch else graph_url(graph)
    return HandwrittenRow(match, graph, launch, launches, url, steps, inductor_us, method, handwritten_us, eager_us,
                          verdict, tone, correctness, alone_us, launch_bound)  # fmt: skip


def _total_us(timings: list[Timing | None]) -> float | None:
    """The steps' times added up, in µs; None unless every step was timed."""
    known = [t.median_ms for t in timings if t is not None]
    return sum(known) * 1e3 if known and len(known) == len(timings) else None


def _step(run: HandwrittenRun, kernel: HandwrittenKernel | None, source_anchor: str) -> HandwrittenStep:
    # Without the kernel's record (an older report), its shapes' own order: they were written in the
    # order of its dimensions.
    dims = kernel.dims if kernel else tuple(run.shape)
    checked = ""
    if run.checked_shape and dict(run.checked_shape) != dict(run.shape):
        checked = shape_text(run.checked_shape, dims)
    shape = shape_text(run.shape, dims) if run.shape else "—"
    source = _highlighted(kernel.name, kernel.source) if kernel and kernel.source else Markup("")
    return HandwrittenStep(run, kernel, source, source_anchor, shape, checked)


def _inductor_time(
    graph: GraphRecord, match: HandwrittenMatch, launches: Sequence[Launch]
) -> tuple[float | None, str]:
    kernel = graph.kernel(match.target)
    if kernel is not None and kernel.timing is not None and kernel.timing.isolated is not None:
        return kernel.timing.isolated.median_ms * 1e3, "isolated (do_bench on a copy of its real arguments)"
    in_context, timed = _in_context_us(graph, match, launches)
    if in_context is None:
        return None, ""
    return in_context, "in context (profiled steps)" + (f", the median of {timed} launches" if timed > 1 else "")


def _in_context_us(
    graph: GraphRecord, match: HandwrittenMatch, launches: Sequence[Launch]
) -> tuple[float | None, int]:
    """Inductor's GPU time per launch in the profiled steps (no launch overhead in it): the kernel's
    own, else the median of the launches' (equal extern calls, one per layer), with how many were timed."""
    kernel = graph.kernel(match.target)
    if kernel is not None and kernel.timing is not None and kernel.timing.launches:
        return kernel.timing.in_context_us / kernel.timing.launches, 1
    times = [x.timing.median_us for x in launches if x.timing is not None]
    return (statistics.median(times), len(times)) if times else (None, 0)


def _verdict(
    match: HandwrittenMatch, inductor_us: float | None, handwritten_us: float | None
) -> tuple[str, str]:
    if match.kind == "none":
        return "nothing hand-written does this job", "muted"
    if match.rejected:
        return "rejected: computes something else than Inductor's kernel, not timed", "bad"
    if skipped := _skipped(match.runs):
        return skipped, "warn"
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


def _skipped(runs: Sequence[HandwrittenRun]) -> str:
    """What of the match's hand-written runs was skipped or cut short by the stage's budget, and why, in words."""
    reasons = dict.fromkeys(r.skipped for r in runs if r.skipped)
    names = ", ".join(dict.fromkeys(r.name for r in runs if r.skipped))
    return f"{names}: {'; '.join(reasons)}" if reasons else ""


def _correctness(match: HandwrittenMatch, running: bool) -> str:
    runs = match.runs
    if match.rejected:
        return "rejected"
    if not runs or all(r.ok is None and r.error is None for r in runs):
        if running and runs:
            return "running"
        return "skipped" if any(r.skipped for r in runs) else "not run"
    if any(r.ok is False for r in runs):
        return "mismatch"
    if any(r.error for r in runs):
        return "error"
    return "ok"


@functools.lru_cache(maxsize=64)
def _highlighted(name: str, source: str) -> Markup:
    """A hand-written kernel's recorded source, highlighted (cached: many rows and kernel pages show one kernel)."""
    return highlight(source, "python", f"hw-{name}")
