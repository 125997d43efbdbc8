"""Stage 1 of the pipeline (capture), the supervising side: run the child process safely.

The child gets TORCH_COMPILE_DEBUG with its debug folder inside the report's ``capture/`` folder,
TORCH_TRACE, TORCHINDUCTOR_BENCHMARK_KERNEL, and fresh private Inductor and Triton cache dirs (a
warm cache leaves the debug folder empty). It runs in its own process group, so a crash, a hang past ``--timeout`` or a CUDA
error cannot take the tool down: on timeout the whole group (Inductor's compile workers too) is
killed. Everything the child prints is kept in ``capture/capture.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ..options import CompileSpec
from .child import PHASE_MARKER

CAPTURE_DIR = "capture"
LOG_NAME = "capture.log"
RESULT_NAME = "capture.json"
SPEC_NAME = "spec.json"


@dataclass(frozen=True)
class ChildResult:
    """What the child reported (its RESULT.json), or what the supervisor saw if it reported nothing."""

    data: dict[str, Any]
    exit_code: int | None
    timed_out: bool
    wall_s: float
    capture_dir: Path


ProgressCallback = Callable[[str, float], None]


def run_child(
    spec: CompileSpec,
    capture_dir: Path,
    *,
    progress: ProgressCallback | None = None,
    echo: TextIO | None = None,
    cache_root: Path | None = None,
) -> ChildResult:
    """Run the model in a child process; ``cache_root``: Inductor's and Triton's caches, kept (else fresh, deleted)."""
    capture_dir = capture_dir.resolve()
    capture_dir.mkdir(parents=True, exist_ok=True)
    spec_path = capture_dir / SPEC_NAME
    result_path = capture_dir / RESULT_NAME
    spec_path.write_text(replace(spec, model_path=spec.model_path.resolve()).to_json())
    own_cache = cache_root is None
    cache_root = Path(tempfile.mkdtemp(prefix="inductor-lens-cache-")) if own_cache else cache_root.resolve()
    env = child_environment(capture_dir, cache_root, bench=spec.bench)
    # Run as a script, not `-m`: the child needs only torch, not this package and its imports.
    command = [sys.executable, str(Path(__file__).with_name("child.py")), str(spec_path), str(result_path)]
    started = time.perf_counter()
    timed_out = False
    state = {"phase": "start"}
    try:
        with (capture_dir / LOG_NAME).open("w", encoding="utf-8") as log:
            process = subprocess.Popen(
                command,
                cwd=capture_dir,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            reader = threading.Thread(
                target=_pump, args=(process, log, state, started, progress, echo), daemon=True
            )
            reader.start()
            try:
                process.wait(timeout=spec.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(process)
            except KeyboardInterrupt:
                kill_group(process)
                raise
            _kill_stragglers(process)
            reader.join(timeout=10)
    finally:
        if own_cache:
            shutil.rmtree(cache_root, ignore_errors=True)
    wall = time.perf_counter() - started
    data: dict[str, Any] = {}
    if result_path.is_file():
        try:
            data = json.loads(result_path.read_text())
        except json.JSONDecodeError:
            data = {}
    data.setdefault("phase", state["phase"])
    return ChildResult(
        data=data, exit_code=process.returncode, timed_out=timed_out, wall_s=wall, capture_dir=capture_dir
    )


def child_environment(capture_dir: Path, cache_root: Path, *, bench: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if bench:
        # Wraps every C++ kernel in a profiler range named graph_<k>_<kernel>, for per-kernel CPU times.
        env["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"
    env.update(
        TORCH_COMPILE_DEBUG="1",
        TORCH_COMPILE_DEBUG_DIR=str(capture_dir),
        TORCH_TRACE=str(capture_dir / "trace"),
        TORCHINDUCTOR_CACHE_DIR=str(cache_root / "inductor"),
        TRITON_CACHE_DIR=str(cache_root / "triton"),
        # Makes Inductor record bytes and FLOPs per Triton kernel (kernel_num_gb, kernel_flop) and write
        # each kernel's benchmark harness; the C++ backend ignores it.
        TORCHINDUCTOR_BENCHMARK_KERNEL="1",
        PYTHONUNBUFFERED="1",
    )
    # A forced cache-disable leaks temp dirs and changes nothing with a fresh cache dir.
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    # Inductor's own Triton kernels must run compiled, whatever the calling process had set.
    env.pop("TRITON_INTERPRET", None)
    return env


def _pump(
    process: subprocess.Popen[bytes],
    log: TextIO,
    state: dict[str, str],
    started: float,
    progress: ProgressCallback | None,
    echo: TextIO | None,
) -> None:
    assert process.stdout is not None
    for raw in iter(process.stdout.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        log.write(line)
        log.flush()
        if echo is not None:
            echo.write(line)
            echo.flush()
        if line.startswith(PHASE_MARKER):
            state["phase"] = line[len(PHASE_MARKER) :].strip()
            if progress is not None:
                progress(state["phase"], time.perf_counter() - started)


def _kill_stragglers(process: subprocess.Popen[bytes]) -> None:
    """Compile workers left behind by an exited child would keep the log pipe open."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the child and everything it started (Inductor's compile worker pool)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
