"""Numbers as people read them: sizes and ages, shared by the report's pages and the command line."""

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
