"""Tooling beside the pipeline, the caches: what each holds (its size, its parts) and clearing it safely.

Clearing removes a cache's *content*, only from a folder that looks like that cache, never follows a symlink out
of it (a link is removed, not its target), and carries on when files vanish or cannot be removed while it runs.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LensError
from .folders import cache_dir, handwritten_dir, inductor_dir, render_dir, triton_dir
from .runs import check_no_runs

RENDER_ENTRY = re.compile(r"^[0-9a-f]{64}\.(svg|html)$")
# The parts of an Inductor cache folder, by entry name (seen in torch 2.11 and 2.13).
INDUCTOR_PARTS = {
    "fxgraph": "FX graph cache (compiled graphs)",
    "aotautograd": "AOT autograd cache",
    "triton": "Triton kernels compiled by Inductor",
    "precompiled_headers": "precompiled C++ headers",
    "cache": "local autotune and remote-cache fallbacks",
    "locks": "file locks",
}
KERNEL_DIR = re.compile(r"^[a-z0-9_]{2}$")  # generated kernel code, by the first two characters of its hash
TRITON_ENTRY = re.compile(r"^[A-Za-z0-9_-]{32,}$")  # one folder per kernel hash
# One file per tuned (kernel, shape class, dtypes, device, Triton version): <kernel>-<hash>.json.
HANDWRITTEN_ENTRY = re.compile(r"^(?P<kernel>[A-Za-z_][A-Za-z0-9_]*)-[0-9a-f]{32}\.json$")
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "package.json", "Makefile")


class CacheError(LensError):
    """A cache folder that cannot safely be cleared."""

    exit_code = 12


@dataclass(frozen=True)
class Usage:
    bytes: int = 0
    files: int = 0
    newest: float | None = None  # mtime
    oldest: float | None = None


@dataclass(frozen=True)
class CacheInfo:
    name: str
    path: Path
    source: str  # which variable or default gave the path
    exists: bool
    usage: Usage = Usage()
    parts: dict[str, Usage] = field(default_factory=dict)

    def describe(self, part: str) -> str:
        """What one part of the cache (a subfolder of Inductor's, grouped; a kernel's tuned configurations) holds."""
        if self.name == "handwritten":
            return f"tuned configurations of the hand-written {part}" if part != "other" else "not recognised"
        return INDUCTOR_PARTS.get(part, "generated kernel code" if part == "kernels" else "not recognised")

    def to_json(self) -> dict:
        def usage(u: Usage) -> dict:
            return {"bytes": u.bytes, "files": u.files, "newest": u.newest, "oldest": u.oldest}

        return {"name": self.name, "path": str(self.path), "source": self.source, "exists": self.exists,
                **usage(self.usage), "parts": {k: usage(v) for k, v in self.parts.items()}}  # fmt: skip


def usage(path: Path) -> Usage:
    """Bytes and files under ``path``, symlinks counted as themselves and never followed."""
    total = files = 0
    newest = oldest = None
    for root, dirs, names in os.walk(path, followlinks=False):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue  # vanished while we looked
            total += info.st_size
            files += 1
            newest = info.st_mtime if newest is None else max(newest, info.st_mtime)
            oldest = info.st_mtime if oldest is None else min(oldest, info.st_mtime)
    return Usage(total, files, newest, oldest)


def cache_info() -> list[CacheInfo]:
    found = []
    for name, (path, source) in (("inductor", inductor_dir()), ("triton", triton_dir()),
                                 ("handwritten", handwritten_dir()), ("render", render_dir()),
                                 ("reports", (Path("inductor-lens-reports").absolute(), "default"))):  # fmt: skip
        exists = path.is_dir()
        parts: dict[str, Usage] = {}
        if exists and name in ("inductor", "handwritten"):
            for entry in sorted(path.iterdir()):
                part = _part(name, entry.name)
                if part is None:
                    continue
                partial = usage(entry) if entry.is_dir() and not entry.is_symlink() else _single(entry)
                previous = parts.get(part, Usage())
                parts[part] = _add(previous, partial)
        found.append(CacheInfo(name, path, source, exists, usage(path) if exists else Usage(), parts))
    return found


def _part(name: str, entry: str) -> str | None:
    """Which part of the cache an entry is in (None: a file in flight, not worth a line)."""
    if name == "handwritten":
        if entry.startswith("."):
            return None
        found = HANDWRITTEN_ENTRY.match(entry)
        return found.group("kernel") if found else "other"
    return entry if entry in INDUCTOR_PARTS else "kernels" if KERNEL_DIR.match(entry) else "other"


def _single(entry: Path) -> Usage:
    try:
        info = entry.lstat()
    except OSError:
        return Usage()
    return Usage(info.st_size, 1, info.st_mtime, info.st_mtime)


def _add(a: Usage, b: Usage) -> Usage:
    times = [t for t in (a.newest, b.newest) if t is not None]
    olds = [t for t in (a.oldest, b.oldest) if t is not None]
    return Usage(a.bytes + b.bytes, a.files + b.files, max(times, default=None), min(olds, default=None))


def check_clearable(name: str, path: Path) -> None:
    """Refuse any folder that is not recognisably the named cache."""
    resolved = path.resolve()
    home = Path.home().resolve()
    if resolved == Path(resolved.anchor) or resolved == home or resolved in home.parents:
        raise CacheError(
            f"{name} cache {path} is {'/' if resolved == Path(resolved.anchor) else 'a home folder'}; refusing to clear it"
        )
    if resolved in Path.cwd().resolve().parents or resolved == Path.cwd().resolve():
        raise CacheError(f"{name} cache {path} holds the current folder; refusing to clear it")
    markers = [m for m in PROJECT_MARKERS if (resolved / m).exists()]
    if markers:
        raise CacheError(
            f"{name} cache {path} looks like a project folder (it has {', '.join(markers)}); refusing to clear it"
        )
    strangers = [e.name for e in resolved.iterdir() if not _belongs(name, e.name)]
    if strangers:
        shown = ", ".join(sorted(strangers)[:3])
        raise CacheError(f"{path} does not look like a {name} cache (it holds {shown}); refusing to clear it")


def _belongs(name: str, entry: str) -> bool:
    if entry.endswith(".lock") or entry.startswith("."):
        return True
    if name == "inductor":
        return entry in INDUCTOR_PARTS or bool(KERNEL_DIR.match(entry))
    if name == "handwritten":
        return bool(HANDWRITTEN_ENTRY.match(entry))
    if name == "render":
        return bool(RENDER_ENTRY.match(entry))
    return bool(TRITON_ENTRY.match(entry))


@dataclass
class ClearResult:
    name: str
    path: Path
    freed: int = 0
    removed: int = 0
    failed: list[str] = field(default_factory=list)
    would_remove: list[str] = field(default_factory=list)


def clear(name: str, *, dry_run: bool) -> ClearResult:
    """Remove the named cache's content (``dry_run``: only list it); refused while an inductor-lens run goes on."""
    path = cache_dir(name)
    result = ClearResult(name, path)
    if not path.is_dir():
        return result
    check_clearable(name, path)
    if not dry_run:
        check_no_runs()
    for entry in sorted(path.iterdir()):
        if dry_run:
            result.would_remove.append(entry.name)
            result.freed += (
                usage(entry).bytes if entry.is_dir() and not entry.is_symlink() else _single(entry).bytes
            )
        else:
            _remove(entry, result)
    return result


def _remove(entry: Path, result: ClearResult) -> None:
    """Remove a file, a symlink (not what it points to) or a folder tree, without following links."""
    try:
        info = entry.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        for root, dirs, names in os.walk(entry, topdown=False, followlinks=False):
            for item in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                _unlink(Path(root) / item, result)
            for item in dirs:
                _rmdir(Path(root) / item, result)
        _rmdir(entry, result)
    else:
        _unlink(entry, result)


def _unlink(path: Path, result: ClearResult) -> None:
    try:
        size = path.lstat().st_size
        path.unlink()
    except FileNotFoundError:
        return  # vanished: someone else cleared it
    except OSError as exc:
        result.failed.append(f"{path}: {exc.strerror or exc}")
        return
    result.freed += size
    result.removed += 1


def _rmdir(path: Path, result: ClearResult) -> None:
    if path.is_symlink():
        return  # a link to a folder was removed as a file above
    try:
        path.rmdir()
    except FileNotFoundError:
        return
    except OSError as exc:
        result.failed.append(f"{path}: {exc.strerror or exc}")


def check_cache(name: str) -> None:
    """Raise CacheError when the named cache's folder does not look like that cache."""
    path = cache_dir(name)
    if path.is_dir():
        check_clearable(name, path)
