"""``inductor-lens cache info|clear``: the caches torch.compile and Triton keep on this machine, and the
autotune cache of inductor-lens's hand-written kernels."""

from __future__ import annotations

import json
import sys

import click

from .. import api
from ..caches import CacheError, check_no_runs
from ..errors import UsageError
from .common import lens_command


@click.group("cache")
def cache_group() -> None:
    """The caches torch.compile, Triton and the hand-written kernels keep on this machine: show them, clear them safely."""


@cache_group.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@lens_command
def cache_info_command(as_json: bool, verbose: bool) -> None:
    """Every cache, resolved as torch and Triton resolve it, with size, files (entries) and age."""
    found = api.cache_info()
    if as_json:
        click.echo(json.dumps([c.to_json() for c in found], indent=1))
        return
    for cache in found:
        where = f"{cache.path}  ({cache.source})"
        if not cache.exists:
            click.echo(f"{cache.name:<11} {where}: not there")
            continue
        u = cache.usage
        click.echo(
            f"{cache.name:<11} {where}: {api.format_bytes(u.bytes)} in {u.files:,} files, "
            f"newest {api.format_age(u.newest)} old"
        )
        for part, pu in cache.parts.items():
            click.echo(f"  {part:<20} {api.format_bytes(pu.bytes):>10} {pu.files:>8,} files  {cache.describe(part)}")


@cache_group.command("clear")
@click.option(
    "--inductor", is_flag=True, help="Inductor's cache (FX graphs, AOT autograd, kernels, headers)."
)
@click.option("--triton", is_flag=True, help="Triton's own kernel cache.")
@click.option(
    "--handwritten", is_flag=True, help="The tuned launch configurations of inductor-lens's hand-written kernels."
)
@click.option(
    "--render", is_flag=True, help="The report's cached drawing layouts and highlighted code (made again when needed)."
)
@click.option("--all", "clear_all", is_flag=True, help="All four.")
@click.option("--dry-run", is_flag=True, help="Delete nothing; list what would go.")
@click.option("--yes", is_flag=True, help="Do not ask before deleting.")
@lens_command
def cache_clear_command(
    inductor: bool,
    triton: bool,
    handwritten: bool,
    render: bool,
    clear_all: bool,
    dry_run: bool,
    yes: bool,
    verbose: bool,
) -> None:
    """Delete the content of the chosen caches (never anything that does not look like one)."""
    chosen = {"inductor": inductor, "triton": triton, "handwritten": handwritten, "render": render}
    names = [n for n in api.CLEARABLE_CACHES if chosen[n] or clear_all]
    if not names:
        raise UsageError("choose what to clear: --inductor, --triton, --handwritten, --render or --all")
    for name in names:
        api.check_cache(name)
    if not dry_run:
        check_no_runs()
    if not dry_run and not yes:
        if not sys.stdin.isatty():
            raise UsageError(
                "not clearing without confirmation: add --yes (or --dry-run to see what would go)"
            )
        click.confirm(f"Delete the content of the {' and '.join(names)} cache(s)?", abort=True, err=True)
    failed = []
    for name in names:
        result = api.clear_cache(name, dry_run=dry_run)
        if dry_run:
            click.echo(
                f"{name}: would delete {len(result.would_remove)} entries, "
                f"{api.format_bytes(result.freed)}, from {result.path}"
            )
            for entry in result.would_remove[:20]:
                click.echo(f"  {entry}")
            continue
        if result.removed:
            click.echo(f"{name}: freed {api.format_bytes(result.freed)} ({result.removed:,} files) in {result.path}")
        elif not result.failed:
            click.echo(f"{name}: nothing to remove in {result.path}{'' if result.path.is_dir() else ' (not there)'}")
        if result.failed:
            failed.append(result)
    if failed:
        first = failed[0]
        raise CacheError(f"{first.name}: {len(first.failed)} entries not removed from {first.path} "
                         f"({first.failed[0]}); check who owns the folder and its permissions")  # fmt: skip
