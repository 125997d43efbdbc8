"""inductor-lens: inspect and debug torch.compile / TorchInductor.

The pipeline, one package or module per stage, in the order the data flows:

    capture/    run a model file under torch.compile in the model process (TORCH_COMPILE_DEBUG, TORCH_TRACE)
    worker/     the process boundary: what runs in a process of its own (the model, the hand-written
                kernels' checks), its supervisor, and the files that cross the boundary
    parse/      read a debug folder and trace log into records, through a registry of small parsers
    records/    the one data model (frozen dataclasses, saved as lens.json)
    bench/      timings joined to the records: attribution, roofline (measured in worker/measure.py)
    handwritten/  hand-written Triton kernels matched to Inductor's, checked and timed in a worker
    compare/    several configurations or two reports of one model: kernel diff, verdict, evidence
    report/     render the static HTML report from records alone

``pipeline`` composes the stages once (``build_run``); ``api`` is the public façade over them;
``cli`` is the command line on top of ``api``. Importing this package imports none of them: the
names below load on first use, so a worker (``python -m inductor_lens.worker``) stays free of the
report and Jinja2.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .api import (
        ReportResult,
        build_run,
        compile_model,
        inspect,
        inspecting,
        load_run,
        open_report,
        render,
        report_folder,
    )
    from .options import CompileSpec
    from .records import CompileRun

_LAZY = {
    "CompileRun": "records",
    "CompileSpec": "options",
    "ReportResult": "api",
    "build_run": "api",
    "compile_model": "api",
    "inspect": "api",
    "inspecting": "api",
    "load_run": "api",
    "open_report": "api",
    "render": "api",
    "report_folder": "api",
}

__all__ = [
    "CompileRun",
    "CompileSpec",
    "ReportResult",
    "__version__",
    "build_run",
    "compile_model",
    "inspect",
    "inspecting",
    "load_run",
    "open_report",
    "render",
    "report_folder",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
