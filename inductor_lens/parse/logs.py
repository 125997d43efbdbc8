"""Parse stage: plain-text files found beside the debug tree.

- the captured process log (our ``capture.log``, or a ``*.log`` a user saved): Inductor logs
  ``[0/1] model__1_inference_3 debug trace: <folder>`` for every graph folder, the link from a
  folder to its Dynamo compile id when no TORCH_TRACE log is around;
- ``bench_k.txt``: what ``python output_code.py -k`` printed, one line per Triton kernel module,
  named by the first 10 characters of the kernel's cache file name;
- ``fx_graph_runnable.py``: its header records the torch version, the GPU and every non-default
  config value at compile time;
- ``torchdynamo/debug.log`` (TORCH_COMPILE_DEBUG): Dynamo's warnings, among them each graph break with its
  user line. Read only without a TORCH_TRACE log, whose break records are complete and carry compile ids;
  the debug log names a break once per place (torch warns once), so it gives a lower bound.
"""

from __future__ import annotations

import ast
import re
from pathlib import PurePath
from typing import Any

from ..records import GraphBreak, InductorBenchmark
from . import compat
from .diagnostics import Diagnostics
from .pyliteral import literal
from .source_lines import from_traceback, user_frames

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUMBER = r"\d+(?:\.\d+)?"  # what float() reads: "0.023", never "0.0.23"
_BENCH_LINE = re.compile(
    rf"(?P<module>c[a-z0-9]{{9}})\s+(?P<ms>{_NUMBER})ms\s+(?P<gb>{_NUMBER})\s*GB\s+(?P<gbs>{_NUMBER})\s*GB/s"
    r"(?:\s+(?P<regs>\d+) regs\s+(?P<spills>\d+) spills\s+(?P<smem>\d+) shared mem)?"
)
_BENCH_NOISE = re.compile(r"^(No kernel with benchmark functionality found|\s*$)")


def debug_trace_compile_ids(text: str) -> dict[str, str]:
    """Graph folder name -> compile id, from Inductor's ``debug trace:`` log lines."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if "debug trace:" in line and (match := compat.DEBUG_TRACE_LINE.search(line)):
            found[PurePath(match["path"].strip()).name] = match["compile_id"]
    return found


def parse_bench_k(text: str, where: str, diagnostics: Diagnostics) -> dict[str, InductorBenchmark]:
    """Kernel-module prefix (``cys54g25t4``) -> benchmark line."""
    results: dict[str, InductorBenchmark] = {}
    for line in _ANSI.sub("", text).splitlines():
        match = _BENCH_LINE.search(line)
        if match is None:
            if not _BENCH_NOISE.match(line):
                diagnostics.warn(where, f"unrecognised benchmark line: {line.strip()[:80]}")
            continue
        results[match["module"]] = InductorBenchmark(
            ms=float(match["ms"]),
            gb=float(match["gb"]),
            gb_per_s=float(match["gbs"]),
            registers=int(match["regs"]) if match["regs"] else None,
            spills=int(match["spills"]) if match["spills"] else None,
            shared_mem=int(match["smem"]) if match["smem"] else None,
        )
    return results


_RUNNABLE_VERSION = re.compile(r"^# torch (?P<what>version|cuda version|git version): (?P<value>\S+)\s*$")
_RUNNABLE_GPU = re.compile(r"^# (?P<name>.+?) : (?P<count>\d+)\s*$")
_RUNNABLE_CONFIG = re.compile(r"^torch\._inductor\.config\.(?P<key>[\w.]+) = (?P<value>.+)$")


def parse_runnable_header(text: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(facts, inductor config) from fx_graph_runnable.py: versions, GPU name, non-default options."""
    facts: dict[str, str] = {}
    config: dict[str, Any] = {}
    in_gpu_info = False
    for line in text.splitlines():
        if match := _RUNNABLE_VERSION.match(line):
            if match["value"] != "None":
                facts[match["what"]] = match["value"]
        elif line.startswith("# GPU Hardware Info"):
            in_gpu_info = True
            continue
        elif in_gpu_info and (match := _RUNNABLE_GPU.match(line)):
            facts.setdefault("gpu", match["name"].strip())
        elif match := _RUNNABLE_CONFIG.match(line):
            try:
                config[match["key"]] = literal(ast.parse(match["value"], mode="eval").body)
            except (SyntaxError, ValueError, RecursionError):  # null bytes (Python 3.10), deep nesting
                config[match["key"]] = match["value"]
        in_gpu_info = False
    return facts, config


# "Graph break from `Tensor.item()`, consider setting:" (2.13) and "Graph Break Reason: ..." (tlparse's form)
_BREAK_CAUSE = re.compile(r"^(?P<cause>Graph break (?:from|due to) .+?)(?:, consider setting:|:)?\s*$")
_BREAK_REASON = re.compile(r"^Graph Break Reason:\s*(?P<cause>.+)$")
_BREAK_AT = re.compile(r"^Graph break(?::| in user code at)\s*(?:from user code at:?)?\s*(?P<at>.*)$")


def debug_log_graph_breaks(text: str) -> list[GraphBreak]:
    """The graph breaks ``torchdynamo/debug.log`` names: one per ``Graph break: from user code at:``
    block, its cause from the ``Graph break from ...`` line before it (compile ids are not in this log)."""
    breaks: list[GraphBreak] = []
    lines = text.splitlines()
    cause = ""
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if match := _BREAK_REASON.match(line):
            cause = match["cause"].strip()
            continue
        at = _BREAK_AT.match(line)
        if at is None or "user code" not in line:
            if match := _BREAK_CAUSE.match(line):
                cause = match["cause"].strip()
            continue
        block: list[str] = []
        while index < len(lines) and (lines[index].startswith(" ") or not lines[index].strip()):
            if not lines[index].strip() and block:
                break
            block.append(lines[index])
            index += 1
        frames = from_traceback("\n".join(block))
        stack = tuple(user_frames(frames))
        breaks.append(
            GraphBreak(
                compile_id="",
                reason=cause or "graph break",
                detail="\n".join([line, *block]).strip(),
                location=stack[-1] if stack else (frames[-1] if frames else None),
                user_stack=stack,
            )
        )
        cause = ""
    return breaks
