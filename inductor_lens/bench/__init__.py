"""Stage 4 of the pipeline (capture -> parse -> records -> bench -> report): timings joined to the records.

``worker/measure.py`` runs in the model process, where the compiled model and Inductor's kernel
modules live, and leaves raw measurements in ``capture/capture.json`` (a ``worker.files.BenchData``)
and the profiler's trace in ``capture/profile_trace.json``. ``attach_measurements(run, capture_dir)``
turns them into records: every launch gets its in-context time (``attribution.py``), every kernel its
isolated time and its place on the roofline (``roofline.py``), and the run the device's ceilings,
end-to-end latency and memory, and the profiled step.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

from ..exchange.files import (
    GRAPH_FREE_TRACE_FILE,
    PROFILE_TRACE_FILE,
    RESULT_FILE,
    BenchData,
    CeilingsData,
    CudaGraphData,
    EndToEndData,
    IsolatedKernel,
    read_bench_data,
)
from ..exchange.shared import kernel_fingerprint, quantile
from ..parse import compat
from ..parse.diagnostics import unreadable_capture_file
from ..records import (
    BenchResult,
    CompileRun,
    CudaGraphUse,
    DeviceCeilings,
    EndToEnd,
    GraphRecord,
    KernelRecord,
    KernelTiming,
    Launch,
    LaunchTiming,
    StepTiming,
)
from .attribution import Attribution, attribute
from .roofline import extern_cost, flags, kernel_cost, place
from .step_parts import step_parts
from .trace_ranges import UNREADABLE

__all__ = ["attach_measurements", "time_steps"]


def attach_measurements(run: CompileRun, capture_dir: Path, *, strict: bool = False) -> CompileRun:
    """The run with its timings, when the capture in ``capture_dir`` measured any.

    Measurement files that cannot be read (truncated, edited, from another version) leave the run
    untimed with a warning in its parse notes, or, with ``strict``, raise ParseError.
    """
    try:
        data = read_bench_data(capture_dir / RESULT_FILE)
        return run if data is None else _attach(run, data, capture_dir)
    except UNREADABLE as exc:
        return unreadable_capture_file(run, capture_dir, exc, "measurements not read, the report has no timings", strict)


def _attach(run: CompileRun, data: BenchData, capture_dir: Path) -> CompileRun:
    if data.error:
        return replace(run, bench=BenchResult(device=data.device, error=data.error))
    ceilings = _ceilings(data.ceilings)
    trace = capture_dir / PROFILE_TRACE_FILE
    free_trace = capture_dir / GRAPH_FREE_TRACE_FILE
    graph_free = (
        _graph_free_attribution(free_trace, run) if data.cudagraph and free_trace.is_file() else None
    )
    known = graph_free.kernel_names if graph_free is not None else None
    attribution = attribute(trace, run.graphs, data.device, known) if trace.is_file() else None
    isolated = {**_graph_free_isolated(data.cudagraph), **data.isolated}
    graphs, step = run.graphs, None
    if attribution is not None and attribution.steps:
        window = f"torch.profiler over {attribution.steps} compiled steps after 3 warm-up steps"
        graphs, step = time_steps(run.graphs, attribution, isolated, ceilings, window)
    end_to_end = _end_to_end(data.end_to_end, run)
    cudagraphs = _cudagraph_use(data.cudagraph, attribution, graph_free, end_to_end, run)
    return replace(
        run, graphs=graphs, bench=BenchResult(data.device, ceilings, end_to_end, step, cudagraphs=cudagraphs, host=tuple(data.host))
    )


def _graph_free_attribution(trace: Path, run: CompileRun) -> Attribution | None:
    """The graph-free profile only sharpens the ties of the real one: unreadable, it is left out."""
    try:
        return attribute(trace, run.graphs, "cuda")
    except UNREADABLE:
        return None


def _graph_free_isolated(data: CudaGraphData | None) -> dict[str, list[IsolatedKernel]]:
    """Isolated times taken from the graph-free calls (under CUDA graphs no launch reaches Python), their
    method saying where the arguments came from."""
    if data is None:
        return {}
    note = ("; arguments copied from a direct call of the compiled graph's code on Inductor's benchmark inputs "
            "(get_args(): the real sizes, strides and dtypes, random values), since CUDA graphs replayed the step")  # fmt: skip
    return {
        name: [
            replace(e, isolated=replace(e.isolated, method=e.isolated.method + note)) if e.isolated else e
            for e in entries
        ]
        for name, entries in data.isolated.items()
    }


def _cudagraph_use(
    data: CudaGraphData | None,
    attribution: Attribution | None,
    graph_free: Attribution | None,
    end_to_end: EndToEnd | None,
    run: CompileRun,
) -> CudaGraphUse | None:
    if data is None:
        return None
    if attribution is None or not attribution.replayed_us:
        tie = "no CUDA-graph replay in the profiled steps"
    elif attribution.replays_tied_exactly:
        tie = ("every replayed kernel matched, in order, to the kernels each launch issued when the same code ran "
               "without CUDA graphs (profiled right after)")  # fmt: skip
    else:
        tie = ("replayed kernels aligned to the launches by order: Triton kernels by name, the kernels between two "
               "of them to the extern launches between them; ties by position only are counted as approximate")  # fmt: skip
    return CudaGraphUse(
        graphs_recorded=data.graphs_recorded,
        rerecords=data.rerecords,
        skips=data.skips,
        recording_s=run.capture.second_call_s if run.capture else None,
        with_graphs=end_to_end.compiled if end_to_end else None,
        without_graphs=data.step,
        without_graphs_device_us=statistics.median(graph_free.step_total_us)
        if graph_free and graph_free.steps
        else None,
        graph_free_calls=data.graphs,
        tie=tie,
        errors=tuple(data.errors),
    )


def _ceilings(data: CeilingsData | None) -> DeviceCeilings | None:
    if data is None:
        return None
    return DeviceCeilings(
        copy_gb_per_s=data.copy_gb_per_s,
        copy=data.copy,
        copy_bytes=data.copy_bytes,
        matmul_tflops=data.matmul_tflops,
        matmul=data.matmul,
        matmul_dtype=data.dtype,
        matmul_size=round(float(data.matmul_flop / 2) ** (1 / 3)),
        tf32=data.tf32,
        matmul_tf32_tflops=data.matmul_tf32_tflops,
        matmul_bf16_tflops=data.matmul_bf16_tflops,
        cudnn_tf32=data.cudnn_tf32,
        float32_matmul_precision=data.float32_matmul_precision,
    )


def _end_to_end(data: EndToEndData | None, run: CompileRun) -> EndToEnd | None:
    if data is None or data.eager is None or data.compiled is None:
        return None
    eager, compiled = data.eager, data.compiled
    return EndToEnd(
        eager=eager,
        compiled=compiled,
        speedup=eager.median_ms / compiled.median_ms if compiled.median_ms else 0.0,
        eager_peak_bytes=data.eager_peak_bytes,
        compiled_peak_bytes=data.compiled_peak_bytes,
        cudagraphs=_cudagraphs(run),
    )


def _cudagraphs(run: CompileRun) -> str | None:
    """Whether CUDA graphs were on for this run, and if on, used or skipped (with Inductor's reason)."""
    settings = run.settings
    if settings is None:
        return None
    options = {**settings.mode_options, **settings.options}
    if not options.get("triton.cudagraphs"):
        return None
    if run.environment.device_type == "cpu":
        return "skipped: CUDA graphs need a CUDA device"
    reasons = [f.cudagraph_skip_reason for f in run.frames if f.cudagraph_skip_reason]
    return f"skipped: {'; '.join(dict.fromkeys(reasons))}" if reasons else "used"


def time_steps(
    graphs: tuple[GraphRecord, ...],
    attribution: Attribution,
    isolated: dict[str, list[IsolatedKernel]],
    ceilings: DeviceCeilings | None,
    window: str,
) -> tuple[tuple[GraphRecord, ...], StepTiming]:
    """The graphs with the in-context time of every launch the profiled steps tied (and their kernels'
    times), and the step; ``window`` says which steps of which trace (the start of the step's method)."""
    total = statistics.median(attribution.step_total_us)
    timed = tuple(_time_graph(g, attribution, isolated, ceilings, total) for g in graphs)
    parts, wall_us, parts_method = step_parts(attribution, graphs)
    step = replace(_step(attribution, attribution.device, window), parts=parts, step_wall_us=wall_us,
                   parts_method=parts_method)  # fmt: skip
    return timed, step


def _step(attribution: Attribution, device: str, window: str) -> StepTiming:
    attributed = [
        sum(t.per_step_us[i] for t in attribution.launches.values()) for i in range(attribution.steps)
    ]
    gpu = device == "cuda"
    method = (
        f"{window}; per step, the sum of the durations of the GPU kernels each launch issued (tied by the "
        "profiler's External id); medians over steps"
        if gpu
        else f"{window}; per step, the duration of each launch's CPU range (C++ kernels recorded with "
        "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE); medians"
    )
    if attribution.by_ops:
        method += (
            f"; {len(attribution.by_ops)} custom op launch(es) without a range of their own "
            f"({compat.RANGELESS_CUSTOM_OPS}) timed as the ranges of the ops each ran between its neighbouring launches"
        )
    replayed = statistics.median(attribution.replayed_us) if attribution.replayed_us else 0.0
    if replayed:
        method += (
            "; kernels replayed from CUDA graphs tied to launches by aligning each replay's kernel sequence with the "
            "graph's launches"
            + (
                " (exactly, from the same code profiled without CUDA graphs)"
                if attribution.replays_tied_exactly
                else " (by order)"
            )
        )
    return StepTiming(
        steps=attribution.steps,
        total_us=statistics.median(attribution.step_total_us),
        attributed_us=statistics.median(attributed),
        span_us=statistics.median(attribution.step_span_us) if gpu else None,
        busy_us=statistics.median(attribution.step_busy_us) if gpu else None,
        unattributed=attribution.unattributed,
        method=method,
        replayed_us=replayed if replayed else None,
        approximate_us=statistics.median(attribution.approximate_us) if replayed else None,
        total_p10_us=quantile(attribution.step_total_us, 0.1),
        total_p90_us=quantile(attribution.step_total_us, 0.9),
        collectives=attribution.collectives,
    )


def _time_graph(
    graph: GraphRecord,
    attribution: Attribution,
    isolated: dict[str, list[IsolatedKernel]],
    ceilings: DeviceCeilings | None,
    step_total_us: float,
) -> GraphRecord:
    kernels = {k.name: k for k in graph.kernels}
    launches = []
    for launch in graph.launches:
        times = attribution.launches.get((graph.id, launch.position))
        if times is None:
            launches.append(launch)
            continue
        median_us = times.median_us
        kernel = kernels.get(launch.target)
        cost = kernel_cost(graph, kernel, launch) if kernel is not None else extern_cost(graph, launch)
        timing = LaunchTiming(
            median_us=median_us,
            calls=statistics.median(times.per_step_calls) if times.per_step_calls else 0,
            share=median_us / step_total_us if step_total_us else 0.0,
            roofline=place(cost, median_us * 1e-6, "in context", ceilings),
            p10_us=quantile(times.per_step_us, 0.1) if times.per_step_us else None,
            p90_us=quantile(times.per_step_us, 0.9) if times.per_step_us else None,
            steps=len(times.per_step_us),
            device_kernels=tuple(dict.fromkeys(attribution.kernel_names.get((graph.id, launch.position), ()))),
        )
        launches.append(replace(launch, timing=timing))
    timed = tuple(_time_kernel(graph, k, launches, isolated, ceilings) for k in graph.kernels)
    return replace(graph, launches=tuple(launches), kernels=timed)


def _time_kernel(
    graph: GraphRecord,
    kernel: KernelRecord,
    launches: list[Launch],
    isolated: dict[str, list[IsolatedKernel]],
    ceilings: DeviceCeilings | None,
) -> KernelRecord:
    mine = [launch for launch in launches if launch.target == kernel.name and launch.timing is not None]
    entry = _isolated_entry(kernel, isolated)
    isolated_timing = entry.isolated if entry else None
    if not mine and isolated_timing is None:
        return kernel
    in_context_us = sum(launch.timing.median_us for launch in mine if launch.timing is not None)
    per_launch_s = in_context_us * 1e-6 / len(mine) if mine else None
    first = mine[0] if mine else None
    cost = kernel_cost(graph, kernel, first)
    roofline = place(cost, per_launch_s, "in context", ceilings) if per_launch_s else None
    isolated_s = isolated_timing.median_ms * 1e-3 if isolated_timing else None
    isolated_roofline = place(cost, isolated_s, "isolated", ceilings) if isolated_s else None
    timing = KernelTiming(
        in_context_us=in_context_us,
        launches=len(mine),
        isolated=isolated_timing,
        roofline=roofline,
        isolated_roofline=isolated_roofline,
        config=entry.config if entry else None,
        registers=entry.n_regs if entry else None,
        spills=entry.n_spills if entry else None,
        shared_mem=entry.shared if entry else None,
        flags=flags(roofline, per_launch_s, isolated_s),
    )
    return replace(kernel, timing=timing)


def _isolated_entry(kernel: KernelRecord, isolated: dict[str, list[IsolatedKernel]]) -> IsolatedKernel | None:
    """The model process's entry for this kernel: same name, and same text where graphs reuse the name."""
    entries = isolated.get(kernel.name) or []
    if not entries:
        return None
    fingerprint = kernel_fingerprint(kernel.source)
    same = [e for e in entries if e.fingerprint == fingerprint]
    if same:
        return same[0]
    unmarked = [e for e in entries if e.fingerprint is None]
    return unmarked[0] if len(entries) == 1 and unmarked else None
