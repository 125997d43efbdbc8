"""Stage 1 of the pipeline (capture -> parse -> records -> bench -> report): run a model under torch.compile.

``capture(spec, capture_dir)`` runs the model file in the model process (``worker/capture.py``, under
the supervisor of ``capture/supervisor.py``), ``capture_script`` an unchanged script in the script
process (``worker/script.py``), and each turns what it reported into records: the
CaptureOutcome, the measured Environment and the CompileSettings. The debug tree, the trace and the
log stay in ``capture_dir`` for the parse stage, whether the run succeeded or not.

The model process gets TORCH_COMPILE_DEBUG with its debug folder inside ``capture_dir``,
TORCH_TRACE, TORCHINDUCTOR_BENCHMARK_KERNEL, and fresh private Inductor and Triton cache folders
(a warm cache leaves the debug folder empty). What the Triton cache holds is kept in
``capture_dir/triton_cache`` (``triton_cache.py``) before it is deleted: the kernels' compiler stages, with
the configs Inductor's autotuner kept (its ``.best_config`` files). A private cache folder holds its owner's pid
(``OWNER_FILE``): one whose owner was killed before deleting it is deleted by the next run.

A full disk is one line naming it and its free space (NoSpaceError): the report folder's (the model process's
log could not be written) or TMPDIR's and the caches' (the model process failed on "No space left on device").
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ..errors import (
    CaptureTimeout,
    CompileError,
    LensError,
    ModelFileError,
    ModelRunError,
    NoSpaceError,
    RenderError,
    UsageError,
    no_space_message,
)
from ..exchange.files import (
    CAPTURE_DIR,
    LOG_FILE,
    RESULT_FILE,
    SPEC_FILE,
    CaptureResult,
    FileShapeError,
    read_capture_result,
    write_json_file,
)
from ..exchange.shared import alive, process_stat
from ..options import CompileSpec, ScriptSpec
from ..records import CaptureOutcome, CaptureStatus, CompileSettings, Environment
from .supervisor import Finished, PhaseCallback, is_no_space, run_worker
from .triton_cache import keep_compiled

__all__ = ["CAPTURE_DIR", "Capture", "PhaseCallback", "capture", "capture_in_process", "capture_script", "find_capture_dir"]

_ERROR_KINDS: dict[str, type[LensError]] = {
    "ModelFileError": ModelFileError,
    "ModelRunError": ModelRunError,
    "CompileError": CompileError,
    "UsageError": UsageError,
    "NoSpaceError": NoSpaceError,
}
PRIVATE_CACHE_PREFIX = "inductor-lens-cache-"
OWNER_FILE = "owner.pid"  # "<pid> <start time>" of the process that made a private cache folder
# what a compiler, Python or torch says when a write meets a full disk; the path before it where one is named
NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded|\[Errno (?:28|122)\]|ENOSPC")
NO_SPACE_PATH = re.compile(r"(/[^\s:'\"]+)['\"]?:? *(?:No space left on device|Disk quota exceeded)|"
                           r"(?:No space left on device|Disk quota exceeded)['\"]?: *'(/[^']+)'")
LOG_TAIL_BYTES = 256 * 1024
TRACE_DIR = "trace"  # TORCH_TRACE, in the capture folder


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
    # the model process runs in the capture folder: a relative model path would point elsewhere
    placed = replace(spec, model_path=spec.model_path.resolve())
    result, finished, capture_dir = _run_worker("capture", placed.to_json(), spec.bench, spec.timeout_s, capture_dir,
                                                capture_dir, progress, echo, cache_root)  # fmt: skip
    outcome = _outcome(str(spec.model_path), spec.model_name, spec.timeout_s, result, finished, capture_dir)
    return Capture(outcome, result.environment, _settings(spec, result), capture_dir)


def _settings(spec: CompileSpec, result: CaptureResult) -> CompileSettings:
    return CompileSettings(
        mode=spec.mode,
        options=dict(spec.options),
        mode_options=dict(result.settings.mode_options),
        train=spec.train,
        device=result.settings.device or spec.device,
        dtype=spec.dtype,
        fullgraph=spec.fullgraph,
        dynamic=spec.dynamic,
        capture_options=dict(result.settings.capture_options),
        backward=result.settings.backward,
        **_process_settings(spec, result),
    )


def _process_settings(spec: CompileSpec | ScriptSpec, result: CaptureResult) -> dict[str, Any]:
    """The precision, autocast and Dynamo settings the spec set: as the process reported them once applied,
    else (it failed before) as asked."""
    reported = result.settings
    return {
        "matmul_precision": reported.matmul_precision or spec.matmul_precision,
        "cudnn_allow_tf32": spec.cudnn_allow_tf32 if reported.cudnn_allow_tf32 is None else reported.cudnn_allow_tf32,
        "autocast": reported.autocast or spec.autocast,
        "dynamo_options": dict(reported.dynamo_options or spec.dynamo_options),
    }


def capture_script(
    spec: ScriptSpec,
    capture_dir: Path,
    *,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
    cache_root: Path | None = None,
) -> Capture:
    """Run an unchanged script in the script process (``worker/script.py``), in the user's folder;
    ``cache_root``: Inductor's and Triton's caches, kept (else fresh ones, deleted after the process ends)."""
    result, finished, capture_dir = _run_worker("script", spec.to_json(), spec.bench, spec.timeout_s, capture_dir,
                                                spec.cwd, progress, echo, cache_root)  # fmt: skip
    return script_capture(spec, result, finished, capture_dir)


def script_capture(spec: ScriptSpec, result: CaptureResult, finished: Finished, capture_dir: Path) -> Capture:
    """The Capture of a script process (one rank's, for ``run -- torchrun``), from what it reported."""
    settings = CompileSettings(
        mode=spec.mode,
        options=dict(spec.options),
        mode_options=dict(result.settings.mode_options),
        device=result.settings.device,
        dynamic=spec.dynamic,
        capture_options=dict(result.settings.capture_options),
        **_process_settings(spec, result),
    )
    outcome = replace(
        _outcome(str(spec.model_path), spec.model_name, spec.timeout_s, result, finished, capture_dir),
        command=result.command or spec.command,
        compile_calls=tuple(result.compile_calls),
        profiled=result.profiled,
    )
    return Capture(outcome, result.environment, settings, capture_dir)


def capture_in_process(spec: CompileSpec, capture_dir: Path, model: Any, inputs: Any) -> Capture:
    """The capture of ``capture``, made in this process on a model the caller holds (``inductor_lens.inspect``)."""
    from ..worker.inprocess import capture_in_process as run_here
    from ..worker.inprocess import in_process_capture

    started = time.perf_counter()
    with in_process_capture(capture_dir) as capture_dir:
        (capture_dir / SPEC_FILE).write_text(spec.to_json(), encoding="utf-8")
        code = run_here(spec, capture_dir / RESULT_FILE, model, inputs)
    finished = Finished(exit_code=code, timed_out=False, wall_s=time.perf_counter() - started)
    result = read_capture_result(capture_dir / RESULT_FILE) or CaptureResult()
    outcome = _outcome(str(spec.model_path), spec.model_name, spec.timeout_s, result, finished, capture_dir)
    # no log: in the caller's process, its output went where the caller's goes
    return Capture(replace(outcome, log_file=None), result.environment, _settings(spec, result), capture_dir)


def _run_worker(
    job: str,
    spec_json: str,
    bench: bool,
    timeout_s: float,
    capture_dir: Path,
    cwd: Path,
    progress: PhaseCallback | None,
    echo: TextIO | None,
    cache_root: Path | None,
) -> tuple[CaptureResult, Finished, Path]:
    """Write the spec, run the worker job on fresh (or the given) caches, read back what it wrote."""
    capture_dir = capture_dir.resolve()
    capture_dir.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = capture_dir / SPEC_FILE, capture_dir / RESULT_FILE
    spec_path.write_text(spec_json, encoding="utf-8")
    # "failed at start" until the process says more: a run killed before its first phase (its parent with it)
    # still reads as stopped, never as a complete capture
    write_json_file(result_path, CaptureResult())
    own_cache = cache_root is None
    if own_cache:
        remove_stale_caches()
    caches = private_cache_folder() if cache_root is None else cache_root.resolve()
    phases = ["start"]

    def on_phase(phase: str, elapsed: float) -> None:
        phases.append(phase)
        if progress is not None:
            progress(phase, elapsed)

    try:
        finished = run_worker(
            job,
            [str(spec_path), str(result_path)],
            cwd=cwd,
            env=capture_environment(capture_dir, caches, bench=bench),
            log_path=capture_dir / LOG_FILE,
            timeout_s=timeout_s,
            on_phase=on_phase,
            echo=echo,
        )
        try:
            result = read_capture_result(result_path)
        except FileShapeError as exc:
            result = CaptureResult(phase=phases[-1], error=f"the worker left an unreadable result: {exc}")
        if result is None:  # it died before writing anything
            result = CaptureResult()
        # The last phase it announced: its result file may not have caught up when it died.
        result = replace(result, phase=phases[-1]) if len(phases) > 1 else result
        full = full_disk(result, finished, capture_dir, caches)  # measured before the caches free their space
    finally:
        # the kernels' compiler stages (TTIR ... cubin) and the configs autotuning kept, for the stages pages
        keep_compiled(caches, capture_dir)
        if own_cache:
            shutil.rmtree(caches, ignore_errors=True)
    if finished.log_error is not None:  # the report folder's disk: no report can be written there either
        log = capture_dir / LOG_FILE
        if is_no_space(finished.log_error):
            raise NoSpaceError(no_space_message(log, "the model process's log could not be written"))
        raise RenderError(f"cannot write {log}: {finished.log_error.strerror or finished.log_error}; pass another --out")
    if full is not None:
        result = replace(result, error=full, error_kind="NoSpaceError")
    return result, finished, capture_dir


def private_cache_folder() -> Path:
    """A fresh folder in TMPDIR for the model process's caches, marked with this process as its owner."""
    folder = Path(tempfile.mkdtemp(prefix=PRIVATE_CACHE_PREFIX))
    try:
        (folder / OWNER_FILE).write_text(_owner_stamp(os.getpid()) or str(os.getpid()), encoding="ascii")
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)  # an unowned folder would never be removed
        if is_no_space(exc):
            raise NoSpaceError(no_space_message(folder.parent, "TMPDIR: no private cache folder can be made")) from exc
        raise
    return folder


def remove_stale_caches(temp_dir: Path | None = None) -> list[Path]:
    """Delete the private cache folders in ``temp_dir`` (TMPDIR) whose owner is dead (a killed run's: a live
    owner deletes its own); returns them. A folder without an owner file may be one being made: kept."""
    removed: list[Path] = []
    try:
        folders = list(Path(temp_dir or tempfile.gettempdir()).glob(f"{PRIVATE_CACHE_PREFIX}*"))
    except OSError:
        return removed
    for folder in folders:
        try:
            if folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
            recorded = (folder / OWNER_FILE).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        pid_text = recorded.split()[0] if recorded else ""
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if alive(pid) and _owner_stamp(pid) in (recorded, None):  # None: no /proc to tell a reused pid
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _owner_stamp(pid: int) -> str | None:
    """``"<pid> <start time>"``: the start time (clock ticks since boot) tells a reused pid apart; None without
    /proc."""
    fields = process_stat(pid)
    return f"{pid} {fields[19]}" if fields is not None and len(fields) > 19 else None


def full_disk(result: CaptureResult, finished: Finished, capture_dir: Path, caches: Path) -> str | None:
    """Where a failed model process met a full disk: one line naming the folder (TMPDIR with the private caches,
    the caches, the report folder) and its free space; None where it failed otherwise."""
    if result.status == "ok" and finished.exit_code == 0 and not finished.timed_out:
        return None
    # the log has the failure's first line; torch's trace log its whole text (a compiler's output included)
    logs = [capture_dir / LOG_FILE, *sorted((capture_dir / TRACE_DIR).glob("*.log"))]
    text = "\n".join([result.error or "", *(_log_tail(log) for log in logs)])
    if not NO_SPACE.search(text):
        return None
    named = next((Path(m.group(1) or m.group(2)) for m in NO_SPACE_PATH.finditer(text)), None)
    where = [(caches, f"the model process's caches ({caches}, in TMPDIR)"), (capture_dir, "the report folder"),
             (Path(tempfile.gettempdir()), "TMPDIR")]  # the innermost first  # fmt: skip
    if named is not None:
        for folder, what in where:
            if named.is_relative_to(folder):
                return no_space_message(folder, f"{what}: the model process failed writing {named}")
        return no_space_message(named, f"the model process failed writing {named}")
    # no path in what it said: the fullest of the disks it writes to
    folder, what = min(where, key=lambda entry: _free_bytes(entry[0]))
    return no_space_message(folder, f"{what}: the model process failed")


def _free_bytes(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 1 << 62


def _log_tail(log: Path) -> str:
    with contextlib.suppress(OSError), log.open("rb") as file:
        file.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
        return file.read().decode("utf-8", errors="replace")
    return ""


def capture_environment(capture_dir: Path, cache_root: Path, *, bench: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if bench:
        # Wraps every C++ kernel in a profiler range named graph_<k>_<kernel>, for per-kernel CPU times.
        env["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"
    env.update(
        TORCH_COMPILE_DEBUG="1",
        TORCH_COMPILE_DEBUG_DIR=str(capture_dir),
        TORCH_TRACE=str(capture_dir / TRACE_DIR),
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


def _outcome(
    model_path: str, model_name: str, timeout_s: float, result: CaptureResult, finished: Finished, capture_dir: Path
) -> CaptureOutcome:
    status: CaptureStatus = "ok" if result.status == "ok" and finished.exit_code == 0 else "failed"
    error, kind = result.error, result.error_kind
    if finished.timed_out:
        status, kind = "timeout", "CaptureTimeout"
        error = f"timed out after {timeout_s:g} s during '{result.phase}' (raise --timeout to wait longer)"
    elif status == "failed" and not error:
        error = _death_message(finished.exit_code, result.phase, capture_dir / LOG_FILE)
    return CaptureOutcome(
        model_path=model_path,
        model_name=model_name,
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
        model_built=tuple(result.model_built),
        accuracy=result.accuracy,
        divergence=result.divergence,
        log_file=f"{CAPTURE_DIR}/{LOG_FILE}",
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
