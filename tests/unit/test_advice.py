"""What to try (bench/diagnosis.py): advice that fits the run, on four real H100 captures and real CPU captures.

- never the run's own mode or options, never a mode that drops its CUDA graphs;
- precision where float32 matmuls near their float32 roof take most of the device time with TF32 off, the
  time at stake from the measured ceilings (the float32 matmul time recomputed here from profile_trace.json:
  the cuBLAS / CUTLASS float32 GEMM kernels of each profiled step, by the step that launched them);
- autotuning only where library matmuls sit measurably under their roof;
- one finding per root cause (a data-dependent scalar explains every frame it broke), training advice only on
  training runs, and "nothing to gain" said as such.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench.diagnosis import (
    PRECISION_SHARE,
    autotunes,
    diagnose,
    suggested_mode,
    uses_cudagraphs,
)
from inductor_lens.pipeline import build_run
from inductor_lens.records import CompileRun, Finding, GraphBreak
from inductor_lens.report import render_report

from ..conftest import FIXED_TIME

pytestmark = pytest.mark.unit

H100 = ("h100-gpt2-fp32-default", "h100-llama-bf16-max-autotune-nocg", "h100-vit-s16-reduce-overhead",
        "h100-resnet50-train")  # fmt: skip
CPU = ("cpu-torch2.13-graphbreak-recompile", "cpu-torch2.14.1-mlp-train", "cpu-torch2.13-gated-mlps")
MODES_WITHOUT_GRAPHS = ("default", "max-autotune-no-cudagraphs")
# The same GPT-2 compiled with torch.set_float32_matmul_precision("high") on the same H100 (a capture beside the
# fixture, not committed): its compiled step's do_bench median.
GPT2_TF32_STEP_MS = 3.2834880352020264


@pytest.fixture(scope="module")
def runs(unpacked: Callable[[str], Path]) -> dict[str, CompileRun]:
    built = {}
    for name in (*H100, *CPU):
        root = unpacked(name)
        capture = root / "capture" if (root / "capture").is_dir() else root
        built[name] = build_run(root, capture, now=lambda: FIXED_TIME)
    return built


def raw_fp32_gemm_us(trace: Path) -> float:
    """Median over the profiled steps of the float32 (no tensor core) GEMM kernels' device time."""
    events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("inductor_lens_step_")), key=lambda e: e["ts"])  # fmt: skip
    launched_at = {e["args"]["correlation"]: e["ts"] for e in events
                   if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}  # fmt: skip
    per_step = [0.0] * len(steps)
    for e in events:
        name = str(e.get("name", ""))
        fp32_gemm = "gemm" in name and ("f32f32_f32f32" in name or "sgemm" in name) and "fprop" not in name
        if e.get("cat") != "kernel" or not fp32_gemm:
            continue
        at = launched_at.get(e["args"].get("correlation"))
        for index, step in enumerate(steps):
            if at is not None and step["ts"] <= at <= step["ts"] + step["dur"]:
                per_step[index] += e["dur"]
    return statistics.median(per_step)


def capture_ceilings(capture: Path) -> dict[str, Any]:
    ceilings: dict[str, Any] = json.loads((capture / "capture.json").read_text())["bench"]["ceilings"]
    return ceilings


def named_modes(finding: Finding) -> list[str]:
    return re.findall(r'mode="([^"]+)"', finding.change)


def named_options(finding: Finding) -> list[str]:
    return re.findall(r'options=\{"([^"]+)": True\}', finding.change)


@pytest.mark.parametrize("name", [*H100, *CPU])
def test_no_change_repeats_the_run_or_drops_its_cuda_graphs(runs: dict[str, CompileRun], name: str) -> None:
    run = runs[name]
    assert run.settings is not None
    options = {**run.settings.mode_options, **run.settings.options}
    for finding in diagnose(run).findings:
        for mode in named_modes(finding):
            assert mode != run.settings.mode, finding
            if uses_cudagraphs(run):
                assert mode not in MODES_WITHOUT_GRAPHS, finding
        for option in named_options(finding):
            assert not options.get(option), finding


def test_llama_gets_cuda_graphs_in_its_own_autotuned_mode(runs: dict[str, CompileRun]) -> None:
    """Llama ran max-autotune-no-cudagraphs: never told to try it, or coordinate descent, again."""
    run = runs["h100-llama-bf16-max-autotune-nocg"]
    assert run.settings is not None and run.settings.mode == "max-autotune-no-cudagraphs" and autotunes(run)
    findings = diagnose(run).findings
    top = findings[0]
    assert top.kind == "host-bound" and named_modes(top) == ["max-autotune"]
    assert top.caveat and "memory" in top.caveat
    changes = " ".join(f.change for f in findings)
    assert "coordinate_descent_tuning" not in changes and "max-autotune-no-cudagraphs" not in changes
    assert not [f for f in findings if f.kind == "precision"]  # bfloat16 matmuls: nothing to gain from TF32


def test_resnet_train_gets_reduce_overhead_and_no_precision(runs: dict[str, CompileRun]) -> None:
    run = runs["h100-resnet50-train"]
    findings = diagnose(run).findings
    assert findings[0].kind == "host-bound" and named_modes(findings[0]) == ["reduce-overhead"]
    # its float32 convolutions already run on TF32 tensor cores (cuDNN's default), its float32 matmuls are tiny
    ceilings = run.bench.ceilings if run.bench else None
    assert ceilings is not None and ceilings.cudnn_tf32 is True and not ceilings.tf32
    assert not [f for f in findings if f.kind == "precision"]


def test_vit_with_cuda_graphs_keeps_them(runs: dict[str, CompileRun]) -> None:
    run = runs["h100-vit-s16-reduce-overhead"]
    assert run.bench is not None and run.bench.end_to_end is not None
    assert run.bench.end_to_end.cudagraphs == "used"
    assert suggested_mode(run, autotune=True) == "max-autotune"  # autotuning added, CUDA graphs kept
    diagnosis = diagnose(run)
    assert "max-autotune-no-cudagraphs" not in " ".join(f.change for f in diagnosis.findings)
    # its one matmul under half its roof (the classifier head, 6%) has 8.8 µs above the roof: under the noise,
    # so no mode change is advised for it
    assert diagnosis.noise_us is not None and diagnosis.noise_us > 100
    assert not [f for f in diagnosis.findings if f.kind == "autotune"]
    assert [mode for f in diagnosis.findings for mode in named_modes(f)] == []


@pytest.mark.parametrize("name", ["h100-gpt2-fp32-default", "h100-vit-s16-reduce-overhead"])
def test_precision_finding_on_fp32_matmul_bound_models(
    runs: dict[str, CompileRun], unpacked: Callable[[str], Path], name: str
) -> None:
    run = runs[name]
    findings = diagnose(run).findings
    assert findings[0].kind == "precision"  # the largest time at stake on these models
    precision = findings[0]
    matmul_us = raw_fp32_gemm_us(unpacked(name) / "profile_trace.json")
    ceilings = capture_ceilings(unpacked(name))
    assert ceilings["dtype"] == "float32" and ceilings["tf32"] is False
    assert ceilings["float32_matmul_precision"] == "highest"
    fp32, tf32, bf16 = ceilings["matmul_tflops"], ceilings["matmul_tf32_tflops"], ceilings["matmul_bf16_tflops"]
    assert precision.at_stake_us == pytest.approx(matmul_us * (1 - fp32 / tf32), rel=0.01)
    step = run.bench.step if run.bench else None
    assert step is not None and matmul_us / step.total_us >= PRECISION_SHARE
    assert f"{matmul_us / step.total_us:.0%} of the device time" in precision.title
    assert precision.change.startswith('torch.set_float32_matmul_precision("high")')
    assert 'torch.autocast("cuda", dtype=torch.bfloat16)' in precision.change
    bf16_stake = re.search(r"about ([0-9,.]+) µs at stake by the bfloat16 ceiling", precision.change)
    assert bf16_stake is not None
    assert float(bf16_stake[1].replace(",", "")) == pytest.approx(matmul_us * (1 - fp32 / bf16), rel=0.01)
    assert precision.caveat.startswith("accuracy:")
    assert "both ceilings measured" in precision.estimate
    # near the float32 roof: tuning is not the answer, and it is not suggested for these matmuls
    assert "no tuning closes the gap" in precision.evidence
    assert not [f for f in findings if f.kind == "autotune" and f.at_stake_us and f.at_stake_us > 0.05 * matmul_us]


def test_gpt2_precision_estimate_against_the_tf32_measurement(runs: dict[str, CompileRun]) -> None:
    """The estimate (9.8 ms) against what TF32 saved on the same H100 (12.65 -> 3.28 ms: 9.36 ms)."""
    run = runs["h100-gpt2-fp32-default"]
    assert run.bench is not None and run.bench.end_to_end is not None
    (precision,) = [f for f in diagnose(run).findings if f.kind == "precision"]
    saved_us = (run.bench.end_to_end.compiled.median_ms - GPT2_TF32_STEP_MS) * 1e3
    assert precision.at_stake_us == pytest.approx(saved_us, rel=0.10)


def test_precision_without_measured_ceilings_says_so(runs: dict[str, CompileRun]) -> None:
    run = runs["h100-gpt2-fp32-default"]
    assert run.bench is not None and run.bench.ceilings is not None
    older = replace(run.bench.ceilings, matmul_tf32_tflops=None, matmul_bf16_tflops=None)
    (precision,) = [f for f in diagnose(replace(run, bench=replace(run.bench, ceilings=older))).findings
                    if f.kind == "precision"]  # fmt: skip
    assert precision.at_stake_us is None
    assert precision.estimate.startswith("not estimated: this capture did not measure the TF32 ceiling")
    assert "typical ratio, from NVIDIA's datasheets, not measured here" in precision.estimate
    # TF32 on: no precision finding at all
    on = replace(run.bench.ceilings, tf32=True, float32_matmul_precision="high")
    assert not [f for f in diagnose(replace(run, bench=replace(run.bench, ceilings=on))).findings
                if f.kind == "precision"]  # fmt: skip


def test_page_shows_caveat_and_no_empty_try(runs: dict[str, CompileRun]) -> None:
    index = render_report(runs["h100-gpt2-fp32-default"], analyze(runs["h100-gpt2-fp32-default"]), draw=False)["index.html"]
    section = index[index.index('<h2 id="diagnosis">'):index.index('<h2 id="graphs">')]
    assert "<b>Mind:</b> accuracy: TF32 rounds" in section
    assert "torch.set_float32_matmul_precision(&#34;high&#34;)" in section
    assert "<b>precision</b>: float32 library matmuls" in section  # the rule, from the code's threshold
    assert "30% longer than the time the GPU ran" not in section  # the old rule, which the code did not apply


def test_data_dependent_scalar_is_one_root_cause(runs: dict[str, CompileRun]) -> None:
    """The real .item() break, and a Qwen3-MoE-like run: 13 frames skipped over aten._local_scalar_dense,
    each logged as a data-dependent operator and a backend compiler exception (torch's GB0033, GB0219)."""
    run = runs["cpu-torch2.13-graphbreak-recompile"]
    (found,) = [f for f in diagnose(run).findings if f.kind == "graph break"]
    assert "Tensor.item()" in found.root_cause and "capture_scalar_outputs = True" in found.change
    breaks = []
    for frame in range(13):
        breaks.append(GraphBreak(f"{frame}/0", "Data dependent operator",
                                 "Graph Break Reason: Data dependent operator\n  Explanation: Operator "
                                 "`aten._local_scalar_dense.default` has a non-Tensor output whose value is dependent "
                                 "on the data of Tensor inputs.", code="GB0033"))  # fmt: skip
        breaks.append(GraphBreak(f"{frame}/0_1", "Backend compiler exception",
                                 "Graph Break Reason: Backend compiler exception\n  Explanation: Backend compiler "
                                 "`inductor` failed with aten._local_scalar_dense.default. Adding a graph break.\n"
                                 "  Hint: Report an issue to the backend compiler repo.", code="GB0219",
                                 hints=("Report an issue to the backend compiler repo.",)))  # fmt: skip
    moe = replace(run, graph_breaks=tuple(breaks))
    found_all = [f for f in diagnose(moe).findings if f.kind == "graph break"]
    assert len(found_all) == 1
    (folded,) = found_all
    # a frame and its restarted attempt (3/0, 3/0_1) are one place: thirteen, one cause
    assert folded.occurrences == 13 and folded.title == "13 graph breaks, one cause: a data-dependent scalar"
    assert "aten._local_scalar_dense" in folded.root_cause
    assert "in 13 compiled frames" in folded.evidence and "frame [12/0]" not in folded.evidence  # five named
    assert "capture_scalar_outputs = True" in folded.change and "Report an issue" not in folded.change


def test_recompiles_of_one_size_change_fold(runs: dict[str, CompileRun]) -> None:
    run = runs["cpu-torch2.13-graphbreak-recompile"]
    assert len(run.recompiles) == 2
    (recompile,) = [f for f in diagnose(run).findings if f.kind == "recompile"]
    assert recompile.occurrences == 2
    assert recompile.root_cause == "tensor size mismatch at index 0. expected 64, actual 96"
    assert "tensor 'x'" in recompile.evidence and "tensor 'y'" in recompile.evidence
    assert recompile.change.startswith("torch._dynamo.mark_dynamic(x, 0)")


def test_training_advice_only_on_training(runs: dict[str, CompileRun]) -> None:
    run = runs["cpu-torch2.13-gated-mlps"]  # inference, time outside its one graph
    (outside,) = [f for f in diagnose(run).findings if f.kind == "outside graphs"]
    assert "optimizer" not in outside.change and "loss" not in outside.change
    assert run.settings is not None
    trained = replace(run, settings=replace(run.settings, train=True))
    (outside,) = [f for f in diagnose(trained).findings if f.kind == "outside graphs"]
    assert "the loss, the optimizer step" in outside.change


def test_nothing_to_gain_said_as_such(runs: dict[str, CompileRun]) -> None:
    run = runs["cpu-torch2.14.1-mlp-train"]  # stable, kernel-bound, no break, recompile or fallback
    diagnosis = diagnose(run)
    first = diagnosis.findings[0]
    assert first.kind == "nothing to gain" and first.change == "" and first.at_stake_us is None
    assert first.title.startswith("Nothing to gain here")
    assert diagnosis.noise_us is not None and f"({diagnosis.noise_us:,.1f} µs)" in first.estimate
    assert all((f.at_stake_us or 0.0) < diagnosis.noise_us for f in diagnosis.findings)
    # a run with something at stake never says so
    for name in H100:
        assert "nothing to gain" not in {f.kind for f in diagnose(runs[name]).findings}


def test_convolutions_count_only_where_cudnn_tf32_is_off(runs: dict[str, CompileRun]) -> None:
    run = runs["h100-resnet50-train"]
    assert run.bench is not None and run.bench.ceilings is not None and run.bench.step is not None
    off = replace(run.bench.ceilings, cudnn_tf32=False)
    (precision,) = [f for f in diagnose(replace(run, bench=replace(run.bench, ceilings=off))).findings
                    if f.kind == "precision"]  # fmt: skip
    assert "torch.backends.cudnn.allow_tf32 = True" in precision.change
    assert precision.title.startswith("Float32 matmuls and convolutions take")
    assert "torch.backends.cudnn.allow_tf32 is False" in precision.evidence
