"""On a CUDA device: ``compile --find-divergence`` names a planted bug's Triton kernel and line, and a training
step's backward graph (run by autograd on its device thread unless told otherwise) is compared too. Skipped
where torch sees no GPU."""

from __future__ import annotations

from pathlib import Path

from inductor_lens.records import CompileRun

from ..conftest import run_cli_process
from ..e2e.test_divergence_cpu import PLANTED


def test_planted_bug_is_named_by_its_triton_kernel_and_line(tmp_path: Path) -> None:
    model = tmp_path / "planted.py"
    model.write_text(PLANTED)
    out = tmp_path / "report"
    result = run_cli_process("compile", model, "--device", "cuda", "--no-bench", "--no-handwritten",
                             "--find-divergence", "--divergence-budget", "60", "--out", out)  # fmt: skip
    assert result.code == 0, result.stderr
    found = CompileRun.from_json((out / "lens.json").read_text()).capture.divergence  # type: ignore[union-attr]
    assert found is not None and found.status == "diverged", found
    first = found.first
    assert first is not None and first.kind == "triton" and first.target.startswith("triton_"), first
    assert first.node == "mul" and "tanh" in first.target
    assert first.source is not None and (first.source.filename, first.source.line) == (str(model), 21)
    assert {t.option: t.outcome for t in found.options}["pattern_matcher"] == "fixes"
    print("first diverging:", first.place, "max abs error", first.max_abs_error)


TRAINED = """import torch


def get_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.LayerNorm(512),
                               torch.nn.Linear(512, 64))


def get_inputs():
    return (torch.randn(64, 256),)
"""


def test_a_cuda_training_step_compares_its_backward_graph(tmp_path: Path) -> None:
    """In the model process, as a user runs it: the backward (autograd's device thread on CUDA) is compared too."""
    model = tmp_path / "trained.py"
    model.write_text(TRAINED)
    out = tmp_path / "report"
    result = run_cli_process("compile", model, "--device", "cuda", "--train", "--no-bench", "--no-handwritten",
                             "--find-divergence", "--out", out)  # fmt: skip
    assert result.code == 0, result.stderr
    found = CompileRun.from_json((out / "lens.json").read_text()).capture.divergence  # type: ignore[union-attr]
    assert found is not None, result.stderr
    print("skipped:", found.skipped, "error:", found.error, "compared:", found.compared,
          [(g.index, g.kernels) for g in found.graphs])  # fmt: skip
    assert found.status == "agrees", found
    assert len(found.graphs) == 2 and all(g.launches >= 1 for g in found.graphs), found.graphs
    assert not any("not compared" in note or "could not run" in note for note in found.skipped), found.skipped
    assert found.compared >= 6
