"""Parse stage: a graph break's entry in torch's graph-break registry (its ``GBxxxx`` code, explanation, hints).

Dynamo formats an unsupported construct as (``torch/_dynamo/exc.py:format_graph_break_message``, 2.13)::

    <gb_type>
      Explanation: <explanation, continued on lines indented by 4>
      Hint: <hint>            (any number of them)

      Developer debug context: <context>

     For more details about this graph break, please visit: https://.../gb/gb0124.html

The code is read from that link. A message without one (older torch) is looked up by its gb_type in the
registry file of the torch installed here (``torch/_dynamo/graph_break_registry.json``: 517 entries in 2.13,
``{"GB0124": [{"Gb_type": ..., "Explanation": ..., "Hints": [...]}]}``), read without importing torch; it
also fills the explanation and hints a message lacks (the registry's own text, with ``{placeholders}``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

_LINK = re.compile(r"/gb/gb(?P<number>\d{4})\.html")
_EXPLANATION = re.compile(r"^(?P<indent> *)Explanation: (?P<text>.*)$")
_HINT = re.compile(r"^(?P<indent> *)Hint: (?P<text>.*)$")
REGISTRY_FILE = ("_dynamo", "graph_break_registry.json")  # under torch's package folder, 2.8+


@dataclass(frozen=True)
class RegistryEntry:
    code: str | None  # "GB0124"
    gb_type: str  # "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    explanation: str
    hints: tuple[str, ...]


def registry_entry(message: str) -> RegistryEntry | None:
    """The registry's view of one graph-break message; None when the message is not in the registry's format."""
    lines = message.splitlines()
    at = next((i for i, line in enumerate(lines) if _EXPLANATION.match(line)), None)
    gb_type = next((lines[i].strip() for i in range(at - 1, -1, -1) if lines[i].strip()), "") if at else ""
    explanation, hints = "", []
    if at is not None:
        explanation, end = _indented(lines, at, _EXPLANATION)
        while end < len(lines) and _HINT.match(lines[end]):
            text, end = _indented(lines, end, _HINT)
            hints.append(text)
    link = _LINK.search(message)
    code = f"GB{link['number']}" if link else None
    known = _registry().get(code) if code else None
    if known is None and gb_type in _by_type():
        found, known = _by_type()[gb_type]
        code = code or found
    if code is None and not gb_type:
        return None
    if known is not None:
        explanation = explanation or str(known.get("Explanation", ""))
        listed = known.get("Hints")
        if not hints and isinstance(listed, list):
            hints = [hint for hint in listed if isinstance(hint, str)]
    return RegistryEntry(code, gb_type, explanation, tuple(hints))


def _indented(lines: list[str], at: int, first: re.Pattern[str]) -> tuple[str, int]:
    """The text of a field starting at line ``at`` and its continuation lines (indented 4 more)."""
    match = first.match(lines[at])
    assert match is not None
    parts, indent = [match["text"].strip()], len(match["indent"]) + 4
    end = at + 1
    while end < len(lines) and lines[end].startswith(" " * indent) and lines[end].strip():
        parts.append(lines[end].strip())
        end += 1
    return " ".join(p for p in parts if p), end


@functools.cache
def _registry() -> dict[str, dict[str, object]]:
    """code -> its newest entry, from the installed torch's registry file ({} without one)."""
    spec = importlib.util.find_spec("torch")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder).joinpath(*REGISTRY_FILE)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return {
                code: entries[-1]
                for code, entries in data.items()
                if isinstance(entries, list) and entries and isinstance(entries[-1], dict)
            }
    return {}


@functools.cache
def _by_type() -> dict[str, tuple[str, dict[str, object]]]:
    """gb_type -> (code, entry), the first code listing it (a type torch renumbered keeps its first)."""
    found: dict[str, tuple[str, dict[str, object]]] = {}
    for code, entry in _registry().items():
        found.setdefault(str(entry.get("Gb_type", "")), (code, entry))
    return found
