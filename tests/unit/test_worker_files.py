"""The process boundary's files: declared once, read back with their shape checked (see exchange/files.py).

What the model process itself imports is checked end to end in tests/e2e/test_model_process.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inductor_lens.exchange.files import (
    BenchData,
    CaptureResult,
    FileShapeError,
    read_bench_data,
    read_capture_result,
    read_json_file,
    write_json_file,
)


def test_boundary_files_of_the_wrong_shape_raise_one_error(tmp_path: Path) -> None:
    result = tmp_path / "capture.json"
    result.write_text(json.dumps({"status": "ok", "phase": 3}))
    with pytest.raises(FileShapeError, match="not a CaptureResult"):
        read_capture_result(result)
    # a damaged measurement section does not hide how the model process ended
    result.write_text(json.dumps({"status": "ok", "phase": "done", "bench": {"device": "cpu", "end_to_end": [1]}}))
    outcome = read_capture_result(result)
    assert outcome is not None and outcome.status == "ok" and outcome.bench is None
    with pytest.raises(FileShapeError, match="bench: not a BenchData"):
        read_bench_data(result)
    result.write_text("[1, 2]")
    with pytest.raises(FileShapeError):
        read_bench_data(result)
    result.write_text('{"status": "ok"')
    with pytest.raises(FileShapeError, match="not JSON"):
        read_capture_result(result)
    assert read_capture_result(tmp_path / "missing.json") is None
    assert read_json_file(tmp_path / "missing.json", BenchData) is None


def test_a_default_result_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "capture.json"
    write_json_file(path, CaptureResult(phase="compile", inputs=["float32[2] on cpu"]))
    assert read_capture_result(path) == CaptureResult(phase="compile", inputs=["float32[2] on cpu"])
    assert not list(tmp_path.glob("*.tmp"))


def test_a_scripts_compile_options_holding_a_pass_object_are_recorded_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.compile(options={"post_grad_custom_pre_pass": a_function}) once crashed the script process: its
    result file is JSON, and a function is not. The option is recorded by name and reaches torch unchanged."""
    import torch

    from inductor_lens.exchange.files import read_capture_result
    from inductor_lens.options import ScriptSpec
    from inductor_lens.worker import script_hooks
    from inductor_lens.worker.capture_run import ScriptRun

    def noop_pass(graph: object) -> None:
        return None

    received: dict[str, object] = {}
    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: received.update(kwargs) or model)
    monkeypatch.setattr(script_hooks, "list_mode_options", lambda mode, dynamic=None: {})
    spec = ScriptSpec(argv=("train.py",), cwd=tmp_path, model_path=tmp_path / "train.py")
    run = ScriptRun(spec, tmp_path / "capture.json")
    script_hooks.wrap_compile(spec, run, None)
    torch.compile(noop_pass, options={"post_grad_custom_pre_pass": noop_pass, "max_autotune": True})
    (call,) = run.result.compile_calls
    assert call.script_options == {
        "post_grad_custom_pre_pass": "<function test_a_scripts_compile_options_holding_a_pass_object_are_recorded_by_name.<locals>.noop_pass>",
        "max_autotune": True,
    }
    assert received["options"]["post_grad_custom_pre_pass"] is noop_pass  # type: ignore[index]
    result = read_capture_result(tmp_path / "capture.json")
    assert result is not None and result.compile_calls[0].script_options == call.script_options


def test_an_error_that_introduces_its_cause_keeps_the_cause_on_its_line() -> None:
    """torch's BackendCompilerFailed reads "backend='inductor' raised:" and names the cause on the next line:
    the one-line error once stopped at the colon and said nothing."""
    from inductor_lens.worker.failure import first_line

    exc = RuntimeError(
        "backend='inductor' raised:\nFakeTensorDeviceMismatchError: found at least two devices, cuda:0 and cpu!\n\n"
        "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace"
    )
    assert first_line(exc) == (
        "backend='inductor' raised: FakeTensorDeviceMismatchError: found at least two devices, cuda:0 and cpu!"
    )
    assert first_line(RuntimeError("plain message\nmore")) == "plain message"
    assert first_line(RuntimeError("")) == "RuntimeError"
