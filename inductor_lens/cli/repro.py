"""``inductor-lens repro REPORT KERNEL``: one generated kernel as a standalone script (repro/)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import lens_command, out_option, strict_option


@click.command("repro")
@click.argument("report", type=click.Path(path_type=Path))
@click.argument("kernel")
@out_option("Folder for repro.py and the inputs it reads [default: ./repro-<kernel>/].")
@strict_option
@lens_command
def repro_command(report: Path, kernel: str, out_dir: Path | None, strict: bool, verbose: bool) -> None:
    """Write a standalone script that runs KERNEL (a generated kernel's name, or GRAPH/KERNEL) of REPORT (a
    report folder or any capture `report` reads) alone on its real inputs (saved by `compile --save-inputs`)
    or random ones of the same layout, checks it against the ATen ops it fuses, and times it."""
    from ..repro.writer import write_repro

    result = write_repro(report, kernel, out_dir, strict=strict)
    plan = result.plan
    inputs = (
        "saved inputs of the real launch" if result.saved_inputs else "random inputs of the recorded layout"
    )
    check = f"no check ({plan.reference.missing})" if plan.reference.missing else \
        f"checked against {len(plan.reference.outputs)} FX node(s) run eagerly"  # fmt: skip
    click.echo(f"inductor-lens: {plan.graph_id}/{plan.kernel}: {inputs}; {check}", err=True)
    if result.saved_note:
        click.echo(f"inductor-lens: {result.saved_note}", err=True)
    click.echo(f"repro: {result.script}")
    click.echo(f"run:   python {result.script}")
