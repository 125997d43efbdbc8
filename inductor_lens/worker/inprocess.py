"""Stage 1 of the pipeline (capture), in the caller's own process: for notebooks and tests.

``in_process_capture(capture_dir)`` sets up, for the duration of a ``with`` block, what the model
process gets from its environment: Inductor's debug output under ``capture_dir/torch_compile_debug``
(``trace.enabled``, Dynamo's ``debug_dir_root``), the structured TORCH_TRACE log under
``capture_dir/trace`` (a handler added to torch's trace logger, since TORCH_TRACE is read once, when
torch is imported), provenance tracking, kernel metadata, ``comment_origin``, and fresh private caches
(``torch._inductor.utils.fresh_cache``: a warm cache writes no debug output). Dynamo is reset before
and after, so code compiled earlier in the process neither hides this capture's graphs nor sees its
settings. Each capture's trace defines every file name its stacks use, however many captures the process
made before, and Inductor's lines naming each graph folder's compile id are kept in ``inductor_debug.log``.
``capture_in_process(spec, result_path, model, inputs)`` then runs the model process's capture
(``model_run.py``) on a model the caller holds. Unlike the model process, nothing here is protected from a
crash or a hang. With ``handwritten/check.py``, this module is one of the two doors the tool side uses into
``worker/`` (``tests/unit/test_imports.py``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..options import CompileSpec

TRACE_DIR = "trace"
# Inductor's logger of its debug folders, and where a capture here keeps its lines.
DEBUG_LOGGER = "torch._inductor.debug"
DEBUG_LOG = "inductor_debug.log"

# Inductor settings the model process gets through TORCH_COMPILE_DEBUG, TORCHINDUCTOR_BENCHMARK_KERNEL
# and its options (worker/capture_run.py CAPTURE_OPTIONS).
INDUCTOR_SETTINGS: dict[str, Any] = {
    "trace.enabled": True,
    "trace.provenance_tracking_level": 1,
    "benchmark_kernel": True,
    "comment_origin": True,
}


@contextlib.contextmanager
def in_process_capture(capture_dir: Path) -> Iterator[Path]:
    """Capture every torch.compile made inside the block into ``capture_dir``; yields it."""
    from .compat import dynamo_config, fresh_cache, inductor_config, reset_dynamo

    capture_dir = capture_dir.resolve()
    (capture_dir / TRACE_DIR).mkdir(parents=True, exist_ok=True)
    reset_dynamo()
    handler = _trace_handler(capture_dir / TRACE_DIR)
    _log_interned_strings()
    debug_handler = _debug_trace_handler(capture_dir / DEBUG_LOG)
    try:
        with (
            fresh_cache(),
            inductor_config().patch(INDUCTOR_SETTINGS),
            dynamo_config().patch(debug_dir_root=str(capture_dir / "torch_compile_debug")),
        ):
            yield capture_dir
    finally:
        _remove(handler)
        logging.getLogger(DEBUG_LOGGER).removeHandler(debug_handler)
        debug_handler.close()
        reset_dynamo()


def _trace_handler(folder: Path) -> logging.Handler:
    from .compat import trace_file_handler, trace_logger

    handler = trace_file_handler(str(folder))
    trace_log = trace_logger()
    trace_log.setLevel(logging.DEBUG)
    # Without TORCH_TRACE, torch's own trace handler removes itself on its first record (seen 2.13.0, 2.14.1), and
    # logging then skips the handler after it for that record (the process's first: a stack's file name): first.
    trace_log.handlers.insert(0, handler)
    return handler


def _debug_trace_handler(path: Path) -> logging.Handler:
    """Inductor's ``debug trace:`` lines, which name each graph's folder with its compile id, kept in a log of
    the capture: the model process's capture.log has them (and everything else it printed)."""
    from .compat import torch_logs_formatter

    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(torch_logs_formatter())
    handler.setLevel(logging.WARNING)
    logging.getLogger(DEBUG_LOGGER).addHandler(handler)
    return handler


def _log_interned_strings() -> None:
    """Log again every file name torch's trace has interned in this process.

    Stacks in a TORCH_TRACE log name files by number; torch logs each number's ``str`` record once per
    process (``torch._logging.structured.INTERN_TABLE``, seen 2.13.0 and 2.14.1), so a second capture's
    log would hold numbers it never defines. Each capture's log gets them all (other trace handlers get
    the same definitions again, which changes nothing)."""
    from .compat import interned_strings, trace_structured

    for text, number in interned_strings().items():
        trace_structured("str", _interned(text, number))


def _interned(text: str, number: int) -> Callable[[], tuple[str, int]]:
    return lambda: (text, number)


def _remove(handler: logging.Handler) -> None:
    from .compat import trace_logger

    trace_logger().removeHandler(handler)
    handler.close()


def capture_in_process(spec: CompileSpec, result_path: Path, model: Any, inputs: Any) -> int:
    """The same capture on a model the caller holds (``inductor_lens.inspect``), in the caller's process;
    ``inputs`` as ``get_inputs()`` would return them. Returns 0, or 1 when it failed (the result says why)."""
    from .capture_run import Run, guarded

    run = Run(spec, result_path)

    def body() -> None:
        from .model_file import calls_from  # these import torch: inside guarded's phase
        from .model_run import capture_model

        capture_model(run, model, calls_from(inputs))

    return guarded(run, body, catch_all=False)
