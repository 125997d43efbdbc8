"""``inductor-lens compile MODEL``: compile a model file and write its report."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from .. import api
from ..capture.ranks import check_launcher
from ..config_options import parse_inductor_options
from ..errors import UsageError
from .common import (
    finish_ranked,
    finish_report,
    lens_command,
    model_options,
    out_option,
    show_progress,
    spec_from_options,
    try_after,
    try_options,
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
@click.option(
    "--find-divergence",
    is_flag=True,
    help="After the capture, name the first kernel whose output diverges from its FX node run eagerly (and in "
    "float64), with the line of the model, and which Inductor options that change numerics make it go away.",
)
@click.option(
    "--divergence-budget",
    "divergence_budget_s",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds the --find-divergence re-runs with other Inductor options may take.",
)
@click.option(
    "--save-inputs",
    "save_inputs_mb",
    type=click.FloatRange(min=0, min_open=True),
    is_flag=False,
    flag_value=256.0,
    default=None,
    metavar="[MB]",
    help="Save each kernel's real launch arguments (up to MB in all, default 256; the largest kernels are "
    "skipped first) beside the capture, for `inductor-lens repro`.",
)
@click.option(
    "--preview-gpu",
    "preview_gpu",
    is_flag=False,
    flag_value="H200",
    default=None,
    metavar="[H200|H100]",
    help="On a machine without a GPU: have Inductor generate the Triton kernels it would for this GPU (default "
    "H200), check them under Triton's interpreter against eager, and report them as a CPU preview (no timing).",
)
@try_options
@out_option("Report folder [default: inductor-lens-reports/<model>-<mode>/, with -train, the dtype (-bf16...), "
            "-dynamic/-static and the --option values where given, e.g. mlp-default-train-bf16/; with --nproc, "
            "-nproc<N> after it].")
@model_options
@lens_command
def compile_command(
    model: Path,
    mode: str,
    options: tuple[str, ...],
    nproc: int | None,
    find_divergence: bool,
    divergence_budget_s: float,
    save_inputs_mb: float | None,
    preview_gpu: str | None,
    try_top: int | None,
    try_budget_s: float | None,
    out_dir: Path | None,
    strict: bool,
    open_browser: bool,
    verbose: bool,
    **model_settings: Any,
) -> None:
    """Compile MODEL (a .py file with get_model() and get_inputs()) and write an HTML report."""
    spec = spec_from_options(model, mode, parse_inductor_options(options), **model_settings)
    spec = replace(spec, find_divergence=find_divergence, divergence_budget_s=divergence_budget_s,
                   save_inputs_mb=save_inputs_mb)  # fmt: skip
    if preview_gpu is not None:  # the model runs on the CPU; nothing there to time or to compare by hand
        spec = replace(spec, preview_gpu=preview_gpu.upper(), device="cpu", bench=False, handwritten=False)
    if try_top is not None and (nproc is not None or preview_gpu is not None or not spec.bench):
        raise UsageError("--try measures suggestions against the timed step of one process: not with --nproc, "
                         "--preview-gpu or --no-bench")  # fmt: skip
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
    result = try_after(result, try_top, try_budget_s, f"compile --try {try_top}", strict=strict, verbose=verbose)
    finish_report(result, open_browser)
