"""Stage 4 of the pipeline (bench): the collectives of the profiled steps, wherever they ran.

A collective traced into a compiled graph is in its FX graph (records/ranks.py compares those across ranks). DDP's
gradient all-reduce and FSDP2's all-gathers and reduce-scatters are not: they run in the wrappers' hooks, outside
every compiled graph, and only the profiler sees them. ``collectives_per_step(events, steps, device)`` reads them
from the profiled steps' Chrome trace:

- on a GPU, NCCL's kernels (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclKernel_...``): their device time,
  which runs on NCCL's own stream, beside the step's compute;
- on a CPU, gloo's work ranges (``gloo:all_reduce``), recorded on the thread that does the work, beside the step.

Each op's calls and time per step are the totals over the trace divided by its profiled steps (the profiler
records those steps only); the time overlaps the step's other work, so it is not one of the step's parts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..records.timing import CollectiveTime

# NCCL's kernel names: ncclDevKernel_<Op>_<Reduction>_<dtype>_<Algorithm>_<Protocol> (NCCL 2.19 and later), or
# ncclKernel_<Op>_... (earlier), or ncclDevKernel_<Op>_<Algorithm>... for ops without a reduction (SendRecv).
_NCCL_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_(?P<op>[A-Z][A-Za-z]*)")
# The process group's own ranges around its work: "gloo:all_reduce", "nccl:all_reduce" (torch's ProcessGroup).
_BACKEND_RANGE = re.compile(r"^(?P<backend>gloo|nccl|ucc|mpi):(?P<op>\w+)$")
_GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def collectives_per_step(events: Iterable[Mapping[str, Any]], steps: int, device: str) -> tuple[CollectiveTime, ...]:
    """The collectives of ``steps`` profiled steps, by op, the most time first; () where there are none."""
    if steps <= 0:
        return ()
    calls: dict[str, int] = {}
    time_us: dict[str, float] = {}
    gpu = device == "cuda"
    backend = "NCCL" if gpu else ""
    for event in events:
        if event.get("ph") != "X":
            continue
        name = str(event.get("name", ""))
        category = event.get("cat")
        if gpu and category in _GPU_WORK:
            found = _NCCL_KERNEL.match(name)
            op = _snake(found["op"]) if found else None
        elif not gpu and category == "user_annotation":
            found = _BACKEND_RANGE.match(name)
            op = found["op"] if found else None
            backend = found["backend"] if found else backend
        else:
            op = None
        if op is None:
            continue
        calls[op] = calls.get(op, 0) + 1
        time_us[op] = time_us.get(op, 0.0) + float(event.get("dur", 0.0))
    method = (
        f"the device time of NCCL's kernels (its own stream, beside the step's compute), over the {steps} profiled "
        "steps, per step"
        if gpu
        else f"the time of {backend or 'the backend'}'s own work ranges (its thread, beside the step), over the "
        f"{steps} profiled steps, per step"
    )
    found_ops = sorted(calls, key=lambda op: -time_us[op])
    return tuple(
        CollectiveTime(op, backend, calls[op] / steps, time_us[op] / steps, method)
        for op in found_ops
    )


def _snake(camel: str) -> str:
    """``AllReduce`` -> ``all_reduce``, ``ReduceScatter`` -> ``reduce_scatter``, as torch names the ops."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
