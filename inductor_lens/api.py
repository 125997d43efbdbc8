"""The public API, a thin façade over the pipeline stages: what the CLI and notebooks call.

compile_model(spec)        capture -> parse -> report, returns a ReportResult
report_folder(folder)      parse an existing debug folder (or re-render a report) -> ReportResult
load_run(path)             read a lens.json back into a CompileRun
render(run, out_dir)       write the HTML report and lens.json for a CompileRun
check_handwritten(name...) run a hand-written Triton kernel against its torch reference
bench_handwritten(name...) time it on the GPU next to torch eager and torch.compile
"""

from __future__ import annotations

import contextlib
import shutil
import time
import webbrowser
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .bench import attach_measurements
from .capture import CAPTURE_DIR, capture
from .capture.runner import ProgressCallback
from .errors import DeviceError, InputFolderError, KernelCheckError, LensError, UsageError
from .handwritten import catalog, check
from .handwritten.attach import attach_handwritten
from .handwritten.check import CheckResult
from .options import CompileSpec
from .parse import parse_debug_folder
from .records import CompileRun
from .report import LENS_JSON, render_report, write_report

REPORTS_ROOT = Path("inductor-lens-reports")
# What a report folder holds that this tool wrote and may replace.
_REPORT_PAGES = ("index.html", "log.html", LENS_JSON, "graphs", "kernels")


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
) -> ReportResult:
    """Compile the model in a child process and write its report; a failed run still gets one."""
    if not spec.model_path.is_file():
        raise UsageError(f"{spec.model_path}: no such model file")
    out_dir = out_dir or default_out_dir(spec)
    _prepare_out_dir(out_dir, replace_capture=True)
    captured = capture(spec, out_dir / CAPTURE_DIR, progress=progress, echo=echo)
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
    _prepare_out_dir(out_dir, replace_capture=False)
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


def _prepare_out_dir(out_dir: Path, *, replace_capture: bool) -> None:
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
    for name in (*_REPORT_PAGES, CAPTURE_DIR) if replace_capture else _REPORT_PAGES:
        target = out_dir / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
