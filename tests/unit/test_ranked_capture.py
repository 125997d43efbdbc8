"""``compile --nproc`` reported as ``report`` reports a job's logs (ranked.py): the landing page first, from the light
pass over the ranks' captures; then the full reports of rank 0 and of the ranks that differ or failed, the others
on demand (``report OUT --rank R``), built from their capture beside the landing page.

The ranks' captures are the real two-rank ``compile --nproc 2 samples/ranks_diverge.py`` of
tests/fixtures/cpu-torch2.13-two-ranks.tar.gz (PROVENANCE.md), put in place of torchrun's launch (no model runs).
"""

from __future__ import annotations

import json
import shutil
import types
from collections.abc import Callable
from pathlib import Path

import pytest

import inductor_lens.capture.ranks as capture_ranks
from inductor_lens.options import CompileSpec
from inductor_lens.ranked import RankedResult, compile_ranks, report_rank
from inductor_lens.records.ranks import RankedRun
from inductor_lens.report.ranks_view import render_ranks

from ..conftest import CliResult

FIXTURE = "cpu-torch2.13-two-ranks"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _compiled(
    unpacked: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, out: Path, ranks: dict[int, str]
) -> tuple[RankedResult, list[tuple[str, bool, bool, bool]]]:
    """``compile --nproc`` whose launch leaves the fixture's rank folders (``ranks``: each rank's) in ``out``;
    with what the progress callback was told, and whether the landing page and each rank's report were there."""
    job = unpacked(FIXTURE) / "compile-nproc"

    def launched(*args: object, **kwargs: object) -> types.SimpleNamespace:
        for rank, copied in ranks.items():
            shutil.copytree(job / copied, out / f"rank{rank}")
        return types.SimpleNamespace(exit_code=0, timed_out=False, wall_s=1.0)

    monkeypatch.setattr(capture_ranks, "_launch", launched)
    told: list[tuple[str, bool, bool, bool]] = []

    def progress(phase: str, _elapsed: float) -> None:
        told.append((phase, (out / "index.html").is_file(), (out / "rank0" / "lens.json").is_file(),
                     (out / "rank1" / "lens.json").is_file()))  # fmt: skip

    spec = CompileSpec(model_path=SAMPLES / "ranks_diverge.py", device="cpu", handwritten=False)
    return compile_ranks(spec, out, len(ranks), draw=False, progress=progress), told


def test_identical_ranks_get_the_landing_first_and_rank_0_alone_a_full_report(
    unpacked: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_cli: Callable[..., CliResult],
) -> None:  # fmt: skip
    out = tmp_path / "job"
    result, told = _compiled(unpacked, monkeypatch, out, {0: "rank0", 1: "rank0"})
    assert result.error is None and result.divergences == ()
    # the landing page was written before any full report, and said so
    landing = f"landing page written: {out / 'index.html'} (next: the full report of rank(s) 0)"
    assert told == [(landing, True, False, False)]
    assert result.landing_s is not None and result.report_s is not None and result.landing_s <= result.report_s
    assert [(e.rank, e.report, e.status, e.source) for e in result.ranked.ranks] == [
        (0, True, "ok", "rank0/capture"),
        (1, False, "ok", "rank1/capture"),
    ]
    assert [run.title for run in result.runs] == ["ranks_diverge · rank 0"]
    assert not (out / "rank1" / "lens.json").exists() and result.ranked.handwritten == ()
    page = (out / "index.html").read_text(encoding="utf-8")
    assert f"inductor-lens report {out.resolve()} --rank 1" in page and "hand-written" not in page
    # rank 1's step and first call, from its capture, though it has no full report
    assert result.summaries[1].step_ms is not None and result.summaries[1].cold_compile_s is not None
    # `report OUT --rank 1`: rank 1's full report from its own capture (its measurements attached)
    again = run_cli("report", out, "--rank", "1")
    assert again.code == 0, again.stderr
    assert "full reports: rank(s) 0, 1" in again.stderr and "the ranks compiled the same" in again.stderr
    run = json.loads((out / "rank1" / "lens.json").read_text(encoding="utf-8"))["run"]
    assert run["capture"]["status"] == "ok" and run["bench"]["end_to_end"] is not None
    assert 'href="rank1/index.html"' in (out / "index.html").read_text(encoding="utf-8")
    # into another folder: rank 1's report from the capture its logs lie in, as in place
    report_rank(out, tmp_path / "other", 1, draw=False)
    run = json.loads((tmp_path / "other" / "rank1" / "lens.json").read_text(encoding="utf-8"))["run"]
    assert run["capture"]["status"] == "ok" and run["bench"]["end_to_end"] is not None


def test_ranks_that_diverged_each_get_their_full_report(
    unpacked: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "job"
    result, told = _compiled(unpacked, monkeypatch, out, {0: "rank0", 1: "rank1"})
    assert told == [(f"landing page written: {out / 'index.html'} (next: the full report of rank(s) 0, 1)", True,
                     False, False)]  # fmt: skip
    assert {d.aspect for d in result.divergences} >= {"graphs", "kernels"}
    assert [(e.rank, e.report) for e in result.ranked.ranks] == [(0, True), (1, True)]
    assert [run.title for run in result.runs] == ["ranks_diverge · rank 0", "ranks_diverge · rank 1"]
    assert all((out / f"rank{rank}" / "lens.json").is_file() for rank in (0, 1))
    # asked again for a rank that has its report: nothing rebuilt, the same verdict
    assert report_rank(out, None, 1).divergences == result.divergences


def test_the_landing_names_the_ranks_whose_report_ran_the_handwritten_stage(tmp_path: Path) -> None:
    ranked = RankedRun("job", "", "0", str(tmp_path), handwritten=(0, 3))
    page = render_ranks(ranked, [])["index.html"]
    assert "The hand-written kernels were checked in the full reports of rank(s) 0, 3 only" in page
    assert RankedRun.from_json(ranked.to_json()).handwritten == (0, 3)
