"""The process boundary, parent side: start a worker and watch it, the one way every stage does it.

``run_worker(job, ...)`` runs ``python -m inductor_lens.worker JOB ARGS`` in a process group of its
own, so a crash, a hang or a CUDA error cannot take the tool down: past its timeout (or on Ctrl-C) the
whole group is killed, Inductor's compile workers included. Everything the worker prints is pumped
line by line into its log file (and, on request, echoed and shown as progress) while it runs; a log write that
fails (a full disk) stops the writing, never the draining, and is reported in ``Finished.log_error``.

Child side: ``worker/supervised.py``; what both sides read (the environment variables, ``alive``):
``exchange/shared.py``.
"""

from __future__ import annotations

import contextlib
import errno
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

from ..exchange.files import PHASE_MARKER
from ..exchange.shared import PYTHONPATH_VARIABLE, ROOT_VARIABLE, SUPERVISOR_VARIABLE

# The folder holding the ``inductor_lens`` package, put on the worker's path so that it runs from a
# source checkout too; the worker takes it off again before running anything of the user's.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

PhaseCallback = Callable[[str, float], None]  # (phase, seconds since the worker started)


@dataclass(frozen=True)
class Finished:
    """How a worker ended, as the supervisor saw it."""

    exit_code: int | None  # negative: killed by that signal
    timed_out: bool
    wall_s: float
    log_error: OSError | None = None  # the first failed write of the log (its later lines were drained, not kept)


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
    log = log_path.open("w", encoding="utf-8")
    pump = Pump(log, started, on_phase, echo)
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=worker_environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        reader = threading.Thread(target=pump.drain, args=(process,), daemon=True)
        reader.start()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(process)
        except KeyboardInterrupt:
            kill_group(process)
            raise
        finally:  # the pump done before its log is closed, on Ctrl-C too
            _kill_stragglers(process)
            reader.join(timeout=10)
    finally:
        try:
            log.close()
        except OSError as exc:  # what was buffered met the full disk too
            pump.log_error = pump.log_error or exc
    return Finished(exit_code=process.returncode, timed_out=timed_out, wall_s=time.perf_counter() - started,
                    log_error=pump.log_error)  # fmt: skip


def worker_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this package importable; the worker restores PYTHONPATH as it was (``restore_path``)."""
    result = dict(env)
    original = result.get("PYTHONPATH", "")
    result[PYTHONPATH_VARIABLE] = original
    result[ROOT_VARIABLE] = PACKAGE_ROOT
    result["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, original) if p)
    result["PYTHONUNBUFFERED"] = "1"
    spawner = "main" if threading.current_thread() is threading.main_thread() else "thread"
    result[SUPERVISOR_VARIABLE] = f"{os.getpid()}:{spawner}"
    return result


class Pump:
    """Copies the worker's output into its log line by line, echoes it, and shows its phases. The pipe is drained
    to its end whatever fails: a worker whose output nobody reads blocks on its next print until its timeout. A
    failed log write (a full disk) stops the writing and is kept in ``log_error``; a failed echo or progress
    line (a closed terminal) stops those."""

    def __init__(self, log: TextIO, started: float, on_phase: PhaseCallback | None, echo: TextIO | None) -> None:
        self.log: TextIO | None = log
        self.started = started
        self.on_phase = on_phase
        self.echo = echo
        self.log_error: OSError | None = None

    def drain(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in iter(process.stdout.readline, b""):
            self.line(raw.decode("utf-8", errors="replace"))

    def line(self, line: str) -> None:
        if self.log is not None:
            try:
                self.log.write(line)
                self.log.flush()
            except OSError as exc:
                self.log_error, self.log = exc, None
            except ValueError:  # closed: the run is over
                self.log = None
        if self.echo is not None:
            try:
                self.echo.write(line)
                self.echo.flush()
            except (OSError, ValueError):
                self.echo = None
        if self.on_phase is not None and line.startswith(PHASE_MARKER):
            try:
                self.on_phase(line[len(PHASE_MARKER) :].strip(), time.perf_counter() - self.started)
            except (OSError, ValueError):
                self.on_phase = None


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


def is_no_space(exc: BaseException | None) -> bool:
    """An OSError of a full disk (or of a full quota)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
