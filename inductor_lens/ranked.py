"""The pipeline for several ranks (a torchrun job): one report per rank and a landing page across them.

    is_ranked(folder)                      whether ``report FOLDER`` finds two ranks or more there
    compile_ranks(spec, out_dir, nproc)    ``compile --nproc``: the model file in N ranks under torchrun
                                           (capture/ranks.py), then the report of every rank and the landing
    run_script_ranks(spec, out_dir, opts)  ``run -- torchrun OPTS script.py``: the script process in every rank
    report_ranks(folder, out_dir)          a report per rank in ``out_dir/rank<r>/`` (the single-rank report,
                                           built as ``report_folder`` builds it) and the landing page
    write_landing(out_dir, ranked)         the landing page again, from the ranks' lens.json files alone

A multi-rank report folder::

    index.html  ranks.json           the landing page (report/ranks_view.py) and the ranks document
    rank0/  rank1/ ...               each a full report: index.html, lens.json, capture/ (the rank's own)
    capture/                         compile --nproc: spec.json and launch.log (what torchrun printed)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .capture import CAPTURE_DIR, PhaseCallback
from .capture.ranks import RankedCapture, capture_ranks, capture_script_ranks, check_launcher
from .errors import InputFolderError, LensError, UsageError
from .options import CompileSpec, ScriptSpec
from .parse.ranks import RANK_FOLDER, RankSource, find_ranks, rank_folder_name
from .pipeline import _report_capture, build_run, load_run, render, report_folder
from .records import CompileRun
from .records.ranks import RANKS_JSON, Divergence, RankedRun, RankEntry, RankSummary, divergences, summarize
from .report import write_report
from .report.folders import REPORT_PAGES, named_out_dir, prepare_out_dir
from .report.ranks_view import render_ranks
from .version import __version__

__all__ = ["RankedResult", "compile_ranks", "is_ranked", "report_ranks", "run_script_ranks", "write_landing"]

LANDING_PAGES = ("index.html", RANKS_JSON)


@dataclass(frozen=True)
class RankedResult:
    ranked: RankedRun
    runs: tuple[CompileRun, ...]  # each rank's, in rank order
    divergences: tuple[Divergence, ...]
    index: Path
    error: LensError | None = None
    report_s: float | None = None


def is_ranked(folder: Path) -> bool:
    return (folder / RANKS_JSON).is_file() or bool(find_ranks(folder))


def report_ranks(
    folder: Path, out_dir: Path | None = None, *, strict: bool = False, draw: bool = True
) -> RankedResult:
    """The report of every rank found in ``folder``, and the landing page that compares them."""
    started = time.perf_counter()
    sources = find_ranks(folder)
    previous = read_ranked(folder)
    if not sources:
        raise InputFolderError(
            f"{folder}: no rank's output found (expected rank<r>/ folders or per-rank TORCH_TRACE logs)"
        )
    if out_dir is None:
        out_dir = folder if previous is not None else named_out_dir(folder.resolve().name)
    prepare_ranked_out(out_dir)
    title = previous.title if previous is not None else folder.resolve().name
    entries, runs = [], []
    for source in sources:
        run = _report_rank(
            source, out_dir / rank_folder_name(source.rank), f"{title} · rank {source.rank}", strict, draw
        )
        capture = run.capture
        entries.append(RankEntry(
            rank=source.rank,
            folder=rank_folder_name(source.rank),
            status=capture.status if capture is not None else "ok",
            error=capture.error if capture is not None else None,
            source=_earlier_source(previous, source.rank) or _describe(source, folder),
        ))  # fmt: skip
        runs.append(run)
    ranked = RankedRun(
        title=title,
        created=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        tool_version=__version__,
        source_dir=previous.source_dir if previous is not None else str(folder.resolve()),
        ranks=tuple(entries),
        launch=previous.launch if previous is not None else "",
        error=previous.error if previous is not None else None,
    )
    summaries = _summaries(ranked, runs)
    index = write_report(render_ranks(ranked, summaries), out_dir)
    return RankedResult(
        ranked, tuple(runs), divergences(summaries), index, report_s=time.perf_counter() - started
    )


def compile_ranks(
    spec: CompileSpec,
    out_dir: Path,
    nproc: int,
    *,
    strict: bool = False,
    draw: bool = True,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
) -> RankedResult:
    """``compile --nproc``: the model file in ``nproc`` ranks (a process group each joins before the model
    is loaded), a report per rank and the landing page; a failed rank still gets its report."""
    check_launcher(nproc)
    if not spec.model_path.is_file():
        raise UsageError(f"{spec.model_path}: no such model file")
    prepare_ranked_out(out_dir, rerun=True)
    captured = capture_ranks(spec, out_dir, nproc, progress=progress, echo=echo)
    return _report_ranked_capture(captured, out_dir, spec.model_name, str(spec.model_path), spec.handwritten,
                                  spec.timeout_s, strict=strict, draw=draw, progress=progress,
                                  budget_s=spec.handwritten_budget_s)  # fmt: skip


def run_script_ranks(
    spec: ScriptSpec,
    out_dir: Path,
    launcher_options: Sequence[str],
    *,
    strict: bool = False,
    draw: bool = True,
    progress: PhaseCallback | None = None,
    echo: TextIO | None = None,
) -> RankedResult:
    """``run -- torchrun OPTIONS script.py ARGS``: the script process in every rank torchrun starts, a report
    per rank and the landing page."""
    check_launcher(1)
    prepare_ranked_out(out_dir, rerun=True)
    captured = capture_script_ranks(spec, out_dir, launcher_options, progress=progress, echo=echo)
    return _report_ranked_capture(captured, out_dir, spec.model_name, spec.command, spec.handwritten,
                                  spec.timeout_s, strict=strict, draw=draw, progress=progress,
                                  budget_s=spec.handwritten_budget_s)  # fmt: skip


def _report_ranked_capture(
    captured: RankedCapture,
    out_dir: Path,
    title: str,
    source: str,
    handwritten: bool,
    timeout_s: float,
    *,
    strict: bool,
    draw: bool,
    progress: PhaseCallback | None,
    budget_s: float | None = None,
) -> RankedResult:
    """Each rank's report from its capture (as ``compile`` writes one), then the landing page; ``budget_s``: each
    rank's hand-written stage's (``--handwritten-budget``)."""
    started = time.perf_counter()
    entries, runs = [], []
    for capture in captured.captures:
        number = int(capture.capture_dir.parent.name.removeprefix("rank"))
        folder = rank_folder_name(number)
        result = _report_capture(capture, out_dir / folder, f"{title} · rank {number}", handwritten, timeout_s,
                                 strict=strict, draw=draw, progress=progress if number == 0 else None,
                                 budget_s=budget_s)  # fmt: skip
        outcome = capture.outcome
        entries.append(RankEntry(number, folder, outcome.status, outcome.error, f"{folder}/{CAPTURE_DIR}"))
        runs.append(result.run)
    ranked = RankedRun(
        title=title,
        created=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        tool_version=__version__,
        source_dir=source,
        ranks=tuple(entries),
        launch=captured.launch,
        error=captured.error.one_line() if captured.error is not None else None,
    )
    summaries = _summaries(ranked, runs)
    index = write_report(render_ranks(ranked, summaries), out_dir)
    return RankedResult(ranked, tuple(runs), divergences(summaries), index, captured.error,
                        report_s=time.perf_counter() - started)  # fmt: skip


def write_landing(
    out_dir: Path, ranked: RankedRun
) -> tuple[Path, tuple[CompileRun, ...], tuple[Divergence, ...]]:
    """The landing page of ``ranked`` from its ranks' lens.json files (records only)."""
    runs = tuple(load_run(out_dir / entry.folder) for entry in ranked.ranks)
    summaries = _summaries(ranked, runs)
    return write_report(render_ranks(ranked, summaries), out_dir), runs, divergences(summaries)


def read_ranked(folder: Path) -> RankedRun | None:
    try:
        return RankedRun.from_json((folder / RANKS_JSON).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError) as exc:
        raise InputFolderError(f"{folder / RANKS_JSON}: not a readable ranks document ({exc})") from exc


def prepare_ranked_out(out_dir: Path, *, rerun: bool = False) -> None:
    """Like ``prepare_out_dir``: a new or empty folder, or an earlier multi-rank report (its landing replaced;
    with ``rerun``, its ranks and capture too: a new capture replaces them)."""
    if not (out_dir / RANKS_JSON).is_file():
        prepare_out_dir(out_dir, replace=LANDING_PAGES)
        return
    for name in LANDING_PAGES:
        with contextlib.suppress(FileNotFoundError):
            (out_dir / name).unlink()
    if rerun:
        for child in out_dir.iterdir():
            if (
                child.is_dir()
                and not child.is_symlink()
                and (child.name == CAPTURE_DIR or RANK_FOLDER.match(child.name))
            ):
                shutil.rmtree(child)


def _summaries(ranked: RankedRun, runs: tuple[CompileRun, ...] | list[CompileRun]) -> list[RankSummary]:
    return [
        summarize(entry.rank, entry.folder, run, status=entry.status, error=entry.error)
        for entry, run in zip(ranked.ranks, runs, strict=True)
    ]


def _report_rank(source: RankSource, target: Path, title: str, strict: bool, draw: bool) -> CompileRun:
    """One rank's ordinary report in ``target``."""
    if source.layout is None:
        return report_folder(source.folder, target, strict=strict, draw=draw).run
    prepare_out_dir(target, replace=REPORT_PAGES)
    run = build_run(source.folder, None, strict=strict, allow_empty=True, title=title, layout=source.layout)
    render(run, target, draw=draw)
    return run


def _earlier_source(previous: RankedRun | None, rank: int) -> str:
    """What a rank's report was first built from (a re-render in place builds it from its own folder)."""
    entry = next((e for e in previous.ranks if e.rank == rank), None) if previous is not None else None
    return entry.source if entry is not None else ""


def _describe(source: RankSource, base: Path) -> str:
    if source.layout is None:
        return _relative(source.folder, base)
    files = [_relative(p, base) for p in (*source.layout.trace_files, *source.layout.run_dirs)]
    return ", ".join(files)


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix() or "."
    except ValueError:
        return str(path)
