"""The process boundary, child side: ``python -m inductor_lens.worker JOB ARGS``, started by the supervisor.

    capture SPEC RESULT      run a model file under torch.compile (capture.py), write capture.json
                             (under torch.distributed.run: once per rank, each in its own folder, ranked.py)
    script SPEC RESULT       run an unchanged script under the capture (script.py), write capture.json
    handwritten PLAN RESULT  check (and on a GPU time) hand-written kernels (handwritten.py)
"""

from __future__ import annotations

import sys

from .ranked import rank_setup
from .supervisor import restore_path


def main(argv: list[str]) -> int:
    restore_path()
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
