"""Report stage: what a render keeps for the next one (Graphviz layouts, highlighted code), by content hash.

An entry is a file ``<sha256>.<suffix>`` in ``<lens cache>/render`` (``inductor-lens cache`` shows and clears
it). The key hashes everything the content depends on (the input text and the tool's version), so an entry
is never stale, only unused. A file that cannot be read or written is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from ..caches import render_dir, write_entry


def key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def folder() -> Path:
    return render_dir()[0]


def has(entry_key: str, suffix: str) -> bool:
    return (folder() / f"{entry_key}.{suffix}").is_file()


def read(entry_key: str, suffix: str) -> str | None:
    try:
        return (folder() / f"{entry_key}.{suffix}").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def write(entry_key: str, suffix: str, content: str) -> None:
    with contextlib.suppress(OSError):  # an unwritable cache only costs the next render the work again
        write_entry(folder() / f"{entry_key}.{suffix}", content)
