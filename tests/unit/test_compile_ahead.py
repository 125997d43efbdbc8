"""Compiling the hand-written checks' kernels ahead, in helper processes (worker/handwritten/job.py compile_ahead).

On this CPU machine the helpers' checks fail (no GPU): what is tested is the mechanism a GPU run relies on, that
spawned helpers import this package (from wherever it lives), run every task, report, and are stopped at their
share of the budget."""

from __future__ import annotations

import time

import pytest

from inductor_lens.exchange.files import HandwrittenPlan, HandwrittenTask
from inductor_lens.worker.handwritten import job as handwritten

pytestmark = pytest.mark.unit


def _plan(count: int) -> HandwrittenPlan:
    tasks = [HandwrittenTask("add", {"rows": 8 * (i + 1), "cols": 16}, "float32") for i in range(count)]
    return HandwrittenPlan(device="cuda", tasks=tasks)


def test_helpers_run_every_task_and_say_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handwritten, "COMPILE_AHEAD_PROCESSES", 2)
    with handwritten.compile_ahead(_plan(4), handwritten.StageClock(None)) as checked_ahead:
        assert checked_ahead() == {}  # every helper's check failed here: nothing for the timings to use
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("hand-written: compiling the kernels of 4 checks ahead in 1 processes") or lines[0].endswith(
        "hand-written: compiling the kernels of 4 checks ahead in 2 processes"
    )
    assert "compiled ahead for 4 of 4 checks in " in lines[1] and "stopped" not in lines[1]


def test_a_few_checks_or_a_cpu_compile_nothing_ahead(capsys: pytest.CaptureFixture[str]) -> None:
    cpu = _plan(6)
    cpu.device = "cpu"
    for plan in (_plan(3), cpu):
        with handwritten.compile_ahead(plan, handwritten.StageClock(None)) as checked_ahead:
            assert checked_ahead() == {}
    assert capsys.readouterr().out == ""


def test_helpers_past_their_share_of_the_budget_are_stopped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handwritten, "COMPILE_AHEAD_SHARE", 0.01)  # 0.1 s of a 10 s budget: helpers never start
    started = time.perf_counter()
    with handwritten.compile_ahead(_plan(6), handwritten.StageClock(10.0)) as checked_ahead:
        checked_ahead()
    assert time.perf_counter() - started < 5
    line = capsys.readouterr().out.splitlines()[1]
    assert "stopped at the 0 s it may take, the checks compile the rest" in line


def test_a_helpers_check_is_reused_only_where_the_timings_launch_the_same_configurations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from inductor_lens.exchange.files import HandwrittenTaskResult
    from inductor_lens.records import KernelConfig
    from inductor_lens.worker.handwritten import tuning

    monkeypatch.setattr(tuning, "COMPILE_ONLY", False)  # _compile_one switches it on: put back after the test
    task = _plan(1).tasks[0]
    for origins, reused in ((("table", "cache"), True), (("table", "tuned"), False)):
        made = HandwrittenTaskResult(ok=True, configs=[KernelConfig("k", "BLOCK=16", o) for o in origins])
        monkeypatch.setattr(handwritten, "run_task", lambda task, device, timed=True, made=made: made)
        assert handwritten._compile_one(task, "cuda") == (task.key, made if reused else None)


def test_a_task_checked_ahead_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from inductor_lens.exchange.files import HandwrittenTaskResult
    from inductor_lens.worker.handwritten import check

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("checked twice")

    monkeypatch.setattr(check, "check", never)
    made = HandwrittenTaskResult(checked_shape={"rows": 8, "cols": 16}, ok=True, max_rel_error=1e-7, tolerance=1e-5)
    entry = handwritten.run_task(_plan(1).tasks[0], "cpu", checked=made)
    assert (entry.ok, entry.max_rel_error, entry.tolerance, entry.checked_shape) == (True, 1e-7, 1e-5, {"rows": 8, "cols": 16})
