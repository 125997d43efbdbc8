"""End to end on CPU: the diagnosis of the graph-break sample names its break, and a run measured while other
processes load the CPU says its numbers are unstable and that the machine was busy.

Each test compiles in a model process (about a minute on 2 shared cores). The CLI runs in this process, so the
model process runs this checkout's code (the worker is given the package root of the code that started it).
"""

from __future__ import annotations

import html
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import inductor_lens
from inductor_lens.bench.diagnosis import diagnose
from inductor_lens.bench.stability import judge
from inductor_lens.pipeline import load_run

from ..conftest import ROOT, SAMPLES, CliResult


def _compile(run_cli: Callable[..., CliResult], out: Path, sample: str) -> None:
    assert Path(inductor_lens.__file__).resolve().is_relative_to(ROOT), inductor_lens.__file__
    result = run_cli("compile", SAMPLES / f"{sample}.py", "--device", "cpu", "--no-handwritten",
                     "--accuracy", "off", "--out", out)  # fmt: skip
    assert result.code == 0, result.stderr


def test_graph_break_sample_diagnosis_names_the_break(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    out = tmp_path / "report"
    _compile(run_cli, out, "graphbreak")
    run = load_run(out)
    assert run.bench is not None and {w.window for w in run.bench.host} == {"eager and compiled steps", "profiled steps"}
    diagnosis = diagnose(run)
    (found,) = [f for f in diagnosis.findings if f.kind == "graph break"]
    assert found.title.startswith("Graph break at graphbreak.py:20 in forward(): ")
    assert "Tensor.item()" in found.title
    assert "if y.sum().item() > 0:" in found.evidence
    assert "capture_scalar_outputs = True" in found.change  # torch's own hint
    assert found.evidence_url == "compile.html#breaks"
    index = (out / "index.html").read_text(encoding="utf-8")
    assert html.escape(found.title) in index
    assert html.escape(found.change) in index
    # the time at stake is put on it only when the numbers hold; the break is named either way
    if diagnosis.noisy:
        assert "The times are not drawn: the measurements are unstable" in index
    else:
        assert found.at_stake_us is not None and 'class="waterfall"' in index


@pytest.fixture
def loaded_cpu() -> Iterator[int]:
    """Three busy loops in other processes, on a machine of (usually) two CPUs; ended after the test."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        yield len(loops)
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait(timeout=30)


def test_run_measured_on_a_loaded_cpu_says_it_is_unstable(
    run_cli: Callable[..., CliResult], tmp_path: Path, loaded_cpu: int
) -> None:
    out = tmp_path / "report"
    _compile(run_cli, out, "mlp")
    run = load_run(out)
    assert run.bench is not None and run.bench.host
    stability = judge(run)
    assert not stability.stable and stability.verdict == "unstable"
    busy = [r.text for r in stability.reasons if r.rule == "busy machine"]
    assert busy, stability.reasons
    assert any("other processes kept" in text or "load average" in text for text in busy)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "These measurements are unstable: the speed-up is not judged." in index
    assert "not judged: unstable" in index
    assert "<dt>Machine load</dt>\n    <dd>busy</dd>" in index
    assert diagnose(run).noisy
