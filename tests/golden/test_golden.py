"""Golden HTML: the rendered report of a frozen capture must not change unnoticed.

The expected pages live in tests/golden/<case>/. Paths of the unpacked fixture and the tool version
are scrubbed; the clock is fixed. What third-party tools produce is left out, since it changes with
their versions: drawings are off (Graphviz), and highlighted code blocks and the inlined stylesheet
(Pygments) are replaced by placeholders; test_report.py checks those structurally. The inlined
script, a static file, is replaced too. After an intended change to the report, run
``make update-golden`` (pytest --update-golden) and review the diff. On a mismatch the actual
output is saved under tests/actual/<case>/.
"""

from __future__ import annotations

import difflib
import re
import shutil
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze, analyze_comparison
from inductor_lens.compare import ConfigRun, build_comparison
from inductor_lens.parse import parse_debug_folder
from inductor_lens.pipeline import build_run
from inductor_lens.report import render_comparison, render_report

from ..conftest import CPU_CASE, FIXED_TIME, ROOT, TIMED_CASE

GOLDEN = ROOT / "tests" / "golden"
ACTUAL = ROOT / "tests" / "actual"
CASES = {
    "cpu-mlp-train": CPU_CASE,
    "gpu-mlp-bf16": "mlp_bf16_max_autotune_nocg",
    "gpu-block-timed": TIMED_CASE,  # with measurements: timing section, charts, time columns
    # dynamic shapes: an automatic-dynamic recompile, symbols with their hints, guards on sizes
    "cpu-dynamic-recompile": "cpu-torch2.13-dynamic-recompile",
}


_HIGHLIGHTED = re.compile(r'<div class="highlight">.*?</div>', re.S)
_STYLE = re.compile(r"<style>.*?</style>", re.S)
_SCRIPT = re.compile(r"<script>.*?</script>", re.S)


def _scrub(text: str, root: Path) -> str:
    text = text.replace(str(root), "<FIXTURE>")
    text = _HIGHLIGHTED.sub('<div class="highlight">[highlighted code]</div>', text)
    text = _STYLE.sub("<style>[stylesheet]</style>", text)
    text = _SCRIPT.sub("<script>[lens.js]</script>", text)
    return re.sub(r"inductor-lens \d+\.\d+\.\d+\S*", "inductor-lens <VERSION>", text)


@pytest.mark.parametrize("golden_case", sorted(CASES))
def test_report_matches_golden(unpacked, golden_case: str, request: pytest.FixtureRequest) -> None:
    root = unpacked(CASES[golden_case])
    run = build_run(root, root / "capture", strict=True, now=lambda: FIXED_TIME)
    files = {p: _scrub(t, root) for p, t in render_report(run, analyze(run), draw=False).items() if p.endswith(".html")}
    _check_golden(golden_case, files, request)


def test_comparison_matches_golden(unpacked, request: pytest.FixtureRequest) -> None:
    """``diff`` of two real captures: the default MLP against the bf16 one under max-autotune (templates)."""
    roots = [unpacked("mlp_default"), unpacked("mlp_bf16_max_autotune_nocg")]
    runs = [parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME) for root in roots]
    entries = [ConfigRun(name, run.settings.mode if run.settings else "unknown", {}, run, f"../{name}")
               for name, run in zip(("mlp_default", "mlp-bf16"), runs, strict=True)]  # fmt: skip
    comparison = build_comparison(
        entries, kind="diff", title="mlp", model_path="<FIXTURE>/mlp.py", created=FIXED_TIME.isoformat()
    )
    files = {}
    for path, text in render_comparison(comparison, analyze_comparison(comparison)).items():
        if path.endswith(".html"):
            for root in roots:
                text = _scrub(text, root)
            files[path] = text
    _check_golden("gpu-mlp-diff", files, request)


def _check_golden(golden_case: str, files: dict[str, str], request: pytest.FixtureRequest) -> None:
    expected_dir = GOLDEN / golden_case
    if request.config.getoption("--update-golden"):
        shutil.rmtree(expected_dir, ignore_errors=True)
        for path, text in files.items():
            (expected_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (expected_dir / path).write_text(text, encoding="utf-8")
        return
    expected = {p.relative_to(expected_dir).as_posix(): p for p in expected_dir.rglob("*.html")}
    assert set(files) == set(expected), "pages added or removed; run make update-golden if intended"
    mismatches = []
    for path, text in files.items():
        want = expected[path].read_text(encoding="utf-8")
        if text != want:
            saved = ACTUAL / golden_case / path
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_text(text, encoding="utf-8")
            diff = difflib.unified_diff(
                want.splitlines(), text.splitlines(), f"golden/{path}", f"actual/{path}", lineterm="", n=1
            )
            mismatches.append("\n".join(list(diff)[:40]))
    assert not mismatches, (
        "report differs from the golden files (actual output in tests/actual/):\n" + "\n".join(mismatches)
    )
