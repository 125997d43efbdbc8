"""Stage 4 of the pipeline (bench), read back: are a run's measurements stable enough to judge?

``judge(run) -> Stability`` reads the records only (so a report saved before the load was recorded
re-renders with what it has) and names every reason, with its numbers, for which the timings should
not be read as facts:

- spread: the p10-p90 range of a timing over its median is above ``SPREAD_LIMIT`` (eager step,
  compiled step, the profiled steps' time);
- shares that do not add up: the per-launch times add up to more than ``SHARES_OVER`` of the profiled
  step (parts larger than their whole), or, on CPU, to less than ``SHARES_UNDER`` of it;
- a part larger than its whole: on CPU the time inside compiled graphs per profiled step, on GPU the
  time a kernel ran per step, above the whole compiled step by more than ``PART_OVER``;
- a busy machine (``HostLoad`` of ``worker/load.py``): other processes kept more than ``OTHERS_LIMIT``
  CPUs busy while the steps were timed (``/proc/stat`` against this process's CPU time), the 1-minute
  load average above the CPUs plus ``LOAD_MARGIN``, or, on CPU, this process got less than
  ``STARVED`` of the CPUs its threads could use. On CPU these make the run unstable; on GPU they are notes.

Separately, ``speedup_within_noise`` says when eager's and the compiled step's p10-p90 ranges overlap:
the speed-up is then "about the same", neither a gain nor a loss.
"""

from __future__ import annotations

from ..records import BenchResult, CompileRun, HostLoad, Timing
from ..records.analysis import Stability, StabilityReason

SPREAD_LIMIT = 0.25  # (p90 - p10) / median
SHARES_OVER = 1.05
SHARES_UNDER = 0.5  # CPU only
PART_OVER = 1.10
OTHERS_LIMIT = 0.5  # CPUs kept busy by other processes
LOAD_MARGIN = 0.5
STARVED = 0.35  # this process's CPU time per second of wall time, over min(threads, CPUs)
MIN_WINDOW_S = 0.2  # /proc/stat counts in 10 ms ticks: shorter windows are not judged by it
MIN_SAMPLES = 5

def relative_spread(timing: Timing) -> float | None:
    if timing.median_ms <= 0 or (timing.samples and timing.samples < MIN_SAMPLES):
        return None
    return (timing.p90_ms - timing.p10_ms) / timing.median_ms


def judge(run: CompileRun) -> Stability:
    bench = run.bench
    if bench is None or bench.error or (bench.end_to_end is None and bench.step is None):
        return Stability(judged=False)
    cpu = bench.device != "cuda"
    reasons = [*_spread(bench), *_shares(run, bench, cpu), *_part_over_whole(bench, cpu)]
    busy = _busy(bench, cpu)
    notes: tuple[str, ...] = ()
    if cpu:
        reasons += busy
    else:
        notes = tuple(f"{r.text} (GPU timings are less sensitive to it, host-bound steps excepted)" for r in busy)
    e2e = bench.end_to_end
    within = e2e is not None and e2e.eager.p10_ms <= e2e.compiled.p90_ms and e2e.compiled.p10_ms <= e2e.eager.p90_ms
    return Stability(True, tuple(reasons), notes, within, load_line(bench.host))


def _spread(bench: BenchResult) -> list[StabilityReason]:
    found = []
    timings: list[tuple[str, Timing]] = []
    if bench.end_to_end is not None:
        timings += [("eager step", bench.end_to_end.eager), ("compiled step", bench.end_to_end.compiled)]
    for name, timing in timings:
        spread = relative_spread(timing)
        if spread is not None and spread > SPREAD_LIMIT:
            found.append(
                StabilityReason(
                    "spread",
                    f"the {name} spreads {timing.p10_ms:.3f}-{timing.p90_ms:.3f} ms (p10-p90 over {timing.samples} "
                    f"runs) around its median {timing.median_ms:.3f} ms: {spread:.0%} of it, above {SPREAD_LIMIT:.0%}",
                )
            )
    step = bench.step
    if step is not None and step.total_p10_us is not None and step.total_p90_us is not None and step.total_us > 0:
        spread = (step.total_p90_us - step.total_p10_us) / step.total_us
        if spread > SPREAD_LIMIT:
            what = "device time" if bench.device == "cuda" else "time inside compiled graphs"
            found.append(
                StabilityReason(
                    "spread",
                    f"the {what} of the {step.steps} profiled steps spreads {step.total_p10_us:,.1f}-"
                    f"{step.total_p90_us:,.1f} µs around its median {step.total_us:,.1f} µs: {spread:.0%}, "
                    f"above {SPREAD_LIMIT:.0%}",
                )
            )
    return found


def launch_share_sum(run: CompileRun) -> float | None:
    """The per-launch shares of the profiled step, added up (1.0 when every part adds up to the whole)."""
    shares = [launch.timing.share for g in run.graphs for launch in g.launches if launch.timing is not None]
    return sum(shares) if shares else None


def _shares(run: CompileRun, bench: BenchResult, cpu: bool) -> list[StabilityReason]:
    total = launch_share_sum(run)
    if total is None or bench.step is None:
        return []
    whole = "time inside compiled graphs" if cpu else "device time"
    if total > SHARES_OVER:
        return [
            StabilityReason(
                "shares",
                f"the per-launch times add up to {total:.0%} of the profiled step's {whole} "
                f"({bench.step.total_us:,.1f} µs): parts larger than their whole",
            )
        ]
    if cpu and total < SHARES_UNDER:
        return [
            StabilityReason(
                "shares",
                f"the per-launch times add up to only {total:.0%} of the profiled step's {whole} "
                f"({bench.step.total_us:,.1f} µs), under {SHARES_UNDER:.0%}",
            )
        ]
    return []


def _part_over_whole(bench: BenchResult, cpu: bool) -> list[StabilityReason]:
    e2e, step = bench.end_to_end, bench.step
    if e2e is None or step is None or e2e.compiled.median_ms <= 0:
        return []
    whole_us = e2e.compiled.median_ms * 1e3
    if cpu:
        part, name = step.total_us, "the time inside compiled graphs per profiled step"
    elif step.busy_us is not None:
        part, name = step.busy_us, "the time the GPU ran kernels per profiled step"
    else:
        return []
    if part > PART_OVER * whole_us:
        return [
            StabilityReason(
                "part over whole",
                f"{name} ({part:,.1f} µs) is {part / whole_us:.2f}x the whole compiled step ({whole_us:,.1f} µs): "
                "a part larger than its whole",
            )
        ]
    return []


def _busy(bench: BenchResult, cpu: bool) -> list[StabilityReason]:
    found = []
    for window in bench.host:
        words = _window_busy(window, cpu)
        if words:
            found.append(StabilityReason("busy machine", f"while the {window.window} were timed, {words}"))
    return found


def _window_busy(window: HostLoad, cpu: bool) -> str:
    if window.wall_s <= 0:
        return ""
    own = window.cpu_s / window.wall_s
    said = []
    if window.system_busy_s is not None and window.wall_s >= MIN_WINDOW_S:
        others = max(0.0, window.system_busy_s - window.cpu_s) / window.wall_s
        if others > OTHERS_LIMIT:
            said.append(
                f"other processes kept {others:.1f} of the {window.cpus} CPUs busy (this process: {own:.1f})"
            )
    load = max((x for x in (window.load_before, window.load_after) if x is not None), default=None)
    if load is not None and load > window.cpus + LOAD_MARGIN:
        said.append(f"the load average was {load:.1f} on {window.cpus} CPUs")
    usable = min(window.threads or window.cpus, window.cpus)
    if cpu and window.wall_s >= MIN_WINDOW_S and own < STARVED * usable:
        said.append(f"this process ran {own:.2f} CPU-seconds per second with {usable} thread(s) to keep busy")
    return "; ".join(said)


def load_line(windows: tuple[HostLoad, ...]) -> str:
    """The machine's load over the timed steps in one line, for the report's card."""
    window = next((w for w in windows if w.window != "profiled steps"), windows[0] if windows else None)
    if window is None or window.wall_s <= 0:
        return ""
    parts = []
    load = max((x for x in (window.load_before, window.load_after) if x is not None), default=None)
    if load is not None:
        parts.append(f"load average {load:.1f} on {window.cpus} CPUs")
    parts.append(
        f"this process {window.cpu_s / window.wall_s:.1f} CPU-s per s"
        + (f" ({window.threads} threads)" if window.threads else "")
    )
    if window.system_busy_s is not None and window.wall_s >= MIN_WINDOW_S:
        parts.append(f"other processes {max(0.0, window.system_busy_s - window.cpu_s) / window.wall_s:.1f} CPUs")
    return f"{'; '.join(parts)} (over the {window.window}, {window.wall_s:.2f} s)"
