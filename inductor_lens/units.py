"""Numbers as people read them: sizes, ages, percentages and step times, shared by the report's pages, the
comparison's verdict and the command line."""

from __future__ import annotations

import time

# Memory is counted in decimal (SI) units everywhere in the report and on the command line, as the
# bandwidths it is divided by (GB/s) are: 1 MB = 1,000,000 bytes. No page shows MiB or GiB.
BYTE_UNITS = ("B", "KB", "MB", "GB", "TB")


def format_bytes(value: int | float | None) -> str:
    """A size or an amount of memory: ``512 B``, ``263.3 MB``, ``2.1 GB`` (decimal units, ``BYTE_UNITS``)."""
    if value is None:
        return "—"
    size = float(value)
    if abs(round(size)) < 1000:
        return f"{size:.0f} B"
    for unit in BYTE_UNITS[1:-1]:
        size /= 1000
        if abs(round(size, 1)) < 1000:
            return f"{size:.1f} {unit}"
    return f"{size / 1000:,.1f} {BYTE_UNITS[-1]}"


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


def format_micros(value: float | None) -> str:
    """A duration given in microseconds: ``38.3 µs``, ``12.65 ms`` from 10 ms up."""
    if value is None:
        return "—"
    return f"{value / 1e3:,.2f} ms" if value >= 1e4 else f"{value:,.1f} µs"
