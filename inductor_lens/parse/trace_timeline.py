"""Parse stage: the compile timeline, from the TORCH_TRACE logs' ``chromium_event`` records.

torch logs each timed step of a compile as a Chrome trace event (``torch/_dynamo/utils.py``,
``ChromiumEventLogger``): ``B`` when it begins and ``E`` when it ends, ``i`` for an instant (a cache hit or
miss); ``X`` (a complete event, with its ``dur``) is read too, though 2.11 and 2.13 write none. Every event
says ``pid`` 0 and ``tid`` 0, so the process is the one named in the log line's prefix (a log per process:
the main one, a process that ran a graph's ``output_code.py``, a compile worker).

Each end is paired with the latest open begin of the same name in its process and thread; a begin the log
never ends (a compile killed or still running) becomes an "unfinished" span reaching the process's last
event, an end without a begin is left out; both are counted warnings. Nesting depth is worked out from the
times once every log is read. At most ``MAX_SPANS`` spans are kept: past that, the longest (a compile's
outer spans end last, so keeping the first would lose them); the shorter rest are counted.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeGuard

from ..records import CompileTimeline, JsonScalar, SpanKind, TimelineProcess, TimelineSpan
from .diagnostics import Diagnostics


class TimelineRecord(Protocol):
    """What the timeline reads of a TORCH_TRACE record (``trace_records.TraceRecord`` is one)."""

    @property
    def where(self) -> str: ...

    @property
    def process(self) -> int | None: ...

    def skip(self, diagnostics: Diagnostics, problem: str) -> None: ...

# A big log stays small in lens.json: spans past this many are counted, not kept.
MAX_SPANS = 50_000
# A span keeps this many of its event's args, each value cut to this many characters.
MAX_ARGS = 12
ARG_CHARS = 120
# Args that are never kept: the compile id has its own field; Dynamo's whole config is kilobytes.
_SKIPPED_ARGS = frozenset({"compile_id", "dynamo_config"})
# The glog prefix of a trace line: level, date, time, then the process id.
_GLOG_PROCESS = re.compile(r"^[VIWEC]\d{4} \S+\s+(\d+) ")
_NUMBER = (int, float)


def glog_process(line: str) -> int | None:
    """The process id in a trace line's prefix (``V1121 21:50:42.319000 1192 torch/...``)."""
    match = _GLOG_PROCESS.match(line)
    return int(match[1]) if match else None


@dataclass
class _Open:
    """A begin event waiting for its end."""

    name: str
    start_us: float
    args: dict[str, Any]


@dataclass
class TimelineCollector:
    """The spans of every trace log read so far; ``finish`` pairs what is left and nests them."""

    processes: list[TimelineProcess] = field(default_factory=list)
    # (duration, log order, span): a heap whose shortest span is the first to go past MAX_SPANS
    kept: list[tuple[float, int, TimelineSpan]] = field(default_factory=list)
    cut: int = 0
    cut_longest_us: float = 0.0
    _process_index: dict[tuple[str, int | None], int] = field(default_factory=dict)
    _open: dict[tuple[int, int], list[_Open]] = field(default_factory=dict)
    _last_us: dict[int, float] = field(default_factory=dict)
    _unmatched_ends: Counter[tuple[int, str]] = field(default_factory=Counter)
    _order: int = 0

    def add(self, event: dict[str, Any], record: TimelineRecord, diagnostics: Diagnostics) -> None:
        """One chromium_event payload."""
        name, ts, phase, tid = event.get("name"), event.get("ts"), event.get("ph"), event.get("tid", 0)
        if not isinstance(name, str) or not _is_number(ts) or not isinstance(phase, str):
            record.skip(diagnostics, "is a chromium_event without a name, time or phase")
            return
        if phase not in ("B", "E", "X", "i", "I"):
            record.skip(diagnostics, f"is a chromium_event of phase {phase!r}, not read")
            return
        args = event.get("args")
        args = args if isinstance(args, dict) else {}
        process = self._process(record)
        thread = tid if isinstance(tid, int) and not isinstance(tid, bool) else 0
        start = float(ts)
        self._last_us[process] = max(self._last_us.get(process, start), start)
        stack = self._open.setdefault((process, thread), [])
        if phase == "B":
            stack.append(_Open(name, start, dict(args)))
        elif phase == "E":
            index = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].name == name), None)
            if index is None:
                self._unmatched_ends[(process, name)] += 1
                return
            opened = stack.pop(index)
            self._keep(
                opened.name,
                opened.start_us,
                start - opened.start_us,
                process,
                thread,
                {**opened.args, **args},
            )
        elif phase == "X":
            duration = event.get("dur")
            if not _is_number(duration):
                record.skip(diagnostics, "is a complete chromium_event without a duration")
                return
            self._last_us[process] = max(self._last_us[process], start + duration)
            self._keep(name, start, float(duration), process, thread, args)
        else:
            self._keep(name, start, 0.0, process, thread, args, kind="instant")

    def finish(self, diagnostics: Diagnostics) -> CompileTimeline:
        """What every log left open becomes an unfinished span; then each span's nesting depth."""
        unmatched_begins = 0
        for (process, thread), stack in self._open.items():
            if not stack:
                continue
            unmatched_begins += len(stack)
            last = self._last_us[process]
            for opened in stack:
                self._keep(opened.name, opened.start_us, last - opened.start_us, process, thread, opened.args,
                           kind="unfinished")  # fmt: skip
            names = ", ".join(dict.fromkeys(o.name for o in stack))
            diagnostics.warn(
                self.processes[process].trace_file,
                f"{len(stack)} chromium_event begin(s) without an end ({names}): the log stops inside them; "
                "shown as unfinished spans up to the process's last event",
            )
        for (process, name), count in self._unmatched_ends.items():
            diagnostics.warn(
                self.processes[process].trace_file,
                f"{count} chromium_event end(s) of {name} without a begin; left out",
            )
        return CompileTimeline(
            spans=_nested([span for _, _, span in sorted(self.kept, key=lambda item: item[1])]),
            processes=tuple(self.processes),
            cut=self.cut,
            cut_longest_us=self.cut_longest_us,
            unmatched_begins=unmatched_begins,
            unmatched_ends=sum(self._unmatched_ends.values()),
        )

    def _process(self, record: TimelineRecord) -> int:
        key = (record.where, record.process)
        index = self._process_index.get(key)
        if index is None:
            index = self._process_index[key] = len(self.processes)
            self.processes.append(TimelineProcess(trace_file=record.where, pid=record.process))
        return index

    def _keep(
        self,
        name: str,
        start: float,
        duration: float,
        process: int,
        thread: int,
        args: dict[str, Any],
        kind: SpanKind = "span",
    ) -> None:
        duration = max(duration, 0.0)
        if len(self.kept) >= MAX_SPANS:
            self.cut += 1
            if duration <= self.kept[0][0]:
                self.cut_longest_us = max(self.cut_longest_us, duration)
                return
            self.cut_longest_us = max(self.cut_longest_us, self.kept[0][0])
            heapq.heappop(self.kept)
        compile_id = args.get("compile_id")
        span = TimelineSpan(
            name=name,
            start_us=start,
            duration_us=duration,
            process=process,
            thread=thread,
            compile_id=compile_id if isinstance(compile_id, str) and compile_id != "None" else None,
            args=_short_args(args),
            kind=kind,
        )
        heapq.heappush(self.kept, (duration, self._order, span))
        self._order += 1


def _short_args(args: dict[str, Any]) -> dict[str, JsonScalar]:
    """At most MAX_ARGS args, scalars as they are (long text cut), lists and objects as cut JSON text."""
    kept: dict[str, JsonScalar] = {}
    for key, value in args.items():
        if len(kept) == MAX_ARGS:
            break
        if key in _SKIPPED_ARGS or value is None:
            continue
        if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN or infinity
            value = str(value)
        if not isinstance(value, (bool, int, float, str)):
            value = json.dumps(value, separators=(",", ":"), default=str)
        if isinstance(value, str) and len(value) > ARG_CHARS:
            value = value[: ARG_CHARS - 1] + "…"
        kept[str(key)] = value
    return kept


def _nested(spans: list[TimelineSpan]) -> tuple[TimelineSpan, ...]:
    """Each span with its depth (``nesting``)."""
    rows = nesting(spans)
    return tuple(
        replace(span, depth=rows[i][0]) if rows.get(i, (0,))[0] else span for i, span in enumerate(spans)
    )


def nesting(spans: Sequence[TimelineSpan]) -> dict[int, tuple[int, int | None]]:
    """Per span (by index; instants left out): its row in its process and thread, and the innermost span that
    contains it. A span goes in the first free row below that one: one below it, unless a span that overlaps
    without containing it is there (torch logs every thread as tid 0, so a compile thread's span can straddle
    the end of the main thread's)."""
    placed: dict[int, tuple[int, int | None]] = {}
    lanes: dict[tuple[int, int], list[int]] = {}
    for index, span in enumerate(spans):
        if span.kind != "instant":
            lanes.setdefault((span.process, span.thread), []).append(index)
    for members in lanes.values():
        members.sort(key=lambda i: (spans[i].start_us, -spans[i].duration_us, i))
        last_in_row: list[int] = []  # the span placed last in each row: the only one there that can be open
        for i in members:
            span = spans[i]
            parent = next(
                (r for r in range(len(last_in_row) - 1, -1, -1)
                 if spans[last_in_row[r]].end_us > span.start_us and spans[last_in_row[r]].end_us >= span.end_us),
                -1,
            )  # fmt: skip
            row = next(
                (
                    r
                    for r in range(parent + 1, len(last_in_row))
                    if spans[last_in_row[r]].end_us <= span.start_us
                ),
                len(last_in_row),
            )
            placed[i] = (row, last_in_row[parent] if parent >= 0 else None)
            if row == len(last_in_row):
                last_in_row.append(i)
            else:
                last_in_row[row] = i
    return placed


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, _NUMBER) and not isinstance(value, bool)
