"""Stage 4 of the pipeline (bench), for a profiler trace recorded elsewhere: ``report CAPTURE --profile FILE``.

A Chrome trace that ``torch.profiler.profile(...).export_chrome_trace(path)`` wrote in any script (no
inductor-lens at capture time; gzipped where the file is) gives the report of a capture the same timing views
as a capture by ``inductor-lens compile``, through the same join (``attribution.py``). What differs:

- steps: ``ProfilerStep#<i>`` where torch.profiler's schedule marked them; a plain ``with profile(): ...``
  loop marks none, and a step is then one call of the first compiled graph to run, up to the next;
- graphs: by the FX graph cache key that names each compiled-graph call, where it is one of the report's;
  a trace from another process (other Inductor options, another torch) has other keys, and its calls are
  joined by their launch-name sequence (or, under CUDA graphs, their replayed kernels' names): the report
  says which way each graph was joined;
- work that no graph of the report explains (eager ops, other models) is counted and listed, in the steps
  and outside them; a trace in which nothing joins is refused (``InputFolderError``);
- ceilings: the trace names its device (``deviceProperties``: name, SMs, compute capability, memory) but not
  its bandwidth or FLOP/s, so the roofline uses the ceilings this report's capture measured on a device of the
  same name, and otherwise has none (and says so);
- only the trace's numbers are kept: the capture's own timings (end to end, isolated kernels) are replaced.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import InputFolderError
from ..exchange.files import REGION_MARK
from ..records import BenchResult, CompileRun, DeviceCeilings, GraphJoin, GraphRecord, ProfileSource
from . import time_steps
from .attribution import Attribution, attribute
from .trace_ranges import GPU_WORK, load_trace

__all__ = ["attach_profile"]


def attach_profile(run: CompileRun, path: Path) -> CompileRun:
    """The run timed from the profiler trace at ``path`` alone; raises InputFolderError where the file is not
    a readable trace or nothing in it joins the run's graphs."""
    try:
        trace = load_trace(path)
    except (OSError, EOFError, ValueError) as exc:  # gzip and JSON errors are ValueErrors or EOFError
        raise InputFolderError(
            f"{path}: not a readable profiler trace ({type(exc).__name__}: {exc})"
        ) from exc
    events = [e for e in trace["traceEvents"] if isinstance(e, dict)]
    trace = {**trace, "traceEvents": events}
    properties = _device_properties(trace)
    gpu = bool(properties) or any(e.get("ph") == "X" and e.get("cat") in GPU_WORK for e in events)
    device = "cuda" if gpu else "cpu"
    try:
        attribution = attribute(trace, run.graphs, device, infer_steps=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputFolderError(
            f"{path}: events of an unexpected shape ({type(exc).__name__}: {exc})"
        ) from exc
    if not attribution.launches:
        raise InputFolderError(_nothing_joins(path, events, run, attribution))
    device_name = properties.get("name") if isinstance(properties.get("name"), str) else None
    ceilings, ceilings_note = _ceilings(run, device_name, gpu)
    graphs, step = time_steps(
        tuple(_untimed(g) for g in run.graphs),
        attribution,
        {},
        ceilings,
        f"the profiler trace {path.name}, recorded elsewhere ({attribution.steps_found})",
    )
    source = ProfileSource(
        file=str(path),
        steps_found=attribution.steps_found,
        recorded=_recorded(trace),
        device_name=device_name,
        device_detail=_device_detail(properties),
        joins=tuple(GraphJoin(graph, method, calls) for graph, (method, calls) in attribution.joins.items()),
        unjoined_calls=attribution.unjoined_calls,
        unattributed_count=attribution.unattributed_count,
        outside_count=attribution.outside_count,
        outside_us=attribution.outside_us,
        ceilings=ceilings_note,
        replaced=_replaced(run.bench),
    )
    return replace(run, graphs=graphs, bench=BenchResult(device, ceilings, step=step, profile=source))


def _untimed(graph: GraphRecord) -> GraphRecord:
    """The graph without earlier timings, so no number of the capture survives beside the trace's."""
    return replace(
        graph,
        launches=tuple(replace(launch, timing=None) for launch in graph.launches),
        kernels=tuple(replace(kernel, timing=None) for kernel in graph.kernels),
    )


def _device_properties(trace: dict[str, Any]) -> dict[str, Any]:
    """The first device of the trace's ``deviceProperties`` (Kineto writes one entry per visible GPU)."""
    found = trace.get("deviceProperties")
    first = found[0] if isinstance(found, list) and found else None
    return first if isinstance(first, dict) else {}


def _device_detail(properties: dict[str, Any]) -> str:
    parts = []
    if isinstance(properties.get("numSms"), int):
        parts.append(f"{properties['numSms']} SMs")
    if isinstance(properties.get("computeMajor"), int) and isinstance(properties.get("computeMinor"), int):
        parts.append(f"compute capability {properties['computeMajor']}.{properties['computeMinor']}")
    if isinstance(properties.get("totalGlobalMem"), int):
        parts.append(f"{properties['totalGlobalMem'] / 2**30:.0f} GiB")
    return ", ".join(parts)


def _recorded(trace: dict[str, Any]) -> str | None:
    """When the trace began, by its own clock: Kineto writes times in µs after ``baseTimeNanoseconds`` (older
    versions: µs since the epoch, and no base)."""
    starts = [float(e["ts"]) for e in trace["traceEvents"] if isinstance(e.get("ts"), int | float)]
    base = trace.get("baseTimeNanoseconds")
    if not starts:
        return None
    seconds = min(starts) / 1e6 + (base / 1e9 if isinstance(base, int | float) else 0.0)
    if not dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc).timestamp() < seconds < 4102444800:  # before 2100
        return None
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ceilings(run: CompileRun, device_name: str | None, gpu: bool) -> tuple[DeviceCeilings | None, str]:
    """The report's measured ceilings where its capture ran on the device the trace names, else none."""
    measured = run.bench.ceilings if run.bench is not None else None
    if not gpu:
        return None, "none: no ceilings are measured on CPU"
    if device_name is None:
        return None, "none: the trace names no device (no deviceProperties), so no measured ceilings apply"
    if measured is not None and run.environment.device_name == device_name:
        return measured, (
            f"measured by this report's capture on a {device_name}, the device the trace names (a device-to-device "
            "copy and a matmul, with do_bench)"
        )
    where = (
        f"this report's capture ran on a {run.environment.device_name}"
        if run.environment.device_name and run.environment.device_name != device_name
        else "this report holds no ceilings measured on that device"
    )
    return None, (
        f"none: the trace names its device ({device_name}) but not its bandwidth or FLOP/s, and {where}; "
        "GB/s are shown, the roofline and its percentages are not"
    )


def _replaced(bench: BenchResult | None) -> str | None:
    if bench is None:
        return None
    if bench.profile is not None:
        return f"the times of the profiler trace {bench.profile.file}"
    return "the capture's own measurements (its profiled steps, end-to-end latency and isolated kernel times)"


def _nothing_joins(
    path: Path, events: list[dict[str, Any]], run: CompileRun, attribution: Attribution
) -> str:
    """One line: what the trace holds, and why none of it is one of the report's graphs."""
    calls = sum(1 for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(REGION_MARK))
    kernels = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in GPU_WORK)
    launches = sum(len(g.launches) for g in run.graphs)
    if not run.graphs:
        return f"{path}: the report has no compiled graph to join the trace to"
    held = f"{calls} compiled-graph call(s)" + (f" and {kernels} GPU kernel(s)" if kernels else "")
    if not calls and not kernels:
        why = "no '## Call CompiledFxGraph' range and no kernel: not a trace of a compiled model"
    elif attribution.steps == 0:
        why = f"no profiled step ({attribution.steps_found})"
    else:
        why = (
            "none of them is a call of the report's graphs (other FX graph cache keys and other kernel names)"
        )
    return (
        f"{path}: nothing in the trace joins the report's {len(run.graphs)} graph(s) ({launches} launches): it "
        f"holds {held}, {why}; is it a profile of another model, or of another device?"
    )
