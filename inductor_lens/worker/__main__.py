"""The process boundary, child side: ``python -m inductor_lens.worker JOB ARGS``, started by the supervisor.

    capture SPEC RESULT      run a model file under torch.compile (capture.py), write capture.json
                             (under torch.distributed.run: once per rank, each in its own folder, ranked.py)
    script SPEC RESULT       run an unchanged script under the capture (script.py), write capture.json
    handwritten PLAN RESULT  check (and on a GPU time) hand-written kernels (handwritten.py)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from .ranked import rank_setup
from .supervisor import restore_path, watch_supervisor


def main(argv: list[str]) -> int:
    restore_path()
    watch_supervisor()  # this process and what it starts end with the tool, whatever ends it
    job, args = (argv[0], argv[1:]) if argv else ("", [])
    args = rank_setup(args)  # one rank of several (compile --nproc, run -- torchrun): its own folder and log
    if job == "capture" and len(args) == 2:
        from .capture import main as capture_main

        return capture_main(args)
    if job == "script" and len(args) == 2:
        from .script import main as script_main

        return script_main(args)
    if job == "handwritten" and len(args) == 2:
        from .handwritten import main as handwritten_main

        return handwritten_main(args)
    print("usage: python -m inductor_lens.worker capture|script SPEC RESULT | handwritten PLAN RESULT", file=sys.stderr)
    return 2


# Jobs whose every result is on disk when their main returns: they end there, without the interpreter's teardown
# (Inductor's compile-worker pool shutting down, CUDA's context): on a GPU that took 14-16 s after a capture's
# "done" (benchmarks/results/2026-11-27-h100-first-report.md), time the report waited on. The supervisor kills
# what they leave (their process group). Not ``script``: an unchanged script's own exit handlers must run.
ENDS_AT_ONCE = ("capture", "handwritten")


def end_at_once(code: int) -> None:
    """Flush what the process wrote (its output, torch's trace log) and end it now."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    if sys.argv[1:2] and sys.argv[1] in ENDS_AT_ONCE:
        end_at_once(code)
    sys.exit(code)
