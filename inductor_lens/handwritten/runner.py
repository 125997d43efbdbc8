"""Stage 4 of the pipeline (bench), hand-written side: check and time the matched kernels in a worker.

``run_tasks`` writes a plan (``worker/files.HandwrittenPlan``): each distinct (hand-written kernel,
shape, dtype) the matches need, and has the check process (``worker/handwritten/job.py``) run it under
the supervisor. On a GPU it checks and times each against its torch reference; on a CPU it runs them
under Triton's interpreter, on a reduced shape (``interpreter_shapes.interpreter_shape``), and times nothing. The
worker writes its results after every task, so a crash or a timeout keeps what was done, and a hung
or crashed kernel cannot take the tool down. The stage has a budget; what it left unchecked is reported as
skipped, and each check's line of progress reaches ``on_phase``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..capture.supervisor import PhaseCallback, run_worker
from ..exchange.files import (
    HANDWRITTEN_LOG_FILE,
    HANDWRITTEN_PLAN_FILE,
    HANDWRITTEN_RESULTS_FILE,
    FileShapeError,
    HandwrittenPlan,
    HandwrittenResults,
    HandwrittenTask,
    HandwrittenTaskResult,
    VerifyResult,
    VerifyTask,
    decode,
    load_json_file,
    write_json_file,
)


def run_tasks(
    tasks: list[HandwrittenTask],
    device: str,
    capture_dir: Path,
    timeout_s: float,
    verify: list[VerifyTask] | None = None,
    *,
    budget_s: float | None = None,
    on_phase: PhaseCallback | None = None,
) -> HandwrittenResults:
    """Run the plan in the check process (the matches' verification first, then the tasks); returns what it
    wrote (possibly partial), with an error if it died. ``budget_s``: the seconds the stage may take (None: the
    device's default, ``worker/handwritten.DEFAULT_BUDGET_S``; 0 or less: no limit), the tasks not started by then
    reported as skipped; ``on_phase`` is told of each verification and task as it ends (its progress line)."""
    capture_dir = capture_dir.resolve()  # the worker runs in it: relative paths would point elsewhere
    plan, results = capture_dir / HANDWRITTEN_PLAN_FILE, capture_dir / HANDWRITTEN_RESULTS_FILE
    write_json_file(plan, HandwrittenPlan(device=device, tasks=tasks, verify=verify or [], budget_s=budget_s))
    results.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # on before Triton is imported: the kernels run on CPU tensors
    finished = run_worker(
        "handwritten",
        [str(plan), str(results)],
        cwd=capture_dir,
        env=env,
        log_path=capture_dir / HANDWRITTEN_LOG_FILE,
        timeout_s=timeout_s,
        on_phase=on_phase,
    )
    data = read_results(results)
    if finished.timed_out:
        data.error = f"the check process ran past {timeout_s:.0f} s and was stopped"
    elif finished.exit_code != 0:
        data.error = f"the check process exited with code {finished.exit_code} (see capture/{HANDWRITTEN_LOG_FILE})"
    return data


def read_results(path: Path) -> HandwrittenResults:
    """What a check process wrote. An unreadable file reads as no results (the matches stay unchecked);
    an entry of the wrong shape as that task's error, so one damaged entry does not hide the others."""
    try:
        data = load_json_file(path)
    except FileShapeError:
        return HandwrittenResults()
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        return HandwrittenResults()
    results = {}
    for key, entry in data["results"].items():
        try:
            results[str(key)] = decode(HandwrittenTaskResult, entry, str(key))
        except FileShapeError as exc:
            results[str(key)] = HandwrittenTaskResult(error=f"unreadable result ({exc})"[:200])
    verified = {}
    found = data.get("verified")
    for key, entry in (found if isinstance(found, dict) else {}).items():
        try:
            verified[str(key)] = decode(VerifyResult, entry, str(key))
        except FileShapeError as exc:
            verified[str(key)] = VerifyResult(note=f"not verified: unreadable result ({exc})"[:200])
    device = data.get("device")
    return HandwrittenResults(device=device if isinstance(device, str) else "", results=results, verified=verified)
