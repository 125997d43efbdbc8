"""Stage 4 of the pipeline (bench), hand-written side: the child process that checks and times the kernels.

``python -m inductor_lens.handwritten PLAN RESULTS``: started by ``runner.run_tasks``; for each task
of the plan, checks the hand-written kernel against its torch reference (under Triton's interpreter,
on a reduced shape, when the device is a CPU) and, on a GPU, times it and torch's own op with
``do_bench``. The results file is rewritten after every task, so a crash keeps what was done.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from .runner import task_key


def _run_task(task: dict[str, Any], device: str) -> dict[str, Any]:
    from . import check as checks
    from .catalog import get
    from .match import interpreter_shape

    equivalent = get(task["name"])
    shape = {d: int(task["shape"][d]) for d in equivalent.dims}
    interpreter = device == "cpu"
    if interpreter and task["dtype"] not in equivalent.interpreter_dtypes:
        return {"interpreter": True, "error": f"not checked here: {equivalent.interpreter_note}"}
    checked_shape = interpreter_shape(equivalent, shape) if interpreter else shape
    result = checks.check(equivalent.name, checked_shape, task["dtype"], device)
    entry: dict[str, Any] = {
        "checked_shape": checked_shape,
        "interpreter": result.interpreter,
        "ok": result.ok,
        "max_rel_error": max((e.max_rel for e in result.errors), default=0.0),
        "tolerance": result.tolerance,
    }
    if device == "cuda":
        import torch

        from ..bench.measure import gpu_graph_time, gpu_time

        impl = checks.implementation(equivalent, device)
        inputs = checks.make_inputs(equivalent, shape, task["dtype"], device)
        entry["timing"] = gpu_time(torch, lambda: impl.run(*inputs))
        entry["eager"] = gpu_time(torch, lambda: impl.reference(*inputs))
        entry["gpu_alone"] = gpu_graph_time(torch, lambda: impl.run(*inputs))
        del inputs
        torch.cuda.empty_cache()
    return entry


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    out = Path(argv[1])
    device = plan["device"]
    data: dict[str, Any] = {"device": device, "results": {}}
    for task in plan["tasks"]:
        started = time.perf_counter()
        try:
            entry = _run_task(task, device)
        except Exception as exc:  # one kernel failing must not lose the others
            entry = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        entry["seconds"] = time.perf_counter() - started
        data["results"][task_key(task["name"], task["shape"], task["dtype"])] = entry
        out.write_text(json.dumps(data, indent=1))
        print(
            f"{task['name']} {task['shape']} {task['dtype']}: {entry.get('ok', entry.get('error'))}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
