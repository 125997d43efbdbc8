"""End to end on CPU: a run's settings beyond mode and options (issue 32) reach the model process and the report.

samples/mlp.py is compiled twice, untimed: as it is, and under ``--matmul-precision high --autocast bf16
--dynamo-option capture_scalar_outputs=true``. The second records its settings in lens.json, and its accuracy
verdict, against a float64 run made without autocast, shows the error autocast costs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import SAMPLES, run_cli_process

SETTINGS = ("--matmul-precision", "high", "--autocast", "bf16", "--dynamo-option", "capture_scalar_outputs=true")


def _compile(folder: Path, out: str, *args: str) -> dict:
    result = run_cli_process("compile", SAMPLES / "mlp.py", "--device", "cpu", "--no-bench", "--no-handwritten",
                             "--out", folder / out, *args, cwd=folder)  # fmt: skip
    assert result.code == 0, result.stderr
    return json.loads((folder / out / "lens.json").read_text())["run"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """The sample as it is, and under the settings."""
    folder = tmp_path_factory.mktemp("run-settings")
    return _compile(folder, "plain"), _compile(folder, "amp", *SETTINGS)


def test_settings_reach_the_model_process_and_the_report(runs: tuple[dict, dict]) -> None:
    plain, amp = runs
    settings = amp["settings"]
    assert settings["matmul_precision"] == "high" and settings["autocast"] == "bfloat16"
    assert settings["dynamo_options"] == {"capture_scalar_outputs": True}
    assert plain["settings"]["autocast"] is None and plain["settings"]["dynamo_options"] == {}
    # autocast is around the eager and the compiled calls alike: both give bfloat16, and agree
    assert all("bfloat16" in output for output in amp["capture"]["outputs"]), amp["capture"]["outputs"]
    assert amp["capture"]["accuracy"]["within_tolerance"] is True
    # the verdict's reference is the float64 run, made without autocast
    assert amp["capture"]["accuracy"]["reference"] == plain["capture"]["accuracy"]["reference"] == "float64"


def _worst_rmse(run: dict) -> float | None:
    rmses = [c["compiled_rmse"] for c in run["capture"]["accuracy"]["checks"] if c["compiled_rmse"] is not None]
    return max(rmses) if rmses else None


def test_the_float64_run_shows_what_autocast_costs(runs: tuple[dict, dict]) -> None:
    """The outputs agree with eager (both under autocast), and their RMSEs against float64 are kept all the same."""
    plain, amp = runs
    amp_rmse, plain_rmse = _worst_rmse(amp), _worst_rmse(plain)
    assert amp_rmse is not None and plain_rmse is not None
    assert amp_rmse > 10 * plain_rmse  # bfloat16's error, far beyond float32's
