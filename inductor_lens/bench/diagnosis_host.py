"""Stage 4 of the pipeline (bench), read back: the diagnosis's findings where the host holds the step back: the
GPU idle between launches (host-bound, or GPU-bound with idle time), CUDA graphs skipped or not enough, and (CPU)
Python around the kernels.
"""

from __future__ import annotations

from ..records import BoundVerdict, CompileRun, EndToEnd
from ..records.answers import Confidence, Finding
from ..records.trials import SettingChange
from .bound import arithmetic, launch_count
from .diagnosis_settings import inductor_options, is_on, mode_change, suggested_mode, uses_cudagraphs
from .diagnosis_thresholds import OVERHEAD_SHARE, noise_us

_CUDA_GRAPHS_CAVEAT = (
    "CUDA graphs replay fixed memory addresses: inputs are copied into static buffers, the graphs' memory pool "
    "stays allocated (more memory), and each new input shape records a new graph"
)


def host_bound(run: CompileRun, verdict: BoundVerdict | None) -> list[Finding]:
    """GPU: the bound verdict's idle time, when host-bound or mixed (one rule, the same numbers); GPU-bound with
    more idle time than the step's noise and no CUDA graphs: that idle time, which CUDA graphs remove at most."""
    if verdict is None or not verdict.idle_us:
        return []
    bench = run.bench
    assert bench is not None and bench.end_to_end is not None
    if verdict.verdict == "GPU-bound":
        return _gpu_bound_idle(run, verdict, bench.end_to_end)
    if verdict.verdict not in ("host-bound", "mixed"):
        return []
    idle, share = verdict.idle_us, verdict.idle_share or 0.0
    numbers = arithmetic(verdict.step_us or 0.0, verdict.busy_us or 0.0, True)
    evidence = f"{numbers}; {verdict.detail}" if verdict.detail else numbers
    estimate = ("the idle time per step (the benchmarked step minus the GPU's busy time): what CUDA graphs can "
                "remove at most, since they replay the launches without the host; the kernels themselves stay")  # fmt: skip
    confidence: Confidence = "high" if share >= 0.5 else "medium"
    waits = f"the GPU idles {share:.0%} of the step"
    title = (f"Host-bound: {waits}, waiting for the host to launch work" if verdict.verdict == "host-bound"
             else f"Partly host-bound: {waits} between launches")  # fmt: skip
    cudagraphs = bench.end_to_end.cudagraphs
    if cudagraphs is None and not uses_cudagraphs(run):
        change, settings = _cuda_graphs_change(run, idle)
        return [Finding("host-bound", title, idle, estimate, evidence, "index.html#timing", change, confidence,
                        caveat=_CUDA_GRAPHS_CAVEAT, settings=settings)]  # fmt: skip
    if cudagraphs is not None and cudagraphs.startswith("skipped"):
        reason = cudagraphs.partition(": ")[2] or "no reason recorded"
        return [Finding("cuda graphs", f"CUDA graphs were skipped ({reason}): {waits}", idle, estimate,
                        f"{evidence}; Inductor skipped CUDA graphs: {reason}", "compile.html#frames",
                        _cudagraph_fix(reason), confidence)]  # fmt: skip
    use = bench.cudagraphs
    if use is not None and use.rerecords:
        evidence += f"; cudagraph trees re-recorded {use.rerecords} time(s) (recorded {use.graphs_recorded})"
    if use is not None and use.without_graphs is not None and use.with_graphs is not None:
        evidence += (f"; the same compiled code called without the graphs takes {use.without_graphs.median_ms:.3f} ms "
                     f"against {use.with_graphs.median_ms:.3f} ms with them")  # fmt: skip
    return [Finding("cuda graphs", f"{title} although CUDA graphs were used", idle, estimate,
                    f"{evidence}; the graph replays leave the GPU idle: work outside the graphs, or graphs "
                    "re-recorded for new shapes or inputs", "index.html#timing",
                    "look for re-recording (TORCH_LOGS=cudagraphs) and mark changing sizes with "
                    "torch._dynamo.mark_dynamic, or move eager work between graphs into the compiled function",
                    "low")]  # fmt: skip


def _gpu_bound_idle(run: CompileRun, verdict: BoundVerdict, e2e: EndToEnd) -> list[Finding]:
    idle = verdict.idle_us or 0.0
    if uses_cudagraphs(run) or idle < noise_us(e2e):
        return []
    change, settings = _cuda_graphs_change(run, idle)
    return [Finding("idle time", f"GPU-bound, but the GPU idles {verdict.idle_share or 0.0:.0%} of the step between "
                    "launches", idle, "the idle time per step (the benchmarked step minus the GPU's busy time): what "
                    "CUDA graphs can remove at most", arithmetic(verdict.step_us or 0.0, verdict.busy_us or 0.0, True),
                    "index.html#timing", change, "low", caveat=_CUDA_GRAPHS_CAVEAT, settings=settings)]  # fmt: skip


def _cuda_graphs_change(run: CompileRun, idle_us: float) -> tuple[str, tuple[SettingChange, ...]]:
    """CUDA graphs for a run without them, in words and as the setting --try runs: the run's mode with them on."""
    mode = suggested_mode(run, cudagraphs=True)
    return (f"CUDA graphs: {mode_change(mode)}; the step's launches replay as one graph",
            (SettingChange(f"CUDA graphs (mode {mode})", mode=mode, predicted_us=idle_us),))  # fmt: skip


def _cudagraph_fix(reason: str) -> str:
    lowered = reason.lower()
    if "mutat" in lowered:
        return "stop mutating inputs inside the compiled function (return new tensors), so CUDA graphs apply"
    if "cpu" in lowered:
        return "keep every tensor of the compiled function on the GPU (CPU tensors or ops stop CUDA graphs)"
    if "dynamic" in lowered or "symint" in lowered or "shape" in lowered:
        return "make the shapes static (pad to a few sizes), so each size gets its graph once"
    if "incompatible op" in lowered or "op" in lowered:
        return "move the incompatible op out of the compiled function, or replace it with one CUDA graphs can record"
    return f"remove the cause Inductor names ({reason}), so CUDA graphs can be recorded"


def python_overhead(run: CompileRun, compiled_us: float) -> list[Finding]:
    """CPU: time inside compiled graphs but outside their kernels (``call()``'s Python)."""
    bench = run.bench
    assert bench is not None and bench.step is not None
    step = bench.step
    gap = step.total_us - step.attributed_us
    if gap < OVERHEAD_SHARE * compiled_us or is_on(inductor_options(run), "cpp_wrapper"):
        return []
    launches, _ = launch_count(run)
    return [
        Finding(
            "python overhead",
            "Python around the kernels: the compiled graphs' call() code",
            gap,
            "time inside compiled graphs minus the time inside their kernels, per profiled step (medians)",
            f"{step.total_us:,.1f} µs inside compiled graphs, {step.attributed_us:,.1f} µs of it inside their "
            f"{launches} launches: {gap:,.1f} µs of Python (buffer allocation, argument handling) per step",
            "index.html#timing",
            'torch.compile(model, options={"cpp_wrapper": True}): the graphs\' call() in C++ instead of Python',
            "medium",
            settings=(SettingChange("cpp_wrapper", options={"cpp_wrapper": True}, predicted_us=gap),),
        )
    ]
