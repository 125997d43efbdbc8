"""Compiler stages: which PTX and SASS lines carry each line of the kernel's Python source.

Triton compiles with line info: its PTX holds ``.file N "path"`` and ``.loc N line col`` directives, and
ptxas, given ``-lineinfo``, keeps a line table in the cubin that ``nvdisasm -gi`` prints as
``//## File "path", line L`` above the instructions. The kernel's own file is the one of the function's first
location (its ``def`` line). Code of a helper inlined into the kernel (``triton_helpers.py``, Triton's
``standard.py``) has its ``.loc`` in the helper's file; the comment LLVM writes after it names the calls it
was inlined through (``// triton_helpers.py:304:28 @[ triton_helpers.py:315:46 @[ kernel.py:85:85 ] ]``), so
it counts for the kernel line of that chain (85). The cubin's table names the helper's line only: a SASS
instruction there counts for the kernel line whose PTX inlined that helper line, where only one did. Line 0
is "no line" (code the compiler made up).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..records.stages import LineSpans

_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:\s*,\s*\d+\s*,\s*\d+)?(?:\s+"([^"]*)")?')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(.*)$")
_INLINED = re.compile(r"inlined_at\s+(\d+)\s+(\d+)")
_CHAIN = re.compile(r"([^\s:@\[\]/]+):(\d+)(?::\d+)?")
_SASS_LOC = re.compile(r'File "([^"]*)", line (\d+)')


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@dataclass
class PtxLines:
    """{PTX line (1-based): kernel source line} for every instruction line (0: it carries none), and for each
    inlined helper line (file name, line) the kernel lines whose code inlined it."""

    lines: dict[int, int] = field(default_factory=dict)
    kernel_file: str | None = None
    helpers: dict[tuple[str, int], set[int]] = field(default_factory=dict)


def ptx_lines(ptx: str) -> PtxLines:
    lines = ptx.splitlines()
    files = {}
    for text in lines:
        found = _FILE.match(text)
        if found:
            directory, name = found.group(2), found.group(3)
            files[found.group(1)] = f"{directory.rstrip('/')}/{name}" if name else directory
    result = PtxLines()
    current: int | None = None
    for number, text in enumerate(lines, start=1):
        found = _LOC.match(text)
        if found:
            file, line = files.get(found.group(1), found.group(1)), int(found.group(2))
            if result.kernel_file is None and line:
                result.kernel_file = file
            current = (
                line
                if file == result.kernel_file
                else _caller_line(found.group(3), files, result.kernel_file)
            )
            if current and file != result.kernel_file:
                result.helpers.setdefault((_base(file), line), set()).add(current)
            continue
        stripped = text.strip()
        if stripped.startswith(("}", ".section")):
            current = None
        elif _is_instruction(stripped):
            result.lines[number] = current or 0
    return result


def _caller_line(rest: str, files: dict[str, str], kernel_file: str | None) -> int | None:
    """The kernel line an inlined location was called from: ``inlined_at`` or the comment's call chain."""
    inlined = _INLINED.search(rest)
    if inlined and files.get(inlined.group(1), inlined.group(1)) == kernel_file:
        return int(inlined.group(2))
    _, _, comment = rest.partition("//")
    kernel_name = _base(kernel_file or "")
    calls = [int(line) for name, line in _CHAIN.findall(comment) if name == kernel_name]
    return calls[-1] if calls else None


def _is_instruction(stripped: str) -> bool:
    return bool(stripped) and not stripped.startswith(("//", ".", "$", "{", "}", "@@"))


def sass_lines(sass: str, ptx: PtxLines | None = None) -> tuple[str, dict[int, int]]:
    """The SASS without nvdisasm's ``//##`` line comments, and {its instruction lines: kernel source line (0:
    none)}; ``ptx`` names the kernel's file and the helper lines each kernel line inlined."""
    kept: list[str] = []
    mapping: dict[int, int] = {}
    kernel_name = _base(ptx.kernel_file) if ptx and ptx.kernel_file else None
    helpers = ptx.helpers if ptx else {}
    current: int | None = None
    for text in sass.splitlines():
        if text.lstrip().startswith("//##"):
            places = [(_base(file), int(line)) for file, line in _SASS_LOC.findall(text)]
            if kernel_name is None and places:
                kernel_name = places[0][0]
            current = next((line for name, line in places if name == kernel_name), None)
            if current is None and places and len(callers := helpers.get(places[0], set())) == 1:
                current = next(iter(callers))
            continue
        kept.append(text)
        if "/*" in text and ";" in text:  # an instruction: /*0040*/ SHF.L.U32 R0, ... ;
            mapping[len(kept)] = current or 0
    return "\n".join(kept) + ("\n" if kept else ""), mapping


def line_spans(ptx: dict[int, int], sass: dict[int, int]) -> tuple[LineSpans, ...]:
    """Per kernel source line, its PTX and SASS line ranges: consecutive instructions of the same source line
    make one range (lines between them that are no instruction, labels and directives, included); an
    instruction of no source line (0) ends it."""
    ptx_ranges, sass_ranges = _ranges(ptx.items()), _ranges(sass.items())
    return tuple(
        LineSpans(line, tuple(ptx_ranges.get(line, ())), tuple(sass_ranges.get(line, ())))
        for line in sorted(set(ptx_ranges) | set(sass_ranges))
        if line
    )


def _ranges(mapping: Iterable[tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    ranges: dict[int, list[tuple[int, int]]] = {}
    previous: int | None = None
    for number, line in sorted(mapping):
        spans = ranges.setdefault(line, [])
        if previous == line and spans:
            spans[-1] = (spans[-1][0], number)
        else:
            spans.append((number, number))
        previous = line
    return ranges
