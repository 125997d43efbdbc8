"""Compiler stages: compile Inductor's Triton kernels here, ahead of time, for the capture's GPU target.

Where the capture left no Triton cache (a capture from elsewhere, a bare TORCH_TRACE log, a CPU machine
reading a GPU report), each kernel's source from the output code is compiled the way Inductor's
``CachingAutotuner._precompile_config`` compiles it: ``triton.compile(ASTSource(fn, signature, constants,
attrs), target=GPUTarget("cuda", cc, 32), options=...)``, with the kernel's own ``triton_meta`` (signature,
constants, divisibility attributes, fp fusion, ...) and the launch config the run chose (``cache.chosen_config``),
compile metadata and options built by torch's own ``_create_compile_meta`` and ``_create_compile_options``.
No GPU is needed: Triton's wheel ships ptxas.

The kernels compile in a child process (``python -m inductor_lens.worker.compile_child``, requests as JSON
on stdin):
Triton must run without its interpreter (which the caller may have on), a kernel module's import runs its
decorator, and a crash of the compiler must not take the report down. The child writes each kernel's source
to ``<work>/<n>/<kernel>.py`` (the file its line info names) and compiles into ``<work>/cache``, a Triton
cache read back like the capture's own (``cache.read_cache``). ``helpers``: the Triton helper modules kept
with the capture, which the kernels are compiled against (``compile_child.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..records.codec import JsonScalar

COMPILE_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class CompileRequest:
    key: str
    name: str
    source: str
    config: Mapping[str, JsonScalar]  # {} when the run's choice is unknown
    cc: int


@dataclass(frozen=True)
class CompileOutcome:
    folder: Path | None  # the cache entry's folder
    error: str = ""
    note: str = ""  # how the config was picked, where the child had to choose
    config: Mapping[str, JsonScalar] | None = None
    torch_version: str = ""  # the torch of the compiling process
    helpers: str = ""  # whose Triton helpers: "kept", "installed", or why the kept ones were not used
    helper: str = ""  # where the error was in a call of a helper: "triton_helpers.online_softmax_combine"
    cause: str = ""  # and why that call failed: "missing a required argument: 'strict_signed_zero'"
    cause_type: str = ""  # "TypeError"


def compile_kernels(
    requests: Sequence[CompileRequest], work: Path, helpers: Path | None = None
) -> dict[str, CompileOutcome]:
    """Compile every request in one child process, against the Triton helper modules in ``helpers`` where
    given; {request key: outcome}."""
    if not requests:
        return {}
    work.mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    environment["TRITON_CACHE_DIR"] = str(work / "cache")
    payload = {"work": str(work), "requests": [r.__dict__ for r in requests], "helpers": helpers and str(helpers)}
    try:
        child = subprocess.run(
            [sys.executable, "-m", "inductor_lens.worker.compile_child"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=environment,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {r.key: CompileOutcome(None, f"compiling took over {COMPILE_TIMEOUT_S:g} s") for r in requests}
    lines = child.stdout.strip().splitlines()
    try:
        results = json.loads(lines[-1]) if lines else None
    except ValueError:
        results = None
    if not isinstance(results, dict):
        reason = (child.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {r.key: CompileOutcome(None, f"the compiler process failed: {reason}") for r in requests}
    outcomes = {}
    for request in requests:
        result = results.get(request.key) or {"error": "not compiled"}
        folder = result.get("folder")
        outcomes[request.key] = CompileOutcome(
            Path(folder) if folder else None,
            result.get("error", ""),
            result.get("note", ""),
            result.get("config"),
            *(str(result.get(k) or "") for k in ("torch", "helpers", "helper", "cause", "cause_type")),
        )
    return outcomes
