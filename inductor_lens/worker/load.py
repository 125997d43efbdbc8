"""Stage 4 of the pipeline (bench), in the model process: how busy the machine was while it timed.

``host_window(name, windows)`` is a context manager around one timed window: it appends a
``HostLoad`` with the window's wall time, this process's CPU time (all threads, ``time.process_time``),
the CPUs it may run on, torch's intra-op threads, the 1-minute load average before and after, and the
machine's busy CPU time over the window from ``/proc/stat`` (Linux; None elsewhere). The stability
judgement (``bench/stability.py``) reads them from the records.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

import torch

from ..records.timing import HostLoad

_PROC_STAT = "/proc/stat"


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _system_busy_s() -> float | None:
    """Busy CPU seconds of the whole machine since boot: user, nice, system, irq, softirq, steal."""
    try:
        with open(_PROC_STAT, encoding="ascii") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    steal = int(fields[8]) if len(fields) > 8 else 0
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (user + nice + system + irq + softirq + steal) / ticks


def _threads() -> int | None:
    try:
        return int(torch.get_num_threads())
    except Exception:  # a torch without it: the count is optional
        return None


@contextlib.contextmanager
def host_window(name: str, windows: list[HostLoad] | None) -> Iterator[None]:
    """Record the machine's load around the body in ``windows`` (nothing when ``windows`` is None)."""
    if windows is None:
        yield
        return
    load_before, system_before = _load(), _system_busy_s()
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    yield
    wall, cpu = time.perf_counter() - wall_before, time.process_time() - cpu_before
    system_after = _system_busy_s()
    windows.append(
        HostLoad(
            window=name,
            wall_s=wall,
            cpu_s=cpu,
            cpus=_cpus(),
            threads=_threads(),
            load_before=load_before,
            load_after=_load(),
            system_busy_s=system_after - system_before
            if system_after is not None and system_before is not None
            else None,
        )
    )
