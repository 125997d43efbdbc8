"""compare end to end on CPU: the MLP sample under two modes (each cold, then interleaved warm rounds), two
configurations with identical options (never a winner, however often it is run), and configurations that fail."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from inductor_lens.errors import ModelRunError
from inductor_lens.records import Comparison

from ..conftest import SAMPLES, CliResult, assert_one_line_error, run_cli_process

# The smallest model with a generated C++ kernel (so the wrapper loads one from its cache folder): every
# process of a compare imports torch and compiles, so a small model keeps three compares near two minutes.
TINY_MODEL = """import torch


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())


def get_inputs():
    return (torch.randn(8, 32),)
"""


def test_compare_mlp_two_modes_on_cpu(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = run_cli("compare", SAMPLES / "mlp.py", "--device", "cpu", "--mode", "default", "--rounds", "2",
                     "--mode", "max-autotune-no-cudagraphs", "--no-handwritten", "--out", out)  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.stdout.strip() == f"comparison: {out / 'index.html'}"
    comparison = Comparison.from_json((out / "lens.json").read_text())
    assert [c.name for c in comparison.configs] == ["default", "max-autotune-no-cudagraphs"]
    assert comparison.rounds == 2
    for config in comparison.configs:
        assert config.status == "ok" and config.warm_error is None
        # warm: FX graph, AOTAutograd and kernel caches hit; cold also built C++ kernels (and their header)
        assert config.cold_compile_s and config.warm_compile_s
        assert config.warm_compile_s < 0.6 * config.cold_compile_s, config
        assert config.latency and config.eager and config.speedup
        # two warm rounds, the order rotated: first, then second; or second, then first
        assert [r.round for r in config.rounds] == [1, 2] and all(r.error is None for r in config.rounds)
        assert sorted(r.position for r in config.rounds) == [1, 2]
        # two rounds: the cold process joins them, so one bad round cannot set the step
        assert config.measured.startswith("median of 3: the cold process and 2 warm rounds ("), config.measured
        assert config.kernels == {"cpp pointwise": 1, "extern": 2}
        assert config.graphs == 1 and config.graph_breaks == 0 and config.cudagraphs is None
        assert (out / config.report / "index.html").is_file()
        assert (out / config.report / "warm-rounds" / "2" / "capture.log").is_file()
    assert [r.position for r in comparison.configs[0].rounds] == [1, 2]
    # the kernel diff: the same three launches, matched by their FX nodes, each with a time in both
    (diff,) = comparison.diffs
    assert [(c.kind, c.nodes) for c in diff.changes] == [
        ("unchanged", ("input_1",)),
        ("unchanged", ("input_2",)),
        ("unchanged", ("input_3",)),  # the second addmm computes its own node only (not the GELU before it)
    ]
    assert all(c.delta_us is not None for c in diff.changes)
    assert comparison.verdict is not None
    assert "measured in 2 warm rounds, interleaved" in comparison.verdict.noise_how
    assert comparison.verdict.compares.startswith("it compares the mode and options alone")
    assert comparison.differences == ()
    assert all(c.noise is not None and c.noise >= 0.02 for c in comparison.configs)
    assert "CPU" in comparison.notes[0]
    index = (out / "index.html").read_text()
    assert "Which configuration for <code>mlp</code>?" in index and "Compile, warm" in index
    assert "Warm rounds" in index and "\">Step</th>" in index
    assert "CUDA graphs</th>" not in index and "GPU time per step" not in index
    assert (out / "diffs" / "1.html").is_file()
    # the per-configuration report is the normal report
    assert "cpp_fused_gelu_0" in (out / "configs" / "default" / "index.html").read_text()


def _compare_identical(model: Path, out: Path) -> tuple[CliResult, float]:
    start = time.monotonic()
    result = run_cli_process("compare", model, "--device", "cpu", "--config", "a:max_autotune=False",
                             "--config", "b:max_autotune=False", "--rounds", "2", "--no-handwritten",
                             "--accuracy", "off", "--out", out, timeout=400)  # fmt: skip
    return result, time.monotonic() - start


def test_identical_configurations_never_name_a_winner(tmp_path: Path) -> None:
    """Two compares of two configurations with the same options, run at once (so the machine is busy and the
    measurements noisy): neither names a winner, and each says the code is the same."""
    model = tmp_path / "tiny.py"
    model.write_text(TINY_MODEL)
    outs = [tmp_path / f"cmp{i}" for i in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda out: _compare_identical(model, out), outs))
    for (result, seconds), out in zip(results, outs, strict=True):
        assert result.code == 0, result.stderr
        comparison = Comparison.from_json((out / "lens.json").read_text())
        verdict = comparison.verdict
        assert verdict is not None and verdict.fastest is None and not verdict.significant, verdict
        assert verdict.same_code is True, verdict
        assert verdict.text.startswith("no winner: same code; the gap "), verdict.text
        assert comparison.differences == () and "the mode and options alone" in verdict.compares
        assert all(len(c.rounds) == 2 and c.step_ms for c in comparison.configs)
        assert "is the fastest" not in result.stderr and "no winner: same code" in result.stderr
        index = (out / "index.html").read_text()
        assert f"{verdict.text}." in index and '<th class="num best">' not in index
        print(f"\ncompare of identical configurations: {seconds:.0f} s; {verdict.text}")


def test_failing_configurations_still_give_a_comparison(run_cli, tmp_path: Path) -> None:
    model = tmp_path / "broken.py"
    model.write_text(
        "def get_model():\n    raise RuntimeError('boom in get_model')\n\ndef get_inputs():\n    return ()\n"
    )
    out = tmp_path / "cmp"
    result = run_cli("compare", model, "--device", "cpu", "--mode", "default", "--mode", "reduce-overhead",
                     "--no-handwritten", "--out", out)  # fmt: skip
    assert_one_line_error(result, "configuration default:", "boom in get_model")
    assert result.code == ModelRunError.exit_code
    comparison = Comparison.from_json((out / "lens.json").read_text())
    assert [(c.name, c.status) for c in comparison.configs] == [
        ("default", "failed"),
        ("reduce-overhead", "failed"),
    ]
    assert "boom in get_model" in (out / "index.html").read_text()
    assert (out / "configs" / "default" / "index.html").is_file()  # the failed run's own report, with its log
