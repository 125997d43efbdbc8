"""Parse stage: Inductor's ``# ORIGIN:`` comments inside a kernel: which lines were generated for which op.

Inductor writes them with its ``comment_origin`` option, which the capture turns on: ``#`` comments in
Triton kernels, ``//`` in C++ kernels (``compat.ORIGIN_COMMENT``).
"""

from __future__ import annotations

from typing import Any

from ..records import OriginSegment
from . import compat
from .source_lines import from_traceback, user_frames


def origin_segments(source: str) -> tuple[OriginSegment, ...]:
    """Read Inductor's ``# ORIGIN:`` blocks (written with config.comment_origin) in a kernel's source.

    Each block names the FX ops (and their user stack) whose code follows it, up to the next block::

        # ORIGIN:
        # call_function aten.exp.default seq_nr:-1
        #   File "/m/model.py", line 11, in forward\\    y = torch.softmax(x * 0.5, dim=-1)\\
        # END ORIGIN
        tmp6 = libdevice.exp(tmp5)
    """
    segments: list[OriginSegment] = []
    pending_ops: list[str] = []
    pending_source: list = []
    current: dict[str, Any] | None = None
    in_block = False
    for number, raw in enumerate(source.splitlines(), start=1):
        line = raw.strip()
        if line.startswith(compat.ORIGIN_COMMENT["cpp"]):  # read a C++ kernel's comments as Triton's
            line = compat.ORIGIN_COMMENT["triton"] + line[len(compat.ORIGIN_COMMENT["cpp"]) :]
        if line == "# ORIGIN:":
            in_block = True
            if current is not None:
                segments.append(_segment(current))
                current = None
            continue
        if in_block and line.startswith("#"):
            body = line.lstrip("#").strip()
            if body.startswith("File "):
                pending_source.extend(user_frames(from_traceback(line.lstrip("#"))))
            elif body and body != "END ORIGIN":
                parts = body.split()
                pending_ops.append(parts[1] if len(parts) > 1 else parts[0])
            continue
        in_block = False
        if not line or line.startswith("#"):
            continue
        if pending_ops:
            if current is not None:
                segments.append(_segment(current))
            current = {"first": number, "last": number, "ops": pending_ops, "source": pending_source}
            pending_ops, pending_source = [], []
        elif current is not None:
            current["last"] = number
    if current is not None:
        segments.append(_segment(current))
    return tuple(segments)


def _segment(current: dict[str, Any]) -> OriginSegment:
    return OriginSegment(
        first_line=current["first"],
        last_line=current["last"],
        ops=tuple(dict.fromkeys(current["ops"])),
        source=tuple(dict.fromkeys(current["source"])),
    )
