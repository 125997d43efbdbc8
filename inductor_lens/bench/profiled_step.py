"""Stage 4 of the pipeline (bench), several ranks: a profile trace's step time and collectives, without its graphs.

The landing page of a job of several ranks shows every rank's profiled step, though most ranks have no full
report: this reads the capture's profile trace by the functions a full report times it with (``attribution.py``
``step_totals``, ``collectives.py`` ``collectives_per_step`` and ``collective_sizes``), so both give the same figures.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from ..records import CollectiveTime
from .attribution import step_totals
from .collectives import collective_sizes, collectives_per_step
from .trace_ranges import find_steps, load_trace, read_trace, step_index


@dataclass(frozen=True)
class ProfiledStep:
    """A profiled trace's steps as a full report's ``StepTiming`` has them, read without the run's graphs."""

    steps: int
    total_us: float  # the median of ``step_totals``
    collectives: tuple[CollectiveTime, ...]


def profiled_step(trace: Path, device: str) -> ProfiledStep | None:
    """The step time and collectives of the marked steps of the profiler trace at ``trace`` (a capture's, whose
    report would time it with ``attribute`` and ``time_steps``), by the same functions; None where it marks no step.
    For the landing page of several ranks, whose ranks mostly have no full report."""
    profiled = read_trace(load_trace(trace)["traceEvents"])
    steps, _ = find_steps(profiled, [], infer_steps=False)
    if not steps:
        return None
    totals = step_totals(profiled, step_index(steps), len(steps), device)
    collectives = collectives_per_step(profiled.events, len(steps), device, collective_sizes(trace, device))
    return ProfiledStep(len(steps), statistics.median(totals), collectives)
