"""The suggestions tried (compare/trials.py, bench/trials.py): what is tried, the verdicts, the ranking, the file."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.bench.answers import ranked_by_trials, trial_lines
from inductor_lens.bench.trials import TRIALS_FILE, attach_trials, write_trials
from inductor_lens.compare.trials import (
    BASELINE,
    Suggestion,
    estimates_text,
    request_for,
    suggestions,
    trials_of,
)
from inductor_lens.errors import ParseError
from inductor_lens.options import CompileSpec
from inductor_lens.records import (
    AgainstBaseline,
    CaptureOutcome,
    CompileRun,
    ConfigResult,
    Finding,
    SettingChange,
    Trial,
    Trials,
)

from ..conftest import CliResult, assert_one_line_error

TF32 = SettingChange("TF32 matmuls", matmul_precision="high", predicted_us=5000.0)
BF16 = SettingChange("bfloat16 autocast", autocast="bfloat16", predicted_us=6000.0)
GRAPHS = SettingChange("CUDA graphs (mode reduce-overhead)", mode="reduce-overhead", predicted_us=300.0)
WRAPPER = SettingChange("cpp_wrapper", options={"cpp_wrapper": True}, predicted_us=200.0)


def _finding(kind: str, settings: tuple[SettingChange, ...] = (), change: str = "do it", where: str = "") -> Finding:
    return Finding(kind, f"{kind} finding", 1.0, "", "", "index.html#timing", change, "medium", settings=settings,
                   where=where)  # fmt: skip


def _base(tmp_path: Path, **changes: object) -> CompileSpec:
    model = tmp_path / "model.py"
    model.write_text("")
    return replace(CompileSpec(model), **changes)  # type: ignore[arg-type]


def test_suggestions_in_order_never_the_run_own_settings(tmp_path: Path) -> None:
    findings = [
        _finding("precision", (TF32, BF16)),
        _finding("graph break", change="remove the print", where="model.py:12"),
        _finding("host-bound", (GRAPHS,)),
        _finding("python overhead", (WRAPPER,)),
    ]
    # the run already has cpp_wrapper on: that suggestion is the run's own setting and is never tried
    base = _base(tmp_path, options={"cpp_wrapper": True})
    chosen, untried = suggestions(findings, base, top=2)
    assert [(s.name, s.setting) for s in chosen] == [("try1-tf32-matmuls", TF32), ("try2-bfloat16-autocast", BF16)]
    assert [(u.kind, u.why, u.where) for u in untried] == [
        ("graph break", "a change of code: not something a setting can try", "model.py:12"),
        ("host-bound", "beyond the 2 tried (--try 2)", ""),
    ]
    for suggestion in chosen:
        assert request_for(suggestion.name, suggestion.setting, base).apply(base) != base
    # the options of a suggestion are added to the run's own, which stay
    request = request_for("x", SettingChange("coord", options={"coordinate_descent_tuning": True}), base)
    assert request.apply(base).options == {"cpp_wrapper": True, "coordinate_descent_tuning": True}
    assert request.apply(base).mode == "default"


def _config(name: str, step: float | None, versus: AgainstBaseline | None = None, **fields: object) -> ConfigResult:
    return ConfigResult(name, "default", step_ms=step, against_baseline=versus, cold_compile_s=10.0,
                        report=f"configs/{name}", **fields)  # type: ignore[arg-type]  # fmt: skip


def _trials(configs: list[ConfigResult], chosen: list[Suggestion], skipped: tuple[str, ...] = ()) -> Trials:
    return trials_of(configs, chosen, {}, skipped, rounds_done=3, rounds=3, budget_s=600.0, wall_s=100.0,
                     command="compile --try 3")  # fmt: skip


def test_verdicts_from_the_comparison() -> None:
    chosen = [Suggestion("a", TF32, _finding("precision", (TF32, BF16))), Suggestion("b", GRAPHS, None),
              Suggestion("c", WRAPPER, _finding("python overhead", (WRAPPER,))),
              Suggestion("d", BF16, _finding("precision", (TF32, BF16)))]  # fmt: skip
    configs = [
        _config(BASELINE, 8.0),
        _config("a", 2.75, AgainstBaseline(2.75 / 8 - 1, 0.03, "faster", (0.34, 0.35, 0.34), True)),
        _config("b", 7.9, AgainstBaseline(7.9 / 8 - 1, 0.03, "within noise", (0.98, 1.0, 0.99), False)),
        _config("c", None, None, status="failed", error="CompileError: no working C++ compiler"),
    ]
    trials = _trials(configs, chosen, skipped=("d",))
    assert [(t.name, t.verdict) for t in trials.trials] == [("a", "faster"), ("b", "no gain"), ("c", "failed")]
    faster, same, failed = trials.trials
    assert faster.speedup == pytest.approx(8 / 2.75) and faster.measured_us == pytest.approx(5250.0)
    assert faster.estimate_ratio == pytest.approx(5250 / 5000)
    assert "every round on the same side" in faster.reason and "beyond the noise of 3.0%" in faster.reason
    assert "within the noise of 3.0%" in same.reason and same.kind == "asked"
    assert failed.reason == "CompileError: no working C++ compiler" and failed.report == "tries/configs/c/index.html"
    # the one the budget left out is listed, with why
    (left,) = trials.untried
    assert left.why == "the --try budget of 600 s ran out before it" and "bfloat16" in left.change
    assert "TF32 matmuls: estimated 5.000 ms saved per step, measured 5.250 ms (1.05× the estimate)" in trials.estimates
    assert estimates_text([]) == ""
    lines = trial_lines(trials)
    assert lines[0].startswith("tried TF32 matmuls: faster 2.91x (") and "estimated 5,000.0 µs saved, measured 5,250.0 µs" in lines[0]
    assert lines[2].startswith("tried cpp_wrapper: failed (") and lines[-1].startswith("not tried: 1 suggestion(s)")


def test_measured_gains_rank_the_findings() -> None:
    precision = _finding("precision", (TF32, BF16))
    graphs = _finding("host-bound", (GRAPHS,))
    wrapper = _finding("python overhead", (WRAPPER,))
    code = _finding("graph break")
    findings = (graphs, precision, code, wrapper)

    def trial(setting: SettingChange, verdict: str, measured: float | None) -> Trial:
        return Trial(setting.label, "", "", setting, verdict, "", measured_us=measured)  # type: ignore[arg-type]

    trials = Trials(1, "", "", BASELINE, "tries/index.html", 3, 3, "", 1.0,
                    trials=(trial(GRAPHS, "no gain", -10.0), trial(TF32, "faster", 5000.0), trial(WRAPPER, "faster", 90.0)))  # fmt: skip
    # winners by the time they saved, then the untried in the diagnosis's order, then those that lost
    assert ranked_by_trials(findings, trials) == (precision, wrapper, code, graphs)
    assert ranked_by_trials(findings, None) == findings


def test_trials_file_kept_with_the_capture(tmp_path: Path) -> None:
    run = CompileRun("m", "2026-01-01", "0", str(tmp_path))
    trials = Trials(1, "2026-11-27T00:00:00+00:00", "compile --try 1", BASELINE, "tries/index.html", 2, 3, "how", 12.5,
                    budget_s=None, trials=(Trial("try1-tf32", "f", "precision", TF32, "faster", "why", step_ms=2.0),))  # fmt: skip
    write_trials(tmp_path, trials)
    assert attach_trials(run, tmp_path).trials == trials
    assert attach_trials(run, tmp_path / "nowhere").trials is None
    # an unreadable file: a parse warning, the report built without trials; --strict: an error
    (tmp_path / TRIALS_FILE).write_text(json.dumps({"version": 1, "trials": {"version": "x"}}))
    damaged = attach_trials(run, tmp_path)
    assert damaged.trials is None and "the suggestions tried are left out" in damaged.stats.diagnostics[-1].message
    with pytest.raises(ParseError):
        attach_trials(run, tmp_path, strict=True)


class _Clock:
    """A fake monotonic clock that the fake processes advance."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_budget_keeps_rounds_before_more_configurations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from inductor_lens.compare import runner
    from inductor_lens.compare.configs import ConfigRequest
    from inductor_lens.compare.summary import ConfigRun
    from inductor_lens.records import RoundMeasure, Timing

    clock = _Clock()
    monkeypatch.setattr(runner.time, "monotonic", clock)
    started: list[str] = []

    def cold(spec: object, request: ConfigRequest, *args: object, **kwargs: object) -> tuple[ConfigRun, None]:
        started.append(f"cold {request.name}")
        clock.now += 130.0  # a max-autotune compile: 105 s of it compiling
        run = CompileRun(request.name, "", "", "", capture=CaptureOutcome("m.py", "m", "ok", "done", cold_compile_s=105.0))
        return ConfigRun(request.name, request.mode, {}, run, f"configs/{request.name}"), None

    def warm(spec: object, folder: Path, cache: Path, number: int, position: int, *args: object) -> RoundMeasure:
        started.append(f"warm {folder.parent.parent.name} {number}")
        clock.now += 25.0
        return RoundMeasure(number, position, Timing(2.0, 1.9, 2.1, 20, ""))

    monkeypatch.setattr(runner, "_cold", cold)
    monkeypatch.setattr(runner, "_warm", warm)
    monkeypatch.setattr(runner, "build_comparison", lambda entries, **kw: entries)
    monkeypatch.setattr(runner, "write_report", lambda files, out: out / "index.html")
    monkeypatch.setattr(runner, "analyze_comparison", lambda comparison: None)
    monkeypatch.setattr(runner, "render_comparison", lambda comparison, analysis: {})
    requests = [ConfigRequest(name) for name in ("as-run", "a", "b", "c")]
    result = runner.compare_models(_base(tmp_path), requests, tmp_path / "cmp", rounds=3,
                                   budget=runner.Budget(420.0, clock.now))  # fmt: skip
    # the warm estimate is the cold process less its compile (25 s), at least a quarter of it (32.5 s): "a" fits
    # with two rounds of both; "b" would not leave time for two rounds of three configurations
    assert started[:2] == ["cold as-run", "cold a"] and result.skipped == ("b", "c")
    assert result.rounds_done == 3 and started[2:] == ["warm as-run 1", "warm a 1", "warm a 2", "warm as-run 2",
                                                       "warm as-run 3", "warm a 3"]  # fmt: skip
    assert clock.now - 1000.0 <= 420.0


def test_a_change_of_ones_own_may_not_take_a_trials_name(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    report = tmp_path / "report"
    (report / "capture").mkdir(parents=True)
    model = tmp_path / "model.py"
    model.write_text("")
    (report / "capture" / "spec.json").write_text(CompileSpec(model).to_json())
    (report / "lens.json").write_text(CompileRun("m", "2026-01-01", "0", str(tmp_path)).to_json())
    result = run_cli("try", report, "--config", "as-run:matmul_precision=high")
    assert_one_line_error(result, "--config as-run: the name is taken")
