"""Stage 4 of the pipeline (bench), read back: one bound verdict per run — does the step wait on the device's
work, on the host feeding it, or on both?

``bound_verdict(run) -> BoundVerdict | None`` reads the records only, and applies one rule that the report
states in the same words (``rule_text``):

- GPU: idle = the benchmarked compiled step (``do_bench`` median, end to end) minus the time a kernel ran
  per profiled step (``StepTiming.busy_us``), never negative. GPU-bound when idle is under ``GPU_BOUND``
  of the step, host-bound from ``HOST_BOUND`` of it, mixed between. The profiled span (first kernel to last,
  under the profiler) is longer than the benchmarked step — the profiler slows the host — so idle is never
  measured against it; ``span_note`` says how the two relate.
- CPU: the kernels run on the host itself, so the same rule compares the time inside the compiled kernels
  per profiled step with the benchmarked step: the rest is Python around the kernels (``call()``'s code)
  and time outside the compiled graphs (Dynamo's guards, eager code). Kernel-bound under ``GPU_BOUND``,
  host-bound from ``HOST_BOUND``, mixed between.

A run whose measurements are unstable (``stability.judge``) gets "unknown" with why: its step and its
parts are not comparable.
"""

from __future__ import annotations

from ..records import BoundVerdict, CompileRun
from ..records.answers import Bound
from .stability import judge

GPU_BOUND = 0.10  # idle (or overhead) under this share of the step: bound by the device's work
HOST_BOUND = 0.30  # from this share on: bound by the host


def rule_text(gpu: bool) -> str:
    """The rule in words, as the report explains it (the numbers come from the constants above)."""
    if gpu:
        return (
            "idle = the benchmarked compiled step (do_bench median) minus the time a kernel ran per profiled "
            f"step; GPU-bound when idle is under {GPU_BOUND:.0%} of the step, host-bound from {HOST_BOUND:.0%}, "
            "mixed between. The profiled span (first kernel to last, under the profiler) is longer than the "
            "benchmarked step because the profiler slows the host: idle is never measured against it"
        )
    return (
        "on CPU the kernels run on the host: host overhead = the benchmarked compiled step minus the time inside "
        f"the compiled kernels per profiled step; kernel-bound when it is under {GPU_BOUND:.0%} of the step, "
        f"host-bound from {HOST_BOUND:.0%}, mixed between"
    )


def arithmetic(step_us: float, busy_us: float, gpu: bool) -> str:
    """The rule's subtraction with its numbers: "2,294.7 µs step - 1,701.4 µs busy = 593.3 µs idle, 26% of it"."""
    idle = max(0.0, step_us - busy_us)
    busy, rest = ("GPU busy", "idle") if gpu else ("in kernels", "host overhead")
    return (f"{step_us:,.1f} µs benchmarked step - {busy_us:,.1f} µs {busy} per profiled step = {idle:,.1f} µs "
            f"{rest}, {idle / step_us:.0%} of the step")  # fmt: skip


def launch_count(run: CompileRun) -> tuple[int, float]:
    """Launches per profiled step (top-level launches of the compiled graphs) and the device kernels they ran."""
    timed = [launch.timing for g in run.graphs for launch in g.launches if launch.timing is not None]
    return len(timed), sum(t.calls for t in timed)


def is_training(run: CompileRun) -> bool:
    """A training run: the capture said so, or a backward graph was compiled (copied captures lose the flag)."""
    settings = run.settings
    if settings is not None and (settings.train or settings.backward):
        return True
    return any(g.kind == "backward" for g in run.graphs)


def _classify(share: float, low: Bound) -> Bound:
    if share < GPU_BOUND:
        return low
    return "host-bound" if share >= HOST_BOUND else "mixed"


def bound_verdict(run: CompileRun) -> BoundVerdict | None:
    """None where the run was not timed end to end and profiled (no step to compare)."""
    bench = run.bench
    if bench is None or bench.error or bench.end_to_end is None or bench.step is None:
        return None
    step_us = bench.end_to_end.compiled.median_ms * 1e3
    if step_us <= 0:
        return None
    stability = judge(run)
    unstable = (
        "the measurements are unstable, so the step and its parts do not compare ("
        + "; ".join(r.text for r in stability.reasons[:2])
        + ")"
        if stability.judged and not stability.stable
        else ""
    )
    if bench.device == "cuda":
        return _gpu(run, step_us, unstable)
    return _cpu(run, step_us, unstable)


def _gpu(run: CompileRun, step_us: float, unstable: str) -> BoundVerdict:
    bench = run.bench
    assert bench is not None and bench.step is not None and bench.end_to_end is not None
    step = bench.step
    span = step.span_us
    span_note = ""
    if span:
        span_note = (
            f"under the profiler, first kernel to last: {span:,.1f} µs, {span / step_us:.2f}x the benchmarked "
            f"{step_us:,.1f} µs step (the profiler slows the host); idle is measured against the benchmarked step"
            if span > step_us
            else f"under the profiler, first kernel to last: {span:,.1f} µs (the benchmarked step: {step_us:,.1f} µs)"
        )
    if step.busy_us is None:
        return BoundVerdict("unknown", step_us, None, None, None, rule_text(True),
                            "the profile recorded no busy time per step", span, span_note)  # fmt: skip
    busy = step.busy_us
    idle = max(0.0, step_us - busy)
    share = idle / step_us
    rule = f"{rule_text(True)}. Here: {arithmetic(step_us, busy, True)}"
    if unstable:
        return BoundVerdict("unknown", step_us, busy, idle, share, rule, unstable, span, span_note)
    verdict = _classify(share, "GPU-bound")
    detail = _gpu_host_detail(run, idle) if verdict != "GPU-bound" else ""
    return BoundVerdict(verdict, step_us, busy, idle, share, rule, detail, span, span_note)


def _gpu_host_detail(run: CompileRun, idle: float) -> str:
    """What the host spends while the GPU waits: launches, eager work between the graphs, autograd."""
    bench = run.bench
    assert bench is not None and bench.step is not None and bench.end_to_end is not None
    launches, kernels = launch_count(run)
    parts = []
    if bench.end_to_end.cudagraphs == "used":
        parts.append("CUDA graphs replay the compiled launches, so the idle time is host work outside the graphs "
                     "(Python, Dynamo's guards, eager ops) or graphs re-recorded")  # fmt: skip
    elif launches:
        parts.append(
            f"{launches} launches ({kernels:.0f} GPU kernels) per step, each paid on the host (the graphs' Python "
            f"call() code and the CUDA launch): the idle time is {idle / launches:,.1f} µs per launch"
        )
    outside = bench.step.total_us - bench.step.attributed_us
    if outside > 0.01 * bench.step.total_us:
        parts.append(f"{outside:,.1f} µs of device work per step not from the compiled graphs' launches "
                     "(eager ops between them)")  # fmt: skip
    if is_training(run):
        parts.append("a training step: autograd drives the backward graph and accumulates gradients between "
                     "the compiled calls")  # fmt: skip
    return "; ".join(parts)


def _cpu(run: CompileRun, step_us: float, unstable: str) -> BoundVerdict:
    bench = run.bench
    assert bench is not None and bench.step is not None
    step = bench.step
    kernels = step.attributed_us
    overhead = max(0.0, step_us - kernels)
    share = overhead / step_us
    around = max(0.0, step.total_us - kernels)
    outside = max(0.0, step_us - step.total_us)
    rule = f"{rule_text(False)}. Here: {arithmetic(step_us, kernels, False)}"
    if unstable:
        return BoundVerdict("unknown", step_us, kernels, overhead, share, rule, unstable)
    verdict = _classify(share, "kernel-bound")
    detail = ""
    if verdict != "kernel-bound":
        launches, _ = launch_count(run)
        detail = (
            f"Python around the kernels (the graphs' call() code: buffer allocation, argument handling for "
            f"{launches} launches) {around:,.1f} µs per step; outside the compiled graphs (Dynamo's guards, eager "
            f"code between graphs) {outside:,.1f} µs"
        )
    return BoundVerdict(verdict, step_us, kernels, overhead, share, rule, detail)
