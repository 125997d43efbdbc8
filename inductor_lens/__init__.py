"""inductor-lens: inspect and debug torch.compile / TorchInductor.

The pipeline, one package or module per stage:

    capture/   run a model file under torch.compile in a child process (TORCH_COMPILE_DEBUG, TORCH_TRACE)
    parse/     read the debug folder into the data model
    records    the data model (frozen dataclasses, saved as lens.json)
    report/    render the static HTML report

``api`` is the public façade over them; ``cli`` is the command line on top of ``api``.
"""

from .api import ReportResult, compile_model, load_run, open_report, render, report_folder
from .options import CompileSpec
from .records import CompileRun
from .version import __version__

__all__ = [
    "CompileRun",
    "CompileSpec",
    "ReportResult",
    "__version__",
    "compile_model",
    "load_run",
    "open_report",
    "render",
    "report_folder",
]
