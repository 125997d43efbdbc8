"""The data model's JSON form (lens.json): versioned, round-trips exactly, refuses what it cannot read."""

from __future__ import annotations

import json
import math

import pytest

from inductor_lens.records import RUN_SCHEMA_VERSION, Accuracy, CaptureOutcome, CompileRun, Environment


def _run(**capture: object) -> CompileRun:
    outcome = CaptureOutcome(model_path="m.py", model_name="m", status="ok", phase="done", **capture)  # type: ignore[arg-type]
    return CompileRun(
        title="m",
        created="2026-01-01T00:00:00+00:00",
        tool_version="0",
        source_dir="/x",
        environment=Environment(torch_version="2.13.0"),
        capture=outcome,
    )


def test_schema_version_is_written() -> None:
    document = json.loads(_run().to_json())
    assert document["schema_version"] == RUN_SCHEMA_VERSION
    assert document["run"]["environment"]["torch_version"] == "2.13.0"


def test_non_finite_errors_survive_the_round_trip() -> None:
    accuracy = Accuracy(
        compared="outputs",
        tensors=1,
        max_abs_error=math.inf,
        max_rel_error=math.nan,
        within_tolerance=False,
        rtol=1e-4,
        atol=1e-5,
    )
    again = CompileRun.from_json(_run(accuracy=accuracy).to_json())
    assert again.capture is not None and again.capture.accuracy is not None
    assert again.capture.accuracy.max_abs_error == math.inf
    assert math.isnan(again.capture.accuracy.max_rel_error)


def test_newer_schema_is_refused_with_a_reason() -> None:
    document = json.loads(_run().to_json())
    document["schema_version"] = RUN_SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="newer than this inductor-lens reads"):
        CompileRun.from_json(json.dumps(document))


@pytest.mark.parametrize("text", ['{"run": {}}', "[]", '{"schema_version": 1, "run": {"title": 3}}'])
def test_malformed_documents_raise(text: str) -> None:
    with pytest.raises((ValueError, TypeError)):
        CompileRun.from_json(text)


def test_unknown_fields_from_newer_minor_versions_are_ignored() -> None:
    document = json.loads(_run().to_json())
    document["run"]["environment"]["gpu_clock_mhz"] = 1980
    assert CompileRun.from_json(json.dumps(document)).environment.torch_version == "2.13.0"
