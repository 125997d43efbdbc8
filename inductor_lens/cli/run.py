"""``inductor-lens run [OPTIONS] -- python SCRIPT ARGS``: an unchanged script, captured and reported."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .. import api
from ..capture.ranks import split_torchrun
from ..config_options import parse_inductor_options
from ..errors import UsageError
from ..options import DEFAULT_TIMEOUT_S
from .common import (
    finish_ranked,
    finish_report,
    lens_command,
    open_option,
    out_option,
    process_settings,
    process_settings_options,
    show_progress,
    strict_option,
    threads_option,
    try_after,
    try_options,
)


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--mode",
    default="default",
    show_default=True,
    help="Applied to each torch.compile call that sets neither a mode nor options of its own.",
)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Inductor option for those calls (repeatable).")  # fmt: skip
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True,
              help="Calls of the first compiled function (or module) before the profiled steps.")  # fmt: skip
@click.option("--steps", type=click.IntRange(min=1), default=10, show_default=True,
              help="Calls of it profiled, each a step up to its next call (backward and optimizer included).")  # fmt: skip
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Seconds before the script's process is killed.")  # fmt: skip
@click.option("--no-bench", is_flag=True, help="Do not profile any step.")
@click.option("--no-handwritten", is_flag=True, help="Skip the hand-written Triton equivalents.")
@click.option("--dynamic/--no-dynamic", default=None,
              help="torch.compile(dynamic=...) for each call that sets no dynamic of its own (default: torch decides).")  # fmt: skip
@threads_option
@process_settings_options("Set before the script runs (a setting the script makes itself, later, wins).",
                          "Entered around each call of a compiled function or module; the script's eager code "
                          "between those calls runs as it is.")  # fmt: skip
@try_options
@out_option("Report folder [default: inductor-lens-reports/<script>-run/, with a --mode other than default, "
            "-dynamic/-static and the --option values where given].")
@strict_option
@open_option("report")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@lens_command
def run_command(
    command: tuple[str, ...],
    mode: str,
    options: tuple[str, ...],
    warmup: int,
    steps: int,
    timeout_s: float,
    no_bench: bool,
    no_handwritten: bool,
    dynamic: bool | None,
    threads: int | None,
    try_top: int | None,
    try_budget_s: float | None,
    out_dir: Path | None,
    strict: bool,
    open_browser: bool,
    verbose: bool,
    **settings: Any,
) -> None:
    """Run COMMAND (python script.py ARGS, or python -m module ARGS) unchanged, and report what it compiled.

    Under torchrun (torchrun OPTIONS script.py ARGS, or python -m torch.distributed.run ...), every rank is
    captured on its own, with a report per rank and a page that says where the ranks diverged.

    Every torch.compile call it makes is captured (debug output, TORCH_TRACE, fresh caches); those that set
    no mode or options of their own get --mode/--option. A window of steps is profiled: the calls of the
    first compiled function or module it calls, after --warmup of them. The script's output is shown as it runs.
    """
    torchrun = split_torchrun(command)
    spec = api.script_spec(
        torchrun[1] if torchrun else command, Path.cwd(), mode=mode, options=parse_inductor_options(options),
        warmup=warmup, steps=steps, timeout_s=timeout_s, bench=not no_bench, handwritten=not no_handwritten,
        threads=threads, dynamic=dynamic, **process_settings(settings),
    )  # fmt: skip
    target = out_dir or api.default_script_report_dir(spec)
    if try_top is not None and (torchrun is not None or no_bench):
        raise UsageError("--try measures suggestions against the profiled steps of one process: not under torchrun "
                         "or with --no-bench")  # fmt: skip
    if torchrun is not None:
        click.echo(f"inductor-lens: running {spec.command} under torchrun {' '.join(torchrun[0])}, one capture per "
                   f"rank (mode {mode} where it sets none) into {target}/", err=True)  # fmt: skip
        ranked = api.run_script_ranks(spec, target, torchrun[0], strict=strict,
                                      progress=None if verbose else show_progress, echo=sys.stderr)  # fmt: skip
        finish_ranked(ranked, open_browser)
        return
    click.echo(f"inductor-lens: running {spec.command} (mode {mode} where it sets none) into {target}/", err=True)
    result = api.run_script(spec, target, strict=strict, progress=None if verbose else show_progress, echo=sys.stderr)
    result = try_after(result, try_top, try_budget_s, f"run --try {try_top}", strict=strict, verbose=verbose)
    finish_report(result, open_browser)
