"""Where compiled vs eager has no figure, the first page says why and how to get one, read from the records of real
captures: a capture made with --no-bench, the same stopped while compiling, a script's run (its profiled steps are
timed, no eager run beside them), and debug output alone (the model never ran through the tool)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.pipeline import report_folder

pytestmark = pytest.mark.unit


def _note(folder: Path, out: Path) -> str:
    answers = report_folder(folder, out, draw=False).run.answers
    assert answers is not None and answers.speedup is None
    return answers.speedup_note


def test_each_reason_is_named(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    no_bench = unpacked("cpu-torch2.13-t5-gated")
    assert json.loads((no_bench / "capture" / "spec.json").read_text(encoding="utf-8"))["bench"] is False
    assert _note(no_bench, tmp_path / "no-bench") == "not measured: the capture ran without timing (--no-bench)"

    # the same capture as its model process would have left it, stopped while compiling
    failed = tmp_path / "failed-capture"
    shutil.copytree(no_bench / "capture", failed)
    result = json.loads((failed / "capture.json").read_text(encoding="utf-8"))
    (failed / "capture.json").write_text(json.dumps({**result, "status": "failed", "phase": "compile"}), encoding="utf-8")
    note = _note(failed, tmp_path / "failed")
    assert note == "not measured: the model process stopped during 'compile', before its timing"

    script = unpacked("cpu-torch2.13-run-sgd-train")
    note = _note(script, tmp_path / "script")
    assert note == "not measured: a script's run times its profiled steps, not an eager run beside them"

    debug_only = tmp_path / "debug-only"
    (debug_only).mkdir()
    (debug_only / "torch_compile_debug").symlink_to(no_bench / "capture" / "torch_compile_debug")
    assert _note(debug_only, tmp_path / "debug").startswith("not measured: this report was read from debug output")
