"""Stage 1 of the pipeline (capture -> parse -> records -> bench -> report): run a model under torch.compile.

``capture(spec, capture_dir)`` runs the model file in the model process (``worker/capture.py``, under
the supervisor of ``worker/supervisor.py``) and turns what it reported into records: the
CaptureOutcome, the measured Environment and the CompileSettings. The debug tree, the trace and the
log stay in ``capture_dir`` for the parse stage, whether the run succeeded or not.

The model process gets TORCH_COMPILE_DEBUG with its debug folder inside ``capture_dir``,
TORCH_TRACE, TORCHINDUCTOR_BENCHMARK_KERNEL, and fresh private Inductor and Triton cache folders
(a warm cache leaves the debug folder empty).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from ..errors import CaptureTimeout, CompileError, LensError, ModelFileError, ModelRunError, UsageError
from ..options import CompileSpec
from ..records import CaptureOutcome, CaptureStatus, CompileSettings, Environment
from ..worker.files import (
    CAPTURE_DIR,
    LOG_FILE,
    RESULT_FILE,
    SPEC_FILE,
    CaptureResult,
    FileShapeError,
    read_capture_result,
)
from ..worker.supervisor import Finished, PhaseCallback, run_worker

__all__ = ["CAPTURE_DIR", "Capture", "PhaseCallback", "capture", "find_capture_dir"]

_ERROR_KINDS: dict[str, type[LensError]] = {
    "ModelFileError": ModelFileError,
    "ModelRunError": ModelRunError,
    "CompileError": CompileError,
    "UsageError": UsageError,
}


@dataclass(frozen=True)
class Capture:
    outcome: CaptureOutcome
    environment: Environment
    settings: CompileSettings
    capture_dir: Path

    def error(self) -> LensError | None:
        """The error to report for a failed capture, with the exit code of its kind."""
        if self.outcome.status == "ok":
            return None
        message = self.outcome.error or "the capture failed"
        if self.outcome.status == "timeout":
            return CaptureTimeout(message)
        return _ERROR_KINDS.get(self.outcome.error_kind or "", CompileError)(message)


def capture(
    spec: CompileSpec,
    capture_dir: Path,
    *,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
    cache_root: Path | None = None,
) -> Capture:
    """Run the model in the model process; ``cache_root``: Inductor's and Triton's caches, kept (else
    fresh ones, deleted after the process ends)."""
    capture_dir = capture_dir.resolve()
    capture_dir.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = capture_dir / SPEC_FILE, capture_dir / RESULT_FILE
    spec_path.write_text(replace(spec, model_path=spec.model_path.resolve()).to_json(), encoding="utf-8")
    result_path.unlink(missing_ok=True)
    own_cache = cache_root is None
    cache_root = (
        Path(tempfile.mkdtemp(prefix="inductor-lens-cache-")) if cache_root is None else cache_root.resolve()
    )
    phases = ["start"]

    def on_phase(phase: str, elapsed: float) -> None:
        phases.append(phase)
        if progress is not None:
            progress(phase, elapsed)

    try:
        finished = run_worker(
            "capture",
            [str(spec_path), str(result_path)],
            cwd=capture_dir,
            env=capture_environment(capture_dir, cache_root, bench=spec.bench),
            log_path=capture_dir / LOG_FILE,
            timeout_s=spec.timeout_s,
            on_phase=on_phase,
            echo=echo,
        )
    finally:
        if own_cache:
            shutil.rmtree(cache_root, ignore_errors=True)
    try:
        result = read_capture_result(result_path)
    except FileShapeError as exc:
        result = CaptureResult(phase=phases[-1], error=f"the model process left an unreadable result: {exc}")
    if result is None:  # it died before writing anything
        result = CaptureResult()
    # The last phase it announced: its result file may not have caught up when it died.
    result = replace(result, phase=phases[-1]) if len(phases) > 1 else result
    return Capture(
        outcome=_outcome(spec, result, finished, capture_dir),
        environment=result.environment,
        settings=_settings(spec, result),
        capture_dir=capture_dir,
    )


def capture_environment(capture_dir: Path, cache_root: Path, *, bench: bool = True) -> dict[str, str]:
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
    )
    # A forced cache-disable leaks temp dirs and changes nothing with a fresh cache dir.
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    # Inductor's own Triton kernels must run compiled, whatever the calling process had set.
    env.pop("TRITON_INTERPRET", None)
    return env


def find_capture_dir(folder: Path) -> Path | None:
    """The folder holding what a model process left (capture.json): ``folder/capture`` of a report,
    or ``folder`` itself (a capture folder copied off a GPU box)."""
    return next((d for d in (folder / CAPTURE_DIR, folder) if (d / RESULT_FILE).is_file()), None)


def _outcome(spec: CompileSpec, result: CaptureResult, finished: Finished, capture_dir: Path) -> CaptureOutcome:
    status: CaptureStatus = "ok" if result.status == "ok" and finished.exit_code == 0 else "failed"
    error, kind = result.error, result.error_kind
    if finished.timed_out:
        status, kind = "timeout", "CaptureTimeout"
        error = f"timed out after {spec.timeout_s:g} s during '{result.phase}' (raise --timeout to wait longer)"
    elif status == "failed" and not error:
        error = _death_message(finished.exit_code, result.phase, capture_dir / LOG_FILE)
    return CaptureOutcome(
        model_path=str(spec.model_path),
        model_name=spec.model_name,
        status=status,
        phase=result.phase,
        error=error,
        error_kind=kind,
        exit_code=finished.exit_code,
        wall_s=finished.wall_s,
        cold_compile_s=result.cold_compile_s,
        eager_first_call_s=result.eager_first_call_s,
        second_call_s=result.second_call_s,
        calls=result.calls,
        call_seconds=tuple(result.call_seconds),
        inputs=tuple(result.inputs),
        outputs=tuple(result.outputs),
        parameters=result.parameters,
        accuracy=result.accuracy,
        log_file=f"{CAPTURE_DIR}/{LOG_FILE}",
    )


def _settings(spec: CompileSpec, result: CaptureResult) -> CompileSettings:
    reported = result.settings
    return CompileSettings(
        mode=spec.mode,
        options=dict(spec.options),
        mode_options=dict(reported.mode_options),
        train=spec.train,
        device=reported.device or spec.device,
        dtype=spec.dtype,
        fullgraph=spec.fullgraph,
        dynamic=spec.dynamic,
        capture_options=dict(reported.capture_options),
    )


def _death_message(exit_code: int | None, phase: str, log: Path) -> str:
    if exit_code is not None and exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        cause = f"the model process was killed by {name}"
    else:
        cause = f"the model process exited with code {exit_code}"
    return f"{cause} during '{phase}' (see {log.name})"
