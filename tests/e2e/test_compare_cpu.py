"""compare end to end on CPU: the MLP sample under two modes (each cold, then warm), and configurations that fail."""

from __future__ import annotations

from pathlib import Path

from inductor_lens.errors import ModelRunError
from inductor_lens.records import Comparison

from ..conftest import SAMPLES, assert_one_line_error


def test_compare_mlp_two_modes_on_cpu(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = run_cli("compare", SAMPLES / "mlp.py", "--device", "cpu", "--mode", "default",
                     "--mode", "max-autotune-no-cudagraphs", "--no-handwritten", "--out", out)  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.stdout.strip() == f"comparison: {out / 'index.html'}"
    comparison = Comparison.from_json((out / "lens.json").read_text())
    assert [c.name for c in comparison.configs] == ["default", "max-autotune-no-cudagraphs"]
    for config in comparison.configs:
        assert config.status == "ok" and config.warm_error is None
        # warm: FX graph, AOTAutograd and kernel caches hit; cold also built C++ kernels (and their header)
        assert config.cold_compile_s and config.warm_compile_s
        assert config.warm_compile_s < 0.6 * config.cold_compile_s, config
        assert config.latency and config.latency_again and config.eager and config.speedup
        assert config.kernels == {"cpp pointwise": 1, "extern": 2}
        assert config.graphs == 1 and config.graph_breaks == 0 and config.cudagraphs is None
        assert (out / config.report / "index.html").is_file()
        assert (out / config.report / "capture-warm" / "capture.log").is_file()
    # the kernel diff: the same three launches, matched by their FX nodes, each with a time in both
    (diff,) = comparison.diffs
    assert [(c.kind, c.nodes) for c in diff.changes] == [
        ("unchanged", ("input_1",)),
        ("unchanged", ("input_2",)),
        ("unchanged", ("input_2", "input_3")),
    ]
    assert all(c.delta_us is not None for c in diff.changes)
    assert comparison.verdict is not None
    assert "the gap between the step medians of its cold and its warm process" in comparison.verdict.noise_how
    assert all(c.noise is not None and c.noise >= 0.02 for c in comparison.configs)
    assert "CPU" in comparison.notes[0]
    index = (out / "index.html").read_text()
    assert "Which configuration for <code>mlp</code>?" in index and "Compile, warm" in index
    assert (out / "diffs" / "1.html").is_file()
    # the per-configuration report is the normal report
    assert "cpp_fused_gelu_0" in (out / "configs" / "default" / "index.html").read_text()


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
