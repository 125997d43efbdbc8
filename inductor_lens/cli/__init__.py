"""The command line: a thin click layer over ``api``, one module per command; no pipeline logic lives here.

    compile.py      compile MODEL                   report.py       report FOLDER, open [FOLDER]
    run.py          run -- python SCRIPT ARGS
    compare.py      compare MODEL, diff A B         handwritten.py  handwritten list|check|bench
    cache.py        cache info|clear                common.py       error handling, shared options
    repro.py        repro REPORT KERNEL             try_.py         try REPORT (its suggestions, measured)
"""

from __future__ import annotations

import sys

import click

from ..version import __version__
from .cache import cache_group
from .common import fail
from .compare import compare_command, diff_command
from .compile import compile_command
from .handwritten import handwritten_group
from .report import open_command, report_command
from .repro import repro_command
from .run import run_command
from .try_ import try_command

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="inductor-lens")
def cli() -> None:
    """Inspect what torch.compile / TorchInductor made of a model: graphs, fused kernels, their source."""


for command in (compile_command, run_command, compare_command, diff_command, report_command, open_command,
                try_command, handwritten_group, cache_group, repro_command):  # fmt: skip
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: click's own usage errors are shortened to one line too."""
    try:
        cli.main(args=argv, prog_name="inductor-lens", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        fail("aborted", 130)
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
