"""The process boundary, child side: the worker ends with the tool, and runs the user's code on the user's path.

``watch_supervisor()``, first thing in every worker: the worker ends with the tool whatever ends the tool,
SIGKILL included: a parent-death signal and a thread watching the tool's pid each kill the worker's whole
process group. ``restore_path()`` takes off ``sys.path`` what only served to find this package. The parent side
is ``capture/supervisor.py``; the environment both read is ``exchange/shared.py``'s.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..exchange.shared import PYTHONPATH_VARIABLE, ROOT_VARIABLE, SUPERVISOR_VARIABLE, alive

WATCH_S = 0.25  # how often the worker looks whether the tool is still there
PR_SET_PDEATHSIG = 1  # linux/prctl.h


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


def watch_supervisor() -> None:
    """In the worker, first thing: end with the tool. Where the tool started this process itself (from its main
    thread: Linux sends the parent-death signal when the thread that forked dies), the kernel sends SIGTERM when
    it dies, SIGKILL included; the handler kills this process group at once, so the compile workers and their
    compilers go too (a SIGKILL as the signal would end this process alone). A thread also looks every
    ``WATCH_S`` whether the tool is still there (a worker under a launcher has the launcher as its parent; a
    busy main thread runs no handler) and kills the group when it is not."""
    value = os.environ.pop(SUPERVISOR_VARIABLE, None)
    if not value:
        return
    pid_text, _, spawner = value.partition(":")
    try:
        supervisor = int(pid_text)
    except ValueError:
        return
    if spawner == "main" and os.getppid() == supervisor and set_parent_death_signal(signal.SIGTERM):
        signal.signal(signal.SIGTERM, _group_ender(os.getpid()))
    if not alive(supervisor):  # gone before the signal was set
        kill_own_group()

    def watch() -> None:
        while alive(supervisor):
            time.sleep(WATCH_S)
        kill_own_group()

    threading.Thread(target=watch, name="inductor-lens-supervisor-watch", daemon=True).start()


def _group_ender(worker: int) -> Callable[[int, Any], None]:
    """The worker's SIGTERM handler; a process forked from it (a DataLoader worker) inherits it, and there a
    SIGTERM (its parent stopping it) ends that process alone, as it would without the handler."""

    def on_signal(number: int, frame: Any) -> None:
        if os.getpid() != worker:
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        kill_own_group()

    return on_signal


def set_parent_death_signal(number: int) -> bool:
    """prctl(PR_SET_PDEATHSIG, number) on Linux; False elsewhere or where it fails."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, number, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def kill_own_group() -> None:
    """Kill this process's group: itself, the compile workers and the compilers they run."""
    with contextlib.suppress(OSError):
        os.killpg(os.getpgid(0), signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)
