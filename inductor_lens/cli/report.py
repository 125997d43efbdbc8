"""``inductor-lens report FOLDER`` (a report of any capture, or a re-render) and ``open [FOLDER]``."""

from __future__ import annotations

from pathlib import Path

import click

from .. import api
from ..capture import find_capture_dir
from ..errors import UsageError
from ..ranked import report_rank
from ..report.folders import LENS_JSON
from ..report.timing_view import profile_summary
from .common import (
    finish_comparison,
    finish_ranked,
    finish_report,
    lens_command,
    open_option,
    out_option,
    show_progress,
    strict_option,
)


@click.command("report")
@click.argument("folder", type=click.Path(path_type=Path))
@out_option(
    "Report folder [default: the folder itself for an inductor-lens report, "
    "else inductor-lens-reports/<name>/]."
)
@click.option(
    "--profile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Time the report from this torch.profiler Chrome trace (.json or .json.gz), recorded elsewhere by "
    "export_chrome_trace around the same model; replaces the capture's own timings.",
)
@click.option(
    "--compile-stages",
    is_flag=True,
    help="Compile each Triton kernel that has no compiler stages from the capture's own Triton cache here, for "
    "the capture's GPU (no GPU needed; seconds per kernel): its TTIR, TTGIR, LLVM IR, PTX and SASS pages.",
)
@click.option(
    "--rank",
    type=click.IntRange(min=0),
    default=None,
    help="Several ranks: build this rank's full report too (the landing page builds one rank of each group "
    "that compiled the same, the others on demand) and link it from the landing page.",
)
@strict_option
@open_option("report")
@lens_command
def report_command(
    folder: Path,
    out_dir: Path | None,
    profile: Path | None,
    compile_stages: bool,
    rank: int | None,
    strict: bool,
    open_browser: bool,
    verbose: bool,
) -> None:
    """Build the report from FOLDER: a torch_compile_debug tree (e.g. copied from a GPU machine), a report, or
    TORCH_TRACE logs alone (a folder of them, or one file): graphs rebuilt from the trace. A folder of several
    ranks' output (per-rank TORCH_TRACE logs, rank<r>/ folders) gets a report per rank and a landing page."""
    inner = sole_input(folder)
    if inner != folder:
        click.echo(f"inductor-lens: {folder} holds only {inner.name}/: reading that", err=True)
        folder = inner
    if api.is_ranked(folder):
        if profile is not None:
            raise UsageError(f"{folder} holds several ranks: --profile times the report of one capture")
        if rank is not None:
            finish_ranked(report_rank(folder, out_dir, rank, strict=strict), open_browser)
        else:
            finish_ranked(api.report_ranks(folder, out_dir, strict=strict, progress=show_progress), open_browser)
        return
    if rank is not None:
        raise UsageError(f"--rank {rank}: {folder} holds one process's output, not several ranks; leave --rank out")
    if api.is_comparison(folder):
        if profile is not None:
            raise UsageError(f"{folder} is a comparison: --profile times the report of one capture")
        finish_comparison(api.rerender_comparison(folder, out_dir), open_browser)
        return
    result = api.report_folder(folder, out_dir, strict=strict, profile=profile, compile_stages=compile_stages)
    bench = result.run.bench
    if profile is not None and bench is not None and bench.profile is not None:
        click.echo(f"inductor-lens: profile: {profile_summary(bench.profile, bench.device == 'cuda')}", err=True)
    finish_report(result, open_browser)


def sole_input(folder: Path) -> Path:
    """The folder to read for FOLDER: itself, or where it holds nothing but one capture, report, comparison or
    job of several ranks (an archive unpacked into a folder of its own), that one. Read from the outer folder,
    a copied capture would lose its measurements and its own run's settings (only its debug tree is found)."""
    if not folder.is_dir() or find_capture_dir(folder) is not None or (folder / LENS_JSON).is_file():
        return folder
    entries = [entry for entry in folder.iterdir() if not entry.name.startswith(".")]
    if len(entries) != 1 or not entries[0].is_dir():
        return folder
    child = entries[0]
    readable = find_capture_dir(child) is not None or (child / LENS_JSON).is_file()
    return child if readable or api.is_ranked(child) or api.is_comparison(child) else folder


@click.command("open")
@click.argument("folder", type=click.Path(path_type=Path), required=False)
@lens_command
def open_command(folder: Path | None, verbose: bool) -> None:
    """Open a report (default: the newest under inductor-lens-reports/) and print its file URL."""
    click.echo(api.open_report(folder))
