"""The process boundary, parent side: start a worker and watch it, the one way every stage does it.

``run_worker(job, ...)`` runs ``python -m inductor_lens.worker JOB ARGS`` in a process group of its
own, so a crash, a hang or a CUDA error cannot take the tool down: past its timeout (or on Ctrl-C) the
whole group is killed, Inductor's compile workers included. Everything the worker prints is pumped
line by line into its log file (and, on request, echoed and shown as progress) while it runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .files import PHASE_MARKER

# The folder holding the ``inductor_lens`` package, put on the worker's path so that it runs from a
# source checkout too; the worker takes it off again before running anything of the user's.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
ROOT_VARIABLE = "INDUCTOR_LENS_WORKER_ROOT"
PYTHONPATH_VARIABLE = "INDUCTOR_LENS_WORKER_PYTHONPATH"

PhaseCallback = Callable[[str, float], None]  # (phase, seconds since the worker started)


@dataclass(frozen=True)
class Finished:
    """How a worker ended, as the supervisor saw it."""

    exit_code: int | None  # negative: killed by that signal
    timed_out: bool
    wall_s: float


def run_worker(
    job: str,
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_path: Path,
    timeout_s: float,
    on_phase: PhaseCallback | None = None,
    echo: TextIO | None = None,
    launcher: Sequence[str] = (),
) -> Finished:
    """Run a worker job to its end, its timeout, or Ctrl-C (which kills it and is raised again).

    ``launcher``: a module that starts the worker module itself, several times (``torch.distributed.run
    --nproc-per-node 2 -m``, see ranked.py); the worker is then ``python -m <launcher> inductor_lens.worker ...``.
    """
    command = [sys.executable, "-m", *launcher, "inductor_lens.worker", job, *args]
    started = time.perf_counter()
    timed_out = False
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=worker_environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        reader = threading.Thread(target=_pump, args=(process, log, started, on_phase, echo), daemon=True)
        reader.start()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(process)
        except KeyboardInterrupt:
            kill_group(process)
            raise
        _kill_stragglers(process)
        reader.join(timeout=10)
    return Finished(exit_code=process.returncode, timed_out=timed_out, wall_s=time.perf_counter() - started)


def worker_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this package importable; the worker restores PYTHONPATH as it was (``restore_path``)."""
    result = dict(env)
    original = result.get("PYTHONPATH", "")
    result[PYTHONPATH_VARIABLE] = original
    result[ROOT_VARIABLE] = PACKAGE_ROOT
    result["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, original) if p)
    result["PYTHONUNBUFFERED"] = "1"
    return result


def restore_path() -> None:
    """In the worker: take off sys.path what only served to find this package (``-m`` puts the
    current folder first, ``worker_environment`` the package root), and give PYTHONPATH back, so the
    user's code imports what it would import on its own and its subprocesses inherit the user's path."""
    root = os.environ.pop(ROOT_VARIABLE, None)
    original = os.environ.pop(PYTHONPATH_VARIABLE, None)
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path.pop(0)
    if root is not None and root in sys.path and root not in (original or "").split(os.pathsep):
        sys.path.remove(root)
    if original is not None:
        if original:
            os.environ["PYTHONPATH"] = original
        else:
            os.environ.pop("PYTHONPATH", None)


def _pump(
    process: subprocess.Popen[bytes],
    log: TextIO,
    started: float,
    on_phase: PhaseCallback | None,
    echo: TextIO | None,
) -> None:
    assert process.stdout is not None
    for raw in iter(process.stdout.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        log.write(line)
        log.flush()
        if echo is not None:
            echo.write(line)
            echo.flush()
        if on_phase is not None and line.startswith(PHASE_MARKER):
            on_phase(line[len(PHASE_MARKER) :].strip(), time.perf_counter() - started)


def _kill_stragglers(process: subprocess.Popen[bytes]) -> None:
    """Compile workers left behind by an exited worker would keep the log pipe open."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the worker and everything it started (Inductor's compile worker pool)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
