"""--try and ``try REPORT`` end to end on CPU, on a real corpus model (HF Llama, random weights).

``compile --try 2`` runs the report's two suggestions that apply as settings (on this CPU: the C++ wrapper for
the Python around the kernels, and freezing for the library matmuls of an inference run) as configurations of a
comparison against the run's own settings; ``try REPORT --top 1 --config ...`` then tries the first again with a
configuration that cannot compile. Every number the first page and lens.json give for a trial is checked against
the raw files of the comparison (each warm round's capture.json), worked out here independently.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.bench.diagnosis import diagnose
from inductor_lens.compare.trials import base_spec, suggestions
from inductor_lens.records import CompileRun

from ..conftest import SAMPLES, CliResult, run_cli_process

pytest.importorskip("transformers", reason="the real-model corpus needs transformers (make test installs it)")

MODEL = SAMPLES / "real" / "llama.py"
# A C++ compiler that does not exist: every compile of the configuration fails, with Inductor's own error.
BROKEN = "broken:cpp.cxx=/nonexistent/c++"


@pytest.fixture(scope="module")
def tried(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliResult]:
    out = tmp_path_factory.mktemp("try") / "llama"
    result = run_cli_process("compile", MODEL, "--device", "cpu", "--no-handwritten", "--try", "2", "--out", out,
                             timeout=1500)  # fmt: skip
    return out, result


def _run(out: Path) -> CompileRun:
    return CompileRun.from_json((out / "lens.json").read_text(encoding="utf-8"))


def _round_medians(config_dir: Path) -> list[float]:
    """The compiled step's median of each warm round, read from the rounds' own capture.json."""
    medians = []
    for capture in sorted((config_dir / "warm-rounds").glob("*/capture.json")):
        data = json.loads(capture.read_text(encoding="utf-8"))
        medians.append(data["bench"]["end_to_end"]["compiled"]["median_ms"])
    return medians


def test_try_two_suggestions_measured(tried: tuple[Path, CliResult]) -> None:
    out, result = tried
    assert result.code == 0, result.stderr
    run = _run(out)
    trials = run.trials
    assert trials is not None and trials.command == "compile --try 2"
    settings = run.settings
    assert settings is not None
    # the first two suggestions of the run's own diagnosis that apply as settings (on this CPU: the C++ wrapper,
    # freezing), whatever the measurements then made of their ranking
    chosen, _ = suggestions(diagnose(replace(run, trials=None)).findings, base_spec(out), 2)
    assert [t.setting for t in trials.trials] == [c.setting for c in chosen]
    assert 1 <= len(trials.trials) <= 2 and {t.setting.label for t in trials.trials} <= {"cpp_wrapper", "freezing"}
    assert trials.rounds == trials.rounds_asked == 3
    for trial in trials.trials:
        # never the run's own settings: each changes an option the run did not have
        assert trial.setting.options and all(settings.options.get(k) != v for k, v in trial.setting.options.items())
        spec = json.loads((out / "tries" / "configs" / trial.name / "capture" / "spec.json").read_text())
        assert all(spec["options"][k] == v for k, v in trial.setting.options.items())
        assert trial.verdict in ("faster", "no gain", "slower"), trial.reason
        # the step and the baseline's, from the rounds' raw files
        mine = statistics.median(_round_medians(out / "tries" / "configs" / trial.name))
        base = statistics.median(_round_medians(out / "tries" / "configs" / "as-run"))
        assert trial.step_ms == pytest.approx(mine, rel=1e-9) and trial.base_step_ms == pytest.approx(base, rel=1e-9)
        assert trial.change == pytest.approx(mine / base - 1, rel=1e-6)
        assert trial.speedup == pytest.approx(base / mine, rel=1e-6)
        assert trial.noise is not None and trial.noise >= 0.02 and len(trial.ratios) == 3
        judged_beyond = abs(trial.change) > trial.noise and trial.rounds_agree
        assert (trial.verdict != "no gain") == bool(judged_beyond), trial
        assert trial.cold_compile_s and trial.base_cold_compile_s
        # accuracy under the change, against the float64 run: the worst output's RMSE beside the run's own
        assert trial.rmse is not None and trial.base_rmse is not None and trial.accuracy_within is not None
        assert "checked against float64" in trial.accuracy_note
    estimated = [t for t in trials.trials if t.predicted_us]  # the C++ wrapper's estimate: the Python measured
    assert all(t.measured_us is not None and t.setting.label in trials.estimates for t in estimated)
    # the first page: the section, each trial's verdict and step, linked to its report and to the comparison
    page = (out / "index.html").read_text(encoding="utf-8")
    section = page[page.index('id="tried"'):]
    for trial in trials.trials:
        assert trial.setting.label in section and trial.verdict in section
        assert f"{trial.step_ms:.3f}" in section or f"{trial.step_ms:,.2f}" in section, trial.step_ms
        assert f'href="{trial.report}"' in page and (out / trial.report).is_file()
    assert 'href="tries/index.html"' in page and (out / "tries" / "index.html").is_file()
    # the terminal: one line per trial (which were chosen depends on what this machine measured: on a loaded one the
    # Python around the kernels may not be judged, and the C++ wrapper is then not suggested)
    for trial in trials.trials:
        assert re.search(rf"tried {trial.setting.label}: (faster|no gain|slower)", result.stderr), result.stderr


def test_try_report_again_with_a_failing_change(tried: tuple[Path, CliResult]) -> None:
    out, first = tried
    assert first.code == 0, first.stderr
    before = _run(out).trials
    assert before is not None
    earlier = before.trials
    result = run_cli_process("try", out, "--top", "1", "--rounds", "2", "--config", BROKEN, timeout=1200)
    assert result.code == 0, result.stderr
    run = _run(out)
    trials = run.trials
    assert trials is not None and trials.command == f"try --top 1 --config {BROKEN}"
    first_time = earlier[0]
    assert [t.name for t in trials.trials] == [first_time.name, "broken"]
    broken = trials.trials[1]
    assert broken.verdict == "failed" and broken.kind == "asked"
    assert "C++ compiler" in broken.reason or "cxx" in broken.reason, broken.reason
    assert trials.trials[0].verdict != "failed" and len(trials.trials[0].ratios) == 2
    # the second suggestion is beyond --top 1: listed as not tried, with why
    for second in earlier[1:]:
        assert any("beyond the 1 tried" in u.why and second.setting.label in u.title for u in trials.untried)
    page = (out / "index.html").read_text(encoding="utf-8")
    section = page[page.index('id="tried"'):]
    assert "failed" in section and "broken" in section
    # the report built again from its folder keeps the trials (they live in capture/trials.json)
    again = run_cli_process("report", out)
    assert again.code == 0, again.stderr
    assert _run(out).trials == trials


# A training loop whose input length changes once: Dynamo recompiles, and the diagnosis suggests dynamic shapes.
TRAIN = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
compiled = torch.compile(model)
for length in (16, 32):
    for _ in range(4):
        loss = compiled(torch.randn(length, 64)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_run_try_measures_a_scripts_suggestion(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    out = tmp_path / "report"
    result = run_cli_process("run", "--try", "1", "--out", out, "--warmup", "2", "--steps", "3", "--", "python",
                             "train.py", cwd=tmp_path, timeout=900)  # fmt: skip
    assert result.code == 0, result.stderr
    trials = _run(out).trials
    assert trials is not None and trials.command == "run --try 1"
    (trial,) = trials.trials
    assert trial.setting.dynamic is True and trial.kind == "recompile"
    assert trial.verdict in ("faster", "no gain", "slower"), trial.reason
    assert len(trial.ratios) == 3 and trial.step_ms and trial.base_step_ms
    # a script's step: the median host wall time of its profiled steps, in each warm process
    spec = json.loads((out / "tries" / "configs" / trial.name / "capture" / "spec.json").read_text())
    assert spec["kind"] == "script" and spec["dynamic"] is True
    assert "a script has no accuracy check" in trial.accuracy_note
    assert f"tried dynamic shapes: {trial.verdict}" in result.stderr
