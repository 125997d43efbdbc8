"""Parse stage: the ranks of a folder that holds several processes' output (torchrun, DDP, FSDP jobs).

torch names a rank's TORCH_TRACE log ``dedicated_log_torch_trace_rank_<r>_<random>.log`` once a process
group is initialized (torch/_logging/_internal.py, LazyTraceHandler.emit), and writes ``"rank": <r>`` into
its records (trace_structured). A TORCH_COMPILE_DEBUG tree may be shared by the ranks: each process writes
its own ``run_<time>-pid_<pid>`` folder, and the pid is also in every trace line's prefix, which ties a run
folder to a rank. ``inductor-lens compile --nproc`` writes one report folder per rank, ``rank<r>/`` (each
with its own ``capture/``).

``find_ranks(folder)`` returns one RankSource per rank, in rank order, or nothing where the folder holds
fewer than two ranks (then it is an ordinary single-process report). Only file names, folder names and
the opening lines of each trace log are read here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import compat
from .layout import DebugLayout, GraphFolder, locate
from .trace_timeline import glog_process

__all__ = ["RankSource", "find_ranks", "rank_folder_name"]

# ``rank0``, ``rank_1``, ``rank-2``: a rank's own folder (``compile --nproc`` writes ``rank<r>``).
RANK_FOLDER = re.compile(r"^rank[_-]?(?P<rank>\d+)$")
TRACE_RANK = re.compile(r"^dedicated_log_torch_trace_rank_(?P<rank>\d+)_")
RUN_PID = re.compile(r"-pid_(?P<pid>\d+)$")
# A renamed log names no rank: its first records do (``"rank": 1``), if a process group was up by then.
_HEAD_LINES = 200
_RECORD_RANK = re.compile(r'"rank":\s*(?P<rank>\d+)\b')


@dataclass(frozen=True)
class RankSource:
    """Where one rank's output is. ``folder`` holds only this rank's files (a report or capture folder of
    its own) where ``layout`` is None; otherwise ``layout`` picks this rank's files out of a shared folder."""

    rank: int
    folder: Path
    layout: DebugLayout | None = None

    @property
    def is_report(self) -> bool:
        return self.layout is None and (self.folder / "lens.json").is_file()


def rank_folder_name(rank: int) -> str:
    """The folder of a rank's report inside a multi-rank report."""
    return f"rank{rank}"


def find_ranks(folder: Path) -> tuple[RankSource, ...]:
    """The ranks under ``folder`` (a multi-rank report, per-rank folders, or per-rank TORCH_TRACE logs
    with or without a shared debug tree); empty when there are fewer than two."""
    if not folder.is_dir():
        return ()
    own = _rank_folders(folder)
    if len(own) >= 2:
        return tuple(RankSource(rank, path) for rank, path in sorted(own.items()))
    return _shared_folder_ranks(folder)


def _rank_folders(folder: Path) -> dict[int, Path]:
    """``rank<r>/`` children that hold a report, a capture or debug output of their own."""
    found: dict[int, Path] = {}
    for child in sorted(folder.iterdir()):
        match = RANK_FOLDER.match(child.name)
        if match and child.is_dir() and not child.is_symlink() and _holds_output(child):
            found.setdefault(int(match["rank"]), child)
    return found


def _holds_output(folder: Path) -> bool:
    markers = ("lens.json", "capture.json", "capture/capture.json", "torch_compile_debug", "trace")
    return any((folder / marker).exists() for marker in markers)


def _shared_folder_ranks(folder: Path) -> tuple[RankSource, ...]:
    """Per-rank TORCH_TRACE logs in one folder (and a debug tree the ranks shared, split by pid)."""
    try:
        layout = locate(folder, allow_empty=True)
    except OSError:
        return ()
    logs: dict[int, list[Path]] = {}
    pids: dict[int, set[int]] = {}
    for path in layout.trace_files:
        rank, processes = _trace_rank(path)
        if rank is not None:
            logs.setdefault(rank, []).append(path)
            pids.setdefault(rank, set()).update(processes)
    if len(logs) < 2:
        return ()
    sources = []
    for rank in sorted(logs):
        runs = tuple(run for run in layout.run_dirs if _run_pid(run) in pids[rank])
        graph_folders = tuple(
            GraphFolder(g.path, g.run_dir) for g in layout.graph_folders if g.run_dir in runs
        )
        rank_layout = DebugLayout(
            root=layout.root,
            run_dirs=runs,
            graph_folders=graph_folders,
            trace_files=tuple(logs[rank]),
            # a process log shared by the ranks would mix them: only the trace and the debug tree are split
            log_files=(),
            capture_json=None,
        )
        sources.append(RankSource(rank, layout.root, rank_layout))
    return tuple(sources)


def _trace_rank(path: Path) -> tuple[int | None, set[int]]:
    """A trace log's rank (from its name, else its first records) and the process ids its lines name."""
    match = TRACE_RANK.match(path.name)
    rank = int(match["rank"]) if match else None
    processes: set[int] = set()
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for _, line in zip(range(_HEAD_LINES), handle, strict=False):
                if line.startswith("\t"):
                    continue
                if (pid := glog_process(line)) is not None:
                    processes.add(pid)
                if rank is None and compat.TRACE_LINE.match(line.rstrip("\n")):
                    rank = _record_rank(line)
    except OSError:
        return None, set()
    return rank, processes


def _record_rank(line: str) -> int | None:
    found = _RECORD_RANK.search(line)
    if found is None:
        return None
    try:
        value = json.loads(line[line.index("{") :]).get("rank")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def _run_pid(run_dir: Path) -> int | None:
    match = RUN_PID.search(run_dir.name)
    return int(match["pid"]) if match else None
