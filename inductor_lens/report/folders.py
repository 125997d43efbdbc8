"""Report stage, on disk: where reports go, which folders may be written into, and how to find one.

A report folder holds the pages, ``lens.json`` and, for ``compile``, the ``capture/`` folder the
model process filled. The tool writes into a folder only when it is new, empty, or an earlier report
of this tool (its lens.json, or a capture's spec.json), and then replaces only what it wrote there.

Nothing the folder held is lost on the way: one run at a time writes into it (``claimed_out_dir``: a lock
file naming the run, held with flock); a new report is written whole beside the old one, then moved in
(``swap_in``: renames, lens.json last), so a full disk leaves the old report as it was; a capture that fails
before the model runs (a bad model file, a device this machine lacks) puts the earlier capture back.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..caches import FileLock, register_run
from ..errors import (
    InputFolderError,
    InUseError,
    LensError,
    ModelFileError,
    NoSpaceError,
    RenderError,
    UsageError,
    no_space_message,
)
from ..exchange.files import CAPTURE_DIR, SPEC_FILE

LENS_JSON = "lens.json"
# The compile timeline as a Chrome trace, beside the pages (report/timeline_view.py).
TIMELINE_EXPORT = "compile_timeline.json"
# What the report's lens.json was built from (input_fingerprint): a re-render of unchanged input reads it back.
INPUT_STAMP = ".inductor-lens-input"
REPORTS_ROOT = Path("inductor-lens-reports")
# What a report folder holds that this tool wrote and may replace.
REPORT_PAGES = ("index.html", "compile.html", "handwritten.html", "source.html", "log.html", LENS_JSON, "graphs",
                "kernels", "compile", INPUT_STAMP, TIMELINE_EXPORT)  # fmt: skip
# The same for a comparison: its pages, and the reports of its configurations.
CONFIGS_DIR = "configs"
COMPARISON_PAGES = ("index.html", LENS_JSON, "diffs", CONFIGS_DIR)
_COMPARISON_HEAD = re.compile(r'\s*\{\s*"schema_version"\s*:\s*\d+\s*,\s*"comparison"\s*:')
# What ``swap_in`` removes when a new report lacks it: the pages of a run or of a comparison, never its capture.
_PAGES = (*REPORT_PAGES, "diffs")
# The tool's own files beside a report start with this: the lock, the input stamp, a report being written, the
# one it replaces, a capture set aside. They are not input, and do not make a folder foreign.
OWN_PREFIX = ".inductor-lens"
OUT_LOCK = f"{OWN_PREFIX}.lock"
_STAGING = f"{OWN_PREFIX}-new"
_RETIRED = f"{OWN_PREFIX}-old"
_PREVIOUS_CAPTURE = f"{OWN_PREFIX}-previous-capture"


def named_out_dir(name: str) -> Path:
    """The default folder of a report or comparison: ``inductor-lens-reports/<name>``."""
    return REPORTS_ROOT / (name or "report")


_SHORT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}
_OPTIONS_IN_NAME = 60  # characters of options spelled out in a folder's name; more are named by their hash


def run_folder_name(name: str, *, mode: str | None = None, train: bool = False, dtype: str | None = None,
                    dynamic: bool | None = None, options: Mapping[str, object] | None = None) -> str:
    """A run's default folder name: ``name``, then what sets the run apart from another of the same model:
    ``mlp-default``, ``mlp-default-train-bf16``, ``mlp-max-autotune-dynamic-epilogue_fusion-False``, so a
    ``compile --train`` does not replace the report of the ``compile`` before it."""
    parts = [name] + ([mode] if mode else [])
    parts += ["train"] if train else []
    parts += [_SHORT_DTYPES.get(dtype, dtype)] if dtype else []
    parts += [] if dynamic is None else ["dynamic" if dynamic else "static"]
    if options:
        spelled = "-".join(f"{key}-{value}" for key, value in sorted(options.items()))
        if len(spelled) > _OPTIONS_IN_NAME:
            spelled = "options-" + hashlib.sha256(spelled.encode()).hexdigest()[:8]
        parts.append(spelled)
    return safe_folder_name("-".join(parts))


def safe_folder_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)[:120]


def prepare_out_dir(out_dir: Path, *, replace: Sequence[str] = ()) -> None:
    """Refuse to write into a folder that holds anything but an earlier report of this tool; remove ``replace``
    (what the caller writes again) from it."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a folder")
    if not out_dir.exists() or not any(not e.name.startswith(OWN_PREFIX) for e in out_dir.iterdir()):
        _make_out_dir(out_dir)
        return
    ours = (out_dir / LENS_JSON).is_file() or (out_dir / CAPTURE_DIR / SPEC_FILE).is_file()
    if not ours:
        raise UsageError(
            f"--out {out_dir} is not empty and holds no inductor-lens report; choose a new or empty folder"
        )
    for name in replace:
        target = out_dir / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()


def _make_out_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(out_dir, exc, f"cannot create --out {out_dir}") from exc


def write_error(out_dir: Path, exc: OSError, what: str) -> LensError:
    """The one-line error of a failed write under ``out_dir``: a full disk names the space left on it."""
    if exc.errno == errno.ENOSPC:
        return NoSpaceError(no_space_message(out_dir, what))
    return RenderError(f"{what}: {exc.strerror or exc}; choose a folder you can write to")


@dataclass
class Claim:
    """A report folder this run writes into (``claimed_out_dir``), and what it held before."""

    out_dir: Path
    had_report: bool  # lens.json or a capture was there before this run
    previous_capture: Path | None = None  # the earlier capture/, set aside until this run's replaces it

    def keep_earlier_report(self, error: LensError | None) -> None:
        """Raise ``error`` where the capture failed before the model ran (the model file, a device this machine
        lacks) and the folder held a report: the earlier report and capture are kept, not replaced by an empty
        one. A failure later (the model raised, the compile failed) gets its report as ever."""
        if self.had_report and isinstance(error, (ModelFileError, UsageError)):
            raise type(error)(error.message, hint=f"{self.out_dir} keeps its earlier report")


@contextlib.contextmanager
def locked_out_dir(out_dir: Path, command: str) -> Iterator[None]:
    """Write into ``out_dir``, alone: refused (InUseError) while another run holds it; the run is registered for
    ``cache clear`` too. The folder is made where it is missing."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a folder")
    _make_out_dir(out_dir)
    lock = FileLock(out_dir / OUT_LOCK)
    try:
        holder = lock.acquire(command)
    except OSError as exc:
        raise write_error(out_dir, exc, f"cannot write into --out {out_dir}") from exc
    if holder is not None:
        raise InUseError(f"{out_dir} is in use by {holder.describe()}; wait for it or pass another --out")
    run = None
    try:
        run = register_run(command)
        yield
    finally:
        if run is not None:
            run.release()
        lock.release()


@contextlib.contextmanager
def claimed_out_dir(out_dir: Path, command: str, *, fresh_capture: bool = False) -> Iterator[Claim]:
    """Write into ``out_dir``, alone (``locked_out_dir``), as ``prepare_out_dir`` allows: a new or empty folder or
    an earlier report. With ``fresh_capture`` the earlier ``capture/`` is set aside for the new one, and put back
    where the block raises."""
    with locked_out_dir(out_dir, command):
        _recover_leftovers(out_dir)
        prepare_out_dir(out_dir)
        claim = Claim(out_dir, (out_dir / LENS_JSON).is_file() or (out_dir / CAPTURE_DIR).is_dir())
        if fresh_capture and (out_dir / CAPTURE_DIR).is_dir():
            claim.previous_capture = out_dir / f"{_PREVIOUS_CAPTURE}-{os.getpid()}"
            os.replace(out_dir / CAPTURE_DIR, claim.previous_capture)
        try:
            yield claim
        except BaseException:
            if fresh_capture and claim.had_report:
                _put_back(out_dir, claim.previous_capture)
            raise
        if claim.previous_capture is not None:
            shutil.rmtree(claim.previous_capture, ignore_errors=True)


def _put_back(out_dir: Path, previous: Path | None) -> None:
    """The capture as it was before this run: this run's (partial) one removed, the earlier one moved back."""
    shutil.rmtree(out_dir / CAPTURE_DIR, ignore_errors=True)
    if previous is not None:
        with contextlib.suppress(OSError):
            os.replace(previous, out_dir / CAPTURE_DIR)


def _recover_leftovers(out_dir: Path) -> None:
    """What a run killed mid-way left (the lock is ours, so its owner is gone): a report half written is removed;
    a capture it set aside comes back where it left none of its own, else goes."""
    for entry in sorted(out_dir.glob(f"{OWN_PREFIX}-*")):
        if entry.name.startswith(_PREVIOUS_CAPTURE) and not (out_dir / CAPTURE_DIR).exists():
            with contextlib.suppress(OSError):
                os.replace(entry, out_dir / CAPTURE_DIR)
        elif entry.name.startswith((_STAGING, _RETIRED, _PREVIOUS_CAPTURE)):
            shutil.rmtree(entry, ignore_errors=True)


def write_report_files(files: Mapping[str, str], out_dir: Path) -> None:
    """Write a report's files whole into a folder beside the report in ``out_dir``, then move them in
    (``swap_in``); a write that fails (a full disk) leaves ``out_dir`` as it was."""
    staging = out_dir / f"{_STAGING}-{os.getpid()}"
    try:
        _make_out_dir(out_dir)
        shutil.rmtree(staging, ignore_errors=True)
        for relative, text in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise write_error(out_dir, exc, f"cannot write the report to {out_dir} (the report there is unchanged)") from exc
    try:
        swap_in(staging, out_dir)
    except OSError as exc:
        raise write_error(out_dir, exc, f"cannot move the new report into {out_dir}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def swap_in(staging: Path, out_dir: Path) -> None:
    """Move a report written whole in ``staging`` into ``out_dir`` by renames (no space needed): each file
    replaces its old self, each folder (graphs/, kernels/...) the old folder, lens.json last; pages of the old
    report the new one lacks (``_PAGES``) go. What is replaced goes to a folder removed at the end."""
    retired = out_dir / f"{_RETIRED}-{os.getpid()}"
    shutil.rmtree(retired, ignore_errors=True)
    retired.mkdir()
    names = sorted(os.listdir(staging), key=lambda name: name == LENS_JSON)
    for name in [*[n for n in _PAGES if n not in names], *names]:
        old, new = out_dir / name, staging / name
        # a file replaces a file in one rename; anything else is moved aside first
        replaceable = name in names and old.is_file() and not old.is_symlink() and not new.is_dir()
        if (old.exists() or old.is_symlink()) and not replaceable:
            os.replace(old, retired / name)
        if name in names:
            os.replace(new, old)
    shutil.rmtree(retired, ignore_errors=True)


def input_fingerprint(folder: Path, *, skip: Path | None = None, strict: bool = False) -> str:
    """What a report built from ``folder`` depends on: every input file's path, size and modification time,
    and this inductor-lens's code (its version and the hash of its modules). Pages this tool wrote into
    ``folder`` (a report re-rendered in place) and the folder ``skip`` (the report, when inside) do not count."""
    digest = hashlib.sha256(f"{_code_fingerprint()}\0strict={strict}\n".encode())
    if folder.is_file():  # a TORCH_TRACE log given alone
        info = folder.stat()
        digest.update(f"{folder.name}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
        return digest.hexdigest()
    ours = set(REPORT_PAGES)
    skipped = skip.resolve() if skip is not None else None
    for root, dirs, names in os.walk(folder):
        here = Path(root)
        if here == folder:
            dirs[:] = [d for d in dirs if d not in ours and not d.startswith(OWN_PREFIX)]
            names = [n for n in names if n not in ours and not n.startswith(OWN_PREFIX)]
        dirs[:] = sorted(d for d in dirs if skipped is None or (here / d).resolve() != skipped)
        for name in sorted(names):
            try:
                info = (here / name).stat()
            except OSError:
                continue
            relative = (here / name).relative_to(folder).as_posix()
            digest.update(f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """This inductor-lens's version and a hash of its modules: a parser change must not reuse old records."""
    from ..version import __version__

    digest = hashlib.sha256(__version__.encode())
    package = Path(__file__).resolve().parent.parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def reusable_run_file(out_dir: Path, fingerprint: str) -> Path | None:
    """``out_dir``'s lens.json when it was built from exactly this input (its stamp says so), else None."""
    try:
        stamp = (out_dir / INPUT_STAMP).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return out_dir / LENS_JSON if stamp == fingerprint and (out_dir / LENS_JSON).is_file() else None


def write_input_stamp(out_dir: Path, fingerprint: str) -> None:
    with contextlib.suppress(OSError):  # without the stamp, the next render only parses again
        (out_dir / INPUT_STAMP).write_text(fingerprint + "\n", encoding="utf-8")


def find_index(path: Path | None) -> Path:
    """The index.html of a report: the given folder's (or file), else the newest under REPORTS_ROOT."""
    if path is None:
        candidates = sorted(REPORTS_ROOT.glob("*/index.html"), key=lambda p: p.stat().st_mtime)
        if not candidates:
            raise InputFolderError(f"no reports under {REPORTS_ROOT}/; give the report folder to open")
        return candidates[-1]
    index = path / "index.html" if path.is_dir() else path
    if not index.is_file():
        raise InputFolderError(f"{path}: no index.html (not an inductor-lens report)")
    return index


def is_comparison(folder: Path) -> bool:
    """Whether ``folder`` holds a comparison: its lens.json's top level has "comparison", not "run".

    Only the document's opening is read (``to_json`` writes schema_version, then that key): a run's
    lens.json can be large, and a run whose title says "comparison" must not pass for one.
    """
    try:
        with (folder / LENS_JSON).open(encoding="utf-8") as file:
            head = file.read(200)
    except (OSError, UnicodeDecodeError):
        return False
    return _COMPARISON_HEAD.match(head) is not None


def report_name(folder: Path) -> str:
    """A report's name for a page: its folder's (the folder of a lens.json given directly)."""
    folder = folder.parent if folder.name == LENS_JSON else folder
    return folder.resolve().name or "report"


def relative_link(folder: Path, base: Path) -> str:
    """``folder`` as a link from pages in ``base`` (a comparison's link to a configuration's report)."""
    return Path(os.path.relpath(folder.resolve(), base.resolve())).as_posix()
