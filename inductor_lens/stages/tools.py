"""Compiler stages: the CUDA binary tools Triton's wheel ships (cuobjdump, nvdisasm, ptxas), run on a cubin.

They run on any Linux machine, without a GPU: the SASS of a cubin (``nvdisasm -c -gi``: code only, with the
Python line of each instruction from the cubin's line table, inlined calls included), and its resources
(``cuobjdump -res-usage``: registers and local memory per thread). Each tool is looked up beside Triton
(``triton/backends/nvidia/bin``), then through Triton's own variables (``TRITON_CUOBJDUMP_PATH``, ...),
then on the PATH; a missing tool is a note on the page, not an error.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

TOOL_TIMEOUT_S = 120


def tool_path(name: str) -> str | None:
    """The path of ``cuobjdump``, ``nvdisasm`` or ``ptxas``, or None where this machine has none."""
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / name
        if bundled.is_file():
            return str(bundled)
    named = os.environ.get(f"TRITON_{name.upper()}_PATH")
    if named and Path(named).is_file():
        return named
    return shutil.which(name)


@dataclass(frozen=True)
class Resources:
    registers: int | None
    local_bytes: int | None
    shared_bytes: int | None  # static shared memory (Triton's is dynamic: its metadata says)


_USAGE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def resource_usage(cubin: bytes, kernel: str) -> Resources | None:
    """``cuobjdump -res-usage`` of the kernel's function in the cubin; None without the tool."""
    output = _run_on_cubin("cuobjdump", ["-res-usage"], cubin)
    if output is None:
        return None
    # "Function <name>:" then its usage line
    block = output.split(f"Function {kernel}:", 1)[-1]
    found = _USAGE.search(block)
    if found is None:
        return Resources(None, None, None)
    return Resources(int(found.group(1)), int(found.group(4)), int(found.group(3)))


def disassemble(cubin: bytes) -> str | None:
    """The SASS of the cubin with its line table (``nvdisasm -c -gi``), else ``cuobjdump -sass`` without
    lines; None without either tool."""
    text = _run_on_cubin("nvdisasm", ["-c", "-gi"], cubin)
    if text is None:
        text = _run_on_cubin("cuobjdump", ["-sass"], cubin)
    return text


def _run_on_cubin(tool: str, options: list[str], cubin: bytes) -> str | None:
    path = tool_path(tool)
    if path is None:
        return None
    with tempfile.TemporaryDirectory(prefix="inductor-lens-cubin-") as folder:
        file = Path(folder) / "kernel.cubin"
        file.write_bytes(cubin)
        try:
            done = subprocess.run(
                [path, *options, str(file)],
                capture_output=True,
                text=True,
                timeout=TOOL_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    return done.stdout if done.returncode == 0 else None
