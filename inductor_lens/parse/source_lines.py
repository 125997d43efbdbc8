"""Parse stage: lines of user code, as torch writes them in FX comments, tracebacks and ORIGIN blocks.

- FX graph files: ``# File: /m/model.py:12 in forward, code: y = x.relu()``
- tracebacks (provenance stack traces, graph break reasons)::

      File "/m/model.py", line 12, in forward
        y = x.relu()
            ^^^^^^^^

Frames inside torch, Python, site-packages or inductor-lens's own capture child are not the user's
code and are dropped by ``user_frames``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..records import SourceLine
from ..records.wording import is_tool_file as is_tool_file
from ..records.wording import is_user_file

_FX_COMMENT = re.compile(r"^(?P<file>.+?):(?P<line>\d+) in (?P<function>[^,]+?)(?:, code: (?P<code>.*))?$")
_TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+?)\s*$')
# torch's own package: never the model's source, not even as a library's (a model from transformers is).
_TORCH_PATH = re.compile(r"/(site|dist)-packages/torch/")


def from_fx_comment(text: str) -> SourceLine | None:
    match = _FX_COMMENT.match(text.strip())
    if match is None:
        return None
    code = match["code"].strip() if match["code"] else None
    return SourceLine(filename=match["file"], line=int(match["line"]), function=match["function"], code=code)


def from_traceback(text: str) -> list[SourceLine]:
    """Every frame of a Python traceback, with the code line under it (caret lines skipped)."""
    lines = text.replace("\\\\", "\n").splitlines()
    frames: list[SourceLine] = []
    for index, line in enumerate(lines):
        match = _TRACEBACK_FRAME.match(line)
        if match is None:
            continue
        code = None
        if index + 1 < len(lines) and not _TRACEBACK_FRAME.match(lines[index + 1]):
            candidate = lines[index + 1].strip()
            if candidate and set(candidate) - {"^", "~", " "}:
                code = candidate
        frames.append(SourceLine(match["file"], int(match["line"]), match["function"], code))
    return frames


def is_torch_file(path: str) -> bool:
    return bool(_TORCH_PATH.search(path))


def user_frames(frames: Iterable[SourceLine]) -> tuple[SourceLine, ...]:
    return tuple(f for f in frames if is_user_file(f.filename))


def distinct_lines(lines: Iterable[SourceLine]) -> tuple[SourceLine, ...]:
    """Each file and line once (the copy that has its code, where one has), ordered by file then line."""
    unique: dict[tuple[str, int], SourceLine] = {}
    for line in lines:
        key = (line.filename, line.line)
        if key not in unique or (unique[key].code is None and line.code):
            unique[key] = line
    return tuple(sorted(unique.values(), key=lambda s: (s.filename, s.line)))
