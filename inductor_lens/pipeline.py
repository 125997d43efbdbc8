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

A run is built in two phases, and ``build_run`` is both in turn: ``_first_phase`` parses the capture and attaches
what it measured (seconds), ``_slow_phase`` the Triton kernels' compiler stages (cuobjdump and nvdisasm per
kernel) and the hand-written checks (a worker process: minutes). A capture just made (``compile_model``,
``run_script``, ``inspect_model``) gets its report after the first, saying the hand-written kernels are running,
and again after the second.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from .analysis import analyze
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
from .capture.supervisor import Finished
from .errors import InputFolderError, LensError, UsageError
from .exchange.files import LOG_FILE, RESULT_FILE, SPEC_FILE, read_capture_result
from .handwritten.attach import DEFAULT_TIMEOUT_S, attach_handwritten, checks_to_run
from .options import CompileSpec, ScriptSpec
from .parse import parse_debug_folder
from .parse.kernel_information import attach_kernel_information
from .parse.layout import DebugLayout
from .parse.module_stacks import attach_module_stacks
from .records import CaptureOutcome, CompileRun, CompileSettings, Environment
from .report import render_report, write_report
from .report.folders import (
    LENS_JSON,
    claimed_out_dir,
    input_fingerprint,
    named_out_dir,
    reusable_run_file,
    write_input_stamp,
)
from .stages import attach_stages, stages_to_attach
from .worker.inprocess import in_process_capture


@dataclass(frozen=True)
class ReportResult:
    run: CompileRun
    index: Path
    error: LensError | None = None
    # Seconds spent parsing the debug output and writing the report (not compiling).
    report_s: float | None = None
    # The input was unchanged since the report in the output folder was built: its lens.json was read back.
    reused: bool = False
    # Seconds to the first report, written before the slow stages (None: written once, when the run was whole).
    first_report_s: float | None = None


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
    budget_s: float | None = None,
    on_stage: Callable[[str], None] | None = None,
    now: Callable[[], dt.datetime] | None = None,
    layout: DebugLayout | None = None,
    kernel_stages: bool = True,
) -> CompileRun:
    """The CompileRun of the debug output under ``folder``, with the measurements and hand-written
    results found in ``capture_dir``; ``run_handwritten`` checks (and on a GPU times) the hand-written
    equivalents now, in a worker, instead of reading earlier results (``budget_s``: that stage's budget in
    seconds; ``on_stage`` is told of each slow stage and each check). ``layout``: one rank's files in a
    folder several ranks share. ``kernel_stages=False`` leaves the Triton kernels' compiler stages out (a
    configuration of ``--try``, whose report is read for its numbers: reading SASS is the slow part on a GPU box)."""
    run = _first_phase(folder, capture_dir, strict=strict, allow_empty=allow_empty, title=title, settings=settings,
                       environment=environment, capture=capture, run_handwritten=run_handwritten, now=now,
                       layout=layout)  # fmt: skip
    slow = _SlowStages(capture_dir, kernel_stages, timeout_s, budget_s, on_stage)
    return slow.attach(run)


def _first_phase(
    folder: Path,
    capture_dir: Path | None,
    *,
    strict: bool,
    allow_empty: bool,
    title: str | None,
    settings: CompileSettings | None,
    environment: Environment | None,
    capture: CaptureOutcome | None,
    run_handwritten: bool,
    now: Callable[[], dt.datetime] | None = None,
    layout: DebugLayout | None = None,
) -> CompileRun:
    """The run as parsed and measured, without compiler stages or answers; with ``run_handwritten``, its hand-written
    matches unchecked and its status "running" where there are checks to run (``_SlowStages`` runs them)."""
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
    checking = run_handwritten and capture_dir is not None
    # to be checked: matched only, none of the capture's results (a check process writes them afresh)
    run = attach_handwritten(run, None if checking else capture_dir, execute=False)
    if checking and checks_to_run(run):
        run = replace(run, handwritten_status="running")
    return attach_trials(run, capture_dir, strict=strict)  # the suggestions tried (--try), kept with the capture


@dataclass(frozen=True)
class _SlowStages:
    """The second phase of a run: the Triton kernels' compiler stages (``kernel_stages``: from the capture's
    Triton cache) and the hand-written checks of a run whose status is "running", then the answers."""

    capture_dir: Path | None
    kernel_stages: bool
    timeout_s: float = DEFAULT_TIMEOUT_S
    budget_s: float | None = None
    on_stage: Callable[[str], None] | None = None

    def pending(self, run: CompileRun) -> str:
        """What the second phase has to do for ``run``, in words ("" for nothing)."""
        stages = stages_to_attach(run, self.capture_dir) if self.kernel_stages and self.capture_dir is not None else 0
        parts = [f"the compiler stages of {stages} Triton kernel(s)"] if stages else []
        if run.handwritten_status == "running":
            parts.append(f"the hand-written kernels ({checks_to_run(run)} check(s))")
        return ", then ".join(parts)

    def attach(self, run: CompileRun) -> CompileRun:
        """The compiler stages (threads running cuobjdump) beside the hand-written checks (a process): each fills
        fields of its own (``kernel_stages``; ``handwritten``...), so the two run at once, not one after the other,
        and the stages are read before the check process has started timing."""
        with ThreadPoolExecutor(max_workers=1) as pool:
            staged = None
            if self.kernel_stages and self.capture_dir is not None:
                if self.on_stage is not None and (count := stages_to_attach(run, self.capture_dir)):
                    self.on_stage(f"compiler stages of {count} Triton kernel(s)")
                staged = pool.submit(attach_stages, run, self.capture_dir)  # from the Triton cache the capture kept
            if run.handwritten_status == "running":
                on_stage = self.on_stage
                if on_stage is not None:
                    on_stage("hand-written kernels")
                run = attach_handwritten(run, self.capture_dir, execute=True, timeout_s=self.timeout_s,
                                         budget_s=self.budget_s,
                                         on_phase=(lambda name, _: on_stage(name)) if on_stage is not None else None)
                run = replace(run, handwritten_status="done")
            if staged is not None:
                run = replace(run, kernel_stages=staged.result().kernel_stages)
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
    first_report: bool = True,
) -> ReportResult:
    """Compile the model in the model process and write its report; a failed run still gets one.

    ``cache_root`` holds the model process's Inductor and Triton caches and is kept; by default it
    gets fresh ones, deleted after it ends. ``kernel_stages``: as ``build_run``'s. ``first_report``: a report
    written before the slow stages too (compiler stages, hand-written checks), rewritten after them.
    """
    if not spec.model_path.is_file():
        raise UsageError(f"{spec.model_path}: no such model file")
    with claimed_out_dir(out_dir, f"compile {spec.model_path}", fresh_capture=True) as claim:
        captured = capture(spec, out_dir / CAPTURE_DIR, progress=progress, echo=echo, cache_root=cache_root)
        claim.keep_earlier_report(captured.error())
        return _report_capture(captured, out_dir, spec.model_name, spec.handwritten, spec.timeout_s,
                               strict=strict, draw=draw, progress=progress, kernel_stages=kernel_stages,
                               budget_s=spec.handwritten_budget_s, first_report=first_report)  # fmt: skip


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
    first_report: bool = True,
) -> ReportResult:
    """Run an unchanged script in the script process and write the report of what it compiled (``cache_root``,
    ``kernel_stages``, ``first_report``: as ``compile_model``'s)."""
    with claimed_out_dir(out_dir, f"run {spec.command}", fresh_capture=True) as claim:
        captured = capture_script(spec, out_dir / CAPTURE_DIR, progress=progress, echo=echo, cache_root=cache_root)
        claim.keep_earlier_report(captured.error())
        return _report_capture(captured, out_dir, spec.model_name, spec.handwritten, spec.timeout_s,
                               strict=strict, draw=draw, progress=progress, kernel_stages=kernel_stages,
                               budget_s=spec.handwritten_budget_s, first_report=first_report)  # fmt: skip


def inspect_model(
    model: Any, inputs: Any, spec: CompileSpec, out_dir: Path, *, strict: bool = False, draw: bool = True
) -> ReportResult:
    """``compile_model`` for a model the caller holds, captured in the caller's process; ``inputs`` as
    ``get_inputs()`` would return them."""
    with claimed_out_dir(out_dir, f"inspect {spec.model_name}", fresh_capture=True):
        captured = capture_in_process(spec, out_dir / CAPTURE_DIR, model, inputs)
        return _report_capture(captured, out_dir, spec.model_name, spec.handwritten, spec.timeout_s,
                               strict=strict, draw=draw, progress=None, budget_s=spec.handwritten_budget_s)  # fmt: skip


@dataclass
class Inspection:
    """What ``inspecting`` yields: the report, once the ``with`` block has ended."""

    out_dir: Path
    result: ReportResult | None = None


@contextlib.contextmanager
def inspecting(out_dir: Path, *, title: str = "capture", strict: bool = False, draw: bool = True) -> Iterator[Inspection]:
    """Capture every torch.compile made inside the block (the caller's own calls, in its own process),
    and write the report when it ends: graphs and kernels, not timed (``inspect`` times a model)."""
    with claimed_out_dir(out_dir, f"inspecting {title}", fresh_capture=True):
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
    budget_s: float | None = None,
    first_report: bool = True,
) -> ReportResult:
    """The run of a capture just made, and its report; a failed capture still gets one. With ``first_report``, a
    report is written before the slow stages (compiler stages, hand-written checks), and rewritten after them."""
    started = time.perf_counter()

    def stage(name: str) -> None:
        if progress is not None:
            progress(name, time.perf_counter() - started)

    ok = captured.error() is None
    run = _first_phase(out_dir, out_dir / CAPTURE_DIR, strict=strict, allow_empty=True, title=title,
                       settings=captured.settings, environment=captured.environment, capture=captured.outcome,
                       run_handwritten=handwritten and ok)  # fmt: skip
    slow = _SlowStages(out_dir / CAPTURE_DIR, kernel_stages, timeout_s, budget_s, stage)
    first_s = None
    pending = slow.pending(run) if first_report and ok else ""
    if pending:
        index = render(run, out_dir, draw=draw)
        first_s = time.perf_counter() - started
        stage(f"report written: {index} (next: {pending}; the page is rewritten when they are done)")
    run = slow.attach(run)
    index = render(run, out_dir, draw=draw)
    return ReportResult(run=run, index=index, error=captured.error(), report_s=time.perf_counter() - started,
                        first_report_s=first_s)  # fmt: skip


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
    with claimed_out_dir(out_dir, f"report {folder}"):
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
            # stages compiled here earlier (report --compile-stages) are in lens.json only; the hand-written stage
            # ran (or was stopped) where the capture was made, not here
            found = {(s.graph_id, s.kernel) for s in run.kernel_stages}
            kept = tuple(s for s in previous.kernel_stages if (s.graph_id, s.kernel) not in found)
            return replace(run, kernel_stages=run.kernel_stages + kept, handwritten_status=previous.handwritten_status)
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
    an older lens.json, which has no answers, gets them here, so its pages and its new lens.json agree. The
    analysis the pages read is worked out here from the records (``analysis.analyze``), never saved."""
    if run.answers is None:
        run = attach_answers(run)
    return write_report(render_report(run, analyze(run), draw=draw), out_dir)


def load_run(path: Path) -> CompileRun:
    """A CompileRun from ``lens.json`` (or a report folder holding one)."""
    file = path / LENS_JSON if path.is_dir() else path
    try:
        return CompileRun.from_json(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFolderError(f"{path}: no {LENS_JSON} found") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise InputFolderError(f"{file}: not a readable {LENS_JSON} ({exc})") from exc
