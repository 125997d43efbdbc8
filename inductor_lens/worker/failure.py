"""Stage 1 of the pipeline (capture), in the model and script processes: how a run fails, in one line.

Torch-free, so the entry modules (``capture.py``, ``script.py``, ``ranked.py``) can name a failure before torch
is imported.
"""

from __future__ import annotations


class Failure(Exception):
    """Ends the run with an error kind the parent maps to an exit code (see errors.py)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def first_line(exc: BaseException) -> str:
    """The first informative line of an exception message (torch's can run to pages). A line that only
    introduces the cause ("backend='inductor' raised:") takes the cause's line with it."""
    lines = [
        line.strip()
        for line in str(exc).splitlines()
        if line.strip()
        and not line.strip().startswith("Set TORCHDYNAMO_VERBOSE")
        and not line.strip().startswith("You can suppress")
    ]
    if not lines:
        return type(exc).__name__
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"[:400]
    return lines[0][:400]
