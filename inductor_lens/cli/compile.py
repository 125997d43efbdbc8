"""``inductor-lens compile MODEL``: compile a model file and write its report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .. import api
from ..capture.ranks import check_launcher
from ..options import parse_inductor_options
from .common import (
    finish_ranked,
    finish_report,
    lens_command,
    model_options,
    out_option,
    show_progress,
    spec_from_options,
)


@click.command("compile")
@click.argument("model", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--mode",
    default="default",
    show_default=True,
    help="torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs, or any other "
    "of the installed torch's (torch._inductor.list_mode_options(), e.g. lite in torch 2.13).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Inductor option, e.g. epilogue_fusion=true or triton.cudagraphs=false (repeatable).",
)
@click.option(
    "--nproc",
    type=int,
    default=None,
    metavar="N",
    help="Run the model in N processes (ranks) launched by torch.distributed.run, each in a process group "
    "(gloo on CPU, nccl on CUDA) that the model file can use; a report per rank and a page comparing them.",
)
@out_option("Report folder [default: inductor-lens-reports/<model>-<mode>/, with --nproc <model>-<mode>-nproc<N>/].")
@model_options
@lens_command
def compile_command(
    model: Path,
    mode: str,
    options: tuple[str, ...],
    nproc: int | None,
    out_dir: Path | None,
    strict: bool,
    open_browser: bool,
    verbose: bool,
    **model_settings: Any,
) -> None:
    """Compile MODEL (a .py file with get_model() and get_inputs()) and write an HTML report."""
    spec = spec_from_options(model, mode, parse_inductor_options(options), **model_settings)
    if nproc is not None:
        check_launcher(nproc)
        target = out_dir or api.default_report_dir(spec).with_name(f"{api.default_report_dir(spec).name}-nproc{nproc}")
        click.echo(f"inductor-lens: compiling {model} in {nproc} ranks (mode {mode}, device {spec.device}) "
                   f"into {target}/", err=True)  # fmt: skip
        ranked = api.compile_ranks(spec, target, nproc, strict=strict, progress=None if verbose else show_progress,
                                   echo=sys.stderr if verbose else None)  # fmt: skip
        finish_ranked(ranked, open_browser)
        return
    target = out_dir or api.default_report_dir(spec)
    click.echo(
        f"inductor-lens: compiling {model} (mode {mode}, device {spec.device}) into {target}/", err=True
    )
    result = api.compile_model(
        spec,
        target,
        strict=strict,
        progress=None if verbose else show_progress,
        echo=sys.stderr if verbose else None,
    )
    finish_report(result, open_browser)
