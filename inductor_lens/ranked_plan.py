"""Several ranks (the pipeline for a torchrun job), the plan: which ranks there are to report, and from what.

``plan_ranks(folder, previous)`` lists a job's ranks (``PlannedRank``): from the ranks document of a
multi-rank report re-rendered in place, else from the ranks ``find_ranks`` finds in a job's folder
(``rank<r>/`` folders or per-rank TORCH_TRACE logs), each with its TORCH_TRACE logs for the light pass, how
its process ended, the times its capture.json holds and its profile trace; ``captured_rank`` does the same for a rank of a
capture just made. ``report_source`` says where a rank's full report is built from. ``read_ranked`` and
``prepare_ranked_out`` read and prepare a multi-rank report's folder.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from .capture import CAPTURE_DIR, Capture, find_capture_dir
from .errors import InputFolderError, LensError
from .exchange.files import PROFILE_TRACE_FILE, RESULT_FILE, read_bench_data, read_capture_result
from .parse.layout import DebugLayout, locate
from .parse.ranks import RANK_FOLDER, RankSource, find_ranks, rank_folder_name
from .ranked_light import ProfileTrace
from .records.ranks import RANKS_JSON, RankedRun
from .report.folders import LENS_JSON, prepare_out_dir

LANDING_PAGES = ("index.html", RANKS_JSON)


@dataclass(frozen=True)
class PlannedRank:
    """One rank to report: where its full report is built from, and its TORCH_TRACE logs for the light pass."""

    rank: int
    source: RankSource | None  # None: nothing but its logs to build a full report from
    logs: tuple[str, ...]
    status: str = "ok"
    error: str | None = None
    described: str = ""
    cold_compile_s: float | None = None  # its capture's, where it has one
    step_ms: float | None = None
    profile: ProfileTrace | None = None  # its capture's profile trace, where its full report would time one


def plan_ranks(folder: Path, previous: RankedRun | None) -> list[PlannedRank]:
    """The ranks of ``folder``: those of its ranks document (a multi-rank report re-rendered in place: the ranks
    with a full report are rebuilt from it), else those ``find_ranks`` finds."""
    if previous is not None and previous.ranks:
        plan = []
        for entry in previous.ranks:
            own = folder / entry.folder
            source = RankSource(entry.rank, own) if entry.report and (own / LENS_JSON).is_file() else None
            if source is None and not entry.logs:
                raise InputFolderError(f"{own}: rank {entry.rank} has neither a report nor TORCH_TRACE logs "
                                       f"listed in {folder / RANKS_JSON}; report the job's logs again")  # fmt: skip
            times = _capture_times(own)
            plan.append(PlannedRank(entry.rank, source, entry.logs, entry.status, entry.error,
                                    entry.source or entry.folder, *times))  # fmt: skip
        return plan
    sources = find_ranks(folder)
    if not sources:
        raise InputFolderError(
            f"{folder}: no rank's output found (expected rank<r>/ folders or per-rank TORCH_TRACE logs)"
        )
    plan = []
    for source in sources:
        status, error = _capture_status(source)
        times = _capture_times(source.folder) if source.layout is None else (None, None, None)
        plan.append(
            PlannedRank(source.rank, source, _logs(source), status, error, _describe(source, folder), *times)
        )
    return plan


def captured_rank(number: int, capture: Capture, out_dir: Path) -> PlannedRank:
    """A rank of a capture just made: its outcome as the launcher saw it, its TORCH_TRACE logs and times."""
    folder = out_dir / rank_folder_name(number)
    source = RankSource(number, folder)
    outcome = capture.outcome
    return PlannedRank(number, source, _logs(source), outcome.status, outcome.error, f"{folder.name}/{CAPTURE_DIR}",
                       *_capture_times(folder))  # fmt: skip


def _logs(source: RankSource) -> tuple[str, ...]:
    """A rank's TORCH_TRACE logs, absolute paths."""
    if source.layout is not None:
        files = source.layout.trace_files
    else:
        try:
            files = locate(source.folder, allow_empty=True).trace_files
        except (OSError, LensError):
            return ()
    return tuple(str(path.resolve()) for path in files)


def _capture_status(source: RankSource) -> tuple[str, str | None]:
    """How a rank's process ended, where its folder holds its capture (capture.json)."""
    capture_dir = find_capture_dir(source.folder) if source.layout is None else None
    result = read_capture_result(capture_dir / RESULT_FILE) if capture_dir is not None else None
    if result is None or result.status == "ok":
        return "ok", None
    return "failed", result.error


def _capture_times(folder: Path) -> tuple[float | None, float | None, ProfileTrace | None]:
    """The first compiled call, the compiled step (median, ms) and the profile trace a rank's capture holds, as
    its full report reads them (bench/attach_measurements: the trace beside a capture.json whose timing did not
    fail); None for each without a capture or a readable one."""
    capture_dir = find_capture_dir(folder)
    if capture_dir is None:
        return None, None, None
    try:
        result = read_capture_result(capture_dir / RESULT_FILE)
        bench = read_bench_data(capture_dir / RESULT_FILE)
    except LensError:
        return None, None, None
    timed = bench.end_to_end if bench is not None else None
    step = timed.compiled.median_ms if timed is not None and timed.eager and timed.compiled else None
    trace = capture_dir / PROFILE_TRACE_FILE
    profile = (str(trace.resolve()), bench.device) if bench is not None and not bench.error and trace.is_file() else None
    return (result.cold_compile_s if result is not None else None), step, profile


def report_source(rank: PlannedRank, source_dir: str) -> RankSource:
    """Where a rank's full report is built from: its own folder, the capture its logs lie in (``compile --nproc``,
    ``run -- torchrun``: ``rank<r>/capture/trace/``), the job's folder again, else its logs alone."""
    if rank.source is not None:
        return rank.source
    above = Path(rank.logs[0]).parents if rank.logs else ()
    if len(above) > 2 and find_capture_dir(above[2]) == above[1]:
        return RankSource(rank.rank, above[2])
    found = next((s for s in find_ranks(Path(source_dir)) if s.rank == rank.rank), None)
    if found is not None:
        return found
    logs = tuple(Path(log) for log in rank.logs)
    layout = DebugLayout(root=logs[0].parent, run_dirs=(), graph_folders=(), trace_files=logs, log_files=(),
                         capture_json=None)  # fmt: skip
    return RankSource(rank.rank, logs[0].parent, layout)


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
