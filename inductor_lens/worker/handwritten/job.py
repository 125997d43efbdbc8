"""Stage 4 of the pipeline (bench), in the check process: run the matched hand-written kernels against torch.

``python -m inductor_lens.worker handwritten PLAN RESULTS``, started by ``handwritten/runner.py``:
first verifies each match of the plan against what Inductor's kernel computes (``handwritten/verify.py``);
then, for each task of the plan (a ``files.HandwrittenPlan``), checks the hand-written kernel against its
torch reference (under Triton's interpreter, on a reduced shape, when the device is a CPU) and, on a
GPU, times it and torch's own op with ``do_bench``, noting the launch configurations its autotuned
kernels ran with (``worker/handwritten/tuning.py``: tuned, or read from the autotune cache). The results file
(``files.HandwrittenResults``) is rewritten after every task, so a crash keeps what was done.

The stage has a budget (``HandwrittenPlan.budget_s``, else ``DEFAULT_BUDGET_S`` of the device): a task not
started when it is spent gets a result that says it was skipped, and under the interpreter each check has a
time limit of its own. Each verification and task is announced on the output as a ``PHASE_MARKER`` line.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import torch

from ...exchange.files import (
    PHASE_MARKER,
    HandwrittenPlan,
    HandwrittenResults,
    HandwrittenTask,
    HandwrittenTaskResult,
    VerifyResult,
    VerifyTask,
    read_json_file,
    write_json_file,
)


def run_task(
    task: HandwrittenTask, device: str, *, timed: bool = True, checked: HandwrittenTaskResult | None = None
) -> HandwrittenTaskResult:
    """Check the task's kernel against its torch reference and, on a GPU, time both; ``checked``: the check a
    helper already made of the same configurations (``compile_ahead``), then only the timings run here."""
    from ...handwritten.catalog import get
    from ...handwritten.interpreter_shapes import interpreter_shape
    from . import check as checks
    from .tuning_record import recording
    from .tuning_search import starting_from

    equivalent = get(task.name)
    shape = {d: int(task.shape[d]) for d in equivalent.dims}
    interpreter = device == "cpu"
    if interpreter and task.dtype not in equivalent.interpreter_dtypes:
        return HandwrittenTaskResult(interpreter=True, error=f"not checked here: {equivalent.interpreter_note}")
    checked_shape = interpreter_shape(equivalent, shape) if interpreter else shape
    with recording() as configs, starting_from(task.start_config):
        if checked is not None:
            entry = HandwrittenTaskResult(
                checked_shape=checked.checked_shape, interpreter=checked.interpreter, ok=checked.ok,
                max_rel_error=checked.max_rel_error, tolerance=checked.tolerance,
            )  # fmt: skip
        else:
            result = checks.check(equivalent.name, checked_shape, task.dtype, device)
            entry = HandwrittenTaskResult(
                checked_shape=checked_shape,
                interpreter=result.interpreter,
                ok=result.ok,
                max_rel_error=max((e.max_rel for e in result.errors), default=0.0),
                tolerance=result.tolerance,
            )
        if device == "cuda" and timed:
            from ..measure import gpu_graph_time, gpu_time

            impl = checks.implementation(equivalent, device)
            inputs = checks.make_inputs(equivalent, shape, task.dtype, device)
            entry.timing = gpu_time(lambda: impl.run(*inputs))
            entry.eager = gpu_time(lambda: impl.reference(*inputs))
            entry.gpu_alone = gpu_graph_time(lambda: impl.run(*inputs))
            del inputs
            torch.cuda.empty_cache()
    entry.configs = list(configs)
    return entry


# The hand-written stage's budget when the plan gives none (``HandwrittenPlan.budget_s``), by device: the
# verification and the checks (and on a GPU the timings) share it; a task not started by then is skipped.
DEFAULT_BUDGET_S = {"cpu": 30.0, "cuda": 75.0}
# Seconds the verification may take at most, within the stage's budget (all of it when that is unlimited).
VERIFY_BUDGET_S = 300.0
# Under Triton's interpreter, a check running past this is cut short, so that one kernel cannot take the stage's
# budget (the interpreter is Python: a signal stops it between two of its operations). Not with an unlimited budget.
INTERPRETER_CHECK_LIMIT_S = 8.0
# How to give the stage more time, said wherever something was skipped.
MORE_TIME_HINT = "--handwritten-budget SECONDS gives the stage more time, 0 no limit"


def stage_budget(device: str, budget_s: float | None) -> float | None:
    """The stage's budget in seconds: the plan's, else the device's default; None: no limit."""
    budget = DEFAULT_BUDGET_S.get(device, DEFAULT_BUDGET_S["cuda"]) if budget_s is None else budget_s
    return budget if budget > 0 else None


class StageClock:
    """The stage's budget, counted from the moment the clock is made."""

    def __init__(self, budget_s: float | None) -> None:
        self.budget_s = budget_s
        self.started = time.perf_counter()

    def left(self) -> float | None:
        """Seconds left; None when the stage has no limit."""
        return None if self.budget_s is None else self.budget_s - (time.perf_counter() - self.started)

    def spent(self) -> bool:
        left = self.left()
        return left is not None and left <= 0

    def skipped(self) -> str:
        return f"not started: the hand-written stage's {self.budget_s:g} s budget was spent ({MORE_TIME_HINT})"


class CheckTimeLimit(BaseException):
    """A check ran past its time limit. A BaseException, so the ``except Exception`` of a kernel's or Triton's own
    code cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise ``CheckTimeLimit`` in this (the main) thread after ``seconds`` (SIGALRM); the handler and the timer as
    they were afterwards. None, or no SIGALRM (Windows), or not the main thread: no limit."""
    if seconds is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise CheckTimeLimit(f"cut short after {seconds:.3g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_limit(clock: StageClock, interpreter: bool) -> tuple[float | None, str]:
    """The time limit of the next check and the words a result cut short by it gets: under the interpreter, its
    own limit or what is left of the budget, whichever is less; elsewhere (a GPU's autotuning, CUDA calls),
    none. An unlimited stage sets none."""
    left = clock.left()
    if not interpreter or left is None:
        return None, ""
    if left < INTERPRETER_CHECK_LIMIT_S:
        return left, f"cut short when the hand-written stage's {clock.budget_s:g} s budget was spent ({MORE_TIME_HINT})"
    return INTERPRETER_CHECK_LIMIT_S, (
        f"cut short after {INTERPRETER_CHECK_LIMIT_S:g} s under Triton's interpreter, a check's own limit "
        f"(--handwritten-budget 0 runs every check to its end)"
    )


def load_outside_the_limit(task: HandwrittenTask, device: str) -> None:
    """Import what a check imports (torch, Triton, the kernel's module) before its time limit is armed: an import
    cut short leaves a half-initialised module behind, and every later check would fail on it."""
    from ...handwritten.catalog import get
    from . import check as checks
    from . import tuning  # noqa: F401  (run_task's)

    checks.implementation(get(task.name), device)


def run_verify(task: VerifyTask, device: str) -> VerifyResult:
    """Whether a match computes what Inductor's kernel computes; a failure is the match's note, not the end."""
    from . import verify

    try:
        return verify.run_verify(task, device)
    except Exception as exc:
        return VerifyResult(note=f"not verified: {type(exc).__name__}: {exc}"[:400])


def phase(line: str) -> None:
    """One line of progress: the parent shows each ``PHASE_MARKER`` line as it comes (supervisor.run_worker)."""
    print(f"{PHASE_MARKER}{line}", flush=True)


def verify_line(index: int, count: int, match: str, result: VerifyResult, seconds: float) -> str:
    # the key is "<graph>:<launch>:<target>:<equivalents>" (verify.verify_key)
    _, target, equivalents = match.rsplit(":", 2) if match.count(":") >= 2 else ("", match, "")
    verdict = "agrees" if result.agrees else "REJECTED" if result.agrees is False else result.note
    return f"hand-written verify {index}/{count}: {target} as {equivalents}: {verdict} ({seconds:.1f} s)"


def task_line(index: int, count: int, task: HandwrittenTask, entry: HandwrittenTaskResult) -> str:
    if entry.skipped:  # cut short
        verdict = entry.skipped.split(" (")[0]
    elif entry.error is not None:
        verdict = entry.error.split("\n")[0][:160]
    else:
        verdict = "ok" if entry.ok else "MISMATCH" if entry.ok is False else "not checked"
    checked = ""
    if entry.checked_shape and entry.checked_shape != task.shape:
        checked = f" (checked on {'x'.join(str(v) for v in entry.checked_shape.values())})"
    took = f" ({entry.seconds:.1f} s)" if entry.seconds is not None else ""
    size = "x".join(str(v) for v in task.shape.values())
    return f"hand-written {index}/{count}: {task.name} {size} {task.dtype}{checked}: {verdict}{took}"


def skipped_line(first: int, count: int, clock: StageClock) -> str:
    """One line for the tasks from ``first`` on, none of them started: the budget was spent."""
    which = f"{first}/{count}" if first == count else f"{first}-{count}/{count}"
    return (f"hand-written {which}: skipped (budget spent): {count - first + 1} check(s) not started within the "
            f"stage's {clock.budget_s:g} s ({MORE_TIME_HINT})")  # fmt: skip


def verify_all(plan: HandwrittenPlan, clock: StageClock, data: HandwrittenResults, out: Path) -> None:
    started = time.perf_counter()
    for index, verify in enumerate(plan.verify, 1):
        began = time.perf_counter()
        if clock.spent():
            result = VerifyResult(note=f"not verified: the hand-written stage's {clock.budget_s:g} s budget was "
                                       f"spent ({MORE_TIME_HINT})")  # fmt: skip
        elif began - started > VERIFY_BUDGET_S:
            # the checks and timings still get the rest of the stage's time
            result = VerifyResult(note=f"not verified: the verification's {VERIFY_BUDGET_S:.0f} s were spent on the "
                                       "kernels before it")  # fmt: skip
        else:
            result = run_verify(verify, plan.device)
        data.verified[verify.match] = result
        write_json_file(out, data)
        phase(verify_line(index, len(plan.verify), verify.match, result, time.perf_counter() - began))


def check_all(
    plan: HandwrittenPlan, clock: StageClock, data: HandwrittenResults, out: Path,
    checked: dict[str, HandwrittenTaskResult] | None = None,
) -> None:  # fmt: skip
    """Each task in the plan's order (the largest profiled time first) while the budget lasts; the rest skipped.
    ``checked``: the checks made ahead (``compile_ahead``), by task key: those tasks are only timed here."""
    rejected = {key for key, result in data.verified.items() if result.agrees is False}
    interpreter = plan.device == "cpu"
    for index, task in enumerate(plan.tasks, 1):
        if clock.spent():
            for rest in plan.tasks[index - 1 :]:
                data.results[rest.key] = HandwrittenTaskResult(interpreter=interpreter, skipped=clock.skipped())
            write_json_file(out, data)
            phase(skipped_line(index, len(plan.tasks), clock))
            return
        started = time.perf_counter()
        limit, cut_short = check_limit(clock, interpreter)
        try:
            if limit is not None:
                load_outside_the_limit(task, plan.device)
            with time_limit(limit):
                # checked, but not timed where every match it stands in for computes something else
                timed = not (task.matches and set(task.matches) <= rejected)
                entry = run_task(task, plan.device, timed=timed, checked=(checked or {}).get(task.key))
        except CheckTimeLimit:
            entry = HandwrittenTaskResult(interpreter=interpreter, skipped=cut_short)
        except Exception as exc:  # one kernel failing must not lose the others
            entry = HandwrittenTaskResult(error=f"{type(exc).__name__}: {exc}"[:400])
        entry.seconds = time.perf_counter() - started
        data.results[task.key] = entry
        write_json_file(out, data)
        phase(task_line(index, len(plan.tasks), task, entry))


# On a GPU, the kernels of at least this many checks are compiled ahead, in this many processes at most.
COMPILE_AHEAD_MIN_TASKS = 4
COMPILE_AHEAD_PROCESSES = 8
# The share of the stage's budget left when compiling ahead begins that it may take; the checks then compile
# what it did not reach themselves.
COMPILE_AHEAD_SHARE = 0.5


def _compile_one(task: HandwrittenTask, device: str) -> tuple[str, HandwrittenTaskResult | None]:
    """In a helper process: run the check, which compiles the kernels it launches into Triton's cache on disk
    (shared with the check process), searches none (``tuning.COMPILE_ONLY``) and times nothing. Its result
    where the check process will launch the same configurations (none was left to a search)."""
    from . import tuning

    tuning.COMPILE_ONLY = True
    try:
        entry = run_task(task, device, timed=False)
    except Exception:  # the check process meets the same failure and says it
        return task.key, None
    reusable = entry.error is None and entry.ok is not None and all(c.origin in ("table", "cache") for c in entry.configs)
    return task.key, entry if reusable else None


@contextlib.contextmanager
def compile_ahead(
    plan: HandwrittenPlan, clock: StageClock
) -> Iterator[Callable[[], dict[str, HandwrittenTaskResult]]]:
    """Compile the kernels of every check, and check them, at once in helper processes, while the block runs (the
    verification: nothing in it is timed), before the timings run one by one: on a fresh machine compiling is
    most of a check's time (one to three seconds of Triton and ptxas per kernel), and the timings must not share
    the GPU with anything. Yields the function that waits for the helpers, within a share of the budget left
    when they started, and returns the checks they made that the timings can use; helpers still working after
    it (or after the block) are stopped."""
    import multiprocessing
    import os
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    tasks = plan.tasks
    if plan.device != "cuda" or len(tasks) < COMPILE_AHEAD_MIN_TASKS:
        yield dict
        return
    left = clock.left()
    limit = None if left is None else max(0.0, left * COMPILE_AHEAD_SHARE)
    processes = max(1, min(len(tasks), COMPILE_AHEAD_PROCESSES, (os.cpu_count() or 2) // 2))
    phase(f"hand-written: compiling the kernels of {len(tasks)} checks ahead in {processes} processes")
    started = time.perf_counter()
    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
    # a spawned helper takes this process's sys.path, from which restore_path took the package's root: put last
    # (the user's modules still come first), it lets the helpers import this package wherever it lives
    root = str(Path(__file__).resolve().parents[2])
    sys.path.append(root)
    try:
        futures = [pool.submit(_compile_one, task, plan.device) for task in tasks]  # every helper starts here
    finally:
        sys.path.remove(root)

    def collect() -> dict[str, HandwrittenTaskResult]:
        remaining = None if limit is None else max(0.0, started + limit - time.perf_counter())
        done, pending = wait(futures, timeout=remaining, return_when=FIRST_EXCEPTION)
        cut = f"; stopped at the {limit:.0f} s it may take, the checks compile the rest" if pending else ""
        phase(f"hand-written: compiled ahead for {len(done)} of {len(tasks)} checks in "
              f"{time.perf_counter() - started:.1f} s{cut}")  # fmt: skip
        results = [future.result() for future in done if future.exception() is None]
        return {key: entry for key, entry in results if entry is not None}

    try:
        yield collect
    finally:
        helpers = list(getattr(pool, "_processes", {}).values())  # to stop those still working
        pool.shutdown(wait=False, cancel_futures=True)
        for helper in helpers:
            helper.terminate()


def main(argv: list[str]) -> int:
    """``argv``: the plan file and the results file."""
    plan = read_json_file(Path(argv[0]), HandwrittenPlan)
    if plan is None:
        raise SystemExit(f"no plan at {argv[0]}")
    out = Path(argv[1])
    data = HandwrittenResults(device=plan.device)
    clock = StageClock(stage_budget(plan.device, plan.budget_s))
    with compile_ahead(plan, clock) as checked_ahead:
        verify_all(plan, clock, data, out)  # meanwhile the helpers compile and check
        checked = checked_ahead()
    check_all(plan, clock, data, out, checked)
    write_json_file(out, data)
    return 0
