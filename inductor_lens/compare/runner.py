"""The comparison stage, running it: compile one model under each configuration, or gather two reports.

``compare_models`` gives each configuration private Inductor and Triton caches of its own, kept for the
whole comparison. First each configuration compiles in a cold process on its empty caches (its normal
report, in ``configs/<name>/``). Then come R warm rounds, interleaved: every round runs each
configuration's warm process once (on the caches its cold process filled: its warm compile time and
the compiled step timed again, nothing else), in an order rotated every round, so that drift of the
machine hits every configuration alike (compare/noise.py turns the round medians into noise). The
warm processes write to ``configs/<name>/warm-rounds/<k>/``; the caches are deleted at the end.

With a ``Budget`` (``--try-budget``), a process starts only where one like it, timed earlier in the same
comparison, would end in time, and rounds come before more configurations: a configuration's cold process
starts only where it and ``MIN_ROUNDS`` rounds of every configuration so far would still fit (a warm process
estimated as the longest cold model process less its compile, at least a quarter of it); the others are left out
(``skipped``), and the rounds stop early (the comparison says how many were done).

``diff_reports`` takes two existing reports; ``rerender_comparison`` writes a comparison's pages
again. Both first bring each configuration's report up to date in place (``current_run``), so that the
comparison's links open pages rendered from the run the comparison read, by this inductor-lens, never an
older render. The judging itself (``build_comparison``) works on records only.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from ..analysis import analyze_comparison
from ..capture import Capture, PhaseCallback, capture, capture_script
from ..errors import InputFolderError, LensError, UsageError
from ..exchange.files import RESULT_FILE, FileShapeError, read_bench_data
from ..options import CompileSpec, ScriptSpec
from ..parse.layout import WARM_ROUNDS_DIR
from ..pipeline import ReportResult, build_run, compile_model, load_run, report_folder, run_script
from ..records import Comparison, CompileRun, RoundMeasure, Timing
from ..report import render_comparison, write_report
from ..report.folders import (
    COMPARISON_PAGES,
    CONFIGS_DIR,
    LENS_JSON,
    locked_out_dir,
    named_out_dir,
    prepare_out_dir,
    relative_link,
    report_name,
    safe_folder_name,
)
from . import build_comparison
from .configs import ConfigRequest, settings_text
from .noise import DEFAULT_ROUNDS, MIN_ROUNDS, rotated
from .summary import ConfigRun


@dataclass(frozen=True)
class ComparisonResult:
    comparison: Comparison
    index: Path
    # the first configuration that failed (the comparison is still written with the others)
    error: LensError | None = None
    skipped: tuple[str, ...] = ()  # configurations left out for the budget
    rounds_done: int = 0


@dataclass
class Budget:
    """Wall seconds a comparison may take, from its creation: a process is started only when the estimate of its
    length (the longest like it so far) ends within them."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def fits(self, estimate_s: float) -> bool:
        return time.monotonic() + estimate_s <= self.started + self.seconds


def compare_models(
    base: CompileSpec | ScriptSpec,
    requests: Sequence[ConfigRequest],
    out_dir: Path | None = None,
    *,
    rounds: int = DEFAULT_ROUNDS,
    strict: bool = False,
    draw: bool = True,
    say: Callable[[str], None] | None = None,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
    budget: Budget | None = None,
    cold_scope: str = "full",
) -> ComparisonResult:
    """Compile ``base.model_path`` under each configuration (cold), time them all in ``rounds`` interleaved
    warm rounds, and write the comparison.

    ``base`` gives everything the configurations do not set (device, dtype, --train, timeouts, ...); a
    ScriptSpec runs an unchanged script under each configuration (``run --try``), its step timed from the
    profiled window (``_script_step``).
    ``cold_scope``: what the cold processes measure ("end_to_end": the step, memory and accuracy, no profile
    and no hand-written kernels: what ``--try`` needs). The first configuration always runs, whatever ``budget``.
    """
    if not base.model_path.is_file():
        raise UsageError(f"{base.model_path}: no such model file")
    if rounds < MIN_ROUNDS:
        raise UsageError(f"--rounds must be at least {MIN_ROUNDS}: the noise is the spread of the rounds")
    out_dir = out_dir or named_out_dir(f"{base.model_name}-compare")
    with locked_out_dir(out_dir, f"compare {base.model_path}"):
        prepare_out_dir(out_dir, replace=COMPARISON_PAGES)
        return _compare(base, requests, out_dir, rounds=rounds, strict=strict, draw=draw, say=say, progress=progress,
                        echo=echo, budget=budget, cold_scope=cold_scope)  # fmt: skip


def _compare(
    base: CompileSpec | ScriptSpec,
    requests: Sequence[ConfigRequest],
    out_dir: Path,
    *,
    rounds: int,
    strict: bool,
    draw: bool,
    say: Callable[[str], None] | None,
    progress: PhaseCallback | None,
    echo: TextIO | None,
    budget: Budget | None,
    cold_scope: str,
) -> ComparisonResult:
    """``compare_models`` in a folder it holds alone."""
    announce = say or (lambda _: None)
    entries: dict[str, ConfigRun] = {}
    first_error: LensError | None = None
    skipped: list[str] = []
    cold_s: list[float] = []
    warm_s = 0.0  # the estimate of one warm process
    rounds_done = 0
    with ExitStack() as stack:
        caches: dict[str, Path] = {}
        specs: dict[str, CompileSpec | ScriptSpec] = {}
        for request in requests:
            spec = request.apply(base)
            if cold_scope != "full":
                spec = (replace(spec, bench_scope=cold_scope, handwritten=False) if isinstance(spec, CompileSpec)
                        else replace(spec, handwritten=False))  # fmt: skip
            if budget is not None and cold_s and not budget.fits(max(cold_s) + MIN_ROUNDS * (len(caches) + 1) * warm_s):
                announce(f"{request.name}: left out, the budget of {budget.seconds:.0f} s would not hold its cold "
                         f"compile (the longest so far took {max(cold_s):.0f} s) and {MIN_ROUNDS} warm rounds "
                         f"(about {warm_s:.0f} s a process)")  # fmt: skip
                skipped.append(request.name)
                continue
            cache = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="inductor-lens-compare-")))
            announce(f"{request.name}: cold compile on empty caches ({request.describe()})")
            started = time.monotonic()
            entry, error = _cold(spec, request, out_dir, cache, strict=strict, draw=draw, progress=progress, echo=echo,
                                 kernel_stages=cold_scope == "full")  # fmt: skip
            cold_s.append(time.monotonic() - started)
            # a warm process: the cold one's model process less its compile (no report is built for it)
            capture = entry.run.capture if entry.run is not None else None
            process_s = capture.wall_s if capture is not None and capture.wall_s else cold_s[-1]
            compiling = capture.cold_compile_s if capture is not None and capture.cold_compile_s else 0.0
            warm_s = max(warm_s, process_s - compiling, process_s / 4)
            entries[request.name] = entry
            if error is not None:
                if first_error is None:  # keeps its kind, so its exit code
                    first_error = type(error)(f"configuration {request.name}: {error.message}", hint=error.hint)
                continue
            caches[request.name], specs[request.name] = cache, spec
        measured: dict[str, list[RoundMeasure]] = {name: [] for name in caches}
        round_s = warm_s * len(caches)
        for number in range(1, rounds + 1):
            if budget is not None and not budget.fits(round_s):
                announce(f"rounds: stopped after {number - 1} of {rounds}, the budget of {budget.seconds:.0f} s would "
                         f"not hold another (about {round_s:.0f} s)")  # fmt: skip
                break
            started = time.monotonic()
            order = rotated(list(caches), number)
            for position, name in enumerate(order, 1):
                announce(f"round {number} of {rounds}: {name}, a warm process on its caches ({position} of {len(order)})")
                folder = out_dir / CONFIGS_DIR / name / WARM_ROUNDS_DIR / str(number)
                measured[name].append(_warm(specs[name], folder, caches[name], number, position, progress, echo))
            round_s, rounds_done = time.monotonic() - started, number
    for name, found in measured.items():
        errors = [r.error for r in found if r.error]
        entries[name] = replace(entries[name], rounds=tuple(found), warm_error=errors[0] if errors else None)
    ordered = [entries[r.name] for r in requests if r.name in entries]
    notes = _notes(ordered)
    if skipped and budget is not None:  # only the budget leaves a configuration out
        notes.append(f"Left out for the budget of {budget.seconds:.0f} s: {', '.join(skipped)}.")
    if rounds_done < rounds:
        notes.append(f"{rounds_done} of the {rounds} warm rounds asked for were run, within the budget.")
    comparison = build_comparison(ordered, kind="compare", title=base.model_name, model_path=str(base.model_path),
                                  notes=notes)  # fmt: skip
    index = _write_comparison(comparison, out_dir)
    return ComparisonResult(comparison, index, first_error, tuple(skipped), rounds_done)


def _cold(
    spec: CompileSpec | ScriptSpec,
    request: ConfigRequest,
    out_dir: Path,
    cache: Path,
    *,
    strict: bool,
    draw: bool,
    progress: PhaseCallback | None,
    echo: TextIO | None,
    kernel_stages: bool = True,
) -> tuple[ConfigRun, LensError | None]:
    """The configuration's cold process (its report), on the empty caches ``cache``, which it fills."""
    folder = out_dir / CONFIGS_DIR / request.name
    report = f"{CONFIGS_DIR}/{request.name}"
    shutil.rmtree(folder / WARM_ROUNDS_DIR, ignore_errors=True)
    result: ReportResult
    if isinstance(spec, ScriptSpec):
        result = run_script(spec, folder, strict=strict, draw=draw, progress=progress, echo=echo, cache_root=cache,
                            kernel_stages=kernel_stages, first_report=False)  # fmt: skip
    else:
        # a configuration's report is read when the comparison is done: written once, whole
        result = compile_model(spec, folder, strict=strict, draw=draw, progress=progress, echo=echo, cache_root=cache,
                               kernel_stages=kernel_stages, first_report=False)  # fmt: skip
    if result.error is not None:
        failed = ConfigRun(request.name, request.mode, dict(request.options), result.run, report,
                           status=result.run.capture.status if result.run.capture else "failed",
                           error=result.error.one_line(), settings=settings_text(request))  # fmt: skip
        return failed, result.error
    return ConfigRun(request.name, request.mode, dict(request.options), result.run, report), None


def _warm(
    spec: CompileSpec | ScriptSpec,
    folder: Path,
    cache: Path,
    number: int,
    position: int,
    progress: PhaseCallback | None,
    echo: TextIO | None,
) -> RoundMeasure:
    """One warm process: the compile on the filled caches, and the compiled step timed (nothing else)."""
    shutil.rmtree(folder, ignore_errors=True)
    warm: Capture
    if isinstance(spec, ScriptSpec):
        warm = capture_script(replace(spec, handwritten=False), folder, progress=progress, echo=echo, cache_root=cache)
        latency, eager, unmeasured = _script_step(folder, warm), None, None
    else:
        warm_spec = replace(spec, handwritten=False, bench_scope="end_to_end", accuracy="off")
        warm = capture(warm_spec, folder, progress=progress, echo=echo, cache_root=cache)
        latency, eager, unmeasured = _latencies(folder)
    error = warm.error()
    if latency is None:
        why = error.one_line() if error else "the warm process measured no compiled step" + (
            f": {unmeasured}" if unmeasured else "")
        return RoundMeasure(number, position, Timing(0.0, 0.0, 0.0, 0, ""), None, warm.outcome.cold_compile_s, why)
    return RoundMeasure(number, position, latency, eager, warm.outcome.cold_compile_s,
                        error.one_line() if error else None)  # fmt: skip


def _latencies(capture_dir: Path) -> tuple[Timing | None, Timing | None, str | None]:
    """The compiled and the eager step's timings a warm process measured, if it did, else why not."""
    try:
        bench = read_bench_data(capture_dir / RESULT_FILE)
    except FileShapeError as exc:
        return None, None, f"its measurements cannot be read ({exc})"
    if bench is None or bench.end_to_end is None:
        return None, None, bench.error if bench is not None else None
    return bench.end_to_end.compiled, bench.end_to_end.eager, None


def _script_step(folder: Path, warm: Capture) -> Timing | None:
    """A script's step in a warm process: the median host wall time of its profiled steps (each a call of the first
    compiled function up to the next, under the profiler), as its report works it out."""
    if warm.error() is not None:
        return None
    try:
        run = build_run(folder, folder, allow_empty=True, settings=warm.settings, environment=warm.environment,
                        capture=warm.outcome, kernel_stages=False)  # fmt: skip
    except LensError:
        return None
    step = run.bench.step if run.bench is not None else None
    if step is None or not step.step_wall_us:
        return None
    median_ms = step.step_wall_us / 1e3
    return Timing(median_ms, median_ms, median_ms, step.steps,
                  f"the median host wall time of the script's {step.steps} profiled steps (under the profiler)")  # fmt: skip


def _notes(entries: Sequence[ConfigRun]) -> list[str]:
    notes = []
    runs = [e.run for e in entries if e.run is not None]
    devices = {r.environment.device_type for r in runs}
    if devices == {"cpu"}:
        notes.append(
            "These runs were on a CPU: Inductor wrote C++ kernels, and CUDA graphs (reduce-overhead, "
            "max-autotune) and Triton templates do not apply; modes differ far less than on a GPU."
        )
    return notes


def diff_reports(report_a: Path, report_b: Path, out_dir: Path | None = None) -> ComparisonResult:
    """Compare two existing reports (lens.json) without recompiling; the first is the baseline."""
    runs = [current_run(report_a), current_run(report_b)]
    names = [report_name(report_a), report_name(report_b)]
    if names[0] == names[1]:
        names = [f"{names[0]} (a)", f"{names[1]} (b)"]
    out_dir = out_dir or named_out_dir(safe_folder_name(f"diff-{names[0]}-vs-{names[1]}"))
    prepare_out_dir(out_dir, replace=COMPARISON_PAGES)
    entries = [
        ConfigRun(
            name,
            run.settings.mode if run.settings else "unknown",
            dict(run.settings.options) if run.settings else {},
            run,
            relative_link(folder, out_dir),
        )
        for name, run, folder in zip(names, runs, (report_a, report_b), strict=True)
    ]
    comparison = build_comparison(
        entries,
        kind="diff",
        title=f"{runs[0].title} vs {runs[1].title}" if runs[0].title != runs[1].title else runs[0].title,
        model_path=runs[0].capture.model_path if runs[0].capture else runs[0].source_dir,
        notes=_notes(entries),
    )
    index = _write_comparison(comparison, out_dir)
    return ComparisonResult(comparison, index)


def current_run(folder: Path) -> CompileRun:
    """A configuration's run, its report first brought up to date in place (what ``report FOLDER`` does): the
    comparison's links open its pages, which must show what the comparison read, by the same inductor-lens.
    A report that cannot be rendered again (a read-only copy, say) is read as it is."""
    if not (folder.is_dir() and (folder / LENS_JSON).is_file()):
        return load_run(folder)  # a lens.json given alone, or no report (which load_run says)
    try:
        return report_folder(folder).run
    except (LensError, OSError):
        return load_run(folder)


def _write_comparison(comparison: Comparison, out_dir: Path) -> Path:
    """Analyse the comparison, render its pages and write them; the index page's path."""
    return write_report(render_comparison(comparison, analyze_comparison(comparison)), out_dir)


def rerender_comparison(folder: Path, out_dir: Path | None = None) -> ComparisonResult:
    """Write a comparison's pages again from its lens.json, recomputing the diff and verdict from the
    configurations' own reports where they are all there (e.g. after upgrading inductor-lens)."""
    file = folder / LENS_JSON
    try:
        stored = Comparison.from_json(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InputFolderError(f"{file}: not a readable {LENS_JSON} ({exc})") from exc
    out_dir = out_dir or folder
    if out_dir.resolve() != folder.resolve():
        prepare_out_dir(out_dir, replace=COMPARISON_PAGES)
    reports = {c.name: folder / c.report for c in stored.configs}
    moved = {c.name: relative_link(reports[c.name], out_dir) for c in stored.configs}
    comparison = replace(stored, configs=tuple(replace(c, report=moved[c.name]) for c in stored.configs))
    if all((reports[c.name] / LENS_JSON).is_file() for c in stored.configs):
        runs: dict[str, CompileRun] = {c.name: current_run(reports[c.name]) for c in stored.configs}
        entries = [
            ConfigRun(c.name, c.mode, dict(c.options), runs[c.name], moved[c.name], status=c.status, error=c.error,
                      warm_compile_s=c.warm_compile_s, warm_error=c.warm_error, latency_again=c.latency_again,
                      rounds=c.rounds)
            for c in stored.configs
        ]  # fmt: skip
        comparison = build_comparison(entries, kind=stored.kind, title=stored.title, model_path=stored.model_path,
                                      notes=stored.notes, created=stored.created)  # fmt: skip
    index = _write_comparison(comparison, out_dir)
    return ComparisonResult(comparison, index)
