"""The hand-written stage bounded (issue 33): its budget shared by the verification and the checks, the tasks it
left unstarted reported as skipped, a check's own time limit under the interpreter, a progress line per check,
interpreter shapes of convolutions bounded by their program steps, and ``--handwritten-budget`` into the spec."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.capture.supervisor import run_worker
from inductor_lens.exchange.files import (
    PHASE_MARKER,
    HandwrittenPlan,
    HandwrittenTask,
    HandwrittenTaskResult,
    VerifyResult,
    VerifyTask,
    write_json_file,
)
from inductor_lens.handwritten import catalog, interpreter_shapes
from inductor_lens.handwritten.runner import read_results
from inductor_lens.options import CompileSpec, ScriptSpec
from inductor_lens.records import HandwrittenRun
from inductor_lens.report import handwritten_view
from inductor_lens.worker.handwritten import job as worker

from ..conftest import CliResult


def _tasks(count: int) -> list[HandwrittenTask]:
    return [HandwrittenTask("relu", {"rows": 8 + i, "cols": 4}, "float32") for i in range(count)]


@pytest.fixture(autouse=True)
def _no_compile_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget loop alone: compiling ahead in helper processes has its own tests (test_compile_ahead.py)."""
    monkeypatch.setattr(worker, "COMPILE_AHEAD_MIN_TASKS", 10**6)


def _run_plan(tmp_path: Path, plan: HandwrittenPlan) -> dict[str, HandwrittenTaskResult]:
    write_json_file(tmp_path / "plan.json", plan)
    assert worker.main([str(tmp_path / "plan.json"), str(tmp_path / "results.json")]) == 0
    return read_results(tmp_path / "results.json").results


def _phases(output: str) -> list[str]:
    return [line[len(PHASE_MARKER) :] for line in output.splitlines() if line.startswith(PHASE_MARKER)]


def test_tasks_not_started_within_the_budget_are_skipped_and_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []

    def slow_task(task: HandwrittenTask, device: str, *, timed: bool = True, checked: object = None) -> HandwrittenTaskResult:
        ran.append(task.key)
        time.sleep(0.3)
        return HandwrittenTaskResult(checked_shape=dict(task.shape), ok=True)

    monkeypatch.setattr(worker, "run_task", slow_task)
    tasks = _tasks(4)
    results = _run_plan(tmp_path, HandwrittenPlan(device="cuda", tasks=tasks, budget_s=0.5))
    assert ran == [tasks[0].key, tasks[1].key]  # the second started within the budget, the third did not
    assert [results[t.key].ok for t in tasks] == [True, True, None, None]
    for task in tasks[2:]:
        entry = results[task.key]
        assert entry.error is None and entry.seconds is None
        assert entry.skipped == (
            "not started: the hand-written stage's 0.5 s budget was spent (--handwritten-budget SECONDS gives the "
            "stage more time, 0 no limit)"
        )
    assert [re.sub(r"\(\d+\.\d s\)", "(T)", line) for line in _phases(capsys.readouterr().out)] == [
        "hand-written 1/4: relu 8x4 float32: ok (T)",
        "hand-written 2/4: relu 9x4 float32: ok (T)",
        "hand-written 3-4/4: skipped (budget spent): 2 check(s) not started within the stage's 0.5 s "
        "(--handwritten-budget SECONDS gives the stage more time, 0 no limit)",
    ]


def test_the_verification_shares_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow_verify(task: VerifyTask, device: str) -> VerifyResult:
        time.sleep(0.15)
        return VerifyResult(True, 0.0, 1e-6, "computes what Inductor's kernel computes")

    monkeypatch.setattr(worker, "run_verify", slow_verify)
    monkeypatch.setattr(worker, "run_task", lambda *a, **k: pytest.fail("no task starts after the budget"))
    verify = [VerifyTask(f"g:{i}:kernel_{i}:relu", [], "", [], []) for i in range(3)]
    write_json_file(tmp_path / "plan.json", HandwrittenPlan("cpu", _tasks(1), verify, budget_s=0.1))
    worker.main([str(tmp_path / "plan.json"), str(tmp_path / "results.json")])
    data = read_results(tmp_path / "results.json")
    assert [data.verified[v.match].agrees for v in verify] == [True, None, None]
    assert data.verified[verify[1].match].note.startswith("not verified: the hand-written stage's 0.1 s budget")
    assert data.results[_tasks(1)[0].key].skipped.startswith("not started")


def test_no_budget_runs_every_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "run_task", lambda task, device, timed=True, checked=None: HandwrittenTaskResult(ok=True))
    results = _run_plan(tmp_path, HandwrittenPlan(device="cpu", tasks=_tasks(3), budget_s=0))
    assert all(r.ok and not r.skipped for r in results.values())
    assert worker.stage_budget("cpu", None) == 30.0 and worker.stage_budget("cuda", None) == 75.0
    assert worker.stage_budget("cpu", -1) is None and worker.stage_budget("cpu", 12.5) == 12.5


def test_the_time_limit_interrupts_a_check_and_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGALRM)
    started = time.perf_counter()
    with pytest.raises(worker.CheckTimeLimit), worker.time_limit(0.1):
        time.sleep(5)
    assert time.perf_counter() - started < 2
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with worker.time_limit(None):  # no limit: nothing armed
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_check_past_its_limit_under_the_interpreter_is_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def task(task: HandwrittenTask, device: str, *, timed: bool = True, checked: object = None) -> HandwrittenTaskResult:
        try:
            time.sleep(5 if task.shape["rows"] == 8 else 0)
        except Exception:  # a kernel's own broad handler does not swallow the limit
            pytest.fail("the time limit is not an Exception")
        return HandwrittenTaskResult(ok=True)

    monkeypatch.setattr(worker, "run_task", task)
    monkeypatch.setattr(worker, "INTERPRETER_CHECK_LIMIT_S", 0.2)
    tasks = _tasks(2)
    results = _run_plan(tmp_path, HandwrittenPlan(device="cpu", tasks=tasks, budget_s=60))
    first = results[tasks[0].key]
    assert first.ok is None and first.error is None and first.interpreter
    assert first.skipped == ("cut short after 0.2 s under Triton's interpreter, a check's own limit "
                             "(--handwritten-budget 0 runs every check to its end)")  # fmt: skip
    assert first.seconds is not None and first.seconds < 2
    assert results[tasks[1].key].ok is True  # the next check runs as usual
    assert _phases(capsys.readouterr().out)[0].startswith(
        "hand-written 1/2: relu 8x4 float32: cut short after 0.2 s under Triton's interpreter, a check's own limit ("
    )


def test_what_a_check_imports_is_loaded_before_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import cut short would break every later check: the kernel's module is loaded before the alarm."""
    loaded: list[tuple[str, bool]] = []
    monkeypatch.setattr(worker, "load_outside_the_limit",
                        lambda task, device: loaded.append((task.key, signal.getitimer(signal.ITIMER_REAL)[0] == 0)))  # fmt: skip
    monkeypatch.setattr(worker, "run_task", lambda task, device, timed=True, checked=None: HandwrittenTaskResult(ok=True))
    _run_plan(tmp_path, HandwrittenPlan(device="cpu", tasks=_tasks(2), budget_s=60))
    assert loaded == [(t.key, True) for t in _tasks(2)]
    loaded.clear()
    _run_plan(tmp_path, HandwrittenPlan(device="cpu", tasks=_tasks(1), budget_s=0))  # no limit: loaded by the check
    assert loaded == []


def test_a_check_is_cut_short_at_the_end_of_the_budget() -> None:
    clock = worker.StageClock(3.0)
    limit, words = worker.check_limit(clock, interpreter=True)
    assert limit is not None and limit <= 3.0
    assert words.startswith("cut short when the hand-written stage's 3 s budget was spent")
    assert worker.check_limit(clock, interpreter=False) == (None, "")  # a GPU's checks: only the budget
    assert worker.check_limit(worker.StageClock(None), interpreter=True) == (None, "")


def test_progress_lines() -> None:
    task = HandwrittenTask("conv2d_backward", catalog.get("conv2d_backward").shape(
        (2, 32, 16, 16, 32, 7, 7, 1, 3, 1, 32, 0)), "float32")  # fmt: skip
    checked = interpreter_shapes.interpreter_shape(catalog.get("conv2d_backward"), dict(task.shape))
    entry = HandwrittenTaskResult(checked_shape=checked, interpreter=True, ok=True, seconds=1.24)
    assert worker.task_line(3, 17, task, entry) == (
        "hand-written 3/17: conv2d_backward 2x32x16x16x32x7x7x1x3x1x32x0 float32 (checked on "
        "1x2x7x7x2x7x7x1x3x1x2x0): ok (1.2 s)"
    )
    failed = HandwrittenTaskResult(error="RuntimeError: boom", seconds=0.5)
    assert worker.task_line(1, 2, task, failed).endswith("float32: RuntimeError: boom (0.5 s)")
    line = worker.verify_line(2, 9, "fwd:4:triton_per_fused_0:layernorm", VerifyResult(True), 0.31)
    assert line == "hand-written verify 2/9: triton_per_fused_0 as layernorm: agrees (0.3 s)"


# (shape as profiled, the shape checked under the interpreter): HF ConvNeXt --train's (samples/real/convnext.py),
# whose depthwise 7x7 input gradients took up to 141 s each on their full shapes.
CONV_SHAPES = {
    "conv2d_backward": [
        ((2, 32, 16, 16, 32, 7, 7, 1, 3, 1, 32, 0), (1, 2, 7, 7, 2, 7, 7, 1, 3, 1, 2, 0)),
        ((2, 256, 2, 2, 256, 7, 7, 1, 3, 1, 256, 0), (2, 4, 2, 2, 4, 7, 7, 1, 3, 1, 4, 0)),
        ((2, 128, 4, 4, 256, 2, 2, 2, 0, 1, 1, 1), (2, 32, 4, 4, 64, 2, 2, 2, 0, 1, 1, 1)),
        ((2, 32, 16, 16, 64, 2, 2, 2, 0, 1, 1, 1), (2, 16, 16, 16, 32, 2, 2, 2, 0, 1, 1, 1)),
    ],
    "conv2d": [
        ((2, 32, 16, 16, 32, 7, 7, 1, 3, 1, 32, 1), (2, 2, 8, 8, 2, 7, 7, 1, 3, 1, 2, 1)),
        ((2, 128, 4, 4, 256, 2, 2, 2, 0, 1, 1, 1), (2, 64, 4, 4, 128, 2, 2, 2, 0, 1, 1, 1)),
        ((2, 3, 64, 64, 32, 4, 4, 4, 0, 1, 1, 1), (2, 3, 64, 64, 32, 4, 4, 4, 0, 1, 1, 1)),  # small enough
        # 40 channels keep their partial tile of 8; 4x4 pixels still have padded and whole 3x3 windows
        ((8, 40, 30, 30, 40, 3, 3, 1, 1, 1, 1, 0), (8, 24, 4, 4, 24, 3, 3, 1, 1, 1, 1, 0)),
        # 3 channels a group keep the few-channel path; 2 groups stay
        ((2, 6, 31, 31, 12, 3, 3, 1, 1, 1, 2, 0), (2, 6, 16, 16, 12, 3, 3, 1, 1, 1, 2, 0)),
    ],
    "conv2d_backward_weight": [
        ((2, 3, 64, 64, 32, 4, 4, 4, 0, 1, 1, 1), (2, 3, 64, 64, 32, 4, 4, 4, 0, 1, 1, 1)),
    ],
}


@pytest.mark.parametrize(("name", "full", "checked"), [(n, f, c) for n, pairs in CONV_SHAPES.items() for f, c in pairs])
def test_convolutions_are_checked_on_shapes_of_few_program_steps(
    name: str, full: tuple[int, ...], checked: tuple[int, ...]
) -> None:
    equivalent = catalog.get(name)
    reduced = interpreter_shapes.interpreter_shape(equivalent, equivalent.shape(full))
    assert tuple(reduced.values()) == checked
    assert equivalent.interpreter_steps is not None
    assert equivalent.interpreter_steps(reduced) <= interpreter_shapes.INTERPRETER_STEPS


def test_program_steps_follow_the_measured_interpreter_times() -> None:
    """The depthwise 7x7 input gradient on 2x32x16x16 (141 s) against its weight gradient (22 s): 512 programs of
    49 tl.dot steps against 128 of 16 pixel blocks."""
    shape = catalog.get("conv2d").shape((2, 32, 16, 16, 32, 7, 7, 1, 3, 1, 32, 0))
    steps = {name: catalog.get(name).interpreter_steps(shape) for name in ("conv2d_backward_input",  # type: ignore[misc]
                                                                             "conv2d_backward_weight")}  # fmt: skip
    assert steps == {"conv2d_backward_input": 512 * (2 + 49), "conv2d_backward_weight": 128 * (2 + 16)}


def test_matmul_shapes_keep_their_partial_tiles() -> None:
    reduced = interpreter_shapes.interpreter_shape(catalog.get("matmul"), {"M": 1000, "N": 1024, "K": 8})
    assert reduced == {"M": 232, "N": 256, "K": 8}
    assert interpreter_shapes._tiled_shrink(40, 32) == 40 and interpreter_shapes._tiled_shrink(1000, 32) == 488


def test_the_interpreter_tiles_are_the_kernels() -> None:
    pytest.importorskip("triton")
    from inductor_lens.worker.handwritten.kernels import conv, matmul

    config = matmul.INTERPRETER_CONFIG
    assert (config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]) == interpreter_shapes.MATMUL_TILE
    for tile, config in ((interpreter_shapes.CONV_GEMM_TILE, conv.INTERPRETER_GEMM_CONFIG),
                         (interpreter_shapes.CONV_WEIGHT_GRAD_TILE, conv.INTERPRETER_WEIGHT_GRAD_CONFIG)):  # fmt: skip
        assert tile == (config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"])
    depthwise = conv.INTERPRETER_DEPTHWISE_CONFIG
    assert (depthwise["BLOCK_M"], depthwise["BLOCK_N"]) == interpreter_shapes.CONV_DEPTHWISE_TILE
    assert interpreter_shapes.CONV_FLAT_TAPS_BELOW == conv.FLAT_TAPS_BELOW
    assert conv.INTERPRETER_SMS * max(conv.SPLIT_FILLS) == interpreter_shapes.CONV_SLICE_PROGRAMS
    assert interpreter_shapes.CONV_MIN_SLICE_PIXELS == conv.INTERPRETER_MIN_SPLIT_PIXELS


def test_the_check_process_reports_each_check_as_a_phase(tmp_path: Path) -> None:
    """Through the supervisor: one progress line per task reaches on_phase, a skipped one included."""
    plan = HandwrittenPlan(device="cpu", tasks=_tasks(1), budget_s=-1)
    write_json_file(tmp_path / "plan.json", plan)
    seen: list[str] = []
    finished = run_worker("handwritten", [str(tmp_path / "plan.json"), str(tmp_path / "results.json")],
                          cwd=tmp_path, env={"TRITON_INTERPRET": "1", **_environ()}, log_path=tmp_path / "log",
                          timeout_s=300, on_phase=lambda phase, _: seen.append(phase))  # fmt: skip
    assert finished.exit_code == 0, (tmp_path / "log").read_text()
    assert len(seen) == 1 and seen[0].startswith("hand-written 1/1: relu 8x4 float32: ok (")


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


def test_skipped_runs_are_said_on_the_pages() -> None:
    skipped = "not started: the hand-written stage's 30 s budget was spent (--handwritten-budget SECONDS ...)"
    run = HandwrittenRun("relu", {"rows": 8, "cols": 4}, "float32", "cpu", skipped=skipped)
    assert handwritten_view._skipped((run,)) == f"relu: {skipped}"
    assert handwritten_view._skipped((replace(run, skipped=""),)) == ""


def test_the_budget_flag_reaches_the_spec(
    run_cli: Callable[..., CliResult], tmp_path: Path, stubbed_specs: list[CompileSpec | ScriptSpec]
) -> None:
    seen = stubbed_specs
    model = tmp_path / "m.py"
    model.write_text("")
    assert run_cli("compile", model, "--handwritten-budget", "12.5").code == 2
    assert run_cli("run", "--handwritten-budget", "0", "--", "python", model).code == 2
    assert run_cli("compile", model).code == 2
    assert [spec.handwritten_budget_s for spec in seen] == [12.5, 0.0, None]
    compile_spec, script_spec = seen[0], seen[1]
    assert isinstance(compile_spec, CompileSpec) and isinstance(script_spec, ScriptSpec)
    assert CompileSpec.from_json(compile_spec.to_json()) == compile_spec
    assert ScriptSpec.from_json(script_spec.to_json()).handwritten_budget_s == 0.0
