"""Test helper: a torch.profiler Chrome trace of the model process read with nothing of inductor_lens.

``launch_times(trace)``: per profiled step (the model process's ``inductor_lens_step_<n>`` ranges on the CPU
timeline), the CPU events that launched device work, in time order, each with the summed durations of the
device work (kernels, memsets, copies) it launched (tied by the profiler's External id); ``device_busy(trace)``:
per step, the union of those device intervals (time with any device work running).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

GPU_WORK = {"kernel", "gpu_memset", "gpu_memcpy"}
STEP_MARK = "inductor_lens_step_"


@dataclass
class Step:
    launches: list[tuple[str, float]]  # (launching CPU event's name, device microseconds), in launch order
    busy_us: float  # union of the device intervals

    @property
    def total_us(self) -> float:
        return sum(us for _, us in self.launches)


def profiled_steps(trace: Path) -> list[Step]:
    events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    marks = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(STEP_MARK)),
        key=lambda e: e["ts"],
    )
    work: dict[object, list[dict]] = defaultdict(list)
    for e in events:
        if e.get("cat") in GPU_WORK and "External id" in e.get("args", {}):
            work[e["args"]["External id"]].append(e)
    launchers = sorted(
        (e for e in events if e.get("cat") == "cpu_op" and e.get("args", {}).get("External id") in work),
        key=lambda e: e["ts"],
    )
    steps = []
    for mark in marks:
        inside = [e for e in launchers if mark["ts"] <= e["ts"] <= mark["ts"] + mark["dur"]]
        kernels = [k for e in inside for k in work[e["args"]["External id"]]]
        steps.append(
            Step(
                launches=[(e["name"], sum(k["dur"] for k in work[e["args"]["External id"]])) for e in inside],
                busy_us=_union(sorted((k["ts"], k["ts"] + k["dur"]) for k in kernels)),
            )
        )
    return steps


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in intervals:
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total
