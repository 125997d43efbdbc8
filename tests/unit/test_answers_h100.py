"""The first page's answers on four real H100 captures (issue 31), checked against the raw profiler trace.

tests/fixtures/h100-*.tar.gz are `inductor-lens compile` capture folders (PROVENANCE.md): HF GPT-2 fp32 default,
HF Llama bf16 max-autotune-no-cudagraphs, timm ViT-S/16 reduce-overhead and torchvision ResNet-50 --train.
Per-launch times are recomputed here from the raw traces by tests/raw_profile.py: in each profiled step, the
top-level events of the compiled graphs' ranges are the launches of call() in order (each with the durations of
the kernels it launched); under CUDA graphs (ViT), the replayed kernels in order, aligned with the same code's
launches profiled without the graphs (profile_graph_free.json). A group's share is the sum over its member
launches, by position, of those durations, over the device time of the step.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens import api
from inductor_lens.records import CompileRun

from ..conftest import H100_ANSWER_CAPTURES as FIXTURES
from ..raw_profile import launch_times, profiled_steps

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def reports(unpacked: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, CompileRun]:
    out = tmp_path_factory.mktemp("answers")
    return {name: api.report_folder(unpacked(name), out / name, draw=False).run for name in FIXTURES}


def raw_launch_times(folder: Path, launches: int) -> tuple[list[list[float]], list[float]]:
    per_step, totals = launch_times(folder)
    assert all(len(times) == launches for times in per_step), [len(times) for times in per_step]
    return per_step, totals


def launch_order(run: CompileRun) -> list[tuple[str, int]]:
    """(graph id, position) of every timed launch, forward graphs before backward ones, in call() order."""
    order = sorted(run.graphs, key=lambda g: g.kind == "backward")
    return [(g.id, launch.position) for g in order for launch in g.launches if launch.timing is not None]


@pytest.mark.parametrize("name", FIXTURES)
def test_top_groups_and_shares_match_the_raw_trace(reports: dict[str, CompileRun], unpacked, name: str) -> None:
    run = reports[name]
    answers = run.answers
    assert answers is not None and answers.groups
    order = launch_order(run)
    per_step, totals = raw_launch_times(unpacked(name), len(order))
    index = {key: i for i, key in enumerate(order)}
    total = statistics.median(totals)
    raw_shares = {
        g.key: statistics.median(sum(step[index[(m.graph_id, m.position)]] for m in g.members) for step in per_step) / total
        for g in answers.groups
    }
    raw_top = sorted(raw_shares, key=raw_shares.__getitem__, reverse=True)[:5]
    assert [g.key for g in answers.groups[:5]] == raw_top
    for group in answers.groups[:5]:
        assert group.share == pytest.approx(raw_shares[group.key], abs=0.01), group.name


def test_gpt2_groups_are_the_layers_library_calls(reports: dict[str, CompileRun]) -> None:
    """GPT-2 (4 layers, 768 wide, vocabulary 50,257, 8 x 512 tokens): the LM head first, then each layer's
    projection once per layer (x4), the attention named with its backend."""
    groups = reports["h100-gpt2-fp32-default"].answers.groups
    head = groups[0]
    assert (head.name, head.shapes, head.launches_per_step) == ("mm (cuBLAS)", "f32[4096, 768], f32[768, 50257]", 1)
    assert head.device_kernels and "gemm" in head.device_kernels[0]
    assert head.roofline_percent is not None and head.roofline_percent > 80
    layer_calls = [g for g in groups if g.kind == "library" and g.launches_per_step == 4]
    assert {g.name for g in layer_calls} == {"mm (cuBLAS)", "addmm (cuBLAS)", "efficient attention"}
    assert sum(g.share for g in groups if g.kind == "library") > 0.9  # nine tenths of the device time
    attention = next(g for g in groups if g.name == "efficient attention")
    assert attention.op == "aten._scaled_dot_product_efficient_attention.default"
    assert any("fmha_cutlass" in k for k in attention.device_kernels)


def test_llama_attention_is_one_cudnn_group_of_four(reports: dict[str, CompileRun]) -> None:
    groups = reports["h100-llama-bf16-max-autotune-nocg"].answers.groups
    (attention,) = [g for g in groups if g.kind == "library" and "attention" in g.name]
    assert (attention.name, attention.backend, attention.launches_per_step) == ("cuDNN attention", "cuDNN", 4)
    assert attention.shapes.startswith("bf16[4, 16, 1024, 64]")
    assert groups.index(attention) < 4


def test_every_timed_launch_is_in_exactly_one_group(reports: dict[str, CompileRun]) -> None:
    for name, run in reports.items():
        members = [(m.graph_id, m.position) for g in run.answers.groups for m in g.members]
        assert sorted(members) == sorted(launch_order(run)), name
        assert sum(g.share for g in run.answers.groups) == pytest.approx(
            sum(la.timing.share for g in run.graphs for la in g.launches if la.timing), abs=1e-6
        )


def test_speedup_is_the_end_to_end_medians(reports: dict[str, CompileRun], unpacked) -> None:
    for name, run in reports.items():
        raw = json.loads((unpacked(name) / "capture.json").read_text(encoding="utf-8"))["bench"]["end_to_end"]
        answers = run.answers
        assert answers.compiled_ms == raw["compiled"]["median_ms"]
        assert answers.speedup == pytest.approx(raw["eager"]["median_ms"] / raw["compiled"]["median_ms"])


def test_library_groups_have_their_own_page(reports: dict[str, CompileRun], tmp_path_factory) -> None:
    """The report links each library group to ops/<key>.html, which names the op, shapes, kernels and line."""
    run = reports["h100-gpt2-fp32-default"]
    out = tmp_path_factory.mktemp("pages")
    api.render(run, out, draw=False)
    head = run.answers.groups[0]
    page = (out / "ops" / f"{head.key}.html").read_text(encoding="utf-8")
    for fact in ("aten.mm", "cuBLAS", "f32[4096, 768], f32[768, 50257]", head.device_kernels[0], "modeling_gpt2.py:"):
        assert fact in page, fact
    index = (out / "index.html").read_text(encoding="utf-8")
    assert f'href="ops/{head.key}.html"' in index


def test_bound_verdict_is_the_documented_rule_on_raw_numbers(reports: dict[str, CompileRun], unpacked) -> None:
    """idle = the benchmarked compiled step (capture.json) minus the device's busy time per profiled step (the
    union of its kernels in the raw trace); GPU-bound under 10% of the step, host-bound from 30%, mixed between."""
    for name, run in reports.items():
        folder = unpacked(name)
        busy = statistics.median(step.busy_us for step in profiled_steps(folder / "profile_trace.json"))
        raw = json.loads((folder / "capture.json").read_text(encoding="utf-8"))["bench"]["end_to_end"]
        step_us = raw["compiled"]["median_ms"] * 1e3
        idle = max(0.0, step_us - busy) / step_us
        expected = "GPU-bound" if idle < 0.1 else "host-bound" if idle >= 0.3 else "mixed"
        bound = run.answers.bound
        assert bound is not None and bound.verdict == expected, (name, bound, idle)
        assert bound.busy_us == pytest.approx(busy, rel=0.01), name
        assert bound.step_us == pytest.approx(step_us), name


def test_no_suggestion_repeats_the_run_or_drops_its_cuda_graphs(reports: dict[str, CompileRun]) -> None:
    llama = reports["h100-llama-bf16-max-autotune-nocg"].answers.findings
    for finding in llama:
        assert "max-autotune-no-cudagraphs" not in finding.change, finding
        assert "coordinate_descent_tuning" not in finding.change, finding  # on in that mode already
    vit = reports["h100-vit-s16-reduce-overhead"]
    assert vit.bench.end_to_end.cudagraphs == "used"
    for finding in vit.answers.findings:
        assert "no-cudagraphs" not in finding.change and "reduce-overhead" not in finding.change, finding
    for name, run in reports.items():
        mode = run.settings.mode if run.settings else None
        for finding in run.answers.findings:
            assert not (mode and mode != "default" and f'mode="{mode}"' in finding.change), (name, finding)


def test_precision_is_suggested_where_fp32_matmuls_take_the_time(reports: dict[str, CompileRun]) -> None:
    """GPT-2 and ViT run float32 matmuls with TF32 off, most of their device time; Llama runs in bfloat16."""
    for name in ("h100-gpt2-fp32-default", "h100-vit-s16-reduce-overhead"):
        run = reports[name]
        first = run.answers.findings[0]
        assert first.kind == "precision", (name, first)
        assert 'torch.set_float32_matmul_precision("high")' in first.change
        assert first.caveat and first.at_stake_us is not None
        # the estimate scales the matmul time by the measured fp32 / TF32 ceilings: not more than the step
        assert 0 < first.at_stake_us < run.answers.compiled_ms * 1e3
    assert not [f for f in reports["h100-llama-bf16-max-autotune-nocg"].answers.findings if f.kind == "precision"]


def test_copied_capture_keeps_the_verdict_and_the_cold_compile(reports: dict[str, CompileRun]) -> None:
    """Every report here is built from the capture folder alone (`report <folder>/capture`)."""
    for name, run in reports.items():
        assert run.capture is not None, name
        assert run.capture.accuracy is not None and run.capture.accuracy.within_tolerance, name
        assert run.capture.cold_compile_s and run.capture.cold_compile_s > 1, name
