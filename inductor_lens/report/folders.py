"""Report stage, on disk: where reports go, which folders may be written into, and how to find one.

A report folder holds the pages, ``lens.json`` and, for ``compile``, the ``capture/`` folder the
model process filled. The tool writes into a folder only when it is new, empty, or an earlier report
of this tool (its lens.json, or a capture's spec.json), and then replaces only what it wrote there.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputFolderError, UsageError
from ..worker.files import CAPTURE_DIR, SPEC_FILE

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


def named_out_dir(name: str) -> Path:
    """The default folder of a report or comparison: ``inductor-lens-reports/<name>``."""
    return REPORTS_ROOT / (name or "report")


def safe_folder_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)[:120]


def prepare_out_dir(out_dir: Path, *, replace: Sequence[str]) -> None:
    """Refuse to write into a folder that holds anything but an earlier report of this tool."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a folder")
    if not out_dir.exists() or not any(out_dir.iterdir()):
        out_dir.mkdir(parents=True, exist_ok=True)
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
            dirs[:] = [d for d in dirs if d not in ours]
            names = [n for n in names if n not in ours]
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
