"""``inductor-lens handwritten list|check|bench``: the hand-written Triton kernels set next to Inductor's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from .. import api
from ..errors import KernelCheckError
from .common import lens_command

F = TypeVar("F", bound=Callable[..., Any])


@click.group("handwritten")
def handwritten_group() -> None:
    """The hand-written Triton kernels set next to Inductor's: list, check, time them."""


@handwritten_group.command("list")
@lens_command
def handwritten_list(verbose: bool) -> None:
    """The hand-written kernels, what they compute, their shapes and dtypes."""
    kernels = api.handwritten_kernels()
    width = max(len(e.name) for e in kernels)
    for family in dict.fromkeys(e.family for e in kernels):
        click.echo(f"{family}:")
        for e in (e for e in kernels if e.family == family):
            dtypes = " ".join(d if d in e.interpreter_dtypes else f"{d}(GPU only)" for d in e.tolerance)
            click.echo(f"  {e.name:<{width}}  {' x '.join(e.dims):<30}  {dtypes:<36}  {e.formula}")
    click.echo("covers: the ATen work each stands in for when matched to Inductor's kernels (see the report)")


def _kernel_options(function: F) -> F:
    function = click.option(
        "--dtype", default="float32", show_default=True, help="float32, float16 or bfloat16."
    )(function)
    function = click.option(
        "--shape", "shape_text", default=None, help="Sizes such as 1000x777 (see `list`)."
    )(function)
    return click.argument("name")(function)


@handwritten_group.command("check")
@_kernel_options
@click.option(
    "--device",
    type=click.Choice(("auto", "cpu", "cuda")),
    default="auto",
    show_default=True,
    help="cpu runs the kernel under Triton's interpreter.",
)
@lens_command
def handwritten_check(name: str, shape_text: str | None, dtype: str, device: str, verbose: bool) -> None:
    """Run hand-written kernel NAME against its torch reference; exit non-zero on a mismatch."""
    result = api.check_handwritten(name, shape_text, dtype, device)
    click.echo(result.line())
    if not result.ok:
        raise KernelCheckError(f"{name} disagrees with its torch reference (see the line above)")


@handwritten_group.command("bench")
@_kernel_options
@click.option("--no-compile", is_flag=True, help="Do not time torch.compile of the reference.")
@lens_command
def handwritten_bench(name: str, shape_text: str | None, dtype: str, no_compile: bool, verbose: bool) -> None:
    """Time hand-written kernel NAME (CUDA) next to torch eager and torch.compile of its reference."""
    result = api.bench_handwritten(name, shape_text, dtype, compiled=not no_compile)
    shape = "x".join(str(v) for v in result.shape.values())
    click.echo(
        f"{name} {shape} {result.dtype}: {result.bytes / 1e6:,.1f} MB moved, {result.flops / 1e9:,.2f} GFLOP"
    )
    for label, ms in result.timings_ms.items():
        percent = result.percent_of_ceiling(ms)
        click.echo(
            f"  {label:<13} {ms * 1e3:10.1f} us  {result.rate(ms):>16}  {percent:5.1f}% of the measured ceiling"
        )
    click.echo(
        f"  ceilings: copy {result.ceilings['copy_gb_per_s']:,.0f} GB/s, "
        f"matmul {result.ceilings['matmul_tflops']:,.1f} TFLOP/s ({result.dtype})"
    )
