"""The first report (issue 33): a capture's report is written before its slow stages and rewritten after them.

A real CPU capture (``cpu-torch2.13-gated-mlps``, whose capture folder kept its hand-written results) goes through
``pipeline._report_capture`` as ``compile`` sends it, with the check process replaced by one that looks at the
report folder while it "runs" and then answers with the capture's own results: the first report is on disk and
says the hand-written kernels are running; the second shows their results and the same run a one-go
``build_run`` makes. A report read back while still "running" says they did not finish, and a re-render keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inductor_lens import pipeline
from inductor_lens.capture import CAPTURE_DIR, Capture
from inductor_lens.exchange.files import HANDWRITTEN_RESULTS_FILE, HandwrittenResults
from inductor_lens.handwritten import attach
from inductor_lens.handwritten.runner import read_results
from inductor_lens.pipeline import (
    ReportResult,
    build_run,
    load_run,
    read_copied_capture,
    render,
    report_folder,
)
from inductor_lens.records import RUN_SCHEMA_VERSION, CompileRun

CASE = "cpu-torch2.13-gated-mlps"  # a CPU capture with hand-written results (capture/handwritten.json)
RUNNING = "Hand-written: running"
STOPPED = "Hand-written: did not finish"


def _pages(out_dir: Path) -> tuple[str, str, dict[str, Any]]:
    return ((out_dir / "index.html").read_text(encoding="utf-8"), (out_dir / "handwritten.html").read_text(encoding="utf-8"),
            json.loads((out_dir / "lens.json").read_text(encoding="utf-8")))  # fmt: skip


def _captured(root: Path) -> Capture:
    captured = read_copied_capture(root / CAPTURE_DIR)
    assert captured is not None
    return captured


def _report(
    root: Path, handwritten: bool, phases: list[str], captured: Capture | None = None, **kwargs: Any
) -> ReportResult:
    return pipeline._report_capture(captured or _captured(root), root, "gated", handwritten, 600.0, strict=True,
                                    draw=False, progress=lambda name, _: phases.append(name), **kwargs)  # fmt: skip


@pytest.fixture
def capture_copy(fixture_copy: Callable[[str], Path]) -> tuple[Path, HandwrittenResults]:
    """A private copy of the capture, and the hand-written results it kept (moved out: the checks make them)."""
    root = fixture_copy(CASE)
    results_file = root / CAPTURE_DIR / HANDWRITTEN_RESULTS_FILE
    results = read_results(results_file)
    assert results.results
    results_file.unlink()
    return root, results


def test_the_first_report_is_written_before_the_hand_written_stage_ends_and_rewritten_after(
    capture_copy: tuple[Path, HandwrittenResults], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, results = capture_copy
    seen: dict[str, Any] = {}

    def checks(tasks: list[Any], device: str, capture_dir: Path, timeout_s: float, verify: Any = None, *,
               budget_s: float | None = None, on_phase: Any = None) -> HandwrittenResults:  # fmt: skip
        index, handwritten, lens = _pages(root)  # the first report, on disk while the checks run
        seen.update(index=index, handwritten=handwritten, lens=lens, tasks=len(tasks), budget_s=budget_s)
        assert on_phase is not None
        on_phase("matmul 64x96x32 float32", 0.5)
        return results

    monkeypatch.setattr(attach, "run_tasks", checks)
    phases: list[str] = []
    result = _report(root, True, phases, budget_s=42.0)

    assert seen["lens"]["schema_version"] == RUN_SCHEMA_VERSION
    assert seen["lens"]["run"]["handwritten_status"] == "running"
    assert RUNNING in seen["index"] and 'href="handwritten.html"' in seen["index"]
    assert RUNNING in seen["handwritten"] and "<td>running</td>" in seen["handwritten"]
    assert seen["tasks"] == len(results.results) and seen["budget_s"] == 42.0
    # the terminal: the first report's path before the checks, each check as the worker announces it
    written = next(i for i, p in enumerate(phases) if p.startswith("report written: "))
    assert str(root / "index.html") in phases[written] and "hand-written kernels (5 check(s))" in phases[written]
    assert phases[written + 1:] == ["hand-written kernels", "matmul 64x96x32 float32"]

    index, handwritten, lens = _pages(root)  # the second report
    assert RUNNING not in index and RUNNING not in handwritten and "<td>running</td>" not in handwritten
    assert "<td>yes</td>" in handwritten and lens["run"]["handwritten_status"] == "done"
    assert result.run.handwritten_status == "done" and load_run(root).handwritten_status == "done"
    assert result.first_report_s is not None and result.report_s is not None
    assert 0 < result.first_report_s <= result.report_s
    # the run is the one build_run makes in one go
    monkeypatch.setattr(attach, "run_tasks", lambda *_, **__: results)
    captured = _captured(root)
    whole = build_run(root, root / CAPTURE_DIR, strict=True, allow_empty=True, title="gated",
                      settings=captured.settings, environment=captured.environment, capture=captured.outcome,
                      run_handwritten=True)  # fmt: skip
    assert replace(result.run, created="") == replace(whole, created="")


def test_without_hand_written_checks_the_report_is_written_once(
    capture_copy: tuple[Path, HandwrittenResults], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = capture_copy

    def no_checks(*_: Any, **__: Any) -> HandwrittenResults:
        raise AssertionError("--no-handwritten ran the checks")

    monkeypatch.setattr(attach, "run_tasks", no_checks)
    writes: list[Path] = []
    monkeypatch.setattr(pipeline, "render", lambda run, out_dir, draw=True: writes.append(render(run, out_dir, draw=draw)) or writes[-1])
    phases: list[str] = []
    result = _report(root, False, phases)
    assert len(writes) == 1 and result.first_report_s is None
    assert not any(p.startswith("report written") for p in phases)
    assert result.run.handwritten_status == "" and RUNNING not in _pages(root)[0]


def test_a_failed_capture_is_written_once(
    capture_copy: tuple[Path, HandwrittenResults], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = capture_copy
    captured = _captured(root)
    failed = replace(captured, outcome=replace(captured.outcome, status="failed", error="the model raised"))
    monkeypatch.setattr(attach, "run_tasks", lambda *_, **__: pytest.fail("checks ran for a failed capture"))
    phases: list[str] = []
    result = _report(root, True, phases, failed)
    assert result.error is not None and result.first_report_s is None
    assert not any(p.startswith("report written") for p in phases)
    assert result.run.handwritten_status == ""


def test_without_first_report_the_report_is_written_once(
    capture_copy: tuple[Path, HandwrittenResults], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compare`` reads its configurations' reports for numbers: it needs no first report."""
    root, results = capture_copy
    monkeypatch.setattr(attach, "run_tasks", lambda *_, **__: results)
    phases: list[str] = []
    result = _report(root, True, phases, first_report=False)
    assert result.first_report_s is None and result.run.handwritten_status == "done"
    assert not any(p.startswith("report written") for p in phases)


def _running_report(root: Path) -> CompileRun:
    """The report as the first phase wrote it, the tool then stopped before rewriting it."""
    captured = _captured(root)
    run = pipeline._first_phase(root, root / CAPTURE_DIR, strict=True, allow_empty=True, title="gated",
                                settings=captured.settings, environment=captured.environment,
                                capture=captured.outcome, run_handwritten=True)  # fmt: skip
    assert run.handwritten_status == "running"
    render(run, root, draw=False)
    return run


def test_a_report_read_back_still_running_says_the_checks_did_not_finish(
    capture_copy: tuple[Path, HandwrittenResults],
) -> None:
    root, _ = capture_copy
    _running_report(root)
    assert RUNNING in _pages(root)[0]
    run = load_run(root)
    assert run.handwritten_status == "stopped"
    out = root / "again"
    render(run, out, draw=False)
    index, handwritten, lens = _pages(out)
    for page in (index, handwritten):
        assert STOPPED in page and RUNNING not in page
        assert "compile (or run) the model again" in page and "does not run the checks" in page
    assert lens["run"]["handwritten_status"] == "stopped"


def test_a_re_render_of_a_stopped_report_keeps_it_stopped(capture_copy: tuple[Path, HandwrittenResults]) -> None:
    """``inductor-lens report`` rebuilds from the capture and runs no checks: the checks stay unfinished."""
    root, _ = capture_copy
    _running_report(root)
    result = report_folder(root, draw=False)
    assert result.run.handwritten_status == "stopped" and not result.reused
    assert STOPPED in _pages(root)[1]


def test_a_report_from_before_reads_with_nothing_said(capture_copy: tuple[Path, HandwrittenResults]) -> None:
    """A version 15 lens.json has no status: it reads as "" and its pages say nothing of the checks' progress."""
    root, _ = capture_copy
    run = _running_report(root)
    document = json.loads(replace(run, handwritten_status="").to_json())
    del document["run"]["handwritten_status"]
    document["schema_version"] = 15
    old = CompileRun.from_json(json.dumps(document))
    assert old.handwritten_status == ""
    out = root / "old"
    render(old, out, draw=False)
    index, handwritten, _ = _pages(out)
    for page in (index, handwritten):
        assert RUNNING not in page and STOPPED not in page and 'id="handwritten-status"' not in page
