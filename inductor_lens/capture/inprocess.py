"""Stage 1 of the pipeline (capture), in the caller's own process: for notebooks and tests.

``in_process_capture(capture_dir)`` sets up, for the duration of a ``with`` block, what the model
process gets from its environment: Inductor's debug output under ``capture_dir/torch_compile_debug``
(``trace.enabled``, Dynamo's ``debug_dir_root``), the structured TORCH_TRACE log under
``capture_dir/trace`` (a handler added to torch's trace logger, since TORCH_TRACE is read once, when
torch is imported), provenance tracking, kernel metadata, ``comment_origin``, and fresh private caches
(``torch._inductor.utils.fresh_cache``: a warm cache writes no debug output). Dynamo is reset before
and after, so code compiled earlier in the process neither hides this capture's graphs nor sees its
settings. Unlike the model process, nothing here is protected from a crash or a hang.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TRACE_DIR = "trace"

# Inductor settings the model process gets through TORCH_COMPILE_DEBUG, TORCHINDUCTOR_BENCHMARK_KERNEL
# and its options (worker/capture.py CAPTURE_OPTIONS).
INDUCTOR_SETTINGS: dict[str, Any] = {
    "trace.enabled": True,
    "trace.provenance_tracking_level": 1,
    "benchmark_kernel": True,
    "comment_origin": True,
}


@contextlib.contextmanager
def in_process_capture(capture_dir: Path) -> Iterator[Path]:
    """Capture every torch.compile made inside the block into ``capture_dir``; yields it."""
    import torch
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import fresh_cache

    capture_dir = capture_dir.resolve()
    (capture_dir / TRACE_DIR).mkdir(parents=True, exist_ok=True)
    torch._dynamo.reset()
    handler = _trace_handler(capture_dir / TRACE_DIR)
    try:
        with (
            fresh_cache(),
            inductor_config.patch(INDUCTOR_SETTINGS),
            dynamo_config.patch(debug_dir_root=str(capture_dir / "torch_compile_debug")),
        ):
            yield capture_dir
    finally:
        _remove(handler)
        torch._dynamo.reset()


def _trace_handler(folder: Path) -> logging.Handler:
    from torch._logging._internal import LazyTraceHandler, TorchLogsFormatter, trace_log

    handler = LazyTraceHandler(str(folder))
    handler.setFormatter(TorchLogsFormatter(trace=True))
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    return handler


def _remove(handler: logging.Handler) -> None:
    from torch._logging._internal import trace_log

    trace_log.removeHandler(handler)
    handler.close()
