"""The process boundary, both sides: the few helpers and constants the tool and the model process share.

Torch-free, like ``files.py`` beside it: the tool imports them without starting torch, the model process
(``worker/``) with it.

- ``kernel_fingerprint``: a Triton kernel's text hashed the same way by the parent (output_code.py's copy)
  and the child (``JITFunction.src``), so their launches pair up;
- ``quantile``: every p10 and p90 of the project;
- the environment and files of a several-rank job (``capture/ranks.py`` sets them, ``worker/ranked.py``
  reads them);
- the supervisor's environment for the worker and whether a process runs (``capture/supervisor.py`` starts and
  watches the worker, ``worker/supervised.py`` watches the tool);
- the GPUs a CPU preview can target and what it cannot honour (``--preview-gpu``, checked by ``options.py``
  before anything starts, honoured by ``worker/gpu_preview.py``).
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def kernel_fingerprint(source: str) -> str:
    """A hash of a Triton kernel's text from its ``def`` line on, blind to blank lines and trailing spaces.

    The child sees the kernel as Triton holds it (``JITFunction.src``), the parent as output_code.py
    prints it (imports and decorators above, the benchmark harness below): the function itself,
    from ``def`` to the next top-level line, is the same text in both.
    """
    start = re.search(r"^def\s", source, re.MULTILINE)
    lines: list[str] = []
    for line in (source[start.start() :] if start else source).splitlines():
        if lines and line.strip() and not line[0].isspace() and not line.startswith(")"):
            break
        if line.strip():
            lines.append(line.rstrip())
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:16]


def quantile(values: list[float], q: float) -> float:
    """The value at quantile ``q`` (nearest rank): every p10 and p90 of the project is taken this way."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# Set by the parent: the multi-rank report folder (each rank's capture goes to <it>/rank<r>/capture).
REPORT_VARIABLE = "INDUCTOR_LENS_RANKED_REPORT"
# Set by the parent: where each rank's private caches go (<it>/rank<r>/inductor, .../triton).
CACHES_VARIABLE = "INDUCTOR_LENS_RANKED_CACHES"
# Set by the parent for a model file: the worker joins the process group itself (a script does its own).
PROCESS_GROUP_VARIABLE = "INDUCTOR_LENS_PROCESS_GROUP"
# Set by the worker for the model file: the device of this rank's model ("cpu", "cuda:<local rank>"), where a
# model is placed before DDP or fully_shard wraps it.
RANK_DEVICE_VARIABLE = "INDUCTOR_LENS_RANK_DEVICE"
# In a rank's capture folder: its process id, for the parent to ask it for its stacks.
PID_FILE = "rank.pid"
STACKS_SIGNAL = signal.SIGUSR1


def rank_capture_dir(report_dir: Path, number: int) -> Path:
    return report_dir / f"rank{number}" / "capture"


# The worker's environment, set by the supervisor: the package root it put on the worker's path, the user's own
# PYTHONPATH (both given back before the user's code runs), and "<pid of the tool>:<main|thread>": whom the worker
# watches, and whether the tool started it from its main thread.
ROOT_VARIABLE = "INDUCTOR_LENS_WORKER_ROOT"
PYTHONPATH_VARIABLE = "INDUCTOR_LENS_WORKER_PYTHONPATH"
SUPERVISOR_VARIABLE = "INDUCTOR_LENS_SUPERVISOR"


def process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ... starttime at 19); None where
    there is no such process, or no /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie (killed, not yet reaped by its own parent) does not."""
    fields = process_stat(pid)
    if fields is not None:
        return fields[:1] not in (["Z"], ["X"])
    if os.path.isdir("/proc"):
        return False
    try:  # no /proc (macOS): ask the kernel
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# Properties of the GPUs a preview can target, as torch.cuda.get_device_properties reports them (SXM parts).
GPUS: dict[str, dict[str, Any]] = {
    "H100": dict(name="NVIDIA H100 80GB HBM3", total_memory=85_029_158_912, L2_cache_size=50 * 2**20,
                 memory_clock_rate=2_619_000, memory_bus_width=5120),
    "H200": dict(name="NVIDIA H200", total_memory=150_110_011_392, L2_cache_size=60 * 2**20,
                 memory_clock_rate=3_201_000, memory_bus_width=6144),
}

# Inductor options a preview cannot honour: Inductor settles them by timing candidates on the GPU.
TIMED_OPTIONS = ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise", "coordinate_descent_tuning")


def gpu_key(name: str) -> str:
    """``h200`` -> ``H200``; a name not in the table is a usage error for the caller to report."""
    key = name.upper()
    if key not in GPUS:
        raise ValueError(f"unknown GPU {name!r} to preview; choose one of {', '.join(GPUS)}")
    return key


def check_spec(mode: str, train: bool, dynamic: bool | None, options: Mapping[str, Any]) -> str | None:
    """Why a preview cannot honour this request, or None."""
    if train:
        return ("--preview-gpu previews inference only: AOTAutograd's joint graph would run the autograd engine on a "
                "CUDA device this machine lacks")  # fmt: skip
    if dynamic:
        return "--preview-gpu needs static shapes (no --dynamic)"
    timed = [k for k in TIMED_OPTIONS if options.get(k)] + (["mode " + mode] if "autotune" in mode else [])
    if timed:
        return (f"--preview-gpu cannot honour {', '.join(timed)}: Inductor settles it by timing candidates on the "
                "GPU (use the default mode)")  # fmt: skip
    return None
