"""Report stage: the view model of "where the time goes": end to end, the device's ceilings, the bound
verdict (``bench.bound``), one step as a bar, and the roofline and bandwidth charts of every timed kernel.

On a GPU the bar is drawn against the benchmarked compiled step (``do_bench`` median), never against the
profiled span (first kernel to last under the profiler, which the profiler stretches): the launches' device
times, the device work tied to no launch, and the idle time of the bound verdict (step minus busy)."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from ..records import BenchResult, BoundVerdict, CompileRun, CudaGraphUse, ProfileSource
from ..records.analysis import RunAnalysis, Stability
from ..units import format_bytes
from .charts import BarSegment, ChartPoint, bandwidth_chart, roofline_chart, time_bar
from .views import SummaryItem, kernel_url, launch_category, launch_url


@dataclass(frozen=True)
class TimingView:
    bench: BenchResult
    device_label: str
    cards: tuple[SummaryItem, ...]
    bar: Markup | None
    roofline: Markup | None
    bandwidth: Markup | None
    attributed_percent: float | None
    unattributed: tuple[tuple[str, float], ...]
    in_context_method: str = ""
    isolated_method: str = ""
    profile_note: str = ""  # where the times come from, for a profiler trace recorded elsewhere
    bound: BoundVerdict | None = None
    bar_note: str = ""  # what the bar's whole is


def timing_view(run: CompileRun, analysis: RunAnalysis) -> TimingView | None:
    """The judgement of the measurements and the bound verdict are the analysis's (made once per render)."""
    stability = analysis.diagnosis.stability
    bench = run.bench
    if bench is None:
        return None
    gpu = bench.device == "cuda"
    device_name = bench.profile.device_name if bench.profile is not None else run.environment.device_name
    label = f"GPU: {device_name}" if gpu and device_name else bench.device.upper()
    if bench.error:
        return TimingView(bench, label, (), None, None, None, None, ())
    segments: list[BarSegment] = []
    points: list[ChartPoint] = []
    step = bench.step
    for graph in run.graphs:
        for launch in graph.launches:
            timing = launch.timing
            if timing is None:
                continue
            category = launch_category(graph, launch, analysis.custom_ops)
            name = launch.label
            url = launch_url(graph, launch)
            segments.append(
                BarSegment(f"{graph.id} #{launch.position} {name}", url, category, timing.median_us, 0.0)
            )
            if timing.roofline is not None:
                points.append(
                    ChartPoint(f"#{launch.position} {name}", url, category, timing.roofline, timing.share)
                )
        for kernel in graph.kernels:
            if kernel.timing and kernel.timing.isolated_roofline and not kernel.launches:
                points.append(
                    ChartPoint(
                        kernel.name,
                        kernel_url(graph, kernel.name),
                        kernel.category,
                        kernel.timing.isolated_roofline,
                        0.0,
                    )
                )
    verdict = analysis.bound
    bar, bar_note = None, ""
    if step is not None and segments:
        segments, bar_note = _step_segments(segments, step.total_us - step.attributed_us, verdict, gpu)
        bar = time_bar(segments)
    ceilings = bench.ceilings
    return TimingView(
        bench=bench,
        device_label=label,
        cards=_cards(run, bench, gpu, stability, verdict),
        bar=bar,
        roofline=roofline_chart(points, ceilings) if ceilings else None,
        bandwidth=bandwidth_chart(points, ceilings) if ceilings else None,
        attributed_percent=100.0 * step.attributed_us / step.total_us if step and step.total_us else None,
        unattributed=tuple(sorted(step.unattributed.items(), key=lambda item: -item[1])[:10]) if step else (),
        in_context_method=step.method if step else "",
        isolated_method=next(
            (
                f"{k.timing.isolated.method}; the kernel replayed alone on a copy of its real launch's arguments"
                for g in run.graphs
                for k in g.kernels
                if k.timing and k.timing.isolated
            ),
            "not measured" if gpu else "not measured on CPU",
        ),
        profile_note=profile_note(bench.profile, gpu) if bench.profile is not None else "",
        bound=verdict,
        bar_note=bar_note,
    )


def _step_segments(
    launches: list[BarSegment], untied_us: float, verdict: BoundVerdict | None, gpu: bool
) -> tuple[list[BarSegment], str]:
    """The bar's segments in percent of its whole, and what the whole is. GPU: the benchmarked step, with the
    device work tied to no launch and the bound verdict's idle time; scaled to the parts where they add up to
    more (the profiled device time can exceed a benchmarked step)."""
    parts = list(launches)
    if gpu and untied_us > 0:
        parts.append(BarSegment("Device work tied to no launch (eager ops between the graphs)", "#timing", "other",
                                untied_us, 0.0))  # fmt: skip
    note = f"width: {'device' if gpu else 'CPU'} time per profiled step"
    whole = sum(s.us for s in parts)
    if gpu and verdict is not None and verdict.step_us and verdict.idle_us is not None:
        parts.append(BarSegment("GPU idle: the benchmarked step minus the GPU's busy time", "#bound-rule", "idle",
                                verdict.idle_us, 0.0))  # fmt: skip
        drawn = whole + verdict.idle_us
        whole = max(verdict.step_us, drawn)
        note = f"the whole bar is the benchmarked compiled step, {verdict.step_us:,.1f} µs"
        if drawn > verdict.step_us * 1.01:
            why = ("kernels that overlap count in full" if drawn <= verdict.step_us * 1.05
                   else "the profiled device time per step adds up to more than it")  # fmt: skip
            note = (f"the whole bar is the parts, {drawn:,.1f} µs, longer than the benchmarked compiled step "
                    f"({verdict.step_us:,.1f} µs): {why}")  # fmt: skip
    whole = whole or 1.0
    return [BarSegment(s.label, s.url, s.category, s.us, 100.0 * s.us / whole) for s in parts], note


def profile_summary(source: ProfileSource, gpu: bool) -> str:
    """One line: the steps, how each graph was joined, and the work no graph explains."""
    joins = "; ".join(f"graph {j.graph} by its {j.method} ({j.calls} calls)" for j in source.joins)
    work = "GPU kernels" if gpu else "CPU ranges"
    parts = [source.steps_found, f"joined: {joins}" if joins else "no graph joined"]
    if source.unjoined_calls:
        parts.append(f"{source.unjoined_calls} compiled-graph calls of no graph of this report")
    if source.unattributed_count:
        parts.append(f"{source.unattributed_count} {work} in the steps tied to no launch (listed)")
    if source.outside_count:
        parts.append(f"{source.outside_count} {work} outside the steps ({source.outside_us:,.1f} µs in all)")
    return "; ".join(parts)


def profile_note(source: ProfileSource, gpu: bool) -> str:
    """Where the report's times come from: the trace, its date and device, its steps and the join."""
    recorded = f", recorded {source.recorded}" if source.recorded else ", undated"
    device = (
        f"on a {source.device_name}" + (f" ({source.device_detail})" if source.device_detail else "")
        if source.device_name
        else "on CPU (no deviceProperties)"
    )
    text = f"the profiler trace {source.file}{recorded}, {device}: {profile_summary(source, gpu)}. Ceilings: {source.ceilings}"
    if source.replaced:
        text += f". These times replace {source.replaced}"
    return text


def _cards(
    run: CompileRun, bench: BenchResult, gpu: bool, stability: Stability, bound: BoundVerdict | None
) -> tuple[SummaryItem, ...]:
    cards: list[SummaryItem] = []
    e2e = bench.end_to_end
    if e2e is not None:
        # a verdict only as strong as its evidence: no colour where the numbers are unstable or within the spread
        verdict = {
            "unstable": f"{e2e.speedup:.2f}x, not judged: unstable",
            "within the noise": f"{e2e.speedup:.2f}x, within the spread: about the same",
        }.get(stability.verdict, f"{e2e.speedup:.2f}x")
        tone = "" if stability.verdict != "judged" else "good" if e2e.speedup >= 1.0 else "bad"
        cards.append(
            SummaryItem(
                "Compiled step" + ("" if gpu else " (CPU)"),
                f"{e2e.compiled.median_ms:.3f} ms",
                f"eager {e2e.eager.median_ms:.3f} ms: {verdict}; spread p10-p90 "
                f"{e2e.compiled.p10_ms:.3f}-{e2e.compiled.p90_ms:.3f} ms over {e2e.compiled.samples} runs "
                f"(eager {e2e.eager.p10_ms:.3f}-{e2e.eager.p90_ms:.3f} ms over {e2e.eager.samples})",
                tone,
            )
        )
        if e2e.compiled_peak_bytes is not None and e2e.eager_peak_bytes is not None:
            cards.append(
                SummaryItem(
                    "Peak memory",
                    format_bytes(e2e.compiled_peak_bytes),
                    f"eager {format_bytes(e2e.eager_peak_bytes)} (torch.cuda.max_memory_allocated over one step)",
                )
            )
        if e2e.cudagraphs:
            detail = e2e.cudagraphs.partition(": ")[2]
            if bench.cudagraphs is not None:
                detail = cudagraph_detail(bench.cudagraphs)
            cards.append(SummaryItem("CUDA graphs", e2e.cudagraphs.split(":")[0], detail))
    if stability.load:
        busy = any(r.rule == "busy machine" for r in stability.reasons) or bool(stability.notes)
        cards.append(SummaryItem("Machine load", "busy" if busy else "quiet", stability.load, "bad" if busy else ""))
    step = bench.step
    if step is not None:
        detail = f"{step.attributed_us:,.1f} µs tied to launches"
        if step.total_p10_us is not None and step.total_p90_us is not None:
            detail += f"; spread p10-p90 {step.total_p10_us:,.1f}-{step.total_p90_us:,.1f} µs over {step.steps} steps"
        if gpu and bound is not None and bound.busy_us is not None and bound.step_us:
            detail += (f"; GPU busy {bound.busy_us:,.1f} of the {bound.step_us:,.1f} µs benchmarked step "
                       f"({bound.busy_us / bound.step_us:.0%})")  # fmt: skip
            if bound.profiled_span_us:
                detail += (f"; under the profiler, first kernel to last: {bound.profiled_span_us:,.1f} µs "
                           "(the profiler slows the host)")  # fmt: skip
        cards.append(
            SummaryItem(
                "Device time per step" if gpu else "Time in compiled graphs per step",
                f"{step.total_us:,.1f} µs",
                detail,
            )
        )
    if bench.ceilings is not None:
        c = bench.ceilings
        cards.append(
            SummaryItem(
                "Measured ceilings",
                f"{c.copy_gb_per_s:,.0f} GB/s · {c.matmul_tflops:,.0f} TFLOP/s",
                f"device-to-device copy of {format_bytes(c.copy_bytes / 2)}; {c.matmul_size}³ {c.matmul_dtype} matmul"
                + (" (TF32 on)" if c.tf32 else ""),
            )
        )
    return tuple(cards)


def cudagraph_detail(use: CudaGraphUse) -> str:
    """What the CUDA graphs cost and saved, each number with how it was measured."""
    parts = []
    counts = [f"{n} {what}" for n, what in ((use.graphs_recorded, "recorded"), (use.rerecords, "re-recorded"),
                                            (use.skips, "skipped")) if n is not None]  # fmt: skip
    if counts:
        parts.append("graphs " + ", ".join(counts) + " (cudagraph trees)")
    if use.recording_s is not None:
        parts.append(f"the recording call took {use.recording_s:.2f} s")
    with_, without = use.with_graphs, use.without_graphs
    if with_ is not None and without is not None and with_.median_ms > 0:
        parts.append(
            f"step {with_.median_ms:.3f} ms (p10-p90 {with_.p10_ms:.3f}-{with_.p90_ms:.3f}) with the graphs against "
            f"{without.median_ms:.3f} ms (p10-p90 {without.p10_ms:.3f}-{without.p90_ms:.3f}) for the same compiled code "
            f"called directly without them (and without Dynamo's guards): {without.median_ms / with_.median_ms:.2f}x"
        )
    parts.append(use.tie)
    parts.extend(f"not measured: {error}" for error in use.errors)
    return "; ".join(parts)
