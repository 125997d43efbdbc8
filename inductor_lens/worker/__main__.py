"""The process boundary, child side: ``python -m inductor_lens.worker JOB ARGS``, started by the supervisor.

    capture SPEC RESULT      run a model file under torch.compile (capture.py), write capture.json
                             (under torch.distributed.run: once per rank, each in its own folder, ranked.py)
    script SPEC RESULT       run an unchanged script under the capture (script.py), write capture.json
    handwritten PLAN RESULT  check (and on a GPU time) hand-written kernels (handwritten.py)
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys

from .ranked import rank_setup
from .supervised import restore_path, watch_supervisor


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
        from .handwritten.job import main as handwritten_main

        return handwritten_main(args)
    print("usage: python -m inductor_lens.worker capture|script SPEC RESULT | handwritten PLAN RESULT", file=sys.stderr)
    return 2


# Jobs whose every result is on disk when their main returns: they end there, after the exit handlers (a model
# file's own, torch's cache writes) but without the rest of the interpreter's teardown (freeing every module, CUDA's
# context, waiting on threads). The supervisor kills what they leave (their process group). The 14-16 s between a
# capture's "done" and its first report on an H100 were mostly the tool importing torch to read the capture's
# autotune configs (benchmarks/exit_gap_probe.py, now the model process writes what it needs); this keeps the
# process's own end short as well. Not ``script``: an unchanged script ends as it would on its own.
ENDS_AT_ONCE = ("capture", "handwritten")


def end_at_once(code: int) -> None:
    """Run the exit handlers, flush what the process wrote (its output, torch's trace log) and end it now."""
    atexit._run_exitfuncs()  # the handlers sys.exit would run; then no teardown
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
