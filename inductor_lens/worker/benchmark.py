"""Stage 4 of the pipeline (bench), in the model process: the timings of one run, in order.

``measure(...)`` runs the steps of ``measure.py`` on the compiled model (ceilings, end to end, the profiled
steps, each kernel in isolation) and, where CUDA graphs hid the launches, the graph-free pass of
``graph_free.py``, into one ``BenchData`` for the parent (see ``measure.py`` for what each step measures).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..exchange.files import GRAPH_FREE_TRACE_FILE, BenchData
from .graph_free import graph_free, graphs_replayed
from .load import host_window
from .measure import ceilings, end_to_end, isolated_kernels, profile_steps


def measure(
    step: Callable[[Any], Any],
    eager: Callable[..., Any],
    compiled: Callable[..., Any],
    device: torch.device,
    dtype: torch.dtype,
    trace_path: str,
    scope: str = "full",
) -> BenchData:
    data = BenchData(device=device.type)
    if scope == "end_to_end":
        with host_window("eager and compiled steps", data.host):
            data.end_to_end = end_to_end(step, eager, compiled, device)
        return data
    if device.type == "cuda":
        data.ceilings = ceilings(device, dtype)
    # the machine's load around each timed window (worker/load.py), for the stability judgement
    with host_window("eager and compiled steps", data.host):
        data.end_to_end = end_to_end(step, eager, compiled, device)
    with host_window("profiled steps", data.host):
        data.profile = profile_steps(step, compiled, device, trace_path)
    if device.type == "cuda":
        data.isolated = isolated_kernels(step, compiled, device)
        if graphs_replayed(trace_path):
            free_trace = str(Path(trace_path).with_name(GRAPH_FREE_TRACE_FILE))
            data.cudagraph = graph_free(device, free_trace)
    return data
