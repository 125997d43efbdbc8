"""``inductor-lens try REPORT``: run an existing report's suggestions and add what they gained to it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import api
from ..compare.configs import parse_config
from ..compare.noise import DEFAULT_ROUNDS, MIN_ROUNDS
from ..errors import UsageError
from ..report.folders import CAPTURE_DIR
from .common import finish_report, lens_command, open_option, say, show_progress, strict_option


@click.command("try")
@click.argument("report", type=click.Path(path_type=Path, file_okay=False))
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True,
              help="How many of the report's suggestions that apply as settings to run, best first.")  # fmt: skip
@click.option("--config", "configs", multiple=True, metavar="NAME:KEY=VALUE,...",
              help="A change of your own to try beside them, as compare takes it (mode=..., Inductor options, "
              "matmul_precision=high, autocast=bf16, dynamic=true, dynamo.NAME=VALUE; repeatable).")  # fmt: skip
@click.option("--budget", "budget_s", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
              help="Wall seconds it may take in all: a suggestion whose cold compile would not fit is left out, and "
              "the warm rounds stop early.")  # fmt: skip
@click.option("--rounds", type=click.IntRange(min=MIN_ROUNDS), default=DEFAULT_ROUNDS, show_default=True,
              help="Interleaved warm rounds (as compare): the spread of their medians is the noise a gain must beat.")  # fmt: skip
@strict_option
@open_option("report")
@lens_command
def try_command(
    report: Path,
    top: int,
    configs: tuple[str, ...],
    budget_s: float | None,
    rounds: int,
    strict: bool,
    open_browser: bool,
    verbose: bool,
) -> None:
    """Run REPORT's top suggestions (a report folder of `compile`) as configurations, each measured against the
    report's own settings (cold compile, then interleaved warm rounds), and add what they gained to its first page.

    The model file and the settings are the report's own (its capture/spec.json): the model file must still be
    where it was compiled from. The comparison of the suggestions is written to REPORT/tries/.
    """
    if not (report / CAPTURE_DIR).is_dir():
        raise UsageError(f"{report}: not a report folder of `inductor-lens compile` (no {CAPTURE_DIR}/ in it)")
    asked = [parse_config(text) for text in configs]
    command = f"try --top {top}" + "".join(f" --config {text}" for text in configs)
    say(f"trying the top {top} suggestion(s) of {report}" + (f" (budget {budget_s:.0f} s)" if budget_s else ""))
    tried = api.try_suggestions(report, top, asked=asked, rounds=rounds, budget_s=budget_s, command=command,
                                strict=strict, say=say, progress=None if verbose else show_progress,
                                echo=sys.stderr if verbose else None)  # fmt: skip
    finish_report(api.ReportResult(run=tried.run, index=tried.index), open_browser)
