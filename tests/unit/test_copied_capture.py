"""A capture folder copied off the machine that made it (``report <folder>/capture``) gets the report its own run
wrote: the outcome (accuracy, cold compile, inputs, outputs, parameters), the measured environment and the
settings come back from the capture.json and spec.json it holds, not only the debug output.

Real captures: ``h100-gpt2-fp32-default`` (an H100 capture folder alone, as copied off the GPU box) and
``cpu-torch2.13-repeated-layers-train`` (a report folder holding its ``capture/``). The expected values are read
straight from each capture.json here.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inductor_lens.pipeline import read_copied_capture, report_folder

pytestmark = pytest.mark.unit

# capture.json field -> the same field of lens.json's run.capture
SAME_FIELDS = (
    "status", "phase", "cold_compile_s", "eager_first_call_s", "second_call_s", "calls", "call_seconds", "inputs",
    "outputs", "parameters", "accuracy",
)  # fmt: skip


def _lens(out: Path) -> dict[str, Any]:
    run: dict[str, Any] = json.loads((out / "lens.json").read_text(encoding="utf-8"))["run"]
    return run


def _check_against_capture_json(run: dict[str, Any], capture_dir: Path) -> None:
    raw = json.loads((capture_dir / "capture.json").read_text(encoding="utf-8"))
    spec = json.loads((capture_dir / "spec.json").read_text(encoding="utf-8"))
    captured = run["capture"]
    assert captured is not None
    for name in SAME_FIELDS:
        assert captured[name] == raw[name], name
    assert captured["model_path"] == spec["model_path"]
    assert captured["model_name"] == Path(spec["model_path"]).stem == run["title"]
    assert captured["exit_code"] == 0 and captured["wall_s"] == raw["wall_s"]
    assert run["environment"]["device_name"] == raw["environment"]["device_name"]
    assert run["environment"]["torch_version"] == raw["environment"]["torch_version"]
    settings = run["settings"]
    assert settings["mode"] == spec["mode"] and settings["train"] == spec["train"]
    assert not settings.get("mode_inferred")  # read from the spec, not guessed from the options


def _check_index(out: Path, capture_dir: Path) -> None:
    raw = json.loads((capture_dir / "capture.json").read_text(encoding="utf-8"))
    page = (out / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<h2 id="accuracy">Accuracy: compiled (agrees with|differs from) eager</h2>', page)
    cold = re.search(r"<tr><th>First compiled call</th><td>([^<]+)<", page)
    assert cold is not None, "no cold-compile row"
    assert f"{raw['cold_compile_s']:.1f}"[:3] in cold.group(1).replace(",", "")


def test_gpu_capture_folder_alone(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    capture_dir = unpacked("h100-gpt2-fp32-default")
    report_folder(capture_dir, tmp_path / "copied", draw=False)
    run = _lens(tmp_path / "copied")
    _check_against_capture_json(run, capture_dir)
    _check_index(tmp_path / "copied", capture_dir)
    raw = json.loads((capture_dir / "capture.json").read_text(encoding="utf-8"))
    assert run["capture"]["accuracy"]["within_tolerance"] == raw["accuracy"]["within_tolerance"]


def test_copied_capture_equals_report_folder(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """The same capture read three ways: its folder alone, the report folder around it, and that report re-rendered
    from its lens.json: one capture section."""
    report_dir = tmp_path / "report"
    shutil.copytree(unpacked("cpu-torch2.13-repeated-layers-train"), report_dir)
    capture_dir = report_dir / "capture"
    report_folder(capture_dir, tmp_path / "alone", draw=False)
    report_folder(report_dir, tmp_path / "around", draw=False)
    report_folder(tmp_path / "around", tmp_path / "again", draw=False)
    runs = [_lens(tmp_path / name) for name in ("alone", "around", "again")]
    for run in runs:
        _check_against_capture_json(run, capture_dir)
    assert runs[0]["capture"] == runs[1]["capture"] == runs[2]["capture"]
    assert runs[0]["settings"] == runs[1]["settings"] and runs[0]["environment"] == runs[1]["environment"]
    for name in ("alone", "around"):
        _check_index(tmp_path / name, capture_dir)


def test_unreadable_spec_falls_back(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """A capture folder whose spec.json is damaged is still a report, built from its debug output alone."""
    capture_dir = tmp_path / "capture"
    shutil.copytree(unpacked("cpu-torch2.13-repeated-layers-train") / "capture", capture_dir)
    (capture_dir / "spec.json").write_text("{not json", encoding="utf-8")
    assert read_copied_capture(capture_dir) is None
    report_folder(capture_dir, tmp_path / "out", draw=False)
    assert _lens(tmp_path / "out")["capture"] is None


def test_copied_run_capture(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    """A ``run`` capture (a script's, spec.json of kind "script") copied alone: its command, its torch.compile calls
    and the profiled window come back too."""
    capture_dir = unpacked("cpu-torch2.13-run-sgd-train") / "capture"
    raw = json.loads((capture_dir / "capture.json").read_text(encoding="utf-8"))
    report_folder(capture_dir, tmp_path / "out", draw=False)
    captured = _lens(tmp_path / "out")["capture"]
    assert captured["command"] == raw["command"] and captured["command"].endswith("train_mlp.py")
    assert captured["profiled"] == raw["profiled"] != ""
    assert [c["target"] for c in captured["compile_calls"]] == [c["target"] for c in raw["compile_calls"]]
    assert captured["status"] == raw["status"] == "ok"


def test_a_folder_holding_only_a_capture_reads_that_capture(
    unpacked: Callable[[str], Path], tmp_path: Path, run_cli: Callable[..., Any]
) -> None:
    """An archive unpacked into a folder of its own: ``report <that folder>`` reads the one capture inside it, with
    its measurements and settings (read from the outer folder, only the debug tree was found: an untimed report)."""
    outer = tmp_path / "downloads"
    outer.mkdir()
    shutil.copytree(unpacked("h100-gpt2-fp32-default"), outer / "h100-gpt2-fp32-default")
    result = run_cli("report", outer, "--out", tmp_path / "out")
    assert result.code == 0, result.stderr
    assert f"{outer} holds only h100-gpt2-fp32-default/: reading that" in result.stderr
    run = _lens(tmp_path / "out")
    _check_against_capture_json(run, outer / "h100-gpt2-fp32-default")
    assert run["bench"]["step"] is not None
    # a folder with anything else beside its one subfolder is read as it is
    (outer / "notes.txt").write_text("x", encoding="utf-8")
    result = run_cli("report", outer, "--out", tmp_path / "as-is")
    assert "reading that" not in result.stderr
