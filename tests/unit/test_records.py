"""The data model's JSON form (lens.json): versioned, round-trips exactly, refuses what it cannot read."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace

import pytest

from inductor_lens.records import (
    RUN_SCHEMA_VERSION,
    Accuracy,
    AutotuneChoice,
    AutotuneTable,
    CaptureOutcome,
    CompileRun,
    CompileSettings,
    Environment,
    GraphRecord,
    JsonValue,
    KernelRecord,
    from_jsonable,
)


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


def test_json_values_are_read_back_as_written() -> None:
    """Kernel metadata and option values keep their JSON types: "1.5" stays a string, 3 an int."""
    meta = {
        "grid_type": "Grid1D",
        "num_load": 3,
        "kernel_num_gb": 0.5,
        "no_x_dim": None,
        "tiling_scores": {"x": 0, "r0_": 12},
        "text": "1.5",
        "nan_text": "nan",
        "nested": [[1, {"a": [True]}], []],
    }
    kernel = KernelRecord(
        "k", "triton", "pointwise", "src", 1,
        launch_config={"device": {"cc": 90}},
        inductor_meta=meta,
        autotune_info={"best_config": [["XBLOCK", 64]], "coordesc_tuning": True},
    )  # fmt: skip
    template = {"BLOCK_M": 64, "ACC_TYPE": "tl.float32", "EVEN_K": True}
    table = AutotuneTable("mm", ("a",), (AutotuneChoice("t", 0.1, config=template),))
    options = {"epilogue_fusion": True, "unroll": 8, "ratio": 0.25, "name": "2", "d": {"x": [1]}}
    run = replace(
        _run(),
        graphs=(GraphRecord("g", "g", "g", "forward", kernels=(kernel,)),),
        autotune=(table,),
        settings=CompileSettings(options=options),
    )
    again = CompileRun.from_json(run.to_json())
    assert again == run
    read = again.graphs[0].kernels[0].inductor_meta
    assert read["text"] == "1.5" and read["nan_text"] == "nan" and type(read["num_load"]) is int
    assert type(read["kernel_num_gb"]) is float and read["nested"] == [[1, {"a": [True]}], []]
    assert again.settings is not None and type(again.settings.options["name"]) is str
    assert again.autotune[0].choices[0].config == template


def test_json_value_fields_refuse_what_is_not_json() -> None:
    with pytest.raises((TypeError, ValueError)):
        from_jsonable(Mapping[str, JsonValue], {"a": [{"b": [[{"c": object()}]]}]})
    document = json.loads(_run().to_json())
    choice = {"name": "t", "ms": 1.0, "config": {"BLOCK_M": [64]}}  # a template's config holds scalars
    document["run"]["autotune"] = [{"op": "mm", "shapes": [], "choices": [choice]}]
    with pytest.raises(ValueError, match="matches none of"):
        CompileRun.from_json(json.dumps(document))
