"""Several ranks of real models on a CPU (gloo), ``compile --nproc 2``: HF GPT-2 in DDP and HF Llama in FSDP2
(``fully_shard``) trained, judged and compiled the same on every rank, a tensor-parallel MLP judged by each
rank's part; divergences planted one at a time and
named on the landing page (a rank-dependent branch, a recompile on one rank, a warm compile cache on one rank
only); a hung job's timeout naming where each rank waited. An HF model's job costs a minute or two on 2 cores,
a small model's about 30 s."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ..conftest import CliResult, assert_one_line_error, run_cli_process

pytestmark = pytest.mark.e2e

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SAME = "inductor-lens: the ranks compiled the same"
# The landing page's causes (records/rank_causes.py)
RECOMPILE = "Recompile on some ranks only"
RANK_CODE = "Rank-dependent code"
CACHE_HANG_RISK = "HANG RISK: compile cache outcome differs across ranks"


def _compile(sample: Path, out: Path, *options: str) -> CliResult:
    return run_cli_process(
        "compile", sample, "--nproc", "2", "--device", "cpu", "--no-handwritten", "--out", out, *options
    )


def _captured(out: Path, rank: int) -> dict[str, object]:
    """What the rank's model process reported (capture.json), whether or not its full report was built."""
    result: dict[str, object] = json.loads((out / f"rank{rank}" / "capture" / "capture.json").read_text(encoding="utf-8"))
    assert result["status"] == "ok"
    return result


def _accuracy(out: Path, rank: int) -> dict[str, object]:
    accuracy: dict[str, object] = _captured(out, rank)["accuracy"]  # type: ignore[assignment]
    return accuracy


def _full_reports(out: Path) -> list[bool]:
    """Which ranks have their full report: ranks.json says so, and their folder holds it."""
    ranks = json.loads((out / "ranks.json").read_text(encoding="utf-8"))["ranks"]["ranks"]
    assert [r["report"] for r in ranks] == [(out / r["folder"] / "lens.json").is_file() for r in ranks]
    return [r["report"] for r in ranks]


def test_gpt2_in_ddp_trains_and_every_rank_compiles_the_same(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "gpt2"
    result = _compile(SAMPLES / "real" / "gpt2_ddp.py", out, "--train", "--no-bench")
    assert result.code == 0, result.stderr
    for rank in (0, 1):
        accuracy = _accuracy(out, rank)
        # DDP's averaged gradients judged against a float64 copy wrapped in DDP too
        assert accuracy["within_tolerance"] and accuracy["reference"] == "float64", accuracy
        assert accuracy["compared"] == "outputs and parameter gradients"
        # the reference's gradients are averaged as eager's are: eager is near it (a copied DDP converted to
        # float64 kept each rank's own gradients, measured 1.5 apart on a small MLP)
        gradients = [c for c in accuracy["checks"] if c["kind"] == "gradient"]  # type: ignore[attr-defined]
        assert gradients and max(c["eager_rmse"] for c in gradients) < 1e-4, gradients
    # guards normalised (device index, code-object addresses), DDP's split graphs matched by their place
    assert SAME in result.stderr, result.stderr
    assert _full_reports(out) == [True, False]  # rank 0's report stands for rank 1


def test_llama_in_fsdp2_trains_judged_shard_by_shard(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "llama"
    result = _compile(SAMPLES / "real" / "llama_fsdp2.py", out, "--train", "--no-bench")
    assert result.code == 0, result.stderr  # was exit 5: RuntimeError: aten.allclose.default
    for rank in (0, 1):
        accuracy = _accuracy(out, rank)
        assert accuracy["within_tolerance"] and accuracy["failed"] == 0, accuracy
        # torch cannot copy an FSDP2 model: eager's tolerances, saying why
        assert accuracy["reference"] == "eager"
        assert "an FSDP2 (fully_shard) model cannot be copied to float64" in str(accuracy["method"])
        assert "judged shard by shard" in str(accuracy["method"])
        names = [str(c["name"]) for c in accuracy["checks"]]  # type: ignore[attr-defined]
        assert "grad of model.embed_tokens.weight (this rank's shard: Shard(dim=0) of [1024, 128])" in names
    # guards normalised: the globals Dynamo names after object ids (_1400..._c14) differ in every process
    assert SAME in result.stderr, result.stderr


def test_a_tensor_parallel_model_is_judged_by_each_ranks_part(tmp_path: Path) -> None:
    out = tmp_path / "tp"
    result = _compile(SAMPLES / "tp_mlp.py", out, "--train", "--no-bench")
    assert result.code == 0, result.stderr
    for rank in (0, 1):
        accuracy = _accuracy(out, rank)
        assert accuracy["within_tolerance"] and accuracy["reference"] == "float64", accuracy
        names = {str(c["name"]) for c in accuracy["checks"]}  # type: ignore[attr-defined]
        assert names == {
            "output (this rank's replica: Replicate() of [8, 32])",
            "grad of up.weight (this rank's shard: Shard(dim=0) of [64, 32])",
            "grad of up.bias (this rank's shard: Shard(dim=0) of [64])",
            "grad of down.weight (this rank's shard: Shard(dim=1) of [32, 64])",
            "grad of down.bias (this rank's replica: Replicate() of [32])",
        }


@pytest.mark.parametrize(
    ("diverge", "named", "not_named"), [("branch", RANK_CODE, RECOMPILE), ("shape", RECOMPILE, RANK_CODE)]
)
def test_a_planted_divergence_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, diverge: str, named: str, not_named: str
) -> None:
    monkeypatch.setenv("RANKS_DIVERGE", diverge)
    out = tmp_path / diverge
    result = _compile(SAMPLES / "ranks_diverge.py", out, "--no-bench")
    assert result.code == 0, result.stderr
    assert "inductor-lens: the ranks diverged" in result.stderr
    landing = (out / "index.html").read_text(encoding="utf-8")
    assert named in landing
    assert not_named not in landing
    assert _full_reports(out) == [True, True]  # ranks that compiled differently each get their full report


def test_a_warm_cache_on_one_rank_only_is_named_a_hang_risk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caches = tmp_path / "caches"
    monkeypatch.setenv("INDUCTOR_LENS_RANK_CACHES", str(caches))
    monkeypatch.setenv("RANKS_DIVERGE", "none")  # the same code on every rank
    cold = _compile(SAMPLES / "ranks_diverge.py", tmp_path / "cold", "--no-bench")
    assert cold.code == 0, cold.stderr
    assert sorted(p.name for p in caches.iterdir()) == ["rank0", "rank1"]
    assert CACHE_HANG_RISK not in (tmp_path / "cold" / "index.html").read_text(encoding="utf-8")
    assert _full_reports(tmp_path / "cold") == [True, False]  # rank 0's report stands for rank 1
    shutil.rmtree(caches / "rank1")  # rank 0 keeps its warm cache, rank 1 compiles cold
    warm = _compile(SAMPLES / "ranks_diverge.py", tmp_path / "warm", "--no-bench")
    assert warm.code == 0, warm.stderr
    assert "inductor-lens: the ranks diverged" in warm.stderr
    # the wording is records/rank_causes.py's
    assert CACHE_HANG_RISK in (tmp_path / "warm" / "index.html").read_text(encoding="utf-8")
    assert _full_reports(tmp_path / "warm") == [True, True]


def test_a_hung_job_names_where_each_rank_waited(tmp_path: Path) -> None:
    sample = SAMPLES / "ranks_hang.py"
    lines = sample.read_text(encoding="utf-8").splitlines()
    reduce_line = 1 + next(n for n, line in enumerate(lines) if "dist.all_reduce(y)" in line)
    sleep_line = 1 + next(n for n, line in enumerate(lines) if "time.sleep(" in line)
    out = tmp_path / "hang"
    result = _compile(sample, out, "--timeout", "30", "--no-bench")
    assert_one_line_error(
        result,
        "timed out after 30 s",
        "rank 0 during 'eager run', waiting in all_reduce (torch/distributed/distributed_c10d.py:",
        f") from ranks_hang.py:{reduce_line} in forward",
        f"rank 1 during 'eager run', at ranks_hang.py:{sleep_line} in forward",
        "their Python stacks at the end of rank<r>/capture/capture.log",
    )
    for rank in (0, 1):
        log = (out / f"rank{rank}" / "capture" / "capture.log").read_text(encoding="utf-8")
        assert "(most recent call first):" in log


def test_an_unchanged_torchrun_ddp_script_compiles_the_same_on_every_rank(tmp_path: Path) -> None:
    """``run -- torchrun`` of an ordinary DDP training script (no get_model: it builds, wraps and trains itself)."""
    pytest.importorskip("transformers")
    out = tmp_path / "train"
    result = run_cli_process(
        "run", "--no-handwritten", "--out", out, "--", "torchrun", "--standalone", "--nproc-per-node", "2",
        SAMPLES / "real" / "train_gpt2_ddp.py", "--steps", "2", "--batch", "2", "--length", "32", cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert SAME in result.stderr, result.stderr
    for rank in (0, 1):
        assert [c["target"] for c in _captured(out, rank)["compile_calls"]]  # type: ignore[attr-defined]
    assert _full_reports(out) == [True, False]
