"""Test helper: a TORCH_TRACE log read with nothing of inductor_lens, to check the parser against.

``output_codes(log)`` gives, in the order logged, each ``inductor_output_code`` record's compile id, the kernels its
payload defines (``name = async_compile.<kind>(``) and the FX graph cache's answer logged after it for the same
compile id (``fx_graph_cache_hit`` / ``_miss`` / ``_bypass``, or None); ``payload_after(lines, n)`` the payload
of the record on line n.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

KERNEL_DEFINITION = re.compile(r"^(\w+) = async_compile\.\w+\(", re.MULTILINE)


@dataclass
class OutputCode:
    compile_id: str
    kernels: list[str]
    code: str
    fx_cache: str | None = None


def _compile_id(envelope: dict) -> str:
    text = f"{envelope['frame_id']}/{envelope['frame_compile_id']}"
    return text + (f"_{envelope['attempt']}" if envelope.get("attempt") else "")


def payload_after(lines: list[str], number: int) -> str:
    """The payload of the record on line ``number``: the tab-led lines after it, tabs cut."""
    payload = []
    for following in lines[number + 1 :]:
        if not following.startswith("\t"):
            break
        payload.append(following[1:])
    return "\n".join(payload)


def output_codes(log: Path) -> list[OutputCode]:
    found: list[OutputCode] = []
    lines = log.read_text().splitlines()
    for number, line in enumerate(lines):
        if line.startswith("\t") or "{" not in line:
            continue
        envelope = json.loads(line[line.index("{") :])
        if "inductor_output_code" in envelope:
            code = payload_after(lines, number)
            found.append(OutputCode(_compile_id(envelope), KERNEL_DEFINITION.findall(code), code))
        name = envelope.get("artifact", {}).get("name", "") if isinstance(envelope.get("artifact"), dict) else ""
        if name.startswith("fx_graph_cache_") and found and found[-1].compile_id == _compile_id(envelope):
            found[-1].fx_cache = found[-1].fx_cache or name.removeprefix("fx_graph_cache_")
    return found
