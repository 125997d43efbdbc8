"""``inductor-lens compare MODEL`` (several configurations of one model) and ``diff A B`` (two reports)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .. import api
from ..compare.noise import DEFAULT_ROUNDS, MIN_ROUNDS
from .common import (
    finish_comparison,
    lens_command,
    model_options,
    open_option,
    out_option,
    show_progress,
    spec_from_options,
)


@click.command("compare")
@click.argument("model", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--mode",
    "modes",
    multiple=True,
    help="A configuration named after its mode (repeatable); any mode of the installed torch.",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="NAME:KEY=VALUE,...",
    help="A named set of Inductor options, e.g. epilogue:max_autotune=true,epilogue_fusion=true "
    "(mode=... picks the mode; repeatable). With no --mode and no --config: every mode of the installed torch.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=MIN_ROUNDS),
    default=DEFAULT_ROUNDS,
    show_default=True,
    help="Warm rounds: each round runs every configuration's warm process once (order rotated each round); "
    "a configuration's step is the median of its round medians (with 2 rounds, of those and the cold "
    "process's: a median of two is their mean, which one bad round would set), and their spread is the "
    "noise a difference must beat.",
)
@out_option("Comparison folder [default: inductor-lens-reports/<model>-compare/].")
@model_options
@lens_command
def compare_command(
    model: Path,
    modes: tuple[str, ...],
    configs: tuple[str, ...],
    rounds: int,
    out_dir: Path | None,
    strict: bool,
    open_browser: bool,
    verbose: bool,
    **model_settings: Any,
) -> None:
    """Compile MODEL under several modes and option sets (each once, cold), time them in interleaved warm
    rounds, and compare them."""
    requests = api.requested_configs(modes, configs)
    spec = spec_from_options(model, "default", {}, **model_settings)
    names = ", ".join(r.name for r in requests)
    click.echo(f"inductor-lens: comparing {model} under {len(requests)} configurations ({names})", err=True)
    result = api.compare_models(
        spec,
        requests,
        out_dir,
        rounds=rounds,
        strict=strict,
        say=lambda line: click.echo(f"inductor-lens: {line}", err=True),
        progress=None if verbose else show_progress,
        echo=sys.stderr if verbose else None,
    )
    finish_comparison(result, open_browser)


@click.command("diff")
@click.argument("report_a", type=click.Path(path_type=Path))
@click.argument("report_b", type=click.Path(path_type=Path))
@out_option("Comparison folder [default: inductor-lens-reports/diff-<a>-vs-<b>/].")
@open_option("comparison")
@lens_command
def diff_command(
    report_a: Path, report_b: Path, out_dir: Path | None, open_browser: bool, verbose: bool
) -> None:
    """Compare two existing reports (REPORT_A is the baseline) without recompiling."""
    finish_comparison(api.diff_reports(report_a, report_b, out_dir), open_browser)
