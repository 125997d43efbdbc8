"""Stage 1 of the pipeline (capture), in the script process: run an unchanged script under the capture.

``python -m inductor_lens.worker script SPEC RESULT`` runs the user's script (``runpy``, as ``python
script.py ARGS`` or ``python -m module ARGS`` would, in the user's folder) with the capture's
environment (TORCH_COMPILE_DEBUG, TORCH_TRACE, fresh caches, set by the parent), and two things added:

- ``torch.compile`` is wrapped: a call that sets no mode and no options of its own gets ``run --mode``
  and ``--option``, one that sets no ``dynamic`` gets ``run --dynamic``; every call is recorded (what,
  where, with what) and gets the capture's own options (``comment_origin``) unless it set them;
- the run's float32 matmul precision, cuDNN TF32 and Dynamo config are set before the script runs (the
  script's own settings, made later, win), and ``run --autocast`` is entered around each call of a
  compiled function or module (``Autocast``): the script's eager code between those calls runs as it is;
- a window of steps is profiled: the first compiled function (or module) the script calls delimits
  the steps; after ``warmup`` of its calls, ``steps`` of them are profiled, each step a range from
  one call to the next (so a training step's backward and optimizer, between two forwards, belong to
  its step), and on a GPU the next step's Triton launches are recorded and replayed alone.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from ..exchange.files import ReportedSettings
from ..options import ScriptSpec
from .capture_run import CAPTURE_OPTIONS, ScriptRun
from .failure import first_line
from .inductor_cache import write_autotune_key

if TYPE_CHECKING:  # imported in main, once torch is
    from .script_hooks import Window


def main(argv: list[str]) -> int:
    """``argv``: the spec file and the result file."""
    spec = ScriptSpec.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    run = ScriptRun(spec, Path(argv[1]))
    window: Window | None = None
    # the run's settings hold until the window's last measurements are taken, after the script
    with contextlib.ExitStack() as settings:
        try:
            run.phase("import torch")
            # imported now, each importing torch: the phase above names what a hang here waits on
            from .compat import list_mode_options
            from .environment import environment
            from .measure import use_threads
            from .model_run import run_settings
            from .module_stacks import module_stacks
            from .script_hooks import Autocast, Window, record_device, wrap_compile

            use_threads(spec.threads)
            run.result.environment = environment()
            applied = settings.enter_context(run_settings(spec))
            mode_options = list_mode_options(spec.mode, spec.dynamic)
            run.result.settings = ReportedSettings(mode_options=mode_options, capture_options=dict(CAPTURE_OPTIONS),
                                                   **applied)  # fmt: skip
            window = Window(spec, run) if spec.bench else None
            wrap_compile(spec, run, window, Autocast(spec.autocast) if spec.autocast else None)
            run.phase("run script")
            with module_stacks(run.result_path.resolve().parent):
                code = run_script(spec)
            if window is not None:
                window.finish()
            record_device(run)
            if code != 0:
                run.result.error, run.result.error_kind = f"the script exited with code {code}", "ModelRunError"
                return 1
            run.result.status = "ok"
            run.phase("done")
            return 0
        except BaseException as exc:  # the script raised: its traceback is in the log, the result says what
            print_script_traceback(exc)
            if window is not None:
                window.finish()
            run.result.error = f"the script raised {type(exc).__name__}: {first_line(exc)}"
            run.result.error_kind = "CompileError" if _from_compiler(exc) else "ModelRunError"
            return 1
        finally:
            write_autotune_key()
            run.write()


def print_script_traceback(exc: BaseException) -> None:
    """The traceback Python would have printed for the script: without this runner's and runpy's frames."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__)):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb if tb is not None else exc.__traceback__)


def run_script(spec: ScriptSpec) -> int:
    """Run it as Python would; returns its exit code (0 when it returns or exits without one)."""
    os.chdir(spec.cwd)
    try:
        if spec.argv[0] == "-m":
            sys.argv = [spec.argv[1], *spec.argv[2:]]
            sys.path.insert(0, str(spec.cwd))
            runpy.run_module(spec.argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(spec.argv)
            sys.path.insert(0, str(Path(spec.argv[0]).resolve().parent))
            runpy.run_path(spec.argv[0], run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code
        if code is None or code == 0:
            return 0
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            return 1
        return code
    return 0


def _from_compiler(exc: BaseException) -> bool:
    """Whether an exception came out of Dynamo, AOTAutograd or Inductor (exit code 5 rather than 4)."""
    names = {cls.__module__ for cls in type(exc).__mro__}
    return any(n.startswith(("torch._dynamo", "torch._inductor", "torch._functorch")) for n in names)
