"""Stage 4 of the pipeline (capture -> parse -> records -> bench -> report): timings joined to the records.

``measure.py`` runs inside the capture's child process, where the compiled model and Inductor's
kernel modules live, and leaves raw measurements in ``capture/capture.json`` and the profiler's
trace in ``capture/profile_trace.json``. ``attach_measurements(run, capture_dir)`` turns them into
records: every launch gets its in-context time (``attribution.py``), every kernel its isolated time
and its place on the roofline (``roofline.py``), and the run the device's ceilings, end-to-end
latency and memory, and the profiled step.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ParseError
from ..records import (
    BenchResult,
    CompileRun,
    DeviceCeilings,
    Diagnostic,
    EndToEnd,
    GraphRecord,
    KernelTiming,
    Launch,
    LaunchTiming,
    StepTiming,
    Timing,
    from_jsonable,
)
from .attribution import Attribution, attribute
from .measure import kernel_fingerprint
from .roofline import extern_cost, flags, kernel_cost, place

__all__ = ["PROFILE_TRACE", "attach_measurements"]

PROFILE_TRACE = "profile_trace.json"


def attach_measurements(run: CompileRun, capture_dir: Path, *, strict: bool = False) -> CompileRun:
    """The run with its timings, when the capture in ``capture_dir`` measured any.

    Measurement files that cannot be read (truncated, edited, from another version) leave the run
    untimed with a warning in its parse notes, or, with ``strict``, raise ParseError.
    """
    result_file = capture_dir / "capture.json"
    if not result_file.is_file():
        return run
    try:
        raw = json.loads(result_file.read_text(encoding="utf-8")).get("bench")
        if not isinstance(raw, dict):
            return run
        return _attach(run, raw, capture_dir)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        message = f"measurements not read, the report has no timings ({type(exc).__name__}: {exc})"[:300]
        if strict:
            raise ParseError(f"{capture_dir}: {message}") from exc
        warning = Diagnostic("warning", str(capture_dir), message)
        return replace(run, stats=replace(run.stats, diagnostics=(*run.stats.diagnostics, warning)))


def _attach(run: CompileRun, raw: dict[str, Any], capture_dir: Path) -> CompileRun:
    device = str(raw.get("device") or "cpu")
    if raw.get("error"):
        return replace(run, bench=BenchResult(device=device, error=str(raw["error"])))
    ceilings = _ceilings(raw.get("ceilings"))
    trace = capture_dir / PROFILE_TRACE
    attribution = attribute(trace, run.graphs, device) if trace.is_file() else None
    isolated = raw.get("isolated") if isinstance(raw.get("isolated"), dict) else {}
    graphs = run.graphs
    step = None
    if attribution is not None and attribution.steps:
        total = statistics.median(attribution.step_total_us)
        graphs = tuple(_time_graph(g, attribution, isolated, ceilings, total) for g in run.graphs)
        step = _step(attribution, device)
    end_to_end = _end_to_end(raw.get("end_to_end"), run)
    return replace(run, graphs=graphs, bench=BenchResult(device, ceilings, end_to_end, step))


def _section(data: Any) -> bool:
    """Whether an optional part of the measurements is there; one of the wrong shape is an error."""
    if data is not None and not isinstance(data, dict):
        raise TypeError(f"expected an object, found {type(data).__name__}")
    return data is not None


def _timing(data: Any) -> Timing | None:
    return from_jsonable(Timing, data) if _section(data) else None


def _ceilings(data: Any) -> DeviceCeilings | None:
    if not _section(data):
        return None
    copy, matmul = _timing(data.get("copy")), _timing(data.get("matmul"))
    if copy is None or matmul is None:
        return None
    return DeviceCeilings(
        copy_gb_per_s=float(data["copy_gb_per_s"]),
        copy=copy,
        copy_bytes=int(data["copy_bytes"]),
        matmul_tflops=float(data["matmul_tflops"]),
        matmul=matmul,
        matmul_dtype=str(data.get("dtype", "")),
        matmul_size=round(float(data.get("matmul_flop", 0) / 2) ** (1 / 3)),
        tf32=bool(data.get("tf32")),
    )


def _end_to_end(data: Any, run: CompileRun) -> EndToEnd | None:
    if not _section(data):
        return None
    eager, compiled = _timing(data.get("eager")), _timing(data.get("compiled"))
    if eager is None or compiled is None:
        return None
    return EndToEnd(
        eager=eager,
        compiled=compiled,
        speedup=eager.median_ms / compiled.median_ms if compiled.median_ms else 0.0,
        eager_peak_bytes=data.get("eager_peak_bytes"),
        compiled_peak_bytes=data.get("compiled_peak_bytes"),
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


def _step(attribution: Attribution, device: str) -> StepTiming:
    attributed = [
        sum(t.per_step_us[i] for t in attribution.launches.values()) for i in range(attribution.steps)
    ]
    gpu = device == "cuda"
    method = (
        f"torch.profiler over {attribution.steps} compiled steps after 3 warm-up steps; per step, the sum of "
        "the durations of the GPU kernels each launch issued (tied by the profiler's External id); medians over steps"
        if gpu
        else f"torch.profiler over {attribution.steps} compiled steps after 3 warm-up steps; per step, the duration "
        "of each launch's CPU range (C++ kernels recorded with TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE); medians"
    )
    return StepTiming(
        steps=attribution.steps,
        total_us=statistics.median(attribution.step_total_us),
        attributed_us=statistics.median(attributed),
        span_us=statistics.median(attribution.step_span_us) if gpu else None,
        busy_us=statistics.median(attribution.step_busy_us) if gpu else None,
        unattributed=attribution.unattributed,
        method=method,
    )


def _time_graph(
    graph: GraphRecord,
    attribution: Attribution,
    isolated: dict[str, Any],
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
        )
        launches.append(replace(launch, timing=timing))
    timed = tuple(_time_kernel(graph, k, launches, isolated, ceilings) for k in graph.kernels)
    return replace(graph, launches=tuple(launches), kernels=timed)


def _time_kernel(graph: GraphRecord, kernel, launches: list[Launch], isolated: dict[str, Any], ceilings):
    mine = [launch for launch in launches if launch.target == kernel.name and launch.timing is not None]
    entry = _isolated_entry(kernel, isolated)
    isolated_timing = _timing(entry.get("isolated")) if entry else None
    if not mine and isolated_timing is None:
        return kernel
    in_context_us = sum(launch.timing.median_us for launch in mine)  # type: ignore[union-attr]
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
        config=entry.get("config") if entry else None,
        registers=entry.get("n_regs") if entry else None,
        spills=entry.get("n_spills") if entry else None,
        shared_mem=entry.get("shared") if entry else None,
        flags=flags(roofline, per_launch_s, isolated_s),
    )
    return replace(kernel, timing=timing)


def _isolated_entry(kernel, isolated: dict[str, Any]) -> dict[str, Any] | None:
    """The child's entry for this kernel: same name, and same text where graphs reuse the name."""
    entries = [e for e in isolated.get(kernel.name) or () if isinstance(e, dict)]
    if not entries:
        return None
    fingerprint = kernel_fingerprint(kernel.source)
    same = [e for e in entries if e.get("fingerprint") == fingerprint]
    if same:
        return same[0]
    unmarked = [e for e in entries if "fingerprint" not in e]
    return unmarked[0] if len(entries) == 1 and unmarked else None
