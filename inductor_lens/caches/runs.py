"""Tooling beside the pipeline, the caches: the inductor-lens runs going on now on this machine, one lock file
each (``register_run``), so that ``cache clear`` refuses while a run uses the caches.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import InUseError
from .folders import lens_cache_dir

try:
    import fcntl
except ImportError:  # not on Windows: runs there are not locked
    fcntl = None  # type: ignore[assignment]


# The runs going on now, one lock file each (<pid>.lock): ``cache clear`` refuses while one is held.
RUNS_FOLDER = "runs"


def check_no_runs() -> None:
    """Raise InUseError while an inductor-lens run goes on: a compile uses the caches (torch keeps its precompiled
    headers in the shared Inductor cache even when the run's own caches are private)."""
    runs = running_runs()
    if runs:
        others = f" and {len(runs) - 1} other run(s)" if len(runs) > 1 else ""
        raise InUseError(f"not clearing the caches: {runs[0].describe()}{others} is running and uses them; "
                         "wait for it to end (nothing was removed)")  # fmt: skip


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock file: what it wrote into it when it took the lock."""

    pid: int | None
    host: str
    command: str
    started: float | None  # time.time()

    def describe(self) -> str:
        """``inductor-lens pid 4242 (compile samples/mlp.py, started 10:42:07)``."""
        if self.pid is None:
            return "another inductor-lens run"
        where = f" on {self.host}" if self.host and self.host != socket.gethostname() else ""
        started = f", started {dt.datetime.fromtimestamp(self.started):%H:%M:%S}" if self.started is not None else ""
        return f"inductor-lens pid {self.pid}{where} ({self.command or 'a run'}{started})"


class FileLock:
    """A lock file naming its holder (pid, host, command, start time), held with ``flock``: the kernel frees it when
    its holder dies, however it dies, so a lock file left behind by a killed run is free, not stuck."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, command: str) -> LockHolder | None:
        """Take the lock; None when taken, else who holds it. Raises OSError where the file cannot be created."""
        if fcntl is None:
            return None
        for _ in range(5):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                return holder
            except OSError:  # a file system without locks (some NFS): the run goes on unlocked
                os.close(fd)
                return None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # its holder removed it between our open and our flock: take the new one
                os.close(fd)
                continue
            named = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "started": time.time()}
            try:
                os.ftruncate(fd, 0)
                os.write(fd, json.dumps(named).encode())
            except OSError:
                pass  # held, only unnamed: a second run is refused all the same
            self._fd = fd
            return None
        return LockHolder(None, "", "", None)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # before the unlock: whoever opens it next makes a new file
        os.close(self._fd)
        self._fd = None


def held_by(path: Path) -> LockHolder | None:
    """Who holds the lock file ``path`` now; None when nobody does (a file left by a dead run is removed)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(fd)
    except OSError:
        return None
    else:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    finally:
        os.close(fd)


def _read_holder(fd: int) -> LockHolder:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return LockHolder(int(data["pid"]), str(data["host"]), str(data["command"]), float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return LockHolder(None, "", "", None)  # taken a moment ago and not yet named


def register_run(command: str) -> FileLock | None:
    """Mark a run as going on (``running_runs`` sees it until it is released or its process dies); None where the
    lens cache cannot be written: the run goes on, unseen by ``cache clear``."""
    folder = lens_cache_dir()[0] / RUNS_FOLDER
    lock = FileLock(folder / f"{os.getpid()}.lock")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        holder = lock.acquire(command)
    except OSError:
        return None
    return lock if holder is None else None


def running_runs() -> list[LockHolder]:
    """The inductor-lens runs going on now on this machine (those registered with ``register_run``)."""
    folder = lens_cache_dir()[0] / RUNS_FOLDER
    try:
        paths = sorted(folder.glob("*.lock"))
    except OSError:
        return []
    return [holder for path in paths if (holder := held_by(path)) is not None]
