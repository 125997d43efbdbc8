"""``inductor-lens report FOLDER`` (a report of any capture, or a re-render) and ``open [FOLDER]``."""

from __future__ import annotations

from pathlib import Path

import click

from .. import api
from .common import finish_comparison, finish_report, lens_command, open_option, out_option, strict_option


@click.command("report")
@click.argument("folder", type=click.Path(path_type=Path))
@out_option(
    "Report folder [default: the folder itself for an inductor-lens report, "
    "else inductor-lens-reports/<name>/]."
)
@strict_option
@open_option("report")
@lens_command
def report_command(
    folder: Path, out_dir: Path | None, strict: bool, open_browser: bool, verbose: bool
) -> None:
    """Build the report from FOLDER: a torch_compile_debug tree (e.g. copied from a GPU machine), a report, or
    TORCH_TRACE logs alone (a folder of them, or one file): graphs rebuilt from the trace."""
    if api.is_comparison(folder):
        finish_comparison(api.rerender_comparison(folder, out_dir), open_browser)
        return
    finish_report(api.report_folder(folder, out_dir, strict=strict), open_browser)


@click.command("open")
@click.argument("folder", type=click.Path(path_type=Path), required=False)
@lens_command
def open_command(folder: Path | None, verbose: bool) -> None:
    """Open a report (default: the newest under inductor-lens-reports/) and print its file URL."""
    click.echo(api.open_report(folder))
