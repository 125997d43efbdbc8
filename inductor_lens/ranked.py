"""The pipeline for several ranks (a torchrun job): one report per rank and a landing page across them.

    is_ranked(folder)                      whether ``report FOLDER`` finds two ranks or more there
    compile_ranks(spec, out_dir, nproc)    ``compile --nproc``: the model file in N ranks under torchrun
                                           (capture/ranks.py), then the landing page and the full reports as
                                           ``report_ranks`` builds them, each from its rank's capture (rank 0's
                                           always; the hand-written stage in these only)
    run_script_ranks(spec, out_dir, opts)  ``run -- torchrun OPTS script.py``: the script process in every rank,
                                           reported alike
    report_ranks(folder, out_dir)          the landing page first, from the light pass over every rank's
                                           TORCH_TRACE logs (ranked_light.py, in parallel); then, in parallel,
                                           the full report (as ``report_folder`` builds it) of one rank of each
                                           group that compiled the same, of the failed ranks and the stragglers
    report_rank(folder, out_dir, rank)     ``report FOLDER --rank R``: one more rank's full report, on demand
    write_landing(out_dir, ranked)         the landing page again, from the ranks' lens.json files (and the
                                           light pass for ranks without a full report)

A multi-rank report folder::

    index.html  ranks.json           the landing page (report/ranks_view.py) and the ranks document
    rank0/  rank1/ ...               capture/ (compile --nproc, run -- torchrun: the rank's own) and, for the
                                     ranks ranks.json marks ``report``, the full report: index.html, lens.json;
                                     the others on demand
    capture/                         compile --nproc: spec.json and launch.log (what torchrun printed)

Which ranks there are and what each is reported from: ranked_plan.py; their full reports, in parallel:
ranked_reports.py; what the ranks are compared by: records/rank_summary.py and records/rank_causes.py.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from .capture import PhaseCallback
from .capture.ranks import RankedCapture, capture_ranks, capture_script_ranks, check_launcher
from .errors import LensError, UsageError
from .options import CompileSpec, ScriptSpec
from .parse.ranks import find_ranks, rank_folder_name
from .pipeline import load_run
from .ranked_light import light_summaries
from .ranked_plan import PlannedRank, captured_rank, plan_ranks, prepare_ranked_out, read_ranked
from .ranked_reports import CaptureReports, full_reports
from .records import CompileRun
from .records.rank_causes import divergences, rank_list
from .records.rank_summary import summarize
from .records.ranks import RANKS_JSON, Divergence, RankedRun, RankEntry, RankSummary
from .report import write_report
from .report.folders import locked_out_dir, named_out_dir
from .report.ranks_view import render_ranks
from .version import __version__

__all__ = [
    "RankedResult", "compile_ranks", "is_ranked", "report_rank", "report_ranks", "run_script_ranks", "write_landing"
]  # fmt: skip

_STRAGGLER_REPORTS = 4  # stragglers given a full report at once, the lowest ranks first


@dataclass(frozen=True)
class RankedResult:
    ranked: RankedRun
    runs: tuple[CompileRun, ...]  # each full report's, in rank order
    divergences: tuple[Divergence, ...]
    index: Path
    error: LensError | None = None
    report_s: float | None = None
    summaries: tuple[RankSummary, ...] = ()  # every rank's, in rank order (runs: the full reports only)
    landing_s: float | None = None  # when the landing page was first written, from the start


def is_ranked(folder: Path) -> bool:
    return (folder / RANKS_JSON).is_file() or bool(find_ranks(folder))


def report_ranks(
    folder: Path,
    out_dir: Path | None = None,
    *,
    strict: bool = False,
    draw: bool = True,
    ranks: Sequence[int] = (),
    progress: PhaseCallback | None = None,
) -> RankedResult:
    """The landing page of every rank found in ``folder``, written first from the light pass over the ranks'
    TORCH_TRACE logs (ranked_light.py, the ranks spread over the cores); then the full report of one rank of
    each group that compiled the same (the ranks that differ among them), of every failed rank and of ``ranks``,
    in parallel; the others are built on demand (``report FOLDER --rank R``, ``report_rank``). ``progress`` is
    told where the landing page is once it is written."""
    started = time.perf_counter()
    previous = read_ranked(folder)
    plan = plan_ranks(folder, previous)
    if out_dir is None:
        out_dir = folder if previous is not None else named_out_dir(folder.resolve().name)
    prepare_ranked_out(out_dir)
    title = previous.title if previous is not None else folder.resolve().name
    source_dir = previous.source_dir if previous is not None else str(folder.resolve())
    keep = {r for r in ranks if r in {p.rank for p in plan}}
    if previous is not None:  # re-rendered in place: every rank that had its full report keeps it
        keep |= {r.rank for r in plan if r.source is not None}
    job = previous if previous is not None else RankedRun(title, "", __version__, source_dir)
    build = functools.partial(full_reports, out_dir=out_dir, title=title, source_dir=source_dir, strict=strict,
                              draw=draw)  # fmt: skip
    return _report_plan(plan, out_dir, job, build, keep=keep, started=started, progress=progress)


def _report_plan(
    plan: Sequence[PlannedRank],
    out_dir: Path,
    job: RankedRun,
    build: Callable[[Sequence[PlannedRank]], dict[int, CompileRun]],
    *,
    keep: set[int],
    started: float,
    progress: PhaseCallback | None,
    error: LensError | None = None,
    handwritten: bool = False,
) -> RankedResult:
    """The landing page of ``plan``'s ranks (``job``: the ranks document's other fields), written first from the
    light pass; then the full reports ``build`` makes, of the ranks in ``keep`` and of those ``chosen_ranks``
    picks; the page written again with them. ``handwritten``: the full reports built here run the hand-written
    stage (the page names their ranks)."""
    # a rank without a TORCH_TRACE log is compared from its full report: built first
    runs = build([r for r in plan if not r.logs])
    light = _light(plan)
    summaries = [light[r.rank] if r.rank in light else _summary(r, runs[r.rank]) for r in plan]
    chosen = set(runs) | chosen_ranks(summaries) | keep
    ranked = replace(
        job,
        created=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        tool_version=__version__,
        ranks=tuple(
            RankEntry(r.rank, rank_folder_name(r.rank), r.status, r.error, r.described, r.logs, r.rank in chosen)
            for r in plan
        ),
    )
    if handwritten:
        ranked = replace(ranked, handwritten=tuple(r.rank for r in plan if r.rank in chosen and r.status == "ok"))
    # the landing page first, from the light pass; written again once the full reports are built
    index = write_report(render_ranks(ranked, summaries, str(out_dir.resolve()), building=True), out_dir)
    landing_s = time.perf_counter() - started
    todo = [r for r in plan if r.rank in chosen and r.rank not in runs]
    if progress is not None:
        following = f" (next: the full report of rank(s) {rank_list(r.rank for r in todo)})" if todo else ""
        progress(f"landing page written: {index}{following}", landing_s)
    runs.update(build(todo))
    summaries = [_merged(light.get(r.rank), _summary(r, runs[r.rank])) if r.rank in runs else light[r.rank]
                 for r in plan]  # fmt: skip
    index = write_report(render_ranks(ranked, summaries, str(out_dir.resolve())), out_dir)
    return RankedResult(
        ranked, tuple(runs[r] for r in sorted(runs)), divergences(summaries), index, error,
        report_s=time.perf_counter() - started, summaries=tuple(summaries), landing_s=landing_s,
    )  # fmt: skip


def report_rank(folder: Path, out_dir: Path | None, rank: int, *, strict: bool = False, draw: bool = True) -> RankedResult:
    """``report FOLDER --rank R``: the full report of one rank, beside the landing page (which then links it);
    the landing page is made first where there is none yet."""
    previous = read_ranked(folder)
    if out_dir is None:
        out_dir = folder if previous is not None else named_out_dir(folder.resolve().name)
    landing = read_ranked(out_dir)
    if landing is None:
        return report_ranks(folder, out_dir, strict=strict, draw=draw, ranks=(rank,))
    entry = next((e for e in landing.ranks if e.rank == rank), None)
    if entry is None:
        known = rank_list(e.rank for e in landing.ranks)
        raise UsageError(f"--rank {rank}: {out_dir} holds no rank {rank} (its ranks: {known}); give one of those")
    plan = next(r for r in plan_ranks(out_dir, landing) if r.rank == rank)
    if not entry.report:
        full_reports([plan], out_dir, landing.title, landing.source_dir, strict, draw)
        landing = replace(landing, ranks=tuple(replace(e, report=e.report or e.rank == rank) for e in landing.ranks))
    index, runs, found, summaries = _landing(out_dir, landing)
    return RankedResult(landing, runs, found, index, summaries=summaries)


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
    is loaded), the landing page, then the full reports ``report_ranks`` would choose and rank 0's; a failed
    rank still gets its report."""
    check_launcher(nproc)
    if not spec.model_path.is_file():
        raise UsageError(f"{spec.model_path}: no such model file")
    with locked_out_dir(out_dir, f"compile --nproc {nproc} {spec.model_path}"):
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
    """``run -- torchrun OPTIONS script.py ARGS``: the script process in every rank torchrun starts, then the
    landing page and the full reports, as ``compile_ranks``."""
    check_launcher(1)
    with locked_out_dir(out_dir, f"run {spec.command}"):
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
    """The ranks' captures reported as ``report_ranks`` reports a job's logs: the landing page first, from the
    light pass; then the full report (as ``compile`` writes one) of rank 0, which reports its progress, and of the
    ranks ``chosen_ranks`` picks or whose compiled model was not accurate, the hand-written stage in theirs only
    (``budget_s``: each one's, ``--handwritten-budget``); the others built on demand (``report OUT --rank R``)."""
    started = time.perf_counter()
    captures = {int(c.capture_dir.parent.name.removeprefix("rank")): c for c in captured.captures}
    plan = [captured_rank(number, capture, out_dir) for number, capture in sorted(captures.items())]
    inaccurate = {n for n, c in captures.items() if c.outcome.accuracy is not None
                  and not c.outcome.accuracy.within_tolerance}  # fmt: skip
    error = captured.error.one_line() if captured.error is not None else None
    job = RankedRun(title, "", __version__, source, launch=captured.launch, error=error)
    build = CaptureReports(captures, out_dir, title, handwritten, timeout_s, strict, draw, progress, budget_s)
    return _report_plan(plan, out_dir, job, build, keep={0} & set(captures) | inaccurate, started=started,
                        progress=progress, error=captured.error, handwritten=handwritten)  # fmt: skip


def write_landing(
    out_dir: Path, ranked: RankedRun
) -> tuple[Path, tuple[CompileRun, ...], tuple[Divergence, ...]]:
    """The landing page of ``ranked`` again: each rank from its lens.json where its full report was built, else
    from the light pass over its TORCH_TRACE logs. Returns the page, the full reports' runs and the divergences."""
    index, runs, found, _ = _landing(out_dir, ranked)
    return index, runs, found


def chosen_ranks(summaries: Sequence[RankSummary]) -> set[int]:
    """The ranks that get a full report at once: the lowest of each group that compiled the same (the reference
    rank stands for the ranks identical to it), every failed rank, and the first stragglers."""
    chosen: dict[str, int] = {}
    for summary in summaries:
        chosen.setdefault(summary.fingerprint, summary.rank)
    failed = {s.rank for s in summaries if s.status != "ok"}
    slow = sorted({r for d in divergences(summaries) if d.aspect == "stragglers" for r in d.ranks})
    return set(chosen.values()) | failed | set(slow[:_STRAGGLER_REPORTS])


def _merged(light: RankSummary | None, full: RankSummary) -> RankSummary:
    """A rank compared as the light pass sees it (so every rank is compared alike: a debug folder's graphs may be
    named and ordered otherwise than the trace's), with its full report's outcome and times."""
    if light is None:
        return full
    return replace(light, status=full.status, error=full.error, cold_compile_s=full.cold_compile_s,
                   step_ms=full.step_ms, step_device_us=full.step_device_us, kernel_us=full.kernel_us,
                   step_collectives=full.step_collectives)  # fmt: skip


def _summary(rank: PlannedRank, run: CompileRun) -> RankSummary:
    capture = run.capture
    status = capture.status if capture is not None else rank.status
    error = capture.error if capture is not None else rank.error
    return summarize(rank.rank, rank_folder_name(rank.rank), run, status=status, error=error)


def _landing(
    out_dir: Path, ranked: RankedRun
) -> tuple[Path, tuple[CompileRun, ...], tuple[Divergence, ...], tuple[RankSummary, ...]]:
    plan = plan_ranks(out_dir, ranked)
    runs = {r.rank: load_run(r.source.folder) for r in plan if r.source is not None}
    light = _light(plan)
    summaries = [_merged(light.get(r.rank), _summary(r, runs[r.rank])) if r.rank in runs else light[r.rank]
                 for r in plan]  # fmt: skip
    index = write_report(render_ranks(ranked, summaries, str(out_dir.resolve())), out_dir)
    return index, tuple(runs[r] for r in sorted(runs)), divergences(summaries), tuple(summaries)


def _light(plan: Sequence[PlannedRank]) -> dict[int, RankSummary]:
    """The light pass over the logs of the ranks that have some (and their capture's profile trace), with the times
    their capture.json holds."""
    todo = [r for r in plan if r.logs]
    summaries = light_summaries([(r.rank, rank_folder_name(r.rank), r.logs, r.status, r.error, r.profile)
                                 for r in todo])  # fmt: skip
    return {
        r.rank: replace(summary, cold_compile_s=r.cold_compile_s, step_ms=r.step_ms)
        for r, summary in zip(todo, summaries, strict=True)
    }
