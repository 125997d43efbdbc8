"""The command line: a thin click layer over ``api.py``; no pipeline logic lives here.

Every failure ends as one line ``error: <cause>`` on stderr and a non-zero exit code (see
errors.py for the codes); ``--verbose`` adds the traceback and streams the model process's output.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from . import api
from .errors import KernelCheckError, LensError, UsageError
from .options import DEFAULT_TIMEOUT_S, DTYPES, MODES, CompileSpec, normalize_dtype, parse_inductor_options
from .version import __version__

F = TypeVar("F", bound=Callable[..., Any])
INTERNAL_ERROR_EXIT = 70


def lens_command(function: F) -> F:
    """Adds --verbose and turns errors into one line plus an exit code."""

    @click.option("-v", "--verbose", is_flag=True, help="Stream the model process's output; show tracebacks.")
    @functools.wraps(function)
    def wrapper(*args: Any, verbose: bool, **kwargs: Any) -> Any:
        try:
            return function(*args, verbose=verbose, **kwargs)
        except LensError as exc:
            if verbose:
                traceback.print_exc()
            _fail(exc.one_line(), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted; whatever was captured so far is kept", 130)
        except click.exceptions.Exit:
            raise
        except Exception as exc:
            if verbose:
                traceback.print_exc()
            _fail(
                f"internal error: {type(exc).__name__}: {exc} (run with --verbose for the traceback)",
                INTERNAL_ERROR_EXIT,
            )

    return wrapper  # type: ignore[return-value]


def _fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="inductor-lens")
def cli() -> None:
    """Inspect what torch.compile / TorchInductor made of a model: graphs, fused kernels, their source."""


def _out_option(help_text: str) -> Callable[[F], F]:
    """``--out DIR``: where a command writes its report or comparison."""
    return click.option(
        "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, help=help_text
    )


def _model_options(function: F) -> F:
    """The options ``compile`` and ``compare`` share: how the model runs, how long, what is measured."""
    decorators = [
        click.option("--train", is_flag=True, help="Compile forward + backward of the output's sum."),
        click.option(
            "--device",
            type=click.Choice(("auto", "cpu", "cuda")),
            default="auto",
            show_default=True,
            help="auto: cuda when available.",
        ),
        click.option(
            "--dtype",
            type=click.Choice(sorted(set(DTYPES)), case_sensitive=False),
            default=None,
            help="Cast the model and floating inputs to this dtype.",
        ),
        click.option("--fullgraph", is_flag=True, help="Passed to torch.compile: fail on any graph break."),
        click.option(
            "--dynamic/--no-dynamic", default=None, help="Passed to torch.compile (default: torch decides)."
        ),
        click.option(
            "--timeout",
            "timeout_s",
            type=click.FloatRange(min=1),
            default=DEFAULT_TIMEOUT_S,
            show_default=True,
            help="Seconds before a model process is killed.",
        ),
        click.option(
            "--no-bench",
            "no_bench",
            is_flag=True,
            help="Skip timing (end to end, per kernel, device ceilings).",
        ),
        click.option(
            "--no-handwritten",
            "no_handwritten",
            is_flag=True,
            help="Skip checking and timing the hand-written Triton equivalents of the kernels.",
        ),
        click.option(
            "--strict", is_flag=True, help="Fail on any debug output this version does not recognise."
        ),
        click.option("--open", "open_browser", is_flag=True, help="Open the report in a browser when done."),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def _spec(model: Path, mode: str, options: dict[str, Any], **kwargs: Any) -> CompileSpec:
    return CompileSpec(
        model_path=model,
        mode=mode,
        options=options,
        train=kwargs["train"],
        device=kwargs["device"],
        dtype=normalize_dtype(kwargs["dtype"]),
        fullgraph=kwargs["fullgraph"],
        dynamic=kwargs["dynamic"],
        timeout_s=kwargs["timeout_s"],
        bench=not kwargs["no_bench"],
        handwritten=not kwargs["no_handwritten"],
    )


def _progress(phase: str, elapsed: float) -> None:
    click.echo(f"  [{elapsed:6.1f}s] {phase}", err=True)


@cli.command("compile")
@click.argument("model", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--mode", type=click.Choice(MODES), default="default", show_default=True, help="torch.compile mode."
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Inductor option, e.g. epilogue_fusion=true or triton.cudagraphs=false (repeatable).",
)
@_out_option("Report folder [default: inductor-lens-reports/<model>-<mode>/].")
@_model_options
@lens_command
def compile_command(
    model: Path,
    mode: str,
    options: tuple[str, ...],
    out_dir: Path | None,
    strict: bool,
    open_browser: bool,
    verbose: bool,
    **model_options: Any,
) -> None:
    """Compile MODEL (a .py file with get_model() and get_inputs()) and write an HTML report."""
    spec = _spec(model, mode, parse_inductor_options(options), **model_options)
    target = out_dir or api.default_out_dir(spec)
    click.echo(
        f"inductor-lens: compiling {model} (mode {mode}, device {spec.device}) into {target}/", err=True
    )
    result = api.compile_model(
        spec,
        target,
        strict=strict,
        progress=None if verbose else _progress,
        echo=sys.stderr if verbose else None,
    )
    _finish(result, open_browser)


@cli.command("compare")
@click.argument("model", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--mode",
    "modes",
    type=click.Choice(MODES),
    multiple=True,
    help="A configuration named after its mode (repeatable).",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="NAME:KEY=VALUE,...",
    help="A named set of Inductor options, e.g. epilogue:max_autotune=true,epilogue_fusion=true "
    "(mode=... picks the mode; repeatable). With no --mode and no --config: all four modes.",
)
@_out_option("Comparison folder [default: inductor-lens-reports/<model>-compare/].")
@_model_options
@lens_command
def compare_command(
    model: Path,
    modes: tuple[str, ...],
    configs: tuple[str, ...],
    out_dir: Path | None,
    strict: bool,
    open_browser: bool,
    verbose: bool,
    **model_options: Any,
) -> None:
    """Compile MODEL under several modes and option sets (each cold, then warm) and compare them."""
    from .compare import requested_configs

    requests = requested_configs(modes, configs)
    spec = _spec(model, "default", {}, **model_options)
    names = ", ".join(r.name for r in requests)
    click.echo(f"inductor-lens: comparing {model} under {len(requests)} configurations ({names})", err=True)
    result = api.compare_models(
        spec,
        requests,
        out_dir,
        strict=strict,
        say=lambda line: click.echo(f"inductor-lens: {line}", err=True),
        progress=None if verbose else _progress,
        echo=sys.stderr if verbose else None,
    )
    _finish_comparison(result, open_browser)


@cli.command("diff")
@click.argument("report_a", type=click.Path(path_type=Path))
@click.argument("report_b", type=click.Path(path_type=Path))
@_out_option("Comparison folder [default: inductor-lens-reports/diff-<a>-vs-<b>/].")
@click.option("--open", "open_browser", is_flag=True, help="Open the comparison in a browser when done.")
@lens_command
def diff_command(
    report_a: Path, report_b: Path, out_dir: Path | None, open_browser: bool, verbose: bool
) -> None:
    """Compare two existing reports (REPORT_A is the baseline) without recompiling."""
    _finish_comparison(api.diff_reports(report_a, report_b, out_dir), open_browser)


def _finish_comparison(result: api.ComparisonResult, open_browser: bool) -> None:
    comparison = result.comparison
    if comparison.verdict is not None:
        click.echo(f"inductor-lens: {comparison.verdict.text}", err=True)
    click.echo(f"comparison: {result.index}")
    if open_browser:
        click.echo(api.open_report(result.index))
    if result.error is not None:
        raise result.error


@cli.command("report")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@_out_option(
    "Report folder [default: the folder itself for an inductor-lens report, "
    "else inductor-lens-reports/<name>/]."
)
@click.option("--strict", is_flag=True, help="Fail on any debug output this version does not recognise.")
@click.option("--open", "open_browser", is_flag=True, help="Open the report in a browser when done.")
@lens_command
def report_command(
    folder: Path, out_dir: Path | None, strict: bool, open_browser: bool, verbose: bool
) -> None:
    """Build the report from FOLDER: a torch_compile_debug tree (e.g. copied from a GPU machine) or a report."""
    if api.is_comparison(folder):
        _finish_comparison(api.rerender_comparison(folder, out_dir), open_browser)
        return
    _finish(api.report_folder(folder, out_dir, strict=strict), open_browser)


@cli.command("open")
@click.argument("folder", type=click.Path(path_type=Path), required=False)
@lens_command
def open_command(folder: Path | None, verbose: bool) -> None:
    """Open a report (default: the newest under inductor-lens-reports/) and print its file URL."""
    click.echo(api.open_report(folder))


@cli.group("handwritten")
def handwritten_group() -> None:
    """The hand-written Triton kernels set next to Inductor's: list, check, time them."""


@handwritten_group.command("list")
@lens_command
def handwritten_list(verbose: bool) -> None:
    """The hand-written kernels, what they compute, their shapes and dtypes."""
    from .handwritten.catalog import EQUIVALENTS

    width = max(len(e.name) for e in EQUIVALENTS)
    for family in dict.fromkeys(e.family for e in EQUIVALENTS):
        click.echo(f"{family}:")
        for e in (e for e in EQUIVALENTS if e.family == family):
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


@cli.group("cache")
def cache_group() -> None:
    """The caches torch.compile and Triton keep on this machine: show them, clear them safely."""


@cache_group.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@lens_command
def cache_info_command(as_json: bool, verbose: bool) -> None:
    """Every cache, resolved as torch and Triton resolve it, with size, files and age."""
    from . import caches
    from .report.env import format_bytes

    found = caches.cache_info()
    if as_json:
        click.echo(json.dumps([c.to_json() for c in found], indent=1))
        return
    for cache in found:
        where = f"{cache.path}  ({cache.source})"
        if not cache.exists:
            click.echo(f"{cache.name:<9} {where}: not there")
            continue
        u = cache.usage
        click.echo(
            f"{cache.name:<9} {where}: {format_bytes(u.bytes)} in {u.files:,} files, newest {caches.age(u.newest)} old"
        )
        for part, pu in cache.parts.items():
            label = caches.INDUCTOR_PARTS.get(
                part, "generated kernel code" if part == "kernels" else "not recognised"
            )
            click.echo(f"  {part:<20} {format_bytes(pu.bytes):>10} {pu.files:>8,} files  {label}")


@cache_group.command("clear")
@click.option(
    "--inductor", is_flag=True, help="Inductor's cache (FX graphs, AOT autograd, kernels, headers)."
)
@click.option("--triton", is_flag=True, help="Triton's own kernel cache.")
@click.option("--all", "clear_all", is_flag=True, help="Both.")
@click.option("--dry-run", is_flag=True, help="Delete nothing; list what would go.")
@click.option("--yes", is_flag=True, help="Do not ask before deleting.")
@lens_command
def cache_clear_command(
    inductor: bool, triton: bool, clear_all: bool, dry_run: bool, yes: bool, verbose: bool
) -> None:
    """Delete the content of the chosen caches (never anything that does not look like one)."""
    from . import caches
    from .report.env import format_bytes

    names = [
        n for n, chosen in (("inductor", inductor or clear_all), ("triton", triton or clear_all)) if chosen
    ]
    if not names:
        raise UsageError("choose what to clear: --inductor, --triton or --all")
    for name in names:
        path = caches.inductor_dir()[0] if name == "inductor" else caches.triton_dir()[0]
        if path.is_dir():
            caches.check_clearable(name, path)
    if not dry_run and not yes:
        if not sys.stdin.isatty():
            raise UsageError(
                "not clearing without confirmation: add --yes (or --dry-run to see what would go)"
            )
        click.confirm(f"Delete the content of the {' and '.join(names)} cache(s)?", abort=True, err=True)
    for name in names:
        result = caches.clear(name, dry_run=dry_run)
        if dry_run:
            click.echo(
                f"{name}: would delete {len(result.would_remove)} entries, {format_bytes(result.freed)}, from {result.path}"
            )
            for entry in result.would_remove[:20]:
                click.echo(f"  {entry}")
            continue
        click.echo(f"{name}: freed {format_bytes(result.freed)} ({result.removed:,} files) in {result.path}")
        for failure in result.failed[:5]:
            click.echo(f"  not removed: {failure}", err=True)


def _finish(result: api.ReportResult, open_browser: bool) -> None:
    run = result.run
    warnings = len(run.stats.warnings)
    kernels = sum(len(g.kernels) for g in run.graphs)
    summary = f"{len(run.graphs)} graph(s), {kernels} kernel(s)"
    if warnings:
        summary += f", {warnings} parse warning(s) (listed in the report)"
    if result.report_s is not None:
        summary += f"; report written in {result.report_s:.1f} s"
    click.echo(f"inductor-lens: {summary}", err=True)
    click.echo(f"report: {result.index}")
    if open_browser:
        click.echo(api.open_report(result.index))
    if result.error is not None:
        raise result.error


def main(argv: list[str] | None = None) -> None:
    """Entry point: click's own usage errors are shortened to one line too."""
    try:
        cli.main(args=argv, prog_name="inductor-lens", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
