"""Test helper: a torch.profiler Chrome trace of the model process read with nothing of inductor_lens.

``profiled_steps(trace)``: per profiled step (the model process's ``inductor_lens_step_<n>`` ranges on the CPU
timeline), the launches of the compiled graphs in time order, each with the summed durations of the device work
(kernels, memsets, copies) it launched, tied by the profiler's External id. A launch is a top-level CPU event
inside a graph's ``## Call CompiledFxGraph`` range (an ATen op such as ``aten::convolution`` launches its kernels
from ops nested in it, ``aten::cudnn_convolution``); device work launched outside those ranges (eager ops such as
the gradients' accumulation, a CUDA-graph replay) is ``Step.other_us``. ``Step.busy_us``: the union of the step's
device intervals.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

GPU_WORK = {"kernel", "gpu_memset", "gpu_memcpy"}
STEP_MARK = "inductor_lens_step_"
REGION_MARK = "## Call CompiledFxGraph"


@dataclass
class Step:
    launches: list[tuple[str, float]]  # (the launch's CPU event name, device microseconds), in launch order
    other_us: float  # device work launched outside the compiled graphs (eager ops, a CUDA-graph replay)
    busy_us: float  # union of the device intervals
    launch_kernels: list[list[str]]  # each launch's device work by name, in time order
    other_work: list[tuple[str, float]]  # the device work outside the graphs' launches, in time order

    @property
    def total_us(self) -> float:
        return sum(us for _, us in self.launches) + self.other_us


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
    owner = _top_level_owner(events)
    steps = []
    for mark in marks:
        inside = [e for e in launchers if mark["ts"] <= e["ts"] <= mark["ts"] + mark["dur"]]
        merged: dict[int, tuple[dict, float]] = {}
        names: dict[int, list[dict]] = defaultdict(list)
        outside: list[dict] = []
        for e in inside:
            mine = work[e["args"]["External id"]]
            us = sum(k["dur"] for k in mine)
            top = owner.get(id(e))
            if top is None:
                outside.extend(mine)
                continue
            _, before = merged.get(id(top), (top, 0.0))
            merged[id(top)] = (top, before + us)
            names[id(top)].extend(mine)
        outside.sort(key=lambda k: k["ts"])
        kernels = [k for e in inside for k in work[e["args"]["External id"]]]
        ordered = sorted(merged.values(), key=lambda item: item[0]["ts"])
        steps.append(
            Step(
                launches=[(top["name"], us) for top, us in ordered],
                other_us=sum(k["dur"] for k in outside),
                launch_kernels=[[k["name"] for k in sorted(names[id(top)], key=lambda k: k["ts"])] for top, _ in ordered],
                other_work=[(k["name"], k["dur"]) for k in outside],
                busy_us=_union(sorted((k["ts"], k["ts"] + k["dur"]) for k in kernels)),
            )
        )
    return steps


def _top_level_owner(events: list[dict]) -> dict[int, dict]:
    """id(CPU event) -> the top-level event inside a compiled-graph range that contains it (same thread)."""
    cpu = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation") and "dur" in e]
    by_thread: dict[object, list[dict]] = defaultdict(list)
    for e in cpu:
        by_thread[(e["pid"], e["tid"])].append(e)
    owner: dict[int, dict] = {}
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        starts = [e["ts"] for e in thread]
        for region in (e for e in thread if str(e["name"]).startswith(REGION_MARK)):
            end = region["ts"] + region["dur"]
            top: dict | None = None
            for e in thread[bisect.bisect_left(starts, region["ts"]) :]:
                if e["ts"] > end:
                    break
                if e is region:
                    continue
                if top is None or e["ts"] >= top["ts"] + top["dur"]:
                    top = e  # a new top-level child of the region
                owner[id(e)] = top
    return owner


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in intervals:
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def replayed_launch_times(trace: Path, graph_free: Path) -> list[list[float]]:
    """A CUDA-graph run: per profiled step, each launch's device microseconds, its replayed kernels aligned in
    order with the kernels each launch issued when the same code ran without CUDA graphs (``graph_free``)."""
    plain = profiled_steps(graph_free)[0].launch_kernels
    expected = [_work_name(name) for kernels in plain for name in kernels]
    per_step = []
    for step in profiled_steps(trace):
        replayed = step.other_work
        found = [_work_name(name) for name, _ in replayed]
        assert found == expected, "the replay's kernels differ from the graph-free launches'"
        times, at = [], 0
        for kernels in plain:
            times.append(sum(us for _, us in replayed[at : at + len(kernels)]))
            at += len(kernels)
        per_step.append(times)
    return per_step


def _work_name(name: str) -> str:
    """``Memset (Device)`` launched, ``Memset (Unknown)`` replayed: the same memset."""
    return name.split(" (", 1)[0] if name.startswith(("Memset", "Memcpy")) else name


def launch_times(capture: Path) -> tuple[list[list[float]], list[float]]:
    """A capture folder's per-step launch times in call() order (replayed ones aligned, ``replayed_launch_times``)
    and each step's device total."""
    steps = profiled_steps(capture / "profile_trace.json")
    if (capture / "profile_graph_free.json").is_file():
        per_step = replayed_launch_times(capture / "profile_trace.json", capture / "profile_graph_free.json")
    else:
        per_step = [[us for _, us in step.launches] for step in steps]
    return per_step, [step.total_us for step in steps]
