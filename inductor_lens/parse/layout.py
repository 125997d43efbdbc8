"""Parse stage: find the debug output inside a folder; no file content is read here.

Accepted: a report folder written by ``inductor-lens compile``, any folder holding a
``torch_compile_debug`` tree (a copy from a GPU machine), the tree itself, one ``run_*`` folder of
it, or a single graph folder. Graph folders live at
``torch_compile_debug/run_<timestamp>-pid_<pid>/torchinductor/<model>__<aot>_<kind>_<n>.<k>/``.
Without any, a folder of TORCH_TRACE logs, or one log file, is a *bare trace*: its graphs are rebuilt
from the log (``parse/__init__.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputFolderError
from . import compat

MAX_DEPTH = 4
# A comparison's warm processes write their own debug output under a configuration's report
# (``configs/<name>/warm-rounds/<k>/``): the configuration's graphs are its cold capture's.
WARM_ROUNDS_DIR = "warm-rounds"
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", ".mypy_cache", WARM_ROUNDS_DIR}
LOG_SIZE_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class GraphFolder:
    path: Path
    run_dir: Path | None


@dataclass(frozen=True)
class DebugLayout:
    root: Path
    run_dirs: tuple[Path, ...]
    graph_folders: tuple[GraphFolder, ...]
    trace_files: tuple[Path, ...]
    log_files: tuple[Path, ...]
    capture_json: Path | None

    def relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix() or "."
        except ValueError:
            return path.as_posix()


def locate(folder: Path, *, allow_empty: bool = False) -> DebugLayout:
    if not folder.exists():
        raise InputFolderError(f"{folder}: no such folder")
    if not folder.is_dir():
        if not _is_trace_log(folder):
            raise InputFolderError(
                f"{folder}: not a folder or a TORCH_TRACE log (give the folder that holds torch_compile_debug)"
            )
        path = folder.resolve()
        return DebugLayout(path.parent, (), (), (path,), (), None)
    root = folder.resolve()
    run_dirs, graph_folders = _graph_folders(root)
    trace_files = tuple(sorted(p for p in _walk_files(root) if compat.TRACE_FILE.match(p.name)))
    if not graph_folders and not trace_files and not allow_empty:
        raise InputFolderError(
            f"{folder}: no torch_compile_debug output found "
            "(expected torch_compile_debug/run_*/torchinductor/<graph>/output_code.py)"
        )
    capture_json = next(
        (p for p in (root / "capture" / "capture.json", root / "capture.json") if p.is_file()), None
    )
    return DebugLayout(
        root=root,
        run_dirs=run_dirs,
        graph_folders=graph_folders,
        trace_files=trace_files,
        log_files=_log_files(root, trace_files),
        capture_json=capture_json,
    )


def _is_trace_log(path: Path) -> bool:
    """A TORCH_TRACE log by its name, or (renamed) by its first record."""
    if compat.TRACE_FILE.match(path.name):
        return True
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline(1 << 16)
    except OSError:
        return False
    return compat.TRACE_LINE.match(first.rstrip("\n")) is not None


def _graph_folders(root: Path) -> tuple[tuple[Path, ...], tuple[GraphFolder, ...]]:
    if _is_graph_folder(root):
        return (), (GraphFolder(root, None),)
    run_dirs: list[Path] = []
    if (root / "torchinductor").is_dir():
        run_dirs.append(root)
    elif root.name == "torch_compile_debug":
        run_dirs.extend(_run_dirs(root))
    else:
        for directory in _walk_dirs(root):
            if directory.name == "torch_compile_debug":
                run_dirs.extend(_run_dirs(directory))
    folders = [
        GraphFolder(child, run)
        for run in run_dirs
        for child in sorted((run / "torchinductor").iterdir())
        if child.is_dir() and not child.is_symlink()
    ]
    folders.sort(key=lambda f: (str(f.run_dir), _creation_order(f.path.name), f.path.name))
    return tuple(run_dirs), tuple(folders)


def _run_dirs(debug_root: Path) -> list[Path]:
    return sorted(p for p in debug_root.iterdir() if p.is_dir() and (p / "torchinductor").is_dir())


def _is_graph_folder(path: Path) -> bool:
    return (path / "output_code.py").is_file() or (path / "fx_graph_readable.py").is_file()


def _creation_order(name: str) -> int:
    """The ``.k`` suffix counts graph folders in the order Inductor created them."""
    match = compat.GRAPH_FOLDER.match(name)
    if match and match["counter"] is not None:
        return int(match["counter"])
    return 1 << 30


def _walk_dirs(root: Path) -> Iterator[Path]:
    for current, dirs, _files in os.walk(root, followlinks=False):
        depth = len(Path(current).relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        if depth >= MAX_DEPTH:
            dirs[:] = []
        for name in dirs:
            yield Path(current) / name


def _walk_files(root: Path) -> Iterator[Path]:
    yield from (p for p in root.iterdir() if p.is_file())
    for directory in _walk_dirs(root):
        try:
            yield from (p for p in directory.iterdir() if p.is_file() and not p.is_symlink())
        except OSError:
            continue


def _log_files(root: Path, trace_files: tuple[Path, ...]) -> tuple[Path, ...]:
    """Process logs saved beside the debug tree: our capture/capture.log, or e.g. a run.log."""
    found: list[Path] = []
    for directory in (root, root / "capture"):
        if directory.is_dir():
            for path in sorted(directory.glob("*.log")):
                if path.is_file() and path not in trace_files and path.stat().st_size <= LOG_SIZE_LIMIT:
                    found.append(path)
    return tuple(found)
