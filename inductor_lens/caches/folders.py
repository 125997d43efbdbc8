"""Tooling beside the pipeline, the caches: where each cache is. Paths are resolved the way torch and Triton
resolve them (environment variables first, then their defaults; see ``CACHE_DEFAULTS`` for the versions), and
inductor-lens's own caches (hand-written autotune, render) are written one whole entry at a time.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import tempfile
from pathlib import Path

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


def cache_dir(name: str) -> Path:
    """Where a clearable cache (``CLEARABLE``) is, resolved as torch, Triton and inductor-lens resolve theirs."""
    return {"inductor": inductor_dir, "triton": triton_dir, "handwritten": handwritten_dir, "render": render_dir}[name]()[0]
