"""Parse stage: the tolerance policy shared by every parser.

Parsers never crash on content they do not recognise: they report it here, where it is counted
and later shown as a warning in the report. With ``strict=True`` (used by the tests and
``inductor-lens report --strict``) the first warning raises ParseError instead. Messages quote the
content they did not understand, so non-printable characters in them are escaped (``\\x00``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import ParseError, printable
from ..exchange.files import FileShapeError
from ..records import CompileRun, Diagnostic, DiagnosticLevel, ParseStats


class Diagnostics:
    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.files_seen = 0
        self.files_parsed = 0
        self._counts: dict[tuple[DiagnosticLevel, str, str], int] = {}

    def warn(self, where: str, message: str) -> None:
        """Content that a parser did not understand; it is skipped, counted and reported."""
        where, message = printable(where), printable(message)
        if self.strict:
            raise ParseError(f"{where}: {message}")
        self._add("warning", where, message)

    def note(self, where: str, message: str) -> None:
        """Something worth telling the reader that is not a parsing failure."""
        self._add("note", printable(where), printable(message))

    def _add(self, level: DiagnosticLevel, where: str, message: str) -> None:
        key = (level, where, message)
        self._counts[key] = self._counts.get(key, 0) + 1

    def stats(self) -> ParseStats:
        diagnostics = tuple(
            Diagnostic(level=level, where=where, message=message, count=count)
            for (level, where, message), count in self._counts.items()
        )
        return ParseStats(files_seen=self.files_seen, files_parsed=self.files_parsed, diagnostics=diagnostics)


def unreadable_capture_file(run: CompileRun, where: Path, exc: BaseException, consequence: str, strict: bool) -> CompileRun:
    """A capture file that could not be read (truncated, edited, from another version): ``run`` with a warning
    saying ``consequence`` and why, or with ``strict`` a ParseError."""
    detail = str(exc) if isinstance(exc, FileShapeError) else f"{type(exc).__name__}: {exc}"
    message = f"{consequence} ({detail})"[:300]
    if strict:
        raise ParseError(f"{where}: {message}") from exc
    warning = Diagnostic("warning", str(where), message)
    return replace(run, stats=replace(run.stats, diagnostics=(*run.stats.diagnostics, warning)))
