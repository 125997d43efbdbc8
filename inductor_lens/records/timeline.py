"""Records, the compile timeline: the ``chromium_event`` spans of every TORCH_TRACE log of a capture.

torch times each step of a compile (``dynamo``, ``entire_frame_compile``, ``backend_compile``,
``inductor_compile``, ``GraphLowering.codegen``...) with a begin and an end event in Chrome's trace-event
format, logged as ``chromium_event`` records; tlparse gathers them into ``chromium_events.json``. Here each
begin/end pair is one span, placed in the process (and thread) that logged it, with its nesting depth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .codec import JsonScalar

SpanKind = Literal["span", "instant", "unfinished"]


@dataclass(frozen=True)
class TimelineProcess:
    """A process that logged spans: one TORCH_TRACE log each (the main process, a process that ran a graph's
    ``output_code.py``, a compile worker)."""

    trace_file: str
    pid: int | None = None  # the process id in the log lines' prefix (torch writes pid 0 in every event)


@dataclass(frozen=True)
class TimelineSpan:
    """One span: a begin/end pair (or a complete event), an instant event, or a begin the log never ended."""

    name: str
    start_us: float  # as torch wrote it: microseconds since the epoch
    duration_us: float  # 0 for an instant; an unfinished span runs to its process's last event
    process: int  # index into CompileTimeline.processes
    thread: int = 0
    depth: int = 0  # its row: below the innermost span containing it, and below any it overlaps there
    compile_id: str | None = None
    # A few of the event's args (begin and end merged), values cut short: cache states, function names.
    args: Mapping[str, JsonScalar] = field(default_factory=dict)
    kind: SpanKind = "span"

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class CompileTimeline:
    """Every span of the capture in log order (past the parser's limit, the longest), and what was not kept."""

    spans: tuple[TimelineSpan, ...] = ()
    processes: tuple[TimelineProcess, ...] = ()
    cut: int = 0  # spans past the limit, the shortest, left out
    cut_longest_us: float = 0.0  # the longest of them
    unmatched_begins: int = 0  # kept, as "unfinished" spans
    unmatched_ends: int = 0  # left out
