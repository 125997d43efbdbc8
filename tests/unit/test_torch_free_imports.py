"""What must not import torch: the tool side (its front ends and pipeline), and the model process's entry modules,
which set up the environment (TRITON_INTERPRET, a rank's log and folder) and name the phase "import torch" before
torch is imported. Each is imported in a fresh interpreter and ``sys.modules`` read."""

from __future__ import annotations

import subprocess
import sys

import pytest

TOOL_SIDE = ("inductor_lens.cli", "inductor_lens.api", "inductor_lens.pipeline")
WORKER_ENTRIES = (
    "inductor_lens.worker.__main__",
    "inductor_lens.worker.capture",
    "inductor_lens.worker.capture_run",
    "inductor_lens.worker.script",
    "inductor_lens.worker.ranked",
    "inductor_lens.worker.supervised",
    "inductor_lens.worker.inprocess",
)


@pytest.mark.parametrize("modules", [TOOL_SIDE, WORKER_ENTRIES], ids=["tool side", "worker entries"])
def test_importing_them_imports_no_torch(modules: tuple[str, ...]) -> None:
    code = (
        f"import importlib, sys\nfor name in {modules!r}:\n    importlib.import_module(name)\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
