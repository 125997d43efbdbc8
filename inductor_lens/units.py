"""Numbers as people read them: sizes, ages, percentages and step times, shared by the report's pages, the
comparison's verdict and the command line."""

from __future__ import annotations

import time


def format_bytes(value: int | float | None) -> str:
    if value is None:
        return "—"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def format_age(mtime: float | None) -> str:
    """How long ago a file time was: ``3 d``, ``5 h``, ``12 min``, ``40 s``."""
    if mtime is None:
        return "—"
    seconds = max(0.0, time.time() - mtime)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def format_percent(fraction: float | None) -> str:
    """A share, noise or gap's size: ``6.3%``."""
    return "—" if fraction is None else f"{100 * fraction:.1f}%"


def format_signed_percent(fraction: float | None) -> str:
    """A signed gap (+ = slower): ``+1.6%``."""
    return "—" if fraction is None else f"{100 * fraction:+.1f}%"


def format_ms(value: float | None) -> str:
    """A step time: ``0.640 ms``."""
    return "—" if value is None else f"{value:,.3f} ms"
