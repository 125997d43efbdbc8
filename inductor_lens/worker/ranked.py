"""The process boundary, child side, several ranks: a worker started once per rank by torch.distributed.run.

``compile --nproc N`` (and ``run -- torchrun ...``) start the worker under torchrun, which gives every
process its ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``. Before torch is imported, ``rank_setup`` gives the
rank a capture folder of its own, ``<report>/rank<r>/capture`` (its result file, TORCH_COMPILE_DEBUG
folder, TORCH_TRACE log and private Inductor and Triton caches), sends everything the process prints to
that folder's log (rank 0 also passes its phase lines on, the parent's progress), and watches the
launcher: a rank whose launcher died kills itself and its compile workers, never lingering in a collective.
On SIGUSR1 the rank writes its Python stacks to its log (faulthandler): a job past its timeout says where each
rank waited.
For a model file, ``init_process_group`` joins the job's process group before the model is loaded (gloo
on a CPU; on GPUs ``cpu:gloo,cuda:nccl`` with ``cuda:<local rank>`` the rank's device), so the model file can
use torch.distributed, and names the rank's device in ``INDUCTOR_LENS_RANK_DEVICE`` for the model file to
place its model there before wrapping it.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from ..exchange.files import LOG_FILE, PHASE_MARKER, RESULT_FILE, SPEC_FILE
from ..exchange.shared import (
    CACHES_VARIABLE,
    PID_FILE,
    PROCESS_GROUP_VARIABLE,
    RANK_DEVICE_VARIABLE,
    REPORT_VARIABLE,
    STACKS_SIGNAL,
    rank_capture_dir,
)
from .failure import Failure

_WATCH_S = 0.5


def rank() -> int | None:
    """This process's rank, where it was started as one of several by the tool."""
    value = os.environ.get("RANK")
    return int(value) if value is not None and value.isdigit() and REPORT_VARIABLE in os.environ else None


def rank_setup(args: list[str]) -> list[str]:
    """In a rank's worker, before torch is imported: its own folder, caches and log; the job's arguments with
    the result file moved into its folder. Outside a multi-rank launch, ``args`` unchanged."""
    number = rank()
    if number is None:
        return args
    capture_dir = rank_capture_dir(Path(os.environ[REPORT_VARIABLE]), number)
    capture_dir.mkdir(parents=True, exist_ok=True)
    caches = Path(os.environ.get(CACHES_VARIABLE) or capture_dir) / f"rank{number}"
    os.environ.update(
        TORCH_COMPILE_DEBUG_DIR=str(capture_dir),
        TORCH_TRACE=str(capture_dir / "trace"),
        TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
        TRITON_CACHE_DIR=str(caches / "triton"),
    )
    if args:  # the rank's folder is a capture folder of its own, spec included
        shutil.copyfile(args[0], capture_dir / SPEC_FILE)
    _own_log(capture_dir / LOG_FILE, phases=number == 0)
    # a hung job: before the timeout's kill the parent sends SIGUSR1 and the rank's Python stacks go to its log
    # (capture/ranks.py: dump_stacks); the pid is written once the handler is in place, so no signal comes before
    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True)
    (capture_dir / PID_FILE).write_text(str(os.getpid()), encoding="utf-8")
    _watch_launcher()
    return [*args[:-1], str(capture_dir / RESULT_FILE)] if args else args


def init_process_group(requested_device: str) -> None:
    """Join the job's process group (compile --nproc), before the model file is loaded; raises ``Failure``."""
    if rank() is None or os.environ.get(PROCESS_GROUP_VARIABLE) != "1":
        return
    import torch  # this module runs before torch is imported (rank_setup): torch only here
    import torch.distributed as dist

    if not dist.is_available():
        raise Failure("UsageError", "--nproc: this torch was built without torch.distributed")
    cuda = requested_device == "cuda" or (requested_device == "auto" and torch.cuda.is_available())
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        if local_rank >= torch.cuda.device_count():
            raise Failure(
                "UsageError",
                f"--nproc {os.environ.get('WORLD_SIZE')} on cuda needs a GPU per rank: this machine has "
                f"{torch.cuda.device_count()}",
            )
        torch.cuda.set_device(local_rank)
    # a model built on the CPU and wrapped (DDP, fully_shard) before it moves needs gloo beside NCCL: one
    # backend per device type, as torch.distributed.init_process_group documents ("cpu:gloo,cuda:nccl")
    backend = "cpu:gloo,cuda:nccl" if cuda else "gloo"
    os.environ[RANK_DEVICE_VARIABLE] = f"cuda:{local_rank}" if cuda else "cpu"
    try:
        dist.init_process_group(backend=backend)
    except Exception as exc:
        raise Failure("ModelRunError", f"init_process_group failed: {type(exc).__name__}: {exc}") from exc


def end_process_group() -> None:
    """Leave the process group the worker joined (a model file's, or one the script left open)."""
    if rank() is None or "torch.distributed" not in sys.modules:
        return
    import torch.distributed as dist

    try:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # a failed rank's group may be broken already: the process ends anyway
        pass


class _PhaseEcho:
    """stderr of a rank's worker: all of it to the rank's log; rank 0's phase lines to the launcher too."""

    def __init__(self, log: TextIO, launcher: TextIO) -> None:
        self.log, self.launcher, self.line = log, launcher, ""

    def write(self, text: str) -> int:
        self.log.write(text)
        self.line += text
        while "\n" in self.line:
            line, self.line = self.line.split("\n", 1)
            if line.startswith(PHASE_MARKER):
                self.launcher.write(line + "\n")
                self.launcher.flush()
        return len(text)

    def flush(self) -> None:
        self.log.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)


def _own_log(path: Path, *, phases: bool) -> None:
    """Everything this process (and what it starts) prints goes to ``path``."""
    launcher = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for stream in (1, 2):
        os.dup2(descriptor, stream)
    os.close(descriptor)
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
    log = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = _PhaseEcho(log, launcher) if phases else log


def _watch_launcher() -> None:
    """torchrun starts each rank in a session of its own: where it is killed (a timeout), nothing stops its
    ranks. A rank whose parent went away kills its own process group (itself and its compile workers)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="inductor-lens-launcher-watch", daemon=True).start()
