"""Parse stage: the registry of what this version reads, in the spirit of tlparse's parser list.

Each thing a capture holds is declared once, as a ``Parser``: where it comes from (a file in a graph
folder, a TORCH_TRACE record kind, a trace artifact name, the process log), the name it goes by, a
one-line description, where its result goes in the data model, and the function that reads it, or,
for valid content this version does not show, the reason why. ``readers.py`` declares the parsers,
``known.py`` the content that is known but not shown; ``REGISTRY`` in ``readers.py`` holds both.

Dispatch goes through the registry: what it does not know is a counted warning ("not known to this
version"), an error under ``--strict``, and ``run`` is the safety net of every parser: an unexpected
exception inside one becomes a warning that names the parser and the file, so one odd file never
costs the report.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import LensError
from .diagnostics import Diagnostics

Source = Literal["graph file", "trace record", "trace artifact", "process log"]

# The warning the safety net gives; the fuzz harness counts the cases that reach it.
NET_MARK = "failed unexpectedly"


@dataclass(frozen=True)
class Parser:
    """One declared reader (``parse`` set) or one known thing this version does not show (``reason``)."""

    source: Source
    reads: str  # file name, record kind or artifact name; a glob (``*_pre_grad``) for a family of names
    description: str
    goes_to: str = ""  # the record field the result lands in ("GraphRecord.fx_graphs"); "" when not shown
    parse: Callable[..., Any] | None = None
    reason: str = ""  # why valid content is not shown
    torch: str = ""  # the torch versions it was seen in, or the torch source that writes it
    payload: bool = False  # trace records: keep the payload lines for the parser

    @property
    def name(self) -> str:
        return f"{self.source} {self.reads}"

    @property
    def shown(self) -> bool:
        return self.parse is not None


class Registry:
    """Lookup by source and name: exact names first, then glob families, in declaration order."""

    def __init__(self, parsers: Iterable[Parser]) -> None:
        self.parsers = tuple(parsers)
        self._exact: dict[tuple[str, str], Parser] = {}
        self._globs: list[Parser] = []
        for parser in self.parsers:
            if not (parser.parse is None) ^ (not parser.reason):
                raise ValueError(f"{parser.name}: declare either a parse function or a reason, not both")
            key = (parser.source, parser.reads)
            if key in self._exact:
                raise ValueError(f"{parser.name} is declared twice")
            if any(c in parser.reads for c in "*?["):
                self._globs.append(parser)
            else:
                self._exact[key] = parser

    def find(self, source: Source, name: Any) -> Parser | None:
        if not isinstance(name, str):
            return None
        parser = self._exact.get((source, name))
        if parser is None:
            parser = next(
                (p for p in self._globs if p.source == source and fnmatch.fnmatchcase(name, p.reads)), None
            )
        return parser

    def of(self, source: Source, goes_to: str | None = None) -> tuple[Parser, ...]:
        """The declared parsers of one source (those whose result goes to ``goes_to``), in order."""
        return tuple(
            p for p in self.parsers if p.source == source and (goes_to is None or p.goes_to == goes_to)
        )


def run(parser: Parser, where: str, diagnostics: Diagnostics, *args: Any, default: Any = None) -> Any:
    """Call one parser; an exception it did not mean to raise becomes a warning naming it and ``where``."""
    assert parser.parse is not None, parser.name
    try:
        return parser.parse(*args)
    except LensError:
        raise  # ParseError under --strict: already a one-line error
    except Exception as exc:
        diagnostics.warn(
            where, f"the {parser.name} parser {NET_MARK} ({type(exc).__name__}: {str(exc)[:200]}); skipped"
        )
        return default


def not_known(source: Source, name: Any) -> str:
    """The warning for content no declaration matches (a graph file's warning is placed at the file)."""
    if source == "graph file":
        return "file not known to this version; skipped"
    what = {"trace record": "record kind", "trace artifact": "artifact", "process log": "log"}[source]
    return f"{what} {name!r} not known to this version; skipped"
