"""The bound verdict (bench/bound.py) on four real H100 captures and real CPU captures, and the timing section
that draws it (report/timing_view.py).

The GPU's busy time per step is recomputed here from profile_trace.json alone: each device event (kernel,
memset, copy) belongs to the profiled step whose ``inductor_lens_step_N`` range holds the CPU call that launched
it (same ``correlation``); busy is the union of those events' intervals, and the span from the first to the last,
medians over the steps. The benchmarked compiled step is capture.json's own do_bench median. The verdict must
follow from those numbers by the documented rule, and nothing may measure idle time against the profiled span.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench.bound import GPU_BOUND, HOST_BOUND, bound_verdict, is_training
from inductor_lens.bench.diagnosis import diagnose
from inductor_lens.bench.stability import judge
from inductor_lens.pipeline import build_run
from inductor_lens.records import CompileRun
from inductor_lens.report import render_report

from ..conftest import FIXED_TIME

pytestmark = pytest.mark.unit

EXPECTED = {  # what an engineer reads off these four steps
    "h100-gpt2-fp32-default": "GPU-bound",
    "h100-llama-bf16-max-autotune-nocg": "mixed",
    "h100-vit-s16-reduce-overhead": "GPU-bound",
    "h100-resnet50-train": "host-bound",
}
DEVICE_WORK = {"kernel", "gpu_memset", "gpu_memcpy"}
STABLE_CPU = "cpu-torch2.14.1-mlp-train"  # a CPU training step whose measurements hold
UNSTABLE_CPU = "cpu-torch2.13-graphbreak-recompile"  # spreads of 400-1,500%


@pytest.fixture(scope="module")
def runs(unpacked: Callable[[str], Path]) -> dict[str, CompileRun]:
    built = {}
    for name in (*EXPECTED, STABLE_CPU, UNSTABLE_CPU):
        root = unpacked(name)
        capture = root / "capture" if (root / "capture").is_dir() else root
        built[name] = build_run(root, capture, now=lambda: FIXED_TIME)
    return built


def raw_busy_and_span(trace: Path) -> tuple[float, float]:
    """Median over the profiled steps of the device's busy time (union of intervals) and its first-to-last span."""
    events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("inductor_lens_step_")), key=lambda e: e["ts"])  # fmt: skip
    launched_at = {e["args"]["correlation"]: e["ts"] for e in events
                   if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}  # fmt: skip
    intervals: list[list[tuple[float, float]]] = [[] for _ in steps]
    for e in events:
        if e.get("cat") not in DEVICE_WORK or e.get("args", {}).get("correlation") not in launched_at:
            continue
        at = launched_at[e["args"]["correlation"]]
        for index, step in enumerate(steps):
            if step["ts"] <= at <= step["ts"] + step["dur"]:
                intervals[index].append((e["ts"], e["ts"] + e["dur"]))
    busy, span = [], []
    for found in intervals:
        found.sort()
        total, end = 0.0, float("-inf")
        for start, stop in found:
            if stop > end:
                total += stop - max(start, end)
                end = stop
        busy.append(total)
        span.append(max(stop for _, stop in found) - min(start for start, _ in found))
    return statistics.median(busy), statistics.median(span)


def benchmarked_step_us(capture: Path) -> float:
    return float(json.loads((capture / "capture.json").read_text())["bench"]["end_to_end"]["compiled"]["median_ms"]) * 1e3


@pytest.mark.parametrize("name", list(EXPECTED))
def test_gpu_verdict_follows_the_rule_from_the_raw_trace(
    runs: dict[str, CompileRun], unpacked: Callable[[str], Path], name: str
) -> None:
    verdict = bound_verdict(runs[name])
    assert verdict is not None
    busy, span = raw_busy_and_span(unpacked(name) / "profile_trace.json")
    step = benchmarked_step_us(unpacked(name))
    assert verdict.step_us == pytest.approx(step, rel=1e-9)
    assert verdict.busy_us == pytest.approx(busy, rel=0.002)
    idle = max(0.0, step - busy)
    assert verdict.idle_us == pytest.approx(idle, rel=0.01, abs=1.0)
    share = idle / step
    expected = "GPU-bound" if share < GPU_BOUND else "host-bound" if share >= HOST_BOUND else "mixed"
    assert verdict.verdict == expected == EXPECTED[name]
    # the rule as applied, with its numbers, in the words the page shows
    assert f"under {GPU_BOUND:.0%} of the step, host-bound from {HOST_BOUND:.0%}" in verdict.rule
    assert f"{step:,.1f} µs benchmarked step - {verdict.busy_us:,.1f} µs GPU busy" in verdict.rule
    # the profiled span is reported, labelled as under the profiler, never the reference for idle
    assert verdict.profiled_span_us == pytest.approx(span, rel=0.002)
    assert verdict.span_note.startswith("under the profiler, first kernel to last")
    assert (verdict.detail == "") == (expected == "GPU-bound")


def test_profiled_span_is_longer_than_the_benchmarked_step(runs: dict[str, CompileRun]) -> None:
    """Llama and ResNet-50: drawn against the span, the GPU would look idle 57% and 64% of the step."""
    for name in ("h100-llama-bf16-max-autotune-nocg", "h100-resnet50-train"):
        verdict = bound_verdict(runs[name])
        assert verdict is not None and verdict.profiled_span_us and verdict.step_us and verdict.busy_us
        assert verdict.profiled_span_us > 1.5 * verdict.step_us
        assert 1 - verdict.busy_us / verdict.profiled_span_us > 0.55  # the old, wrong reading
        assert verdict.idle_share is not None and verdict.idle_share < 0.45  # the benchmarked one
        assert f"{verdict.profiled_span_us / verdict.step_us:.2f}x the benchmarked" in verdict.span_note


def test_host_detail_names_what_the_host_spends(runs: dict[str, CompileRun]) -> None:
    resnet = runs["h100-resnet50-train"]
    verdict = bound_verdict(resnet)
    assert verdict is not None and verdict.idle_us is not None
    launches = [launch for g in resnet.graphs for launch in g.launches if launch.timing is not None]
    kernels = sum(launch.timing.calls for launch in launches if launch.timing)
    assert f"{len(launches)} launches ({kernels:.0f} GPU kernels) per step" in verdict.detail
    assert f"the idle time is {verdict.idle_us / len(launches):,.1f} µs per launch" in verdict.detail
    step = resnet.bench.step if resnet.bench else None
    assert step is not None
    assert f"{step.total_us - step.attributed_us:,.1f} µs of device work per step not from" in verdict.detail
    assert is_training(resnet) and "a training step: autograd drives the backward graph" in verdict.detail
    llama = bound_verdict(runs["h100-llama-bf16-max-autotune-nocg"])
    assert llama is not None and "training" not in llama.detail and "61 launches" in llama.detail


def test_host_bound_finding_uses_the_verdict_numbers(runs: dict[str, CompileRun]) -> None:
    for name, expected in EXPECTED.items():
        diagnosis = diagnose(runs[name])
        host = [f for f in diagnosis.findings if f.kind in ("host-bound", "cuda graphs")]
        if expected == "GPU-bound":
            assert host == []
            continue
        (finding,) = host
        assert diagnosis.bound is not None and finding.at_stake_us == diagnosis.bound.idle_us
        assert f"{diagnosis.bound.idle_share:.0%} of the step" in finding.title


def test_timing_section_draws_idle_against_the_benchmarked_step(runs: dict[str, CompileRun]) -> None:
    run = runs["h100-llama-bf16-max-autotune-nocg"]
    verdict = bound_verdict(run)
    assert verdict is not None and verdict.step_us and verdict.idle_us is not None and verdict.busy_us is not None
    index = render_report(run, analyze(run), draw=False)["index.html"]
    section = index[index.index('<h2 id="timing">'):index.index('<h2 id="diagnosis">')]
    # the hatched idle segment: the verdict's idle, as a share of the benchmarked step
    (idle,) = re.findall(r'class="seg-idle" style="width: ([0-9.]+)%', section)
    assert float(idle) == pytest.approx(100 * verdict.idle_us / verdict.step_us, abs=0.01)
    widths = [float(w) for w in re.findall(r'class="seg-[^"]+" style="width: ([0-9.]+)%', section)]
    assert sum(widths) == pytest.approx(100.0, abs=0.5)  # launches are medians per launch, not per step
    assert f"the whole bar is the benchmarked compiled step, {verdict.step_us:,.1f} µs" in section
    card = f"GPU busy {verdict.busy_us:,.1f} of the {verdict.step_us:,.1f} µs benchmarked step"
    assert card in section
    assert f"first kernel to last: {verdict.profiled_span_us:,.1f} µs (the profiler slows the host)" in section
    assert "from first to last kernel" not in section  # the old card drew busy against the span
    rule = section[section.index('<div id="bound-rule">'):]
    assert "<b>mixed</b>" in rule and "idle is never measured against it" in rule


def test_cpu_verdict_compares_kernels_with_the_step(runs: dict[str, CompileRun]) -> None:
    run = runs[STABLE_CPU]
    assert judge(run).stable
    verdict = bound_verdict(run)
    bench = run.bench
    assert verdict is not None and bench is not None and bench.step is not None and bench.end_to_end is not None
    step = bench.end_to_end.compiled.median_ms * 1e3
    overhead = max(0.0, step - bench.step.attributed_us)
    assert (verdict.step_us, verdict.busy_us) == (step, bench.step.attributed_us)
    assert verdict.idle_us == pytest.approx(overhead)
    assert overhead < GPU_BOUND * step and verdict.verdict == "kernel-bound"
    assert verdict.rule.startswith("on CPU the kernels run on the host")
    assert verdict.profiled_span_us is None and verdict.detail == ""
    # pushed over the host-bound line, the detail names Python around the kernels and time outside the graphs
    slower = replace(bench.end_to_end, compiled=replace(bench.end_to_end.compiled, median_ms=step * 2 / 1e3))
    doubled = bound_verdict(replace(run, bench=replace(bench, end_to_end=slower)))
    assert doubled is not None and doubled.verdict == "host-bound"
    assert "Python around the kernels" in doubled.detail and "outside the compiled graphs" in doubled.detail


def test_unstable_cpu_run_is_unknown_with_why(runs: dict[str, CompileRun]) -> None:
    run = runs[UNSTABLE_CPU]
    stability = judge(run)
    assert not stability.stable
    verdict = bound_verdict(run)
    assert verdict is not None and verdict.verdict == "unknown"
    assert verdict.detail.startswith("the measurements are unstable")
    assert stability.reasons[0].text in verdict.detail


def test_untimed_run_has_no_verdict(unpacked: Callable[[str], Path]) -> None:
    root = unpacked("cpu-torch2.13-t5-gated")
    run = build_run(root, root / "capture" if (root / "capture").is_dir() else root, now=lambda: FIXED_TIME)
    assert bound_verdict(run) is None


def test_unstable_gpu_run_is_unknown_and_gets_no_host_bound_advice(runs: dict[str, CompileRun]) -> None:
    run = runs["h100-llama-bf16-max-autotune-nocg"]
    bench = run.bench
    assert bench is not None and bench.end_to_end is not None
    compiled = bench.end_to_end.compiled
    wide = replace(compiled, p10_ms=compiled.median_ms * 0.6, p90_ms=compiled.median_ms * 1.4)  # 80% spread
    shaky = replace(run, bench=replace(bench, end_to_end=replace(bench.end_to_end, compiled=wide)))
    assert not judge(shaky).stable
    verdict = bound_verdict(shaky)
    assert verdict is not None and verdict.verdict == "unknown"
    assert verdict.idle_us == pytest.approx(compiled.median_ms * 1e3 - (verdict.busy_us or 0.0))  # still shown
    assert verdict.detail.startswith("the measurements are unstable")
    assert not [f for f in diagnose(shaky).findings if f.kind == "host-bound"]
