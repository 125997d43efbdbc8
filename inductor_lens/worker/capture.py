"""Stage 1 of the pipeline (capture), in the model process: run the model eagerly, compiled, compare, time.

``python -m inductor_lens.worker capture SPEC RESULT`` loads the user's model file (the contract is in
``model_file.py``), makes each call it asks for eagerly, then once more in float64 for the accuracy
verdict (``accuracy.py``), then under ``torch.compile`` (the first call is the cold compile; the parent
set up TORCH_COMPILE_DEBUG, TORCH_TRACE and private caches in the environment), then compiled again,
and unless told not to, times the compiled model (``measure.py``). The spec's float32 matmul precision,
cuDNN TF32 and Dynamo config are set for all of it (``run_settings``); its autocast is entered around every
eager and compiled call and timed step, not around the float64 run, which measures what autocast costs.
Progress goes to stderr as ``PHASE_MARKER`` lines; the outcome, success or not, goes to RESULT (a
``files.CaptureResult``), rewritten after every phase (``capture_run.py``).

This module is the entry (``main``) and imports no torch: the spec's environment comes first, then torch,
then the stages (``model_run.py``: the runs; ``kernel_information.py``, ``module_stacks.py``: what each
compile knows).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..options import CompileSpec
from .capture_run import Run, guarded
from .ranked import end_process_group


def main(argv: list[str]) -> int:
    """``argv``: the spec file and the result file."""
    spec = CompileSpec.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    if spec.preview_gpu:  # before Triton is imported: its jit functions are then the interpreter's
        os.environ["TRITON_INTERPRET"] = "1"
    run = Run(spec, Path(argv[1]))

    def body() -> None:
        from .model_run import execute  # imports torch: after the setup above, in guarded's phase

        execute(run)

    try:
        return guarded(run, body, catch_all=True)
    finally:
        end_process_group()
