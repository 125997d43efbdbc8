"""The comparison stage, running it: compile one model under each configuration, or gather two reports.

``compare_models`` gives each configuration two model processes on private caches of its own: a cold
one (empty caches; the configuration's normal report, in ``configs/<name>/``), then a warm one on the
caches the first filled (its compile time, and the step timed once more), then the caches are
deleted. ``diff_reports`` takes two existing reports; ``rerender_comparison`` writes a comparison's
pages again. The judging itself (``build_comparison``) works on records only.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from ..capture import PhaseCallback, capture
from ..errors import InputFolderError, LensError, UsageError
from ..options import CompileSpec
from ..pipeline import compile_model, load_run
from ..records import Comparison, CompileRun, Timing
from ..report import render_comparison, write_report
from ..report.folders import (
    COMPARISON_PAGES,
    CONFIGS_DIR,
    LENS_JSON,
    named_out_dir,
    prepare_out_dir,
    relative_link,
    report_name,
    safe_folder_name,
)
from ..worker.files import RESULT_FILE, FileShapeError, read_bench_data
from . import build_comparison
from .configs import ConfigRequest
from .summary import ConfigRun

WARM_CAPTURE_DIR = "capture-warm"


@dataclass(frozen=True)
class ComparisonResult:
    comparison: Comparison
    index: Path
    # the first configuration that failed (the comparison is still written with the others)
    error: LensError | None = None


def compare_models(
    base: CompileSpec,
    requests: Sequence[ConfigRequest],
    out_dir: Path | None = None,
    *,
    strict: bool = False,
    draw: bool = True,
    say: Callable[[str], None] | None = None,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
) -> ComparisonResult:
    """Compile ``base.model_path`` under each configuration, cold then warm, and write the comparison.

    ``base`` gives everything but the mode and options (device, dtype, --train, timeouts, ...).
    """
    if not base.model_path.is_file():
        raise UsageError(f"{base.model_path}: no such model file")
    out_dir = out_dir or named_out_dir(f"{base.model_name}-compare")
    prepare_out_dir(out_dir, replace=COMPARISON_PAGES)
    entries, first_error = [], None
    for request in requests:
        spec = replace(base, mode=request.mode, options=dict(request.options))
        entry, error = _compare_one(
            spec, request, out_dir, strict=strict, draw=draw, say=say, progress=progress, echo=echo
        )
        entries.append(entry)
        if error is not None and first_error is None:  # keeps its kind, so its exit code
            first_error = type(error)(f"configuration {request.name}: {error.message}", hint=error.hint)
    comparison = build_comparison(
        entries, kind="compare", title=base.model_name, model_path=str(base.model_path), notes=_notes(entries)
    )
    index = write_report(render_comparison(comparison), out_dir)
    return ComparisonResult(comparison, index, first_error)


def _compare_one(
    spec: CompileSpec,
    request: ConfigRequest,
    out_dir: Path,
    *,
    strict: bool,
    draw: bool,
    say: Callable[[str], None] | None,
    progress: PhaseCallback | None,
    echo: TextIO | None,
) -> tuple[ConfigRun, LensError | None]:
    folder = out_dir / CONFIGS_DIR / request.name
    report = f"{CONFIGS_DIR}/{request.name}"
    announce = say or (lambda _: None)
    with tempfile.TemporaryDirectory(prefix="inductor-lens-compare-") as caches:
        announce(f"{request.name}: cold compile on empty caches ({request.describe()})")
        result = compile_model(spec, folder, strict=strict, draw=draw, progress=progress, echo=echo,
                               cache_root=Path(caches))  # fmt: skip
        if result.error is not None:
            failed = ConfigRun(request.name, request.mode, dict(request.options), result.run, report,
                               status=result.run.capture.status if result.run.capture else "failed",
                               error=result.error.one_line())  # fmt: skip
            return failed, result.error
        announce(f"{request.name}: warm compile, a second process on the same caches")
        warm_dir = folder / WARM_CAPTURE_DIR
        shutil.rmtree(warm_dir, ignore_errors=True)
        warm_spec = replace(spec, handwritten=False, bench_scope="end_to_end")
        warm = capture(warm_spec, warm_dir, progress=progress, echo=echo, cache_root=Path(caches))
    warm_error = warm.error()
    entry = ConfigRun(
        request.name,
        request.mode,
        dict(request.options),
        result.run,
        report,
        warm_compile_s=warm.outcome.cold_compile_s,
        warm_error=warm_error.one_line() if warm_error else None,
        latency_again=_compiled_latency(warm_dir),
    )
    return entry, None


def _compiled_latency(capture_dir: Path) -> Timing | None:
    """The compiled step's timing a capture measured, if it did (a warm capture of a comparison)."""
    try:
        bench = read_bench_data(capture_dir / RESULT_FILE)
    except FileShapeError:
        return None
    return bench.end_to_end.compiled if bench is not None and bench.end_to_end is not None else None


def _notes(entries: Sequence[ConfigRun]) -> list[str]:
    notes = []
    runs = [e.run for e in entries if e.run is not None]
    devices = {r.environment.device_type for r in runs}
    if devices == {"cpu"}:
        notes.append(
            "These runs were on a CPU: Inductor wrote C++ kernels, and CUDA graphs (reduce-overhead, "
            "max-autotune) and Triton templates do not apply; modes differ far less than on a GPU."
        )
    versions = dict.fromkeys(r.environment.torch_version for r in runs if r.environment.torch_version)
    if len(versions) > 1:
        notes.append(f"The runs come from different torch versions: {', '.join(versions)}.")
    titles = dict.fromkeys(r.title for r in runs)
    if len(titles) > 1:
        notes.append(f"The runs are of different models ({', '.join(titles)}): kernels are matched by FX node names, "
                     "which differ where the models differ.")  # fmt: skip
    return notes


def diff_reports(report_a: Path, report_b: Path, out_dir: Path | None = None) -> ComparisonResult:
    """Compare two existing reports (lens.json) without recompiling; the first is the baseline."""
    runs = [load_run(report_a), load_run(report_b)]
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
    index = write_report(render_comparison(comparison), out_dir)
    return ComparisonResult(comparison, index)


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
        runs: dict[str, CompileRun] = {c.name: load_run(reports[c.name]) for c in stored.configs}
        entries = [
            ConfigRun(c.name, c.mode, dict(c.options), runs[c.name], moved[c.name], status=c.status, error=c.error,
                      warm_compile_s=c.warm_compile_s, warm_error=c.warm_error, latency_again=c.latency_again)
            for c in stored.configs
        ]  # fmt: skip
        comparison = build_comparison(entries, kind=stored.kind, title=stored.title, model_path=stored.model_path,
                                      notes=stored.notes, created=stored.created)  # fmt: skip
    index = write_report(render_comparison(comparison), out_dir)
    return ComparisonResult(comparison, index)
