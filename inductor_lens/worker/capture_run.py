"""Stage 1 of the pipeline (capture), in the model and script processes: a run's result, whatever happens.

``Run`` (a model file's capture) and ``ScriptRun`` (a script's) write the result file (``files.CaptureResult``)
after every phase; ``guarded`` imports torch and runs the capture's body so that the result says how it ended,
success or not. Torch-free: the model process names its phase "import torch" before torch is imported
(``capture.py``, ``script.py``), and the in-process API imports this module before a capture starts.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from ..exchange.files import CaptureResult, ResultWriter
from ..options import CompileSpec, ScriptSpec
from ..records.codec import JsonValue
from .failure import Failure, first_line
from .inductor_cache import write_autotune_key

# Inductor options inductor-lens adds to every capture (a user's --option of the same name wins).
CAPTURE_OPTIONS: dict[str, JsonValue] = {"comment_origin": True}


class Run(ResultWriter):
    def __init__(self, spec: CompileSpec, result_path: Path) -> None:
        super().__init__(result_path, CaptureResult())
        self.spec = spec


class ScriptRun(ResultWriter):
    def __init__(self, spec: ScriptSpec, result_path: Path) -> None:
        super().__init__(result_path, CaptureResult(command=spec.command))
        self.spec = spec


def guarded(run: Run, body: Callable[[], None], *, catch_all: bool) -> int:
    """Import torch, then run ``body()``; whatever happens, the result file says how it ended. ``catch_all``: in
    the model process nothing escapes; in the caller's process Ctrl-C and SystemExit still do."""
    try:
        run.phase("import torch")
        import torch  # noqa: F401  # what the model process's phase "import torch" waits on

        from .environment import environment  # imports torch: only now

        run.result.environment = environment()
        body()
        run.result.status = "ok"
        run.phase("done")
        return 0
    except Failure as failure:
        run.result.error, run.result.error_kind = failure.message, failure.kind
        print(f"[inductor-lens] error ({failure.kind}): {failure.message}", file=sys.stderr, flush=True)
        return 1
    except Exception as exc:  # anything unforeseen still leaves a result behind
        run.result.error, run.result.error_kind = f"{type(exc).__name__}: {first_line(exc)}", "CompileError"
        traceback.print_exc()
        return 1
    except BaseException as exc:
        if not catch_all:
            raise
        run.result.error, run.result.error_kind = f"{type(exc).__name__}: {first_line(exc)}", "CompileError"
        traceback.print_exc()
        return 1
    finally:
        if catch_all:  # the model process (not the caller's, in the in-process API): its own Inductor cache
            write_autotune_key()
        run.write()
