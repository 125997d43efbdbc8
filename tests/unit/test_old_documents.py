"""lens.json files older versions wrote: the frozen schema 5 documents of tests/fixtures/lens-schema5.tar.gz
load with today's records and re-render from what they recorded, saying what they did not record."""

from __future__ import annotations

import json
import re

import pytest

from inductor_lens.analysis import analyze, analyze_comparison
from inductor_lens.records import (
    COMPARISON_SCHEMA_VERSION,
    RUN_SCHEMA_VERSION,
    Comparison,
    CompileRun,
)
from inductor_lens.report import render_comparison, render_report

ARCHIVE = "lens-schema5"
RUNS = ("cpu-torch2.13-mlp-train", "h200-block-autotune-timed")
NOT_RECORDED = "Not recorded in this report: it was saved by an older inductor-lens"


def _text(unpacked, name: str) -> str:
    return (unpacked(ARCHIVE) / f"{name}.lens.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", [*RUNS, "diff-mlp"])
def test_the_fixtures_are_older_than_today(unpacked, name: str) -> None:
    assert json.loads(_text(unpacked, name))["schema_version"] == 5
    assert RUN_SCHEMA_VERSION > 5 and COMPARISON_SCHEMA_VERSION > 5


@pytest.mark.parametrize("name", RUNS)
def test_an_older_run_loads_and_saves_as_today(unpacked, name: str) -> None:
    run = CompileRun.from_json(_text(unpacked, name))
    assert run.handwritten and run.handwritten_kernels == ()  # matched, but the kernels were not recorded
    again = json.loads(run.to_json())
    assert again["schema_version"] == RUN_SCHEMA_VERSION
    assert CompileRun.from_json(run.to_json()) == run


@pytest.mark.parametrize("name", RUNS)
def test_an_older_run_reads_as_static_shapes(unpacked, name: str) -> None:
    """Symbols, specializations and shape guards came with schema 8: an older run has none of them."""
    run = CompileRun.from_json(_text(unpacked, name))
    assert all(graph.symbols == () and graph.hints == {} for graph in run.graphs)
    assert all(not (f.symbols or f.specializations or f.shape_guards) for f in run.frames)
    files = render_report(run, analyze(run), draw=False)
    assert not any('id="symbols"' in text or "-shapes" in text for text in files.values())


def test_cpu_run_renders_from_its_records(unpacked) -> None:
    run = CompileRun.from_json(_text(unpacked, "cpu-torch2.13-mlp-train"))
    assert [(g.id, [k.name for k in g.kernels], len(g.launches)) for g in run.graphs] == [
        ("model__0_forward_1.0", ["cpp_fused_relu_0"], 3),
        ("model__0_backward_3.1", ["cpp_fused_sum_threshold_backward_0", "cpp_fused_sum_1"], 5),
    ]
    assert len(run.handwritten) == 8 and run.bench is None
    files = render_report(run, analyze(run), draw=False)
    assert {p for p in files if p.startswith("kernels/")} == {
        "kernels/model__0_forward_1.0/cpp_fused_relu_0.html",
        "kernels/model__0_backward_3.1/cpp_fused_sum_threshold_backward_0.html",
        "kernels/model__0_backward_3.1/cpp_fused_sum_1.html",
    }
    for name in ("cpp_fused_relu_0", "cpp_fused_sum_threshold_backward_0", "cpp_fused_sum_1"):
        assert name in files["index.html"]
    page = files["handwritten.html"]
    # six matched rows, one hand-written kernel each: none of today's source, formula or summary, and
    # the sources section says once that they were not recorded
    assert page.count(NOT_RECORDED) == 1 and page.count('<span class="muted">not recorded</span>') == 6
    assert "matmul_kernel" not in page and "torch.relu(x)" not in page and 'class="highlight"' not in page
    # the shapes are the recorded ones, in the order they were recorded
    assert "<td><code>32x128x64</code> float32" in page and "<td><code>32x128</code> float32" in page
    assert NOT_RECORDED in files["kernels/model__0_forward_1.0/cpp_fused_relu_0.html"]


def test_timed_gpu_run_renders_from_its_records(unpacked) -> None:
    run = CompileRun.from_json(_text(unpacked, "h200-block-autotune-timed"))
    (graph,) = run.graphs
    assert [k.name for k in graph.kernels] == [
        "triton_per_fused_native_layer_norm_0",
        "triton_per_fused_add_addmm_native_layer_norm_view_1",
        "triton_poi_fused_addmm_gelu_view_2",
        "triton_poi_fused_add_addmm_view_3",
    ]
    assert len(graph.launches) == 9 and len(run.handwritten) == 9
    # fields typed since: they read back as the JSON they were
    kernel = graph.kernels[0]
    assert kernel.autotune_info["autotune_cache_state"] == "miss" and kernel.autotune_info["num_configs"] == 2
    device = kernel.launch_config["device"]
    assert isinstance(device, dict) and device["multi_processor_count"] == 132
    assert run.settings is not None and run.settings.options == {
        "max_autotune": True, "coordinate_descent_tuning": True, "comment_origin": True,
    }  # fmt: skip
    template = next(c for t in run.autotune for c in t.choices if c.kind == "triton")
    assert template.config["BLOCK_M"] == 64 and template.config["ACC_TYPE"] == "tl.float32"
    assert run.bench is not None and run.bench.end_to_end is not None
    files = render_report(run, analyze(run), draw=False)
    index = files["index.html"]
    assert all(k.name in index for k in graph.kernels) and "0.391 ms" in index
    page = files["handwritten.html"]
    # nine rows, one of them composed of two kernels, none with a recorded source
    assert page.count(NOT_RECORDED) == 1 and page.count("(not recorded)") == 10
    assert "flash_attention_kernel" not in page and "F.layer_norm" not in page
    assert re.findall(r"<td><code>([\dx]+)</code> float32", page)[:3] == [
        "2048x512",
        "2048x1536x512",
        "8x8x256x64",
    ]


def test_diff_comparison_renders_its_table_without_judgements(unpacked) -> None:
    comparison = Comparison.from_json(_text(unpacked, "diff-mlp"))
    assert comparison.kind == "diff" and [c.name for c in comparison.configs] == ["mlp_default", "mlp-bf16"]
    assert [dict(c.kernels) for c in comparison.configs] == [
        {"extern": 4, "triton pointwise": 2},
        {"triton pointwise": 2, "triton template": 4},
    ]
    assert all(c.step_ms is None and c.against_baseline is None for c in comparison.configs)
    (diff,) = comparison.diffs
    assert [c.kind for c in diff.changes] == ["changed"] * 6 and diff.noise is None
    assert all(c.judgement is None for c in diff.changes)
    files = render_comparison(comparison, analyze_comparison(comparison))
    assert set(files) == {"index.html", "diffs/1.html", "lens.json"}
    index = files["index.html"]
    assert (
        'id="compare-table"' in index and '>mlp_default</a><br><span class="muted">baseline</span>' in index
    )
    assert '<tr><th>Triton template launches</th><td>0</td><td>4</td></tr>' in index
    assert '<span class="badge change-changed">6 changed</span>' in index
    assert 'id="unjudged"' not in index  # nothing was timed, so there was nothing to judge
    page = files["diffs/1.html"]
    assert page.count('<section class="change"') == 6 and '<tr class="replace">' in page
    assert json.loads(files["lens.json"])["schema_version"] == COMPARISON_SCHEMA_VERSION
