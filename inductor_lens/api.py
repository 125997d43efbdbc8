"""The public API: a thin façade over the pipeline stages, what the CLI and notebooks call.

Reports
    compile_model(spec, out_dir)      capture -> parse -> bench -> report, returns a ReportResult
    compile_ranks(spec, out, nproc)   the same in N ranks under torchrun: a report per rank, a landing page
    run_script(script_spec(...))      the same for an unchanged script: ``run -- python train.py``
    run_script_ranks(spec, out, opts) the same under torchrun, once per rank: ``run -- torchrun ... train.py``
    inspect(model, *args, **kwargs)   the same in this process, for a notebook: compiled, compared, timed
    inspecting(out)                   ``with`` block: a report of whatever torch.compile it runs
    report_folder(folder)             a report from a debug folder copied from anywhere, or a re-render
    report_ranks(folder)              a folder of several ranks' output: a report per rank and a landing page
    build_run(folder, capture_dir)    the CompileRun alone, nothing written
    render(run, out_dir)              write the HTML report and lens.json of a CompileRun
    load_run(path)                    read a lens.json back into a CompileRun
    open_report(path)                 open a report in the browser
Comparisons
    compare_models(spec, configs)     compile one model under several configurations (cold, then warm rounds)
    diff_reports(a, b)                compare two existing reports without recompiling
    rerender_comparison(folder)       write a comparison's pages again
    try_suggestions(report, top)      run a report's top suggestions as configurations, measured against its own
                                      settings, and add what they gained to the report (``--try N``, ``try``)
Hand-written kernels
    handwritten_kernels()             the catalog
    check_handwritten(name, ...)      run one against its torch reference (CPU: Triton's interpreter)
    bench_handwritten(name, ...)      time it on the GPU next to torch eager and torch.compile
Caches
    cache_info(), check_cache(name), clear_cache(name)   Inductor's, Triton's and the hand-written kernels' caches
"""

from __future__ import annotations

import contextlib
import webbrowser
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .caches import CLEARABLE as CLEARABLE_CACHES
from .caches import CacheInfo, ClearResult, cache_info, check_cache
from .caches import clear as clear_cache
from .compare.configs import ConfigRequest, requested_configs
from .compare.runner import ComparisonResult, compare_models, diff_reports, rerender_comparison
from .compare.trials import TryResult, try_suggestions
from .config_options import check_inductor_options
from .errors import DeviceError, KernelCheckError, UsageError
from .handwritten import catalog
from .handwritten.equivalent import Equivalent
from .options import CompileSpec, ScriptSpec, normalize_dtype, script_spec
from .pipeline import (
    Inspection,
    ReportResult,
    build_run,
    compile_model,
    inspect_model,
    load_run,
    render,
    report_folder,
    run_script,
)
from .pipeline import inspecting as pipeline_inspecting
from .ranked import RankedResult, compile_ranks, is_ranked, report_ranks, run_script_ranks
from .report.folders import find_index, is_comparison, named_out_dir, run_folder_name
from .units import format_age, format_bytes
from .worker.handwritten import check
from .worker.handwritten.check import CheckResult

__all__ = [
    "CLEARABLE_CACHES",
    "CacheInfo",
    "CheckResult",
    "ClearResult",
    "ComparisonResult",
    "CompileSpec",
    "ConfigRequest",
    "Equivalent",
    "Inspection",
    "RankedResult",
    "ReportResult",
    "ScriptSpec",
    "TryResult",
    "bench_handwritten",
    "build_run",
    "cache_info",
    "check_cache",
    "check_handwritten",
    "clear_cache",
    "compare_models",
    "compile_model",
    "compile_ranks",
    "default_report_dir",
    "default_script_report_dir",
    "diff_reports",
    "format_age",
    "format_bytes",
    "handwritten_kernels",
    "inspect",
    "inspecting",
    "is_comparison",
    "is_ranked",
    "load_run",
    "open_report",
    "render",
    "report_folder",
    "report_ranks",
    "requested_configs",
    "rerender_comparison",
    "run_script",
    "run_script_ranks",
    "script_spec",
    "try_suggestions",
]


def default_report_dir(spec: CompileSpec) -> Path:
    """Where ``compile`` writes a report unless told: ``inductor-lens-reports/<model>-<mode>/``, with what else
    sets the run apart (``-train``, the dtype, ``-dynamic``, the options: ``run_folder_name``)."""
    return named_out_dir(run_folder_name(spec.model_name, mode=spec.mode, train=spec.train, dtype=spec.dtype,
                                         dynamic=spec.dynamic, options=spec.options))  # fmt: skip


def default_script_report_dir(spec: ScriptSpec) -> Path:
    """Where ``run`` writes a report unless told: ``inductor-lens-reports/<script>-run/``, with a mode other than
    the default, ``-dynamic`` and the options where given."""
    return named_out_dir(run_folder_name(f"{spec.model_name}-run", mode=None if spec.mode == "default" else spec.mode,
                                         dynamic=spec.dynamic, options=spec.options))  # fmt: skip


def inspect(
    model: Any,
    *args: Any,
    mode: str = "default",
    options: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    inputs: Any = None,
    train: bool = False,
    dtype: str | None = None,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    accuracy: str = "fp64",
    bench: bool = True,
    handwritten: bool = True,
    strict: bool = False,
    **kwargs: Any,
) -> ReportResult:
    """Compile ``model`` on ``model(*args, **kwargs)`` in this process and write the report ``compile`` writes.

    The model and its inputs stay on their device. ``inputs`` replaces ``args``/``kwargs`` where they would
    clash with these parameters' names, or to make several calls: anything ``get_inputs()`` may return.
    A failure (the model raised, the compile failed) still writes a report; ``ReportResult.error`` says why.
    """
    calls = inputs if inputs is not None else (tuple(args), dict(kwargs)) if kwargs else tuple(args)
    name = getattr(model, "__name__", None) or type(model).__name__
    spec = CompileSpec(
        model_path=Path(f"{name}.py"),
        mode=mode,
        options=check_inductor_options(options or {}),
        train=train,
        device=_device_of(model, calls),
        dtype=normalize_dtype(dtype),
        fullgraph=fullgraph,
        dynamic=dynamic,
        bench=bench,
        handwritten=handwritten,
        accuracy=accuracy,
    )
    out_dir = Path(out) if out is not None else default_report_dir(spec)
    return inspect_model(model, calls, spec, out_dir, strict=strict)


def inspecting(out: str | Path, *, title: str = "capture", strict: bool = False) -> contextlib.AbstractContextManager[Inspection]:
    """``with inductor_lens.inspecting("reports/x") as seen: ...``: every torch.compile the block runs is
    captured in this process; when it ends, ``seen.result`` holds the report (graphs and kernels, not timed)."""
    return pipeline_inspecting(Path(out), title=title, strict=strict)


def _device_of(model: Any, inputs: Any) -> str:
    """``cuda`` where the model or any input tensor is on a GPU, else ``cpu``: nothing is moved."""
    import torch

    tensors = [x for x in torch.utils._pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters())[:1]
    return "cuda" if any(t.is_cuda for t in tensors) else "cpu"


def open_report(path: Path | None = None) -> str:
    """Open a report in the browser (default: the newest); returns its file URL (printed for machines without one)."""
    url = find_index(path).resolve().as_uri()
    with contextlib.suppress(webbrowser.Error):
        webbrowser.open(url)
    return url


def handwritten_kernels() -> tuple[Equivalent, ...]:
    """Every hand-written kernel: what it computes, its shape's dimensions, its dtypes and tolerances."""
    return catalog.EQUIVALENTS


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
) -> tuple[Equivalent, dict[str, int], str]:
    """The kernel, its shape (given, or the catalog's default for a check or a benchmark) and dtype."""
    equivalent = catalog.get(name)
    values = (
        catalog.parse_shape(shape) if shape else equivalent.bench_shape if bench else equivalent.default_shape
    )
    return equivalent, equivalent.shape(values), catalog.kernel_dtype(dtype)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
