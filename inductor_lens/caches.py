"""Tooling beside the pipeline: the caches torch.compile and Triton keep on this machine, and inductor-lens's
own autotune cache of its hand-written kernels, shown and cleared safely.

Paths are resolved the way torch and Triton resolve them (environment variables first, then their
defaults; see ``CACHE_DEFAULTS`` for the versions). Clearing removes a cache's *content*, only from a
folder that looks like that cache, never follows a symlink out of it (a link is removed, not its
target), and carries on when files vanish or cannot be removed while it runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import json
import os
import re
import socket
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InUseError, LensError

try:
    import fcntl
except ImportError:  # not on Windows: runs there are not locked
    fcntl = None  # type: ignore[assignment]

# How each cache's folder is found. torch/_inductor/runtime/cache_dir_utils.py (2.11, 2.13):
# $TORCHINDUCTOR_CACHE_DIR, else <tmp>/torchinductor_<user>; Triton's knobs.cache (3.6, 3.7):
# $TRITON_CACHE_DIR, else $TRITON_HOME (default ~)/.triton/cache. Inductor keeps its own Triton
# kernels in <inductor>/triton/<device> unless TRITON_CACHE_DIR is set.
CACHE_DEFAULTS = {
    "inductor": "$TORCHINDUCTOR_CACHE_DIR, else <tmp>/torchinductor_<user>",
    "triton": "$TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache (TRITON_HOME defaults to ~)",
    "handwritten": "<lens cache>/handwritten-autotune; <lens cache> is $INDUCTOR_LENS_CACHE_DIR, else $XDG_CACHE_HOME/inductor-lens, else ~/.cache/inductor-lens",
    "render": "<lens cache>/render (the report's Graphviz layouts and highlighted code, by content hash)",
    "reports": "./inductor-lens-reports (written by inductor-lens; shown, never cleared)",
}
# The caches ``clear`` empties (the reports are only shown).
CLEARABLE = ("inductor", "triton", "handwritten", "render")
HANDWRITTEN_FOLDER = "handwritten-autotune"
RENDER_FOLDER = "render"
# The runs going on now, one lock file each (<pid>.lock): ``cache clear`` refuses while one is held.
RUNS_FOLDER = "runs"
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


def inductor_dir() -> tuple[Path, str]:
    if value := os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(value).absolute(), "TORCHINDUCTOR_CACHE_DIR"
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return Path(tempfile.gettempdir()) / ("torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)), "default"


def triton_dir() -> tuple[Path, str]:
    if value := os.environ.get("TRITON_CACHE_DIR"):
        return Path(value).absolute(), "TRITON_CACHE_DIR"
    home = os.environ.get("TRITON_HOME")
    base = Path(home) if home else Path.home()
    return (base / ".triton" / "cache").absolute(), "TRITON_HOME" if home else "default"


def lens_cache_dir() -> tuple[Path, str]:
    """inductor-lens's own caches: $INDUCTOR_LENS_CACHE_DIR, else $XDG_CACHE_HOME/inductor-lens, else ~/.cache/inductor-lens."""
    if value := os.environ.get("INDUCTOR_LENS_CACHE_DIR"):
        return Path(value).absolute(), "INDUCTOR_LENS_CACHE_DIR"
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return (Path(xdg) / "inductor-lens").absolute(), "XDG_CACHE_HOME"
    return (Path.home() / ".cache" / "inductor-lens").absolute(), "default"


def handwritten_dir() -> tuple[Path, str]:
    """The autotune cache of the hand-written kernels (``worker/handwritten/tuning.py``)."""
    base, source = lens_cache_dir()
    return base / HANDWRITTEN_FOLDER, source


def render_dir() -> tuple[Path, str]:
    """What the report keeps between renders (``report/render_cache.py``): Graphviz layouts (``<hash>.svg``)
    and highlighted code (``<hash>.html``), each by the hash of what produced it."""
    base, source = lens_cache_dir()
    return base / RENDER_FOLDER, source


def write_entry(path: Path, text: str) -> None:
    """Write one entry of inductor-lens's own caches atomically, safe with other processes writing the same
    entry: a reader never sees half a file. Raises OSError; the callers decide what a failed write costs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise


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


def cache_dir(name: str) -> Path:
    """Where a clearable cache (``CLEARABLE``) is, resolved as torch, Triton and inductor-lens resolve theirs."""
    return {"inductor": inductor_dir, "triton": triton_dir, "handwritten": handwritten_dir, "render": render_dir}[name]()[0]


def check_no_runs() -> None:
    """Raise InUseError while an inductor-lens run goes on: a compile uses the caches (torch keeps its precompiled
    headers in the shared Inductor cache even when the run's own caches are private)."""
    runs = running_runs()
    if runs:
        others = f" and {len(runs) - 1} other run(s)" if len(runs) > 1 else ""
        raise InUseError(f"not clearing the caches: {runs[0].describe()}{others} is running and uses them; "
                         "wait for it to end (nothing was removed)")  # fmt: skip


def check_cache(name: str) -> None:
    """Raise CacheError when the named cache's folder does not look like that cache."""
    path = cache_dir(name)
    if path.is_dir():
        check_clearable(name, path)


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock file: what it wrote into it when it took the lock."""

    pid: int | None
    host: str
    command: str
    started: float | None  # time.time()

    def describe(self) -> str:
        """``inductor-lens pid 4242 (compile samples/mlp.py, started 10:42:07)``."""
        if self.pid is None:
            return "another inductor-lens run"
        where = f" on {self.host}" if self.host and self.host != socket.gethostname() else ""
        started = f", started {dt.datetime.fromtimestamp(self.started):%H:%M:%S}" if self.started is not None else ""
        return f"inductor-lens pid {self.pid}{where} ({self.command or 'a run'}{started})"


class FileLock:
    """A lock file naming its holder (pid, host, command, start time), held with ``flock``: the kernel frees it when
    its holder dies, however it dies, so a lock file left behind by a killed run is free, not stuck."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, command: str) -> LockHolder | None:
        """Take the lock; None when taken, else who holds it. Raises OSError where the file cannot be created."""
        if fcntl is None:
            return None
        for _ in range(5):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                return holder
            except OSError:  # a file system without locks (some NFS): the run goes on unlocked
                os.close(fd)
                return None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # its holder removed it between our open and our flock: take the new one
                os.close(fd)
                continue
            named = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "started": time.time()}
            try:
                os.ftruncate(fd, 0)
                os.write(fd, json.dumps(named).encode())
            except OSError:
                pass  # held, only unnamed: a second run is refused all the same
            self._fd = fd
            return None
        return LockHolder(None, "", "", None)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # before the unlock: whoever opens it next makes a new file
        os.close(self._fd)
        self._fd = None


def held_by(path: Path) -> LockHolder | None:
    """Who holds the lock file ``path`` now; None when nobody does (a file left by a dead run is removed)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(fd)
    except OSError:
        return None
    else:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    finally:
        os.close(fd)


def _read_holder(fd: int) -> LockHolder:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return LockHolder(int(data["pid"]), str(data["host"]), str(data["command"]), float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return LockHolder(None, "", "", None)  # taken a moment ago and not yet named


def register_run(command: str) -> FileLock | None:
    """Mark a run as going on (``running_runs`` sees it until it is released or its process dies); None where the
    lens cache cannot be written: the run goes on, unseen by ``cache clear``."""
    folder = lens_cache_dir()[0] / RUNS_FOLDER
    lock = FileLock(folder / f"{os.getpid()}.lock")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        holder = lock.acquire(command)
    except OSError:
        return None
    return lock if holder is None else None


def running_runs() -> list[LockHolder]:
    """The inductor-lens runs going on now on this machine (those registered with ``register_run``)."""
    folder = lens_cache_dir()[0] / RUNS_FOLDER
    try:
        paths = sorted(folder.glob("*.lock"))
    except OSError:
        return []
    return [holder for path in paths if (holder := held_by(path)) is not None]
