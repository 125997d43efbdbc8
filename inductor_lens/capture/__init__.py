"""Stage 1 of the pipeline (capture -> parse -> records -> bench -> report): run a model under torch.compile.

``capture(spec, capture_dir)`` runs the model file in a child process (``child.py``, supervised by
``runner.py``) and turns what it reported into records: the CaptureOutcome, the measured
Environment and the CompileSettings. The debug tree, the trace and the log stay in ``capture_dir``
for the parse stage, whether the run succeeded or not.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import CaptureTimeout, CompileError, LensError, ModelFileError, ModelRunError, UsageError
from ..options import CompileSpec
from ..records import Accuracy, CaptureOutcome, CompileSettings, Environment, from_jsonable
from .runner import CAPTURE_DIR, LOG_NAME, ChildResult, ProgressCallback, run_child

__all__ = ["CAPTURE_DIR", "Capture", "capture", "outcome_from_result"]

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
    progress: ProgressCallback | None = None,
    echo: TextIO | None = None,
    cache_root: Path | None = None,
) -> Capture:
    result = run_child(spec, capture_dir, progress=progress, echo=echo, cache_root=cache_root)
    return Capture(
        outcome=outcome_from_result(spec, result),
        environment=environment_from_result(result.data),
        settings=settings_from_result(spec, result.data),
        capture_dir=capture_dir,
    )


def outcome_from_result(spec: CompileSpec, result: ChildResult) -> CaptureOutcome:
    data = result.data
    phase = str(data.get("phase") or "start")
    status = "ok" if data.get("status") == "ok" and result.exit_code == 0 else "failed"
    error, kind = data.get("error"), data.get("error_kind")
    if result.timed_out:
        status, kind = "timeout", "CaptureTimeout"
        error = f"timed out after {spec.timeout_s:g} s during '{phase}' (raise --timeout to wait longer)"
    elif status == "failed" and not error:
        error = _death_message(result.exit_code, phase, result.capture_dir / LOG_NAME)
    accuracy = data.get("accuracy")
    return CaptureOutcome(
        model_path=str(spec.model_path),
        model_name=spec.model_name,
        status=status,  # type: ignore[arg-type]
        phase=phase,
        error=error,
        error_kind=kind,
        exit_code=result.exit_code,
        wall_s=result.wall_s,
        cold_compile_s=data.get("cold_compile_s"),
        eager_first_call_s=data.get("eager_first_call_s"),
        second_call_s=data.get("second_call_s"),
        inputs=tuple(data.get("inputs") or ()),
        outputs=tuple(data.get("outputs") or ()),
        parameters=data.get("parameters"),
        accuracy=from_jsonable(Accuracy, accuracy) if isinstance(accuracy, dict) else None,
        log_file=f"{CAPTURE_DIR}/{LOG_NAME}",
    )


def environment_from_result(data: dict[str, Any]) -> Environment:
    env = data.get("environment") or {}
    known = {k: v for k, v in env.items() if k in Environment.__dataclass_fields__}
    return Environment(**{**known, "source": "capture"})


def settings_from_result(spec: CompileSpec, data: dict[str, Any]) -> CompileSettings:
    reported = data.get("settings") or {}
    return CompileSettings(
        mode=spec.mode,
        options=dict(spec.options),
        mode_options=dict(reported.get("mode_options") or {}),
        train=spec.train,
        device=reported.get("device") or spec.device,
        dtype=spec.dtype,
        fullgraph=spec.fullgraph,
        dynamic=spec.dynamic,
        capture_options=dict(reported.get("capture_options") or {}),
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
