"""The report's view of the suggestions tried (issue 32): each tried finding's outcome in the first page's
"What to try", and the section "Suggestions tried" with a row per trial, those not tried and the method.

The run is the real H100 capture of HF GPT-2 fp32 (tests/fixtures/PROVENANCE.md); its trials are made by hand,
one of each verdict, since measuring them needs the GPU.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens import api
from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun, Finding, SettingChange, Trial, Trials, UntriedSuggestion
from inductor_lens.report import render_report

from ..conftest import CPU_CASE, FIXED_TIME
from .test_report import _Links

TF32 = SettingChange("TF32 matmuls", matmul_precision="high", predicted_us=5000.0)
REDUCE_OVERHEAD = SettingChange("mode reduce-overhead", mode="reduce-overhead", predicted_us=800.0)
AUTOTUNE = SettingChange("mode max-autotune-no-cudagraphs", mode="max-autotune-no-cudagraphs", predicted_us=2100.0)
CPP_WRAPPER = SettingChange("cpp_wrapper", options={"cpp_wrapper": True})

MEASURED = dict(base_step_ms=7.97, base_cold_compile_s=10.1, base_peak_bytes=1_500_000_000, rounds_agree=True)
TRIALS = Trials(
    version=1,
    created="2026-01-02T03:04:05+00:00",
    command="compile --try 4",
    base="own settings",
    comparison="tries/index.html",
    rounds=3,
    rounds_asked=3,
    method="each configuration in a process of its own, the median step of each round, judged by the noise rule.",
    wall_s=312.0,
    budget_s=600.0,
    trials=(
        Trial(
            "tf32", "Float32 matmuls with TF32 off", "precision", TF32, "faster", "-65.9%, beyond the noise of 1.8%",
            report="tries/configs/tf32/index.html", step_ms=2.72, change=-0.6587, noise=0.018, speedup=2.93,
            measured_us=5250.0, predicted_us=5000.0, cold_compile_s=12.3, peak_bytes=1_200_000_000,
            accuracy_within=True, accuracy_tensor="logits", rmse=3.1e-4, base_rmse=1.2e-6,
            accuracy_note="TF32 rounds the matmuls' inputs to 10 bits", **MEASURED,
        ),
        Trial(
            "reduce-overhead", "Float32 matmuls with TF32 off", "host-bound", REDUCE_OVERHEAD, "slower",
            "+4.0%, beyond the noise of 1.8%", report="tries/configs/reduce-overhead/index.html", step_ms=8.29,
            change=0.04, noise=0.018, speedup=0.96, measured_us=-320.0, predicted_us=800.0, cold_compile_s=11.0,
            **MEASURED,
        ),
        Trial(
            "max-autotune", "Matmuls under their roofline", "autotune", AUTOTUNE, "no gain",
            "-1.1%, within the noise of 3.0%", report="tries/configs/max-autotune/index.html", step_ms=7.88,
            change=-0.011, noise=0.03, speedup=1.01, measured_us=90.0, predicted_us=2100.0, **MEASURED,
        ),
        Trial(
            "cpp_wrapper", "Host overhead between launches", "host-bound", CPP_WRAPPER, "failed",
            "the compile failed", error="CompileError: <cpp_wrapper> is not supported here",
        ),
    ),
    untried=(
        UntriedSuggestion(
            "graph break", "Graph break at a data-dependent .item()", "Move the .item() out of the step",
            "a code change: the .item() call", where="model.py:12", url="compile.html#breaks",
        ),
    ),
    estimates="the estimates were 0.95× to 23× the measured gains",
    notes=("one GPU, nothing else running",),
)  # fmt: skip


def _finding(title: str, change: str, settings: tuple[SettingChange, ...]) -> Finding:
    return Finding(
        kind="precision", title=title, at_stake_us=5000.0, estimate="the matmuls' time", evidence="",
        evidence_url="#diagnosis", change=change, confidence="high", settings=settings,
    )  # fmt: skip


FINDINGS = (
    _finding("Float32 matmuls with TF32 off", "Allow TF32 matmuls", (REDUCE_OVERHEAD, TF32)),
    _finding("Matmuls under their roofline", "Autotune the matmuls", (AUTOTUNE,)),
    _finding("Host overhead between launches", "Use the C++ wrapper", (CPP_WRAPPER,)),
)


@pytest.fixture(scope="module")
def gpt2(unpacked: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> CompileRun:
    out = tmp_path_factory.mktemp("trials-view")
    return api.report_folder(unpacked("h100-gpt2-fp32-default"), out / "report", draw=False).run


def _with(run: CompileRun, findings: tuple[Finding, ...], trials: Trials | None) -> str:
    assert run.answers is not None
    answers = replace(run.answers, findings=findings)
    tried = replace(run, answers=answers, trials=trials)
    return render_report(tried, analyze(tried), draw=False)["index.html"]


def _section(page: str, start: str, end: str) -> str:
    begin = page.index(start)
    return page[begin : page.index(end, begin)]


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture(scope="module")
def tried_page(gpt2: CompileRun) -> str:
    return _with(gpt2, FINDINGS, TRIALS)


def test_what_to_try_shows_each_tried_findings_outcome(tried_page: str) -> None:
    answers = _section(tried_page, 'id="answers"', "</section>")
    text = _text(answers)
    # the finding's best trial (TF32, faster) before its other one (reduce-overhead, slower), named as several were
    assert "tried TF32 matmuls: 2.93× faster (5,250.0 µs saved per step, noise ±1.8%)" in text
    assert '<a class="tried-outcome tried-faster" href="#tried-tf32"' in answers
    assert '+1 more tried' in text
    assert "tried: no gain (-1.1%, within the noise of 3.0%)" in text
    assert '<a class="tried-outcome tried-no-gain" href="#tried-max-autotune"' in answers
    assert "tried: failed (CompileError: &lt;cpp_wrapper&gt; is not supported here)" in answers
    assert "tried-failed" in answers
    assert "not tried" not in text  # code changes are listed below, never in the first screen's list
    # one outcome per finding, each on the finding's own line
    assert answers.count('class="tried-outcome') == 3


def test_suggestions_tried_has_a_row_per_trial_with_its_numbers(tried_page: str) -> None:
    section = _section(tried_page, '<section class="tried" id="tried"', "</section>")
    assert tried_page.index('id="answers"') < tried_page.index('id="tried"') < tried_page.index('id="diagnosis"')
    rows = re.findall(r'<tr id="(tried-[^"]+)" class="tried-([a-z-]+)">', section)
    assert rows == [
        ("tried-tf32", "faster"), ("tried-reduce-overhead", "slower"),
        ("tried-max-autotune", "no-gain"), ("tried-cpp_wrapper", "failed"),
    ]  # fmt: skip
    text = _text(section)
    assert "(4 tried, 1 not)" in text
    assert "compiled and run as its own configuration of a comparison (compile --try 4)" in text
    for verdict in ("faster beyond the noise", "no gain", "slower", "failed"):
        assert f">{verdict}</span>" in section, verdict
    # the change, the step against the run's own, the speed-up, the estimate beside the measurement
    assert 'TF32 matmuls float32 matmul precision "high" for: Float32 matmuls with TF32 off' in text
    assert "2.720 ms against 7.970 ms -65.9%, noise 1.8%, every round on the same side" in text
    assert "2.93×" in text
    assert "5,250.0 µs saved per step, estimated 5,000.0 µs saved measured 1.05× the estimate" in text
    assert "320.0 µs lost per step, estimated 800.0 µs saved a saving was estimated, none measured" in text
    assert "measured 0.04× the estimate" in text
    assert "— not measured no estimate" in text  # the failed one
    # cold compile, peak memory (decimal units), accuracy under the change
    assert "12.30 s against 10.10 s (+2.20 s)" in text
    assert "1.2 GB against 1.5 GB (-20.0%)" in text
    assert "within tolerance; RMSE of logits 3.10e-04 against 1.20e-06 in the run's own settings (258×)" in text
    assert "TF32 rounds the matmuls' inputs to 10 bits" in text
    assert "CompileError: &lt;cpp_wrapper&gt; is not supported here" in section
    # those not tried, with the line they concern; the method, budget and wall time
    assert "Move the .item() out of the step" in text and "at model.py:12" in text
    assert "not tried, a code change: the .item() call" in text
    assert "3 of 3 interleaved warm rounds done, within a budget of 600.00 s · 312.00 s in all" in text
    assert "Estimates: the estimates were 0.95× to 23× the measured gains" in text
    assert "one GPU, nothing else running" in text


def test_links_go_to_the_trials_reports_and_their_rows(tried_page: str) -> None:
    page = _Links()
    page.feed(tried_page)
    for href in [h for h in page.hrefs if h.startswith("#tried")]:
        assert href[1:] in page.ids, href
    for trial in TRIALS.trials:
        if trial.report:
            assert trial.report in page.hrefs
    assert "tries/index.html" in page.hrefs


def test_without_trials_the_section_says_how_to_get_them(gpt2: CompileRun, unpacked) -> None:
    page = _with(gpt2, FINDINGS, None)
    section = _text(_section(page, '<section class="tried" id="tried"', "</section>"))
    assert "inductor-lens try <this report folder> --top 3" in section
    assert "--try N" in section
    assert 'class="tried-outcome' not in page
    nothing = _text(_section(_with(gpt2, (), None), '<section class="tried"', "</section>"))
    assert "none of this report's suggestions is a change of settings" in nothing
    debug_folder = parse_debug_folder(unpacked(CPU_CASE), strict=True, now=lambda: FIXED_TIME)
    read = _text(_section(render_report(debug_folder, analyze(debug_folder), draw=False)["index.html"], '<section class="tried"', "</section>"))
    assert "read from a debug folder" in read


def test_trials_that_ran_nothing_say_why(gpt2: CompileRun) -> None:
    """The budget spent before the first suggestion: nothing measured, each suggestion listed with why not."""
    budget = UntriedSuggestion("precision", "Float32 matmuls with TF32 off", "Allow TF32", "the --try budget ran out")
    trials = replace(TRIALS, trials=(), untried=(budget,), comparison="", rounds=0)
    page = _with(gpt2, FINDINGS, trials)
    section = _text(_section(page, '<section class="tried" id="tried"', "</section>"))
    assert "(0 tried, 1 not)" in section
    assert "No suggestion was run (compile --try 4): why each was not is below." in section
    assert "not tried, the --try budget ran out" in section
    assert "the whole comparison" not in section
    assert 'class="tried-outcome' not in page
