"""Stage 4 of the pipeline (bench), in the check process: run the matched hand-written kernels against torch.

``python -m inductor_lens.worker handwritten PLAN RESULTS``, started by ``handwritten/runner.py``:
first verifies each match of the plan against what Inductor's kernel computes (``handwritten/verify.py``);
then, for each task of the plan (a ``files.HandwrittenPlan``), checks the hand-written kernel against its
torch reference (under Triton's interpreter, on a reduced shape, when the device is a CPU) and, on a
GPU, times it and torch's own op with ``do_bench``, noting the launch configurations its autotuned
kernels ran with (``handwritten/tuning.py``: tuned, or read from the autotune cache). The results file
(``files.HandwrittenResults``) is rewritten after every task, so a crash keeps what was done.
"""

from __future__ import annotations

import time
from pathlib import Path

from .files import (
    HandwrittenPlan,
    HandwrittenResults,
    HandwrittenTask,
    HandwrittenTaskResult,
    VerifyResult,
    VerifyTask,
    read_json_file,
    write_json_file,
)


def run_task(task: HandwrittenTask, device: str, *, timed: bool = True) -> HandwrittenTaskResult:
    from ..handwritten import check as checks
    from ..handwritten import tuning
    from ..handwritten.catalog import get, interpreter_shape

    equivalent = get(task.name)
    shape = {d: int(task.shape[d]) for d in equivalent.dims}
    interpreter = device == "cpu"
    if interpreter and task.dtype not in equivalent.interpreter_dtypes:
        return HandwrittenTaskResult(interpreter=True, error=f"not checked here: {equivalent.interpreter_note}")
    checked_shape = interpreter_shape(equivalent, shape) if interpreter else shape
    with tuning.recording() as configs:
        result = checks.check(equivalent.name, checked_shape, task.dtype, device)
        entry = HandwrittenTaskResult(
            checked_shape=checked_shape,
            interpreter=result.interpreter,
            ok=result.ok,
            max_rel_error=max((e.max_rel for e in result.errors), default=0.0),
            tolerance=result.tolerance,
        )
        if device == "cuda" and timed:
            import torch

            from .measure import gpu_graph_time, gpu_time

            impl = checks.implementation(equivalent, device)
            inputs = checks.make_inputs(equivalent, shape, task.dtype, device)
            entry.timing = gpu_time(torch, lambda: impl.run(*inputs))
            entry.eager = gpu_time(torch, lambda: impl.reference(*inputs))
            entry.gpu_alone = gpu_graph_time(torch, lambda: impl.run(*inputs))
            del inputs
            torch.cuda.empty_cache()
    entry.configs = list(configs)
    return entry


# Seconds the verification of the matches may take in all, before the checks and timings.
VERIFY_BUDGET_S = 300.0


def run_verify(task: VerifyTask, device: str) -> VerifyResult:
    """Whether a match computes what Inductor's kernel computes; a failure is the match's note, not the end."""
    from ..handwritten import verify

    try:
        return verify.run_verify(task, device)
    except Exception as exc:
        return VerifyResult(note=f"not verified: {type(exc).__name__}: {exc}"[:400])


def main(argv: list[str]) -> int:
    """``argv``: the plan file and the results file."""
    plan = read_json_file(Path(argv[0]), HandwrittenPlan)
    if plan is None:
        raise SystemExit(f"no plan at {argv[0]}")
    out = Path(argv[1])
    data = HandwrittenResults(device=plan.device)
    verify_started = time.perf_counter()
    for verify in plan.verify:
        if time.perf_counter() - verify_started > VERIFY_BUDGET_S:
            # the checks and timings still get the rest of the process's time limit
            data.verified[verify.match] = VerifyResult(
                note=f"not verified: the verification's {VERIFY_BUDGET_S:.0f} s were spent on the kernels before it"
            )
        else:
            data.verified[verify.match] = run_verify(verify, plan.device)
        write_json_file(out, data)
        print(f"verify {verify.match}: {data.verified[verify.match].note}", flush=True)
    rejected = {key for key, result in data.verified.items() if result.agrees is False}
    for task in plan.tasks:
        started = time.perf_counter()
        try:
            # checked, but not timed where every match it stands in for computes something else
            entry = run_task(task, plan.device, timed=not (task.matches and set(task.matches) <= rejected))
        except Exception as exc:  # one kernel failing must not lose the others
            entry = HandwrittenTaskResult(error=f"{type(exc).__name__}: {exc}"[:400])
        entry.seconds = time.perf_counter() - started
        data.results[task.key] = entry
        write_json_file(out, data)
        print(f"{task.name} {task.shape} {task.dtype}: {entry.ok if entry.error is None else entry.error}", flush=True)
    return 0
