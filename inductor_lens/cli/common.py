"""The command line, shared pieces: error handling, the options several commands take, the last lines they print.

Every failure ends as one line ``error: <cause>`` on stderr and a non-zero exit code (see errors.py
for the codes); ``--verbose`` adds the traceback and streams the model process's output. SIGTERM and SIGHUP
are handled as Ctrl-C is (the model process and what it started killed, the private caches removed, what was
captured kept), each with its own exit code: 128 + the signal's number, as a shell reports it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from .. import api
from ..bench.answers import summary_lines, trial_lines
from ..config_options import parse_dynamo_options
from ..errors import LensError, NoSpaceError, RenderError, Terminated, no_space_message
from ..options import (
    ACCURACY_CHECKS,
    AUTOCAST_DTYPES,
    DEFAULT_TIMEOUT_S,
    DTYPES,
    MATMUL_PRECISIONS,
    CompileSpec,
    normalize_autocast,
    normalize_dtype,
)
from ..records.numerics import divergence_headline

F = TypeVar("F", bound=Callable[..., Any])
INTERNAL_ERROR_EXIT = 70  # a bug: every fault of the machine has its own code
INTERRUPTED_EXIT = 128 + signal.SIGINT  # 130, Ctrl-C; SIGTERM 143, SIGHUP 129
STOPPING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def lens_command(function: F) -> F:
    """Adds --verbose and turns errors into one line plus an exit code."""

    @click.option("-v", "--verbose", is_flag=True, help="Stream the model process's output; show tracebacks.")
    @functools.wraps(function)
    def wrapper(*args: Any, verbose: bool, **kwargs: Any) -> Any:
        try:
            if isinstance(kwargs.get("out_dir"), Path):
                check_out_dir(kwargs["out_dir"])
            with signals_as_interrupts():
                return function(*args, verbose=verbose, **kwargs)
        except LensError as exc:
            if verbose:
                traceback.print_exc()
            fail(exc.one_line(), exc.exit_code)
        except KeyboardInterrupt as exc:
            if isinstance(exc, Terminated):
                name = signal.Signals(exc.signal_number).name
                fail(f"stopped by {name}; whatever was captured so far is kept", 128 + exc.signal_number)
            fail("interrupted; whatever was captured so far is kept", INTERRUPTED_EXIT)
        except click.exceptions.Exit:
            raise
        except Exception as exc:
            if verbose:
                traceback.print_exc()
            known = os_fault(exc, kwargs.get("out_dir"))
            if known is not None:
                fail(known.one_line(), known.exit_code)
            fail(
                f"internal error: {type(exc).__name__}: {exc} (run with --verbose for the traceback)",
                INTERNAL_ERROR_EXIT,
            )

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``Terminated`` (a KeyboardInterrupt) in the main thread, so every cleanup that
    Ctrl-C runs runs for them too; a second one while that cleanup runs is ignored, so it completes. A signal
    ignored when the tool started (``nohup``) stays ignored."""
    if threading.current_thread() is threading.main_thread():  # only there can handlers be set
        previous = {number: signal.getsignal(number) for number in STOPPING_SIGNALS}
        previous = {number: handler for number, handler in previous.items() if handler is not signal.SIG_IGN}

        def stop(number: int, frame: Any) -> None:
            for other in STOPPING_SIGNALS:
                signal.signal(other, signal.SIG_IGN)
            raise Terminated(number)

        for number in previous:
            signal.signal(number, stop)
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
    else:
        yield


def check_out_dir(out_dir: Path) -> None:
    """``--out`` names a folder that exists or can be made: checked (the missing folders made, then removed)
    before any work, so a bad --out costs nothing and says so in one line."""
    missing: list[Path] = []
    existing = out_dir.absolute()
    while not existing.exists() and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        raise RenderError(f"--out {out_dir}: {existing} is a file, not a folder; pass another --out")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RenderError(f"--out {out_dir}: {existing} is not writable; pass another --out")
    made: list[Path] = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
    except OSError as exc:
        raise RenderError(f"--out {out_dir}: cannot create {exc.filename}: {exc.strerror}; pass another --out") from exc
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()


def os_fault(exc: Exception, out_dir: Path | None = None) -> LensError | None:
    """The error (with its own exit code) of an OS fault no stage turned into one: a full disk, a folder that
    cannot be written; None for anything else (a bug). ``out_dir``: the disk a write without a file name is
    taken to have failed on."""
    if not isinstance(exc, OSError):
        return None
    path = exc.filename if exc.filename is not None else out_dir or Path.cwd()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return NoSpaceError(no_space_message(path, "a write failed"))
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG):
        return RenderError(f"{path}: {exc.strerror}; fix its permissions or pass another --out")
    return None


def fail(message: str, code: int) -> None:
    with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) still gets the exit code
        click.echo(f"error: {message}", err=True)
    sys.exit(code)


def out_option(help_text: str) -> Callable[[F], F]:
    """``--out DIR``: where a command writes its report or comparison."""
    return click.option(
        "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, help=help_text
    )


def open_option(what: str) -> Callable[[F], F]:
    return click.option("--open", "open_browser", is_flag=True, help=f"Open the {what} in a browser when done.")


def strict_option(function: F) -> F:
    return click.option(
        "--strict", is_flag=True, help="Fail on any debug output this version does not recognise."
    )(function)


def threads_option(function: F) -> F:
    return click.option(
        "--threads",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="CPU: torch.set_num_threads(N) in the model process before it compiles and times (the C++ kernels are "
        "built for N threads). On a busy or shared machine, fewer threads than CPUs keep the timings steady and the "
        "per-launch shares adding up; OMP_NUM_THREADS=N in the environment does the same [default: torch's own].",
    )(function)


def process_settings_options(applies: str, autocast_applies: str) -> Callable[[F], F]:
    """``--matmul-precision``, ``--cudnn-tf32``, ``--autocast``, ``--dynamo-option``: settings of the whole model
    (or script) process; ``applies`` and ``autocast_applies`` say to what, in the help texts. With them (compile,
    compare and run take the same), ``--handwritten-budget``: the seconds of the hand-written stage after it."""
    autocast_names = sorted(name for name, dtype in DTYPES.items() if dtype in AUTOCAST_DTYPES)
    decorators = [
        click.option(
            "--matmul-precision",
            type=click.Choice(MATMUL_PRECISIONS),
            default=None,
            help="torch.set_float32_matmul_precision: high runs float32 matmuls in TF32 on a GPU's tensor cores, "
            f"medium in bfloat16 [default: torch's own, highest]. {applies}",
        ),
        click.option(
            "--cudnn-tf32/--no-cudnn-tf32",
            "cudnn_allow_tf32",
            default=None,
            help=f"torch.backends.cudnn.allow_tf32: cuDNN convolutions in TF32, or not [default: torch's own, on]. {applies}",
        ),
        click.option(
            "--autocast",
            type=click.Choice(autocast_names, case_sensitive=False),
            default=None,
            metavar="DTYPE",
            help="torch.autocast to DTYPE (bfloat16/bf16 or float16/fp16): matmuls and convolutions in that dtype. "
            + autocast_applies,
        ),
        click.option(
            "--dynamo-option",
            "dynamo_options",
            multiple=True,
            metavar="KEY=VALUE",
            help=f"A torch._dynamo.config setting, e.g. capture_scalar_outputs=true (repeatable). {applies}",
        ),
        click.option(
            "--handwritten-budget",
            "handwritten_budget_s",
            type=float,
            default=None,
            metavar="SECONDS",
            help="Seconds the hand-written kernels' checks (and on a GPU their timings) may take in all; those not "
            "started by then are listed as skipped, and under the interpreter each check stops after 8 s "
            "[default: 30 on a CPU, 75 on a GPU; 0: no limit, every check run to its end].",
        ),
    ]

    def decorate(function: F) -> F:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return decorate


def process_settings(options: dict[str, Any]) -> dict[str, Any]:
    """The spec's fields from the values of ``process_settings_options``, checked."""
    return {
        "matmul_precision": options["matmul_precision"],
        "cudnn_allow_tf32": options["cudnn_allow_tf32"],
        "autocast": normalize_autocast(options["autocast"]),
        "dynamo_options": parse_dynamo_options(options["dynamo_options"]),
        "handwritten_budget_s": options["handwritten_budget_s"],
    }


def model_options(function: F) -> F:
    """The options ``compile`` and ``compare`` share: how the model runs, how long, what is measured."""
    decorators = [
        click.option("--train", is_flag=True, help="Compile forward + backward: of outputs.loss where the model returns one, else of the outputs' sum."),
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
            "--accuracy",
            type=click.Choice(ACCURACY_CHECKS),
            default="fp64",
            show_default=True,
            help="How compiled outputs are judged: against a float64 run of the same model (Dynamo's rule), "
            "against eager alone with per-dtype tolerances, or not at all.",
        ),
        threads_option,
        process_settings_options(
            "Set in the model process: the eager and the compiled model alike.",
            "Entered around each call and timed step of the eager and the compiled model alike, not around the "
            "accuracy verdict's float64 run: the verdict measures what autocast costs.",
        ),
        strict_option,
        open_option("report"),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def spec_from_options(model: Path, mode: str, options: dict[str, Any], **kwargs: Any) -> CompileSpec:
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
        accuracy=kwargs["accuracy"],
        threads=kwargs["threads"],
        **process_settings(kwargs),
    )


def show_progress(phase: str, elapsed: float) -> None:
    click.echo(f"  [{elapsed:6.1f}s] {phase}", err=True)


def finish_report(result: api.ReportResult, open_browser: bool) -> None:
    run = result.run
    warnings = len(run.stats.warnings)
    kernels = sum(len(g.kernels) for g in run.graphs)
    summary = f"{len(run.graphs)} graph(s), {kernels} kernel(s)"
    if warnings:
        summary += f", {warnings} parse warning(s) (listed in the report)"
    if result.report_s is not None:
        summary += f"; report written in {result.report_s:.1f} s"
        if result.reused:
            summary += " (input unchanged since the last report: its lens.json was read back, not parsed again)"
    click.echo(f"inductor-lens: {summary}", err=True)
    if run.capture is not None and run.capture.status != "ok" and result.error is None:
        # `report` of a folder whose run failed or was stopped (its parent killed): what it holds is partial
        click.echo(f"inductor-lens: the capture is incomplete: {run.capture.error or run.capture.status}", err=True)
    accuracy = run.capture.accuracy if run.capture else None
    if accuracy is not None and not accuracy.within_tolerance:
        worst = f": {accuracy.worst.name} ({accuracy.worst.note})" if accuracy.worst else ""
        findings = f"; {len(accuracy.findings)} finding(s)" if accuracy.findings else ""
        click.echo(f"inductor-lens: accuracy: the compiled model differs from eager{worst}{findings}", err=True)
    divergence = run.capture.divergence if run.capture else None
    if divergence is not None:
        click.echo(f"inductor-lens: {divergence_headline(divergence)}", err=True)
    if run.answers is not None:  # the first page's four answers, in a few lines
        for line in summary_lines(run.answers):
            click.echo(f"  {line}", err=True)
    if run.trials is not None:
        for line in trial_lines(run.trials):
            click.echo(f"  {line}", err=True)
    _finish("report", result.index, result.error, open_browser)


def try_options(function: F) -> F:
    """``--try N`` and ``--try-budget SECONDS`` (compile, run)."""
    function = click.option(
        "--try-budget", "try_budget_s", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
        help="Wall seconds --try may take in all; a suggestion whose cold compile would not fit is left out, and "
        "the warm rounds stop early (the report says how many ran).",
    )(function)
    return click.option(
        "--try", "try_top", type=click.IntRange(min=1), default=None, metavar="N",
        help="After the report, run its top N suggestions that apply as settings (a mode, options, matmul "
        "precision, autocast, dynamic, Dynamo config), each as a configuration compared with this run's own "
        "settings (cold compile, then interleaved warm rounds), and show what each gained on the first page.",
    )(function)  # fmt: skip


def say(line: str) -> None:
    click.echo(f"inductor-lens: {line}", err=True)


def try_after(result: api.ReportResult, top: int | None, budget_s: float | None, command: str, *, strict: bool,
              verbose: bool) -> api.ReportResult:  # fmt: skip
    """``--try N`` after a report was written: its suggestions tried, the report rendered again with them."""
    if top is None or result.error is not None:
        return result
    say(f"trying the report's top {top} suggestion(s) against its own settings"
        + (f" (budget {budget_s:.0f} s)" if budget_s else ""))  # fmt: skip
    tried = api.try_suggestions(result.index.parent, top, budget_s=budget_s, command=command, strict=strict, say=say,
                                progress=None if verbose else show_progress, echo=sys.stderr if verbose else None)  # fmt: skip
    return replace(result, run=tried.run, index=tried.index)


def finish_ranked(result: api.RankedResult, open_browser: bool) -> None:
    """The last lines of a multi-rank report: the ranks, where they diverged, the landing page."""
    shown = result.summaries[:8]
    ranks = ", ".join(f"rank {s.rank}: {len(s.graphs)} graph(s), {len(s.kernels)} kernel(s)" for s in shown)
    more = f" and {len(result.summaries) - len(shown)} more" if len(result.summaries) > len(shown) else ""
    reports = ", ".join(str(e.rank) for e in result.ranked.ranks if e.report)
    click.echo(f"inductor-lens: {len(result.summaries)} ranks ({ranks}{more}); full reports: rank(s) {reports}", err=True)
    if result.landing_s is not None:
        click.echo(f"inductor-lens: landing page written after {result.landing_s:.1f} s", err=True)
    aspects = list(dict.fromkeys(d.aspect for d in result.divergences))
    compiled = [a for a in aspects if a != "stragglers"]
    verdict = f"the ranks diverged: {', '.join(compiled)}" if compiled else "the ranks compiled the same"
    if "stragglers" in aspects:
        verdict += "; straggler rank(s)"
    click.echo(f"inductor-lens: {verdict} (see the landing page)", err=True)
    _finish("report", result.index, result.error, open_browser)


def finish_comparison(result: api.ComparisonResult, open_browser: bool) -> None:
    from ..compare.comparability import headline

    if result.comparison.differences:
        click.echo(f"inductor-lens: {headline(result.comparison.differences)}", err=True)
    unstable = [c.name for c in result.comparison.configs if c.unstable]
    if unstable:
        click.echo(f"inductor-lens: unstable measurements in {', '.join(unstable)}: read the times as rough", err=True)
    verdict = result.comparison.verdict
    if verdict is not None:
        click.echo(f"inductor-lens: {verdict.text}" + (f"; {verdict.compares}" if verdict.compares else ""), err=True)
    _finish("comparison", result.index, result.error, open_browser)


def _finish(what: str, index: Path, error: LensError | None, open_browser: bool) -> None:
    """The last lines: where the pages are (on stdout, for scripts), then the failure, if any, as the exit."""
    click.echo(f"{what}: {index}")
    if open_browser:
        click.echo(api.open_report(index))
    if error is not None:
        raise error
