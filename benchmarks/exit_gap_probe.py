"""Where the seconds between the model process's "done" and the first report go (issue 33; GPU).

Runs ``inductor-lens compile ARGS`` in this process with the capture's parent-side steps wrapped so that each
prints, on stderr, when it began and ended (seconds since this script started): the worker's exit as the
supervisor sees it (``_kill_stragglers`` runs right after ``process.wait``), the reader thread's join (inside
``run_worker``), the copy of the kernels' compiler files (``keep_compiled``) and the removal of the private caches.

Usage: PYTHONPATH=$PWD python benchmarks/exit_gap_probe.py compile MODEL.py --device cuda --out DIR
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any

from inductor_lens import capture
from inductor_lens.capture import supervisor

STARTED = time.perf_counter()


def stamp(what: str) -> None:
    print(f"[probe {time.perf_counter() - STARTED:7.2f}] {what}", file=sys.stderr, flush=True)


def timed(owner: Any, name: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stamp(f"{name} begins")
        try:
            return original(*args, **kwargs)
        finally:
            stamp(f"{name} ends")

    setattr(owner, name, wrapper)


def main() -> int:
    timed(supervisor, "_kill_stragglers")  # right after the worker's process.wait() returns
    timed(capture, "run_worker")
    timed(capture, "keep_compiled")
    timed(capture.shutil, "rmtree")
    timed(capture, "read_capture_result")
    from inductor_lens.cli import main as cli_main

    cli_main(sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
