"""Several ranks (the pipeline for a torchrun job), the full reports: each rank's ordinary report, built in
parallel over the cores; ``CaptureReports`` for the ranks of a capture just made (``compile --nproc``,
``run -- torchrun``), ``full_reports`` for the ranks of a job's folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from .capture import Capture, PhaseCallback
from .parse.ranks import RankSource, rank_folder_name
from .pipeline import _report_capture, build_run, render, report_folder
from .ranked_plan import PlannedRank, report_source
from .records import CompileRun
from .report.folders import REPORT_PAGES, prepare_out_dir


@dataclass(frozen=True)
class CaptureReports:
    """The full reports of a capture's ranks, as ``compile`` writes one (``budget_s``: each hand-written stage's):
    rank 0's here, reporting its progress, the others in parallel meanwhile; one after another where the
    hand-written stage runs (its checks time kernels on the device every rank's check uses: side by side they
    would slow each other)."""

    captures: Mapping[int, Capture]
    out_dir: Path
    title: str
    handwritten: bool
    timeout_s: float
    strict: bool
    draw: bool
    progress: PhaseCallback | None
    budget_s: float | None

    def __call__(self, ranks: Sequence[PlannedRank]) -> dict[int, CompileRun]:
        quiet = replace(self, progress=None)  # what crosses to another process: no callback
        jobs = {r.rank: (self if r.rank == 0 else quiet, r.rank) for r in ranks}
        return in_parallel(CaptureReports.report, jobs, here=0, parallel=not self.handwritten)

    def report(self, rank: int) -> CompileRun:
        return _report_capture(self.captures[rank], self.out_dir / rank_folder_name(rank), f"{self.title} · rank {rank}",
                               self.handwritten, self.timeout_s, strict=self.strict, draw=self.draw,
                               progress=self.progress, budget_s=self.budget_s).run  # fmt: skip


def full_reports(
    ranks: Sequence[PlannedRank], out_dir: Path, title: str, source_dir: str, strict: bool, draw: bool
) -> dict[int, CompileRun]:
    """The full reports of ``ranks``, in parallel over the cores where there are several."""
    jobs = {
        r.rank: (report_source(r, source_dir), out_dir / rank_folder_name(r.rank), f"{title} · rank {r.rank}", strict,
                 draw)
        for r in ranks
    }  # fmt: skip
    return in_parallel(_report_rank, jobs)


def in_parallel(
    work: Callable[..., CompileRun],
    jobs: Mapping[int, tuple[object, ...]],
    *,
    here: int | None = None,
    parallel: bool = True,
) -> dict[int, CompileRun]:
    """``work(*job)`` for each rank's job, in parallel over the cores where there are several (and ``parallel``);
    rank ``here``'s job in this process meanwhile (what it reports reaches the caller's callbacks)."""
    home = jobs.get(here) if here is not None else None
    away = {rank: job for rank, job in jobs.items() if rank != here}
    workers = min(len(away), (os.cpu_count() or 1) - (home is not None)) if parallel else 0
    if workers < (1 if home is not None else 2):
        return {rank: work(*jobs[rank]) for rank in sorted(jobs, key=lambda r: (r != here, r))}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {rank: pool.submit(work, *job) for rank, job in away.items()}
        built = {here: work(*home)} if here is not None and home is not None else {}
        return built | {rank: future.result() for rank, future in futures.items()}


def _report_rank(source: RankSource, target: Path, title: str, strict: bool, draw: bool) -> CompileRun:
    """One rank's ordinary report in ``target``."""
    if source.layout is None:
        return report_folder(source.folder, target, strict=strict, draw=draw).run
    prepare_out_dir(target, replace=REPORT_PAGES)
    run = build_run(source.folder, None, strict=strict, allow_empty=True, title=title, layout=source.layout)
    render(run, target, draw=draw)
    return run
