"""The pipeline, composed once: capture -> parse -> records -> bench -> report.

    build_run(folder, capture_dir)   parse the debug output and attach what the capture measured and
                                     the hand-written equivalents: a CompileRun, nothing written
    compile_model(spec, out_dir)     capture a model, build its run, write its report
    run_script(spec, out_dir)        capture an unchanged script, build its run, write its report
    inspect_model(model, inputs)     capture a model in this process (notebooks), write its report
    inspecting(out_dir)              capture whatever a ``with`` block compiles, write its report
    report_folder(folder, out_dir)   build the run of a folder copied from anywhere (or re-render a
                                     report), optionally timed from a profiler trace recorded elsewhere,
                                     write its report

Every caller (the API, ``compare``, the tests) goes through ``build_run``, so a report built from a
capture folder copied off a GPU box is the report its own machine would have written.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from .bench import attach_measurements
from .bench.answers import attach_answers
from .bench.profile import attach_profile
from .bench.trials import attach_trials
from .capture import (
    CAPTURE_DIR,
    Capture,
    PhaseCallback,
    capture,
    capture_in_process,
    capture_script,
    find_capture_dir,
    script_capture,
)
from .capture import _outcome as capture_outcome
from .capture import _settings as capture_settings
from .capture.inprocess import in_process_capture
from .errors import InputFolderError, LensError, UsageError
from .handwritten.attach import DEFAULT_TIMEOUT_S, attach_handwritten
from .options import CompileSpec, ScriptSpec
from .parse import parse_debug_folder
from .parse.kernel_information import attach_kernel_information
from .parse.layout import DebugLayout
from .parse.module_stacks import attach_module_stacks
from .records import CaptureOutcome, CompileRun, CompileSettings, Environment
from .report import render_report, write_report
from .report.folders import (
    LENS_JSON,
    REPORT_PAGES,
    input_fingerprint,
    named_out_dir,
    prepare_out_dir,
    reusable_run_file,
    write_input_stamp,
)
from .stages import attach_stages
from .worker.files import LOG_FILE, RESULT_FILE, SPEC_FILE, read_capture_result
from .worker.supervisor import Finished


@dataclass(frozen=True)
class ReportResult:
    run: CompileRun
    index: Path
    error: LensError | None = None
    # Seconds spent parsing the debug output and writing the report (not compiling).
    report_s: float | None = None
    # The input was unchanged since the report in the output folder was built: its lens.json was read back.
    reused: bool = False


def build_run(
    folder: Path,
    capture_dir: Path | None,
    *,
    strict: bool = False,
    allow_empty: bool = False,
    title: str | None = None,
    settings: CompileSettings | None = None,
    environment: Environment | None = None,
    capture: CaptureOutcome | None = None,
    run_handwritten: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_stage: Callable[[str], None] | None = None,
    now: Callable[[], dt.datetime] | None = None,
    layout: DebugLayout | None = None,
    kernel_stages: bool = True,
) -> CompileRun:
    """The CompileRun of the debug output under ``folder``, with the measurements and hand-written
    results found in ``capture_dir``; ``run_handwritten`` checks (and on a GPU times) the hand-written
    equivalents now, in a worker, instead of reading earlier results. ``layout``: one rank's files in a
    folder several ranks share. ``kernel_stages=False`` leaves the Triton kernels' compiler stages out (a
    configuration of ``--try``, whose report is read for its numbers: reading SASS is the slow part on a GPU box)."""
    run = parse_debug_folder(
        folder,
        strict=strict,
        allow_empty=allow_empty,
        title=title,
        settings=settings,
        environment=environment,
        capture=capture,
        now=now,
        layout=layout,
    )
    if capture_dir is not None:
        run = attach_kernel_information(run, capture_dir, strict=strict)  # before the costs, which use it
        run = attach_module_stacks(run, capture_dir, strict=strict)
        run = attach_measurements(run, capture_dir, strict=strict)
        if kernel_stages:
            run = attach_stages(run, capture_dir)  # from the Triton cache the capture kept, where it did
    if run_handwritten and on_stage is not None:
        on_stage("hand-written kernels")
    run = attach_handwritten(run, capture_dir, execute=run_handwritten, timeout_s=timeout_s)
    run = attach_trials(run, capture_dir, strict=strict)  # the suggestions tried (--try), kept with the capture
    return attach_answers(run)  # analysis before rendering: the report and lens.json read the same answers


def compile_model(
    spec: CompileSpec,
    out_dir: Path,
    *,
    strict: bool = False,
    draw: bool = True,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
    cache_root: Path | None = None,
    kernel_stages: bool = True,
) -> ReportResult:
    """Compile the model in the model process and write its report; a failed run still gets one.

    ``cache_root`` holds the model process's Inductor and Triton caches and is kept; by default it
    gets fresh ones, deleted after it ends. ``kernel_stages``: as ``build_run``'s.
    """
    if not spec.model_path.is_file():
        raise UsageError(f"{spec.model_path}: no such model file")
    prepare_out_dir(out_dir, replace=(*REPORT_PAGES, CAPTURE_DIR))
    captured = capture(spec, out_dir / CAPTURE_DIR, progress=progress, echo=echo, cache_root=cache_root)
    return _report_capture(captured, out_dir, spec.model_name, spec.handwritten, spec.timeout_s,
                           strict=strict, draw=draw, progress=progress, kernel_stages=kernel_stages)  # fmt: skip


def run_script(
    spec: ScriptSpec,
    out_dir: Path,
    *,
    strict: bool = False,
    draw: bool = True,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
    cache_root: Path | None = None,
    kernel_stages: bool = True,
) -> ReportResult:
    """Run an unchanged script in the script process and write the report of what it compiled (``cache_root``,
    ``kernel_stages``: as ``compile_model``'s)."""
    prepare_out_dir(out_dir, replace=(*REPORT_PAGES, CAPTURE_DIR))
    captured = capture_script(spec, out_dir / CAPTURE_DIR, progress=progress, echo=echo, cache_root=cache_root)
    return _report_capture(captured, out_dir, spec.model_name, spec.handwritten, spec.timeout_s,
                           strict=strict, draw=draw, progress=progress, kernel_stages=kernel_stages)  # fmt: skip


def inspect_model(
    model: Any, inputs: Any, spec: CompileSpec, out_dir: Path, *, strict: bool = False, draw: bool = True
) -> ReportResult:
    """``compile_model`` for a model the caller holds, captured in the caller's process; ``inputs`` as
    ``get_inputs()`` would return them."""
    prepare_out_dir(out_dir, replace=(*REPORT_PAGES, CAPTURE_DIR))
    captured = capture_in_process(spec, out_dir / CAPTURE_DIR, model, inputs)
    return _report_capture(captured, out_dir, spec.model_name, spec.handwritten, spec.timeout_s,
                           strict=strict, draw=draw, progress=None)  # fmt: skip


@dataclass
class Inspection:
    """What ``inspecting`` yields: the report, once the ``with`` block has ended."""

    out_dir: Path
    result: ReportResult | None = None


@contextlib.contextmanager
def inspecting(out_dir: Path, *, title: str = "capture", strict: bool = False, draw: bool = True) -> Iterator[Inspection]:
    """Capture every torch.compile made inside the block (the caller's own calls, in its own process),
    and write the report when it ends: graphs and kernels, not timed (``inspect`` times a model)."""
    prepare_out_dir(out_dir, replace=(*REPORT_PAGES, CAPTURE_DIR))
    inspection = Inspection(out_dir)
    with in_process_capture(out_dir / CAPTURE_DIR):
        yield inspection
    run = build_run(out_dir, out_dir / CAPTURE_DIR, strict=strict, allow_empty=True, title=title)
    inspection.result = ReportResult(run=run, index=render(run, out_dir, draw=draw))


def _report_capture(
    captured: Capture,
    out_dir: Path,
    title: str,
    handwritten: bool,
    timeout_s: float,
    *,
    strict: bool,
    draw: bool,
    progress: PhaseCallback | None,
    kernel_stages: bool = True,
) -> ReportResult:
    """The run of a capture just made, and its report; a failed capture still gets one."""
    started = time.perf_counter()

    def stage(name: str) -> None:
        if progress is not None:
            progress(name, time.perf_counter() - started)

    run = build_run(
        out_dir,
        out_dir / CAPTURE_DIR,
        strict=strict,
        allow_empty=True,
        title=title,
        settings=captured.settings,
        environment=captured.environment,
        capture=captured.outcome,
        run_handwritten=handwritten and captured.error() is None,
        timeout_s=timeout_s,
        on_stage=stage,
        kernel_stages=kernel_stages,
    )
    index = render(run, out_dir, draw=draw)
    return ReportResult(run=run, index=index, error=captured.error(), report_s=time.perf_counter() - started)


def report_folder(
    folder: Path,
    out_dir: Path | None = None,
    *,
    strict: bool = False,
    draw: bool = True,
    profile: Path | None = None,
    compile_stages: bool = False,
) -> ReportResult:
    """Build a report from a folder holding a torch_compile_debug tree, or re-render a lens.json; with
    ``profile``, timed from that profiler trace (recorded elsewhere) instead of what the capture measured;
    with ``compile_stages``, each Triton kernel without compiler stages from the capture's cache is compiled
    here for the capture's GPU (``inductor_lens/stages``).

    Where ``out_dir`` already holds the report of exactly this input (same files, sizes and times, same
    inductor-lens), its lens.json is read back instead of parsing the capture again."""
    started = time.perf_counter()
    is_report = (folder / LENS_JSON).is_file()
    if out_dir is None:
        out_dir = folder if is_report else named_out_dir(folder.resolve().name)
    fingerprint = input_fingerprint(folder, skip=out_dir, strict=strict)
    if profile is not None:
        fingerprint = input_fingerprint(profile, strict=strict) + fingerprint
    reusable = reusable_run_file(out_dir, fingerprint)
    run = _read_reusable(reusable) if reusable is not None else None
    reused = run is not None
    if run is None:
        run = _build_for_report(folder, load_run(folder) if is_report else None, strict)
        if profile is not None:
            run = attach_answers(attach_profile(run, profile))
    if compile_stages:
        run = attach_stages(run, find_capture_dir(folder), compile_missing=True)
    prepare_out_dir(out_dir, replace=REPORT_PAGES)
    index = render(run, out_dir, draw=draw)
    write_input_stamp(out_dir, fingerprint)
    return ReportResult(run=run, index=index, report_s=time.perf_counter() - started, reused=reused)


def _build_for_report(folder: Path, previous: CompileRun | None, strict: bool) -> CompileRun:
    try:
        if previous is not None:
            run = build_run(
                folder,
                folder / CAPTURE_DIR,
                strict=strict,
                title=previous.title,
                settings=previous.settings,
                environment=previous.environment,
                capture=previous.capture,
            )
            # stages compiled here earlier (report --compile-stages) are in lens.json only
            found = {(s.graph_id, s.kernel) for s in run.kernel_stages}
            kept = tuple(s for s in previous.kernel_stages if (s.graph_id, s.kernel) not in found)
            return replace(run, kernel_stages=run.kernel_stages + kept)
        # a capture folder copied off a GPU box carries its measurements (capture.json, profile_trace.json),
        # the hand-written kernels' results (handwritten.json), and what its own report was built from: the
        # outcome, environment and settings of capture.json and spec.json
        capture_dir = find_capture_dir(folder)
        copied = read_copied_capture(capture_dir) if capture_dir is not None else None
        if copied is None:
            return build_run(folder, capture_dir, strict=strict)
        return build_run(
            folder,
            capture_dir,
            strict=strict,
            title=copied.outcome.model_name,
            settings=copied.settings,
            environment=copied.environment,
            capture=copied.outcome,
        )
    except InputFolderError:
        if previous is None:
            raise
        return previous  # a report copied without its capture/ folder: re-render what lens.json holds


def read_copied_capture(capture_dir: Path) -> Capture | None:
    """The Capture a capture folder's own run reported (its outcome, environment and settings), read back from
    the spec.json and capture.json it holds; None where either is missing or unreadable (the report is then built
    from the debug output alone). The exit code and wall time are the model process's own: ``ok`` exited 0."""
    try:
        spec_text = (capture_dir / SPEC_FILE).read_text(encoding="utf-8")
        result = read_capture_result(capture_dir / RESULT_FILE)
        if result is None:
            return None
        finished = Finished(exit_code=0 if result.status == "ok" else None, timed_out=False, wall_s=result.wall_s or 0.0)
        if json.loads(spec_text).get("kind") == "script":
            return script_capture(ScriptSpec.from_json(spec_text), result, finished, capture_dir)
        spec = CompileSpec.from_json(spec_text)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError, LensError):
        return None
    outcome = capture_outcome(str(spec.model_path), spec.model_name, spec.timeout_s, result, finished, capture_dir)
    if outcome.status == "failed" and not result.error:
        outcome = replace(outcome, error=f"the model process stopped during '{result.phase}' (see {LOG_FILE})")
    return Capture(outcome, result.environment, capture_settings(spec, result), capture_dir)


def _read_reusable(path: Path) -> CompileRun | None:
    try:
        return load_run(path)
    except InputFolderError:
        return None  # unreadable: parse again


def render(run: CompileRun, out_dir: Path, *, draw: bool = True) -> Path:
    """Write the report of ``run`` (pages and lens.json) into ``out_dir``; returns its index.html. A run read from
    an older lens.json, which has no answers, gets them here, so its pages and its new lens.json agree."""
    if run.answers is None:
        run = attach_answers(run)
    return write_report(render_report(run, draw=draw), out_dir)


def load_run(path: Path) -> CompileRun:
    """A CompileRun from ``lens.json`` (or a report folder holding one)."""
    file = path / LENS_JSON if path.is_dir() else path
    try:
        return CompileRun.from_json(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFolderError(f"{path}: no {LENS_JSON} found") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise InputFolderError(f"{file}: not a readable {LENS_JSON} ({exc})") from exc
