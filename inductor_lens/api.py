"""The public API, a thin façade over the pipeline stages: what the CLI and notebooks call.

compile_model(spec)        capture -> parse -> report, returns a ReportResult
report_folder(folder)      parse an existing debug folder (or re-render a report) -> ReportResult
load_run(path)             read a lens.json back into a CompileRun
render(run, out_dir)       write the HTML report and lens.json for a CompileRun
compare_models(model, ...) compile one model under several configurations (cold, then warm caches)
diff_reports(a, b)         compare two existing reports without recompiling
check_handwritten(name...) run a hand-written Triton kernel against its torch reference
bench_handwritten(name...) time it on the GPU next to torch eager and torch.compile
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
import webbrowser
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from .bench import attach_measurements
from .capture import CAPTURE_DIR, capture
from .capture.runner import ProgressCallback
from .compare import ConfigRequest, ConfigRun, build_comparison
from .errors import DeviceError, InputFolderError, KernelCheckError, LensError, UsageError
from .handwritten import catalog, check
from .handwritten.attach import attach_handwritten
from .handwritten.check import CheckResult
from .options import CompileSpec
from .parse import parse_debug_folder
from .records import Comparison, CompileRun, Timing, from_jsonable
from .report import LENS_JSON, render_comparison, render_report, write_report

REPORTS_ROOT = Path("inductor-lens-reports")
# What a report folder holds that this tool wrote and may replace.
_REPORT_PAGES = ("index.html", "log.html", LENS_JSON, "graphs", "kernels")
# The same for a comparison: its pages, and the reports of its configurations.
CONFIGS_DIR = "configs"
WARM_CAPTURE_DIR = "capture-warm"
_COMPARISON_PAGES = ("index.html", LENS_JSON, "diffs", CONFIGS_DIR)
_COMPARISON_HEAD = re.compile(r'\s*\{\s*"schema_version"\s*:\s*\d+\s*,\s*"comparison"\s*:')


@dataclass(frozen=True)
class ReportResult:
    run: CompileRun
    index: Path
    error: LensError | None = None
    # Seconds spent parsing the debug output and writing the report (not compiling).
    report_s: float | None = None


def default_out_dir(spec: CompileSpec) -> Path:
    return REPORTS_ROOT / f"{spec.model_name}-{spec.mode}"


def compile_model(
    spec: CompileSpec,
    out_dir: Path | None = None,
    *,
    strict: bool = False,
    draw: bool = True,
    progress: ProgressCallback | None = None,
    echo: TextIO | None = None,
    cache_root: Path | None = None,
) -> ReportResult:
    """Compile the model in a child process and write its report; a failed run still gets one.

    ``cache_root`` holds the child's Inductor and Triton caches and is kept; by default the child
    gets fresh ones, deleted after it ends.
    """
    if not spec.model_path.is_file():
        raise UsageError(f"{spec.model_path}: no such model file")
    out_dir = out_dir or default_out_dir(spec)
    _prepare_out_dir(out_dir, replace=(*_REPORT_PAGES, CAPTURE_DIR))
    captured = capture(spec, out_dir / CAPTURE_DIR, progress=progress, echo=echo, cache_root=cache_root)
    started = time.perf_counter()
    run = parse_debug_folder(
        out_dir,
        strict=strict,
        allow_empty=True,
        title=spec.model_name,
        settings=captured.settings,
        environment=captured.environment,
        capture=captured.outcome,
    )
    run = attach_measurements(run, out_dir / CAPTURE_DIR, strict=strict)
    if progress is not None and spec.handwritten and captured.error() is None:
        progress("hand-written kernels", time.perf_counter() - started)
    run = attach_handwritten(
        run,
        out_dir / CAPTURE_DIR,
        execute=spec.handwritten and captured.error() is None,
        timeout_s=spec.timeout_s,
    )
    index = render(run, out_dir, draw=draw)
    return ReportResult(run=run, index=index, error=captured.error(), report_s=time.perf_counter() - started)


def report_folder(
    folder: Path, out_dir: Path | None = None, *, strict: bool = False, draw: bool = True
) -> ReportResult:
    """Build a report from a folder holding a torch_compile_debug tree, or re-render a lens.json."""
    started = time.perf_counter()
    previous = _previous_run(folder)
    if out_dir is None:
        out_dir = folder if previous is not None else REPORTS_ROOT / (folder.resolve().name or "report")
    try:
        if previous is not None:
            run = parse_debug_folder(
                folder,
                strict=strict,
                title=previous.title,
                settings=previous.settings,
                environment=previous.environment,
                capture=previous.capture,
            )
            run = attach_measurements(run, folder / CAPTURE_DIR, strict=strict)
            run = attach_handwritten(run, folder / CAPTURE_DIR, execute=False)
        else:
            run = parse_debug_folder(folder, strict=strict)
            # a capture folder copied off a GPU box carries its measurements (capture.json, profile_trace.json)
            # and the hand-written kernels' results (handwritten.json)
            capture_dir = next(
                (d for d in (folder / CAPTURE_DIR, folder) if (d / "capture.json").is_file()), None
            )
            if capture_dir is not None:
                run = attach_measurements(run, capture_dir, strict=strict)
            run = attach_handwritten(run, capture_dir, execute=False)
    except InputFolderError:
        if previous is None:
            raise
        run = previous  # a report copied without its capture/ folder: re-render what lens.json holds
    _prepare_out_dir(out_dir, replace=_REPORT_PAGES)
    index = render(run, out_dir, draw=draw)
    return ReportResult(run=run, index=index, report_s=time.perf_counter() - started)


def check_handwritten(name: str, shape: str | None, dtype: str, device: str = "auto") -> CheckResult:
    """Run one hand-written kernel against its torch reference (CPU: under Triton's interpreter)."""
    equivalent, dims, dtype = _kernel_request(name, shape, dtype, bench=False)
    if device == "auto":
        device = "cuda" if _cuda_available() else "cpu"
    elif device == "cuda" and not _cuda_available():
        raise DeviceError("--device cuda: no CUDA device here (use --device cpu for Triton's interpreter)")
    if device == "cpu" and dtype not in equivalent.interpreter_dtypes:
        raise UsageError(f"{name} in {dtype} cannot be checked on a CPU: {equivalent.interpreter_note}")
    try:
        return check.check(name, dims, dtype, device)
    except (RuntimeError, ValueError, TypeError, AssertionError) as exc:
        raise KernelCheckError(f"{name} failed to run: {type(exc).__name__}: {exc}") from exc


def bench_handwritten(
    name: str, shape: str | None, dtype: str, *, compiled: bool = True
) -> check.BenchResult:
    """Time one hand-written kernel, torch eager and torch.compile of its reference on the GPU."""
    _, dims, dtype = _kernel_request(name, shape, dtype, bench=True)
    if not _cuda_available():
        raise DeviceError(
            "handwritten bench needs a CUDA device; `handwritten check --device cpu` runs on a CPU"
        )
    return check.bench(name, dims, dtype, compiled=compiled)


def _kernel_request(
    name: str, shape: str | None, dtype: str, *, bench: bool
) -> tuple[catalog.Equivalent, dict[str, int], str]:
    """The kernel, its shape (given, or the catalog's default for a check or a benchmark) and dtype."""
    equivalent = catalog.get(name)
    values = (
        catalog.parse_shape(shape) if shape else equivalent.bench_shape if bench else equivalent.default_shape
    )
    return equivalent, equivalent.shape(values), catalog.kernel_dtype(dtype)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


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
    progress: ProgressCallback | None = None,
    echo: TextIO | None = None,
) -> ComparisonResult:
    """Compile ``base.model_path`` under each configuration, cold then warm, and write the comparison.

    ``base`` gives everything but the mode and options (device, dtype, --train, timeouts, ...).
    Each configuration gets its own report in ``configs/<name>/`` and its own caches: fresh for the
    cold process, then handed to a second (warm) process, then deleted.
    """
    if not base.model_path.is_file():
        raise UsageError(f"{base.model_path}: no such model file")
    out_dir = out_dir or REPORTS_ROOT / f"{base.model_name}-compare"
    _prepare_out_dir(out_dir, replace=_COMPARISON_PAGES)
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
    progress: ProgressCallback | None,
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
        data = json.loads((capture_dir / "capture.json").read_text(encoding="utf-8"))
        return from_jsonable(Timing, data["bench"]["end_to_end"]["compiled"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


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
    names = [_report_name(report_a), _report_name(report_b)]
    if names[0] == names[1]:
        names = [f"{names[0]} (a)", f"{names[1]} (b)"]
    out_dir = out_dir or REPORTS_ROOT / _safe_folder_name(f"diff-{names[0]}-vs-{names[1]}")
    _prepare_out_dir(out_dir, replace=_COMPARISON_PAGES)
    entries = [
        ConfigRun(
            name,
            run.settings.mode if run.settings else "unknown",
            dict(run.settings.options) if run.settings else {},
            run,
            _relative(folder, out_dir),
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


def is_comparison(folder: Path) -> bool:
    """Whether ``folder`` holds a comparison: its lens.json's top level has "comparison", not "run".

    Only the document's opening is read (``to_json`` writes schema_version, then that key): a run's
    lens.json can be large, and a run whose title says "comparison" must not pass for one.
    """
    try:
        with (folder / LENS_JSON).open(encoding="utf-8") as file:
            head = file.read(200)
    except (OSError, UnicodeDecodeError):
        return False
    return _COMPARISON_HEAD.match(head) is not None


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
        _prepare_out_dir(out_dir, replace=_COMPARISON_PAGES)
    reports = {c.name: folder / c.report for c in stored.configs}
    moved = {c.name: _relative(reports[c.name], out_dir) for c in stored.configs}
    comparison = replace(stored, configs=tuple(replace(c, report=moved[c.name]) for c in stored.configs))
    if all((reports[c.name] / LENS_JSON).is_file() for c in stored.configs):
        entries = [
            ConfigRun(
                c.name,
                c.mode,
                dict(c.options),
                load_run(reports[c.name]),
                moved[c.name],
                status=c.status,
                error=c.error,
                warm_compile_s=c.warm_compile_s,
                warm_error=c.warm_error,
                latency_again=c.latency_again,
            )
            for c in stored.configs
        ]
        comparison = build_comparison(entries, kind=stored.kind, title=stored.title, model_path=stored.model_path,
                                      notes=stored.notes, created=stored.created)  # fmt: skip
    index = write_report(render_comparison(comparison), out_dir)
    return ComparisonResult(comparison, index)


def _relative(folder: Path, base: Path) -> str:
    """``folder`` as a link from pages in ``base`` (a comparison's link to a configuration's report)."""
    return Path(os.path.relpath(folder.resolve(), base.resolve())).as_posix()


def _report_name(folder: Path) -> str:
    folder = folder.parent if folder.name == LENS_JSON else folder
    return folder.resolve().name or "report"


def _safe_folder_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)[:120]


def render(run: CompileRun, out_dir: Path, *, draw: bool = True) -> Path:
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


def open_report(path: Path | None = None) -> str:
    """Open a report in the browser; returns its file URL (printed for machines without one)."""
    index = _find_index(path)
    url = index.resolve().as_uri()
    with contextlib.suppress(webbrowser.Error):
        webbrowser.open(url)
    return url


def _find_index(path: Path | None) -> Path:
    if path is None:
        candidates = sorted(REPORTS_ROOT.glob("*/index.html"), key=lambda p: p.stat().st_mtime)
        if not candidates:
            raise InputFolderError(f"no reports under {REPORTS_ROOT}/; give the report folder to open")
        return candidates[-1]
    index = path / "index.html" if path.is_dir() else path
    if not index.is_file():
        raise InputFolderError(f"{path}: no index.html (not an inductor-lens report)")
    return index


def _previous_run(folder: Path) -> CompileRun | None:
    if (folder / LENS_JSON).is_file():
        return load_run(folder)
    return None


def _prepare_out_dir(out_dir: Path, *, replace: Sequence[str]) -> None:
    """Refuse to write into a folder that holds anything but an earlier report of this tool."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a folder")
    if not out_dir.exists() or not any(out_dir.iterdir()):
        out_dir.mkdir(parents=True, exist_ok=True)
        return
    ours = (out_dir / LENS_JSON).is_file() or (out_dir / CAPTURE_DIR / "spec.json").is_file()
    if not ours:
        raise UsageError(
            f"--out {out_dir} is not empty and holds no inductor-lens report; choose a new or empty folder"
        )
    for name in replace:
        target = out_dir / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
