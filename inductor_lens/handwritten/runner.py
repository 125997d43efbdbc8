"""Stage 4 of the pipeline (bench), hand-written side: check and time the matched kernels in a child process.

The parent (``run_tasks``) writes a plan: each distinct (hand-written kernel, shape, dtype) the
matches need. The child (``python -m inductor_lens.handwritten PLAN RESULTS``, see ``__main__.py``) checks each
against its torch reference and, on a GPU, times it and torch's own op with ``do_bench`` (L2
cleared before each repetition). On a CPU it runs under Triton's interpreter, on a reduced shape
(see ``match.interpreter_shape``), and times nothing. It writes the results file after every task,
so a crash or a timeout keeps what was done; a hung or crashed kernel cannot take the tool down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PLAN_NAME = "handwritten_plan.json"
RESULTS_NAME = "handwritten.json"


def task_key(name: str, shape: dict[str, int], dtype: str) -> str:
    return f"{name}:{'x'.join(str(v) for v in shape.values())}:{dtype}"


def run_tasks(
    tasks: list[dict[str, Any]], device: str, capture_dir: Path, timeout_s: float
) -> dict[str, Any]:
    """Run the plan in a child process; returns the results file's content (possibly partial)."""
    from ..capture.runner import kill_group

    plan, results = capture_dir / PLAN_NAME, capture_dir / RESULTS_NAME
    plan.write_text(json.dumps({"device": device, "tasks": tasks}, indent=1))
    results.unlink(missing_ok=True)
    command = [sys.executable, "-m", "inductor_lens.handwritten", str(plan), str(results)]
    status = "ok"
    with (capture_dir / "handwritten.log").open("w", encoding="utf-8") as log:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"  # on before Triton is imported: the kernels run on CPU tensors
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env)  # fmt: skip
        try:
            if process.wait(timeout=timeout_s) != 0:
                status = (
                    f"the check process exited with code {process.returncode} (see capture/handwritten.log)"
                )
        except subprocess.TimeoutExpired:
            kill_group(process)
            status = f"the check process ran past {timeout_s:.0f} s and was stopped"
    data = read_results(results)
    if status != "ok":
        data["error"] = status
    return data


def read_results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"results": {}}
    return data if isinstance(data, dict) and isinstance(data.get("results"), dict) else {"results": {}}
