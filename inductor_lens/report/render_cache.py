"""Report stage: what a render keeps for the next one (Graphviz layouts, highlighted code), by content hash.

An entry is a file ``<sha256>.<suffix>`` in ``<lens cache>/render`` (``inductor-lens cache`` shows and clears
it). The key hashes everything the content depends on (the input text and the tool's version), so an entry
is never stale, only unused. Each entry starts with a line holding its content's length and hash: an entry
truncated, emptied or otherwise damaged (a full disk, a killed writer) fails it, is removed and made again.
A file that cannot be read or written is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from ..caches import render_dir, write_entry

# The first line of an entry: this tag, the content's length in characters and its sha256.
_HEADER = "inductor-lens-render"


def key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def folder() -> Path:
    return render_dir()[0]


def has(entry_key: str, suffix: str) -> bool:
    """Whether an entry is there (``read`` checks it is whole)."""
    return (folder() / f"{entry_key}.{suffix}").is_file()


def read(entry_key: str, suffix: str) -> str | None:
    """The entry's content; None when missing, unreadable or damaged (a damaged entry is removed)."""
    path = folder() / f"{entry_key}.{suffix}"
    try:
        text = path.read_bytes().decode("utf-8")  # bytes: a newline translated on the way would fail the check
    except (OSError, UnicodeDecodeError):
        text = None
    content = _checked(text) if text is not None else None
    if content is None and text is not None:
        with contextlib.suppress(OSError):
            path.unlink()
    return content


def write(entry_key: str, suffix: str, content: str) -> None:
    with contextlib.suppress(OSError, UnicodeError):  # an unwritable cache only costs the next render the work again
        write_entry(folder() / f"{entry_key}.{suffix}", f"{_HEADER} {len(content)} {_digest(content)}\n{content}")


def _checked(text: str) -> str | None:
    """The content of an entry whose first line matches it, else None."""
    header, newline, content = text.partition("\n")
    fields = header.split(" ")
    if not newline or len(fields) != 3 or fields[0] != _HEADER:
        return None
    if fields[1] != str(len(content)) or fields[2] != _digest(content):
        return None
    return content


def _digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()
